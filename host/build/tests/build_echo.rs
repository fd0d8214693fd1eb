//! Builds the TESTKIT `echo` guest in every language and checks that each result is a Sluice
//! actor component: it exports `sluice:actor/actor@0.1.0` and imports only `sluice:actor/*`
//! and WASI. A missing toolchain skips its language with the install hint, unless
//! `SLUICE_REQUIRE_GUEST_TOOLCHAINS=1` (CI after `scripts/guest-toolchains.sh`) makes it fail.

use std::path::{Path, PathBuf};

use sluice_build::{ACTOR_EXPORT, BuildError, BuildOptions, JsBackend, Language, build, detect};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn out_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("guests")
        .join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn build_echo(lang_dir: &str, language: Language, opts: BuildOptions, name: &str) {
    let dir = repo().join("guests").join(lang_dir).join("testkit/echo");
    assert_eq!(detect(&dir), Some(language), "detects {}", dir.display());
    let opts = BuildOptions {
        output: Some(out_dir(name).join("echo.wasm")),
        ..opts
    };
    match build(&dir, &opts) {
        Ok(out) => {
            assert_eq!(out.language, language);
            assert!(
                out.info.exports.iter().any(|e| e == ACTOR_EXPORT),
                "{:?}",
                out.info
            );
            // `--disable http fetch-event` keeps wasi:http out (the host need not link it).
            assert!(
                !out.info.imports.iter().any(|i| i.starts_with("wasi:http/")),
                "{:?}",
                out.info.imports
            );
            for i in &out.info.imports {
                assert!(
                    i.starts_with("sluice:actor/") || i.starts_with("wasi:"),
                    "foreign import {i}"
                );
            }
            for i in [
                "sluice:actor/host@0.1.0",
                "sluice:actor/outbox@0.1.0",
                "sluice:actor/bus@0.1.0",
            ] {
                assert!(
                    out.info.imports.iter().any(|x| x == i),
                    "{name} must import {i}: {:?}",
                    out.info.imports
                );
            }
            eprintln!(
                "{name}: {} bytes in {:.1} s",
                out.size,
                out.elapsed.as_secs_f64()
            );
        }
        Err(e @ BuildError::MissingToolchain { .. })
            if std::env::var("SLUICE_REQUIRE_GUEST_TOOLCHAINS").as_deref() != Ok("1") =>
        {
            eprintln!("skipping {name}: {e}");
        }
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn go_echo_builds_into_an_actor_component() {
    build_echo("go", Language::Go, BuildOptions::default(), "go");
}

#[test]
fn python_echo_builds_into_an_actor_component() {
    build_echo(
        "python",
        Language::Python,
        BuildOptions::default(),
        "python",
    );
}

#[test]
fn typescript_echo_builds_into_an_actor_component() {
    build_echo(
        "typescript",
        Language::TypeScript,
        BuildOptions::default(),
        "typescript",
    );
}

#[test]
fn typescript_echo_builds_with_the_quickjs_backend() {
    let opts = BuildOptions {
        js_backend: JsBackend::QuickJs,
        ..Default::default()
    };
    build_echo("typescript", Language::TypeScript, opts, "typescript-qjs");
}

#[test]
fn unknown_folder_is_a_typed_error() {
    let dir = out_dir("empty");
    match build(&dir, &BuildOptions::default()) {
        Err(BuildError::UnknownLanguage { .. }) => {}
        other => panic!("expected UnknownLanguage, got {other:?}"),
    }
}
