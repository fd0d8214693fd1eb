//! The Rust path: `cargo build --target wasm32-wasip2 --release` in the folder and the `.wasm`
//! artifact copied out. Uses a dependency-free cdylib (no WIT exports, so validation is off);
//! the real Rust test guests live in guests/rust and are built the same way.

mod common;

use std::path::Path;

use sluice_build::{BuildError, BuildOptions, Language, build, detect, inspect};

#[test]
fn rust_folder_builds_with_cargo_for_wasm32_wasip2() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-guest");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"tiny-guest\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "#[unsafe(no_mangle)]\npub extern \"C\" fn answer() -> i32 { 42 }\n",
    )
    .unwrap();
    assert_eq!(detect(&dir), Some(Language::Rust));
    let opts = BuildOptions {
        skip_validation: true,
        ..Default::default()
    };
    match build(&dir, &opts) {
        Ok(out) => {
            assert_eq!(out.component, dir.join(".sluice/actor.wasm"));
            let bytes = std::fs::read(&out.component).unwrap();
            inspect(&bytes).expect("wasm32-wasip2 output is a component");
        }
        Err(e @ BuildError::MissingToolchain { .. }) => common::skip(e),
        Err(e) => panic!("{e}"),
    }
}
