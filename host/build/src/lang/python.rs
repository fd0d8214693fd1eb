//! Python: componentize-py with the SDK's `sluice_main` entry module importing `app.py`.

use std::path::Path;
use std::process::Command;

use super::Ctx;
use crate::error::{BuildError, Result};
use crate::{INSTALL_COMMAND, process};

pub(crate) fn build(ctx: &Ctx<'_>) -> Result<()> {
    let tool = process::require("componentize-py", INSTALL_COMMAND)?;
    if !ctx.dir.join("app.py").is_file() {
        return Err(BuildError::Io {
            context: format!(
                "{}: a Python actor's module must be app.py",
                ctx.dir.display()
            ),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    let sdk = ctx.repo.join("guests").join("python");
    let mut cmd = Command::new(tool);
    cmd.arg("-d")
        .arg(ctx.wit_dir())
        .args([
            "-w",
            crate::BATCHED_WORLD,
            "componentize",
            "sluice_main",
            "-p",
        ])
        .arg(ctx.dir)
        .arg("-p")
        .arg(&sdk)
        .arg("-o")
        .arg(ctx.output)
        .current_dir(ctx.dir);
    ctx.step("componentize-py", || process::run("componentize-py", cmd))?;
    ctx.step("free lowered bytes", || patch_leak(ctx.output))
}

/// componentize-py 0.25.1 leaks every `bytes` it lowers (results of `handle`, payloads passed
/// to imports); see `python_leak`.
fn patch_leak(path: &Path) -> Result<()> {
    let io = |e| BuildError::Io {
        context: path.display().to_string(),
        source: e,
    };
    let wasm = std::fs::read(path).map_err(io)?;
    let (patched, sites) = super::python_leak::patch(&wasm)?;
    if sites == 0 {
        tracing::warn!(
            "componentize-py output has no wit-dylib list lowering to patch; \
             left as is (a componentize-py other than 0.25.1?)"
        );
        return Ok(());
    }
    tracing::debug!(sites, "freed componentize-py's lowered byte lists");
    std::fs::write(path, patched).map_err(io)
}
