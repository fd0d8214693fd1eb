//! TypeScript: the SDK's `tools/build.mjs` (tsc, esbuild, jco componentize).

use std::process::Command;

use super::Ctx;
use crate::error::{BuildError, Result};
use crate::{INSTALL_COMMAND, JsBackend, process};

pub(crate) fn build(ctx: &Ctx<'_>) -> Result<()> {
    let node = process::require("node", "apt-get install nodejs npm")?;
    let sdk = ctx.repo.join("guests").join("typescript");
    if !sdk
        .join("node_modules/@bytecodealliance/jco/package.json")
        .is_file()
    {
        return Err(BuildError::MissingToolchain {
            tool: "jco",
            why: format!(
                "{} has no node_modules/@bytecodealliance/jco",
                sdk.display()
            ),
            install: INSTALL_COMMAND.to_string(),
        });
    }
    let mut cmd = Command::new(node);
    cmd.arg(sdk.join("tools/build.mjs"))
        .arg(ctx.dir)
        .arg("-o")
        .arg(ctx.output)
        .arg("--wit")
        .arg(ctx.wit_dir());
    let step = match JsBackend::resolve(ctx.opts.js_backend)? {
        JsBackend::StarlingMonkey => {
            cmd.args(["--backend", "starlingmonkey"]);
            "tsc + esbuild + jco componentize (StarlingMonkey)"
        }
        JsBackend::QuickJs => {
            cmd.args(["--backend", "qjs"]);
            "tsc + esbuild + jco componentize (QuickJS)"
        }
    };
    ctx.step(step, || process::run("jco", cmd))?;
    Ok(())
}
