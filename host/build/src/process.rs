//! Running toolchain commands: finding programs, capturing output, typed failures.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{BuildError, Result};

/// How many trailing bytes of a failed command's output go into the error.
const OUTPUT_TAIL_BYTES: usize = 6000;

/// Finds `program` on `PATH` (like `which`).
pub(crate) fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Finds `program` or reports it missing with the command that installs it.
pub(crate) fn require(program: &'static str, install: &str) -> Result<PathBuf> {
    which(program).ok_or_else(|| BuildError::MissingToolchain {
        tool: program,
        why: format!("`{program}` is not on PATH"),
        install: install.to_string(),
    })
}

/// A command line as a user would type it.
pub(crate) fn display(cmd: &Command) -> String {
    let mut s = String::new();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            s.push_str(&format!("{}={} ", k.to_string_lossy(), v.to_string_lossy()));
        }
    }
    s.push_str(&cmd.get_program().to_string_lossy());
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&quote(a));
    }
    s
}

fn quote(a: &OsStr) -> String {
    let a = a.to_string_lossy();
    if a.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+".contains(c))
    {
        a.into_owned()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// Runs `cmd` to completion; on failure returns [`BuildError::ToolFailed`] with its output.
pub(crate) fn run(tool: &'static str, mut cmd: Command) -> Result<String> {
    let line = display(&cmd);
    tracing::debug!(tool, command = %line, "running");
    let out = cmd.output().map_err(|e| BuildError::ToolFailed {
        tool,
        command: line.clone(),
        status: format!("could not start: {e}"),
        output: String::new(),
    })?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        return Ok(text);
    }
    let tail = if text.len() > OUTPUT_TAIL_BYTES {
        let mut cut = text.len() - OUTPUT_TAIL_BYTES;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        format!("...{}", &text[cut..])
    } else {
        text
    };
    Err(BuildError::ToolFailed {
        tool,
        command: line,
        status: out.status.to_string(),
        output: tail,
    })
}

/// Canonical absolute path, or an I/O error naming it.
pub(crate) fn absolute(p: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(p).map_err(BuildError::io(format!("resolving {}", p.display())))
}
