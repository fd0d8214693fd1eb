//! `cargo run -p sluice-build --example build -- DIR [-o OUT.wasm] [--js-engine ENGINE]`: what
//! `sluice build DIR` will do, until the CLI wires it in.
use std::path::PathBuf;
use std::sync::Arc;

use sluice_build::{BuildOptions, JsBackend, build};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut opts = BuildOptions {
        progress: Some(Arc::new(|p| eprintln!("{p}"))),
        ..Default::default()
    };
    let mut dir = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "-o" => opts.output = args.next().map(PathBuf::from),
            "--js-engine" => {
                let name = args.next().unwrap_or_default();
                opts.js_backend = Some(name.parse::<JsBackend>()?);
            }
            _ => dir = Some(PathBuf::from(a)),
        }
    }
    let dir = dir.ok_or_else(|| {
        anyhow::anyhow!("usage: build DIR [-o OUT.wasm] [--js-engine quickjs|starlingmonkey]")
    })?;
    let out = build(&dir, &opts)?;
    println!(
        "{} component: {} ({} bytes, {:.1} s)\n  imports: {}\n  exports: {}",
        out.language,
        out.component.display(),
        out.size,
        out.elapsed.as_secs_f64(),
        out.info.imports.join(", "),
        out.info.exports.join(", ")
    );
    Ok(())
}
