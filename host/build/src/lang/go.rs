//! Go: mainline Go (wasip1, `-buildmode=c-shared`), then WIT embedding and the preview1 reactor
//! adapter in process (no `wasm-tools` CLI).

use std::process::Command;

use super::Ctx;
use crate::error::{BuildError, Result};
use crate::{INSTALL_COMMAND, component, process};

/// The Go toolchain the wit-bindgen runtime needs; the go command fetches it once.
pub(crate) const GO_TOOLCHAIN: &str = "go1.27.3";

pub(crate) fn build(ctx: &Ctx<'_>) -> Result<()> {
    let go = process::require(
        "go",
        "apt-get install golang-go, then bash scripts/guest-toolchains.sh",
    )?;
    let core = ctx.output.with_extension("core.wasm");
    let mut cmd = Command::new(go);
    cmd.current_dir(ctx.dir)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        // Local `replace` directives resolve every dependency; never rewrite go.mod.
        .env("GOFLAGS", "-mod=mod")
        .args([
            "build",
            "-trimpath",
            "-buildmode=c-shared",
            "-ldflags=-checklinkname=0",
            "-o",
        ])
        .arg(&core)
        .arg(".");
    if std::env::var_os("GOTOOLCHAIN").is_none() {
        cmd.env("GOTOOLCHAIN", GO_TOOLCHAIN);
    }
    let built = ctx.step("go build (wasip1, c-shared)", || process::run("go", cmd));
    if let Err(BuildError::ToolFailed { output, .. }) = &built
        && output.contains("toolchain")
        && output.contains(GO_TOOLCHAIN)
        && output.contains("download")
    {
        return Err(BuildError::MissingToolchain {
            tool: "go",
            why: format!(
                "the {GO_TOOLCHAIN} toolchain could not be fetched: {}",
                output.trim()
            ),
            install: INSTALL_COMMAND.to_string(),
        });
    }
    built?;
    let bytes =
        std::fs::read(&core).map_err(BuildError::io(format!("reading {}", core.display())))?;
    let wit = ctx.wit_dir();
    let comp = ctx.step("embed WIT + preview1 reactor adapter", || {
        component::componentize_core(&bytes, &wit)
    })?;
    std::fs::write(ctx.output, comp)
        .map_err(BuildError::io(format!("writing {}", ctx.output.display())))?;
    let _ = std::fs::remove_file(&core);
    Ok(())
}
