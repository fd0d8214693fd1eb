//! Builds the TESTKIT `echo` guest in every language and checks that each result is a Sluice
//! actor component: it exports `sluice:actor/actor@0.1.0` and imports only `sluice:actor/*`
//! and WASI. A missing toolchain skips its language with the install hint, unless
//! [`sluice_build::toolchains_required`] (CI, or `scripts/test.sh` after
//! `scripts/guest-toolchains.sh`) makes it fail.
//!
//! Each built component is then run under node by `guests/typescript/tools/smoke/smoke.mjs`
//! (jco transpile + a fake host), which drives the TESTKIT table through the real component.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Runs the smoke runner on a built TESTKIT component; skipped (loudly, and only outside the
/// gate) without node or `guests/typescript/node_modules`.
fn smoke(component: &Path, guest: &str) {
    let sdk = repo().join("guests/typescript");
    if !sdk.join("node_modules/@bytecodealliance/jco").is_dir() {
        common::skip(format_args!(
            "smoke run of {}: guests/typescript/node_modules missing ({})",
            component.display(),
            sluice_build::INSTALL_COMMAND
        ));
        return;
    }
    let out = match Command::new("node")
        .arg("--experimental-wasm-extended-const")
        .arg(sdk.join("tools/smoke/smoke.mjs"))
        .arg(component)
        .args(["--guest", guest])
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            common::skip(format_args!("smoke run: cannot run node: {e}"));
            return;
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "smoke run of {} failed:\n{text}",
        component.display()
    );
    eprintln!(
        "{}",
        text.lines()
            .rfind(|l| l.contains(" passed, "))
            .unwrap_or_default()
    );
}

fn build_echo(lang_dir: &str, language: Language, opts: BuildOptions, name: &str) {
    build_guest(lang_dir, "echo", language, opts, name);
}

fn build_guest(lang_dir: &str, guest: &str, language: Language, opts: BuildOptions, name: &str) {
    let dir = repo()
        .join("guests")
        .join(lang_dir)
        .join("testkit")
        .join(guest);
    assert_eq!(detect(&dir), Some(language), "detects {}", dir.display());
    let opts = BuildOptions {
        output: Some(out_dir(name).join(format!("{guest}.wasm"))),
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
            // echo calls every import; the others import only what they use (the Go toolchain
            // drops unused imports, so e.g. Go `slow` imports no sluice:actor function at all).
            let wanted: &[&str] = if guest == "echo" {
                &[
                    "sluice:actor/host@0.1.0",
                    "sluice:actor/outbox@0.1.0",
                    "sluice:actor/bus@0.1.0",
                ]
            } else {
                &[]
            };
            for i in wanted {
                assert!(
                    out.info.imports.iter().any(|x| x == i),
                    "{name} must import {i}: {:?}",
                    out.info.imports
                );
            }
            eprintln!(
                "{name} {guest}: {} bytes in {:.1} s",
                out.size,
                out.elapsed.as_secs_f64()
            );
            if matches!(guest, "echo" | "slow" | "crash" | "flood") {
                smoke(&out.component, guest);
            }
        }
        Err(e @ BuildError::MissingToolchain { .. }) => common::skip(format_args!("{name}: {e}")),
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
fn typescript_echo_builds_with_the_starlingmonkey_backend() {
    let opts = BuildOptions {
        js_backend: Some(JsBackend::StarlingMonkey),
        ..Default::default()
    };
    build_echo("typescript", Language::TypeScript, opts, "typescript-sm");
}

#[test]
fn unknown_folder_is_a_typed_error() {
    let dir = out_dir("empty");
    match build(&dir, &BuildOptions::default()) {
        Err(BuildError::UnknownLanguage { .. }) => {}
        other => panic!("expected UnknownLanguage, got {other:?}"),
    }
}
