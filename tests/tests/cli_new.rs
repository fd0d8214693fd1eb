//! `sluice new LANG NAME` through the real binary: for each language, a project scaffolded into
//! a folder outside the repository builds with `sluice build`, runs with `sluice run`, and its
//! actor answers its first call as the template says; an unknown language and a non-empty
//! folder are refused with exit 1.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use sluice_tests::{SluiceRun, skip, sluice_binary, wait_until};

fn sluice(bin: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env_remove("SLUICE_ROOT")
        .env_remove("SLUICE_HOST")
        .env_remove("SLUICE_INGRESS")
        .env_remove("SLUICE_CONTEXT")
        .env("SLUICE_CONFIG", "/nonexistent/sluice-config.toml")
        .output()
        .expect("running sluice")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Scaffolds `lang` into a new folder of an empty temp dir (outside the repository), builds
/// and runs it, and calls its actor.
async fn scaffold_builds_runs_and_answers(lang: &str, test_cmd: &str) {
    let bin = sluice_binary("sluice-cli-new");
    let tmp = tempfile::tempdir().unwrap();
    let out = sluice(&bin, tmp.path(), &["new", lang, "hello"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // The next three commands, runnable from where `sluice new` ran.
    for c in [
        "sluice build hello",
        "sluice run hello",
        "sluice call MyActor/1 ping",
    ] {
        assert!(stdout.contains(c), "{stdout}");
    }
    let dir = tmp.path().join("hello");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for c in [
        "sluice build .",
        "sluice run .",
        "sluice call MyActor/1 ping",
        test_cmd,
    ] {
        assert!(readme.contains(c), "{readme}");
    }
    let config = std::fs::read_to_string(dir.join("app-config.toml")).unwrap();
    assert!(
        config.contains("module = \".sluice/actor.wasm\""),
        "{config}"
    );

    let out = sluice(&bin, tmp.path(), &["build", "hello"]);
    let stderr = text(&out.stderr);
    if !out.status.success() && stderr.contains("guest-toolchains.sh") {
        skip(format_args!("{lang} toolchain missing:\n{stderr}"));
        return;
    }
    assert!(out.status.success(), "sluice build failed:\n{stderr}");
    assert!(dir.join(".sluice/actor.wasm").is_file());

    let run = SluiceRun::start(&bin, &dir, &[], &[]).await;
    wait_until(Duration::from_secs(120), "the ready line", || {
        run.stdout_has("sluice: ready: ingress ")
    })
    .await;
    let call = |msg: &str| {
        sluice(
            &bin,
            tmp.path(),
            &["call", "MyActor/1", msg, "--host", &run.ingress],
        )
    };
    for n in 1..=2 {
        let out = call("ping");
        assert!(
            out.status.success(),
            "{}\nhost stderr: {:?}",
            text(&out.stderr),
            run.stderr_lines()
        );
        let reply: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
        assert_eq!(reply["pong"], n, "{reply}");
        assert!(reply["at"].as_u64().is_some_and(|t| t > 0), "{reply}");
    }
    let out = call("nope");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("INVALID_ARGUMENT: unknown msg-type"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_new_go_builds_runs_and_answers() {
    scaffold_builds_runs_and_answers("go", "go test ./...").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_new_python_builds_runs_and_answers() {
    scaffold_builds_runs_and_answers("python", "pytest").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_new_typescript_builds_runs_and_answers() {
    scaffold_builds_runs_and_answers("typescript", "node --test").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_new_rust_builds_runs_and_answers() {
    scaffold_builds_runs_and_answers("rust", "cargo test").await;
}

/// `sluice new LANG .` into an existing empty folder, then the language's own test runner.
fn unit_test_passes_outside_the_repository(lang: &str, runner: &str, args: &[&str]) -> String {
    let bin = sluice_binary("sluice-cli-new");
    let tmp = tempfile::tempdir().unwrap();
    let out = sluice(&bin, tmp.path(), &["new", lang, "."]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let test = Command::new(runner)
        .args(args)
        .current_dir(tmp.path())
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap_or_else(|e| panic!("running {runner}: {e}"));
    assert!(
        test.status.success(),
        "{}\n{}",
        text(&test.stdout),
        text(&test.stderr)
    );
    text(&test.stdout)
}

#[test]
fn the_rust_scaffold_unit_test_passes_outside_the_repository() {
    let out = unit_test_passes_outside_the_repository("rust", env!("CARGO"), &["test", "--quiet"]);
    assert!(out.contains("1 passed"), "{out}");
}

#[test]
fn the_go_scaffold_unit_test_passes_outside_the_repository() {
    let out = unit_test_passes_outside_the_repository("go", "go", &["test", "-v", "./..."]);
    assert!(
        out.contains("--- PASS: TestPingCountsAndUnknownTypesAreInvalidArgument"),
        "{out}"
    );
}

#[test]
fn sluice_new_refuses_an_unknown_language_and_a_non_empty_folder() {
    let bin = sluice_binary("sluice-cli-new");
    let tmp = tempfile::tempdir().unwrap();
    let out = sluice(&bin, tmp.path(), &["new", "cobol", "x"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("unknown language \"cobol\"")
            && stderr.contains("go, python, typescript, rust"),
        "{stderr}"
    );
    assert!(!tmp.path().join("x").exists());

    std::fs::create_dir(tmp.path().join("taken")).unwrap();
    std::fs::write(tmp.path().join("taken/notes.txt"), "mine").unwrap();
    let out = sluice(&bin, tmp.path(), &["new", "go", "taken"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("taken already exists and is not empty"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path().join("taken"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec!["notes.txt"]);
}
