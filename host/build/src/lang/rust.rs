//! Rust: `cargo build --target wasm32-wasip2 --release`; the artifact is already a component.

use std::path::PathBuf;
use std::process::Command;

use super::Ctx;
use crate::error::{BuildError, Result};
use crate::{INSTALL_COMMAND, process};

pub(crate) fn build(ctx: &Ctx<'_>) -> Result<()> {
    let cargo = process::require(
        "cargo",
        "https://rustup.rs (rustup), then bash scripts/guest-toolchains.sh",
    )?;
    let mut cmd = Command::new(cargo);
    // The crate's own target dir, whatever CARGO_TARGET_DIR says: a cdylib's artifact name
    // carries no hash, so two crates of the same name (two checkouts of one project) building
    // into a shared target dir overwrite each other's `.wasm` between build and copy.
    cmd.current_dir(ctx.dir)
        .env_remove("CARGO_TARGET_DIR")
        .args([
            "build",
            "--target",
            "wasm32-wasip2",
            "--release",
            "--message-format=json-render-diagnostics",
            "--target-dir",
        ])
        .arg(ctx.dir.join("target"));
    let out = ctx.step("cargo build --target wasm32-wasip2 --release", || {
        process::run("cargo", cmd)
    });
    let out = match out {
        Err(BuildError::ToolFailed { output, .. })
            if output.contains("target may not be installed") =>
        {
            return Err(BuildError::MissingToolchain {
                tool: "wasm32-wasip2",
                why: "the Rust target wasm32-wasip2 is not installed".into(),
                install: INSTALL_COMMAND.to_string(),
            });
        }
        other => other?,
    };
    let artifact = wasm_artifacts(&out)
        .pop()
        .ok_or_else(|| BuildError::ToolFailed {
            tool: "cargo",
            command: "cargo build --target wasm32-wasip2 --release".into(),
            status: "no .wasm artifact (is the crate a cdylib?)".into(),
            output: String::new(),
        })?;
    std::fs::copy(&artifact, ctx.output).map_err(BuildError::io(format!(
        "copying {} to {}",
        artifact.display(),
        ctx.output.display()
    )))?;
    Ok(())
}

/// `.wasm` files cargo reported as artifacts, in build order.
fn wasm_artifacts(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
                .filter(|f| f.extension().is_some_and(|e| e == "wasm"))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_wasm_artifact_among_cargo_messages() {
        let msgs = concat!(
            r#"{"reason":"compiler-artifact","filenames":["/t/wasm32-wasip2/release/deps/libserde.rlib"]}"#,
            "\n",
            "   Compiling echo v0.1.0 (not json)\n",
            r#"{"reason":"compiler-artifact","filenames":["/t/wasm32-wasip2/release/echo.wasm"]}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        assert_eq!(
            wasm_artifacts(msgs),
            vec![PathBuf::from("/t/wasm32-wasip2/release/echo.wasm")]
        );
    }
}
