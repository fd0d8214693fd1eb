//! Python: componentize-py with the SDK's `sluice_main` entry module importing `app.py`.

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
        .args(["-w", crate::WORLD, "componentize", "sluice_main", "-p"])
        .arg(ctx.dir)
        .arg("-p")
        .arg(&sdk)
        .arg("-o")
        .arg(ctx.output)
        .current_dir(ctx.dir);
    ctx.step("componentize-py", || process::run("componentize-py", cmd))?;
    Ok(())
}
