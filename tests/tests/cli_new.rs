//! `sluice new LANG NAME` through the real binary: for each language, a project scaffolded into
//! a folder outside the repository passes its own unit tests in the language's own runner (the
//! command its README names, against the SDK's fake host), builds with `sluice build`, runs with
//! `sluice run`, and its actor answers its first call as the template says; an unknown language
//! and a non-empty folder are refused with exit 1.

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

/// The scaffold's unit-test command as its README names it, how to run it here, and what its
/// output shows when every template test ran and passed (a count, so a runner that found no
/// test does not pass).
struct UnitTests {
    readme: &'static str,
    program: &'static str,
    args: &'static [&'static str],
    passed: &'static [&'static str],
}

/// Runs the scaffold's unit tests in `dir` with the language's own runner. A runner that is not
/// installed fails the test when toolchains are required (CI) and skips it otherwise; a failing
/// unit test always fails it.
fn run_unit_tests(lang: &str, dir: &Path, t: &UnitTests) -> bool {
    let program = if t.program == "cargo" {
        env!("CARGO")
    } else {
        t.program
    };
    let out = match Command::new(program)
        .args(t.args)
        .current_dir(dir)
        // A user's project builds into its own target dir, whatever this test runs under.
        .env_remove("CARGO_TARGET_DIR")
        .env("GOTOOLCHAIN", "go1.27.3")
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Panics under the toolchain gate (CI); a loud skip otherwise.
            skip(format!("{lang} unit tests: {program} is not installed"));
            return false;
        }
        Err(e) => panic!(
            "running {program} for the {lang} scaffold: {e} (bash scripts/guest-toolchains.sh)"
        ),
    };
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "`{}` failed in the {lang} scaffold:\n{stdout}\n{stderr}",
        t.readme
    );
    for want in t.passed {
        assert!(
            stdout.contains(want),
            "`{}` in the {lang} scaffold: no {want:?} in\n{stdout}\n{stderr}",
            t.readme
        );
    }
    true
}

/// Scaffolds `lang` into a new folder of an empty temp dir (outside the repository), runs its
/// unit tests, builds and runs it, and calls its actor.
async fn scaffold_builds_runs_and_answers(lang: &str, tests: UnitTests) {
    let test_cmd = tests.readme;
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

    if !run_unit_tests(lang, &dir, &tests) {
        return;
    }

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
async fn sluice_new_go_passes_its_unit_tests_builds_runs_and_answers() {
    let tests = UnitTests {
        readme: "go test ./...",
        program: "go",
        args: &["test", "-v", "./..."],
        passed: &[
            "--- PASS: TestPingCountsAndUnknownTypesAreInvalidArgument",
            "--- PASS: TestForwardAsksTheWorkerAndReportsAFullMailbox",
        ],
    };
    scaffold_builds_runs_and_answers("go", tests).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_new_python_passes_its_unit_tests_builds_runs_and_answers() {
    let tests = UnitTests {
        readme: "python3 -m pytest",
        program: "python3",
        args: &["-m", "pytest"],
        passed: &["3 passed"],
    };
    scaffold_builds_runs_and_answers("python", tests).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_new_typescript_passes_its_unit_tests_builds_runs_and_answers() {
    let tests = UnitTests {
        readme: "npm test",
        program: "npm",
        args: &["test"],
        passed: &["# pass 3", "# fail 0"],
    };
    scaffold_builds_runs_and_answers("typescript", tests).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_new_rust_passes_its_unit_tests_builds_runs_and_answers() {
    let tests = UnitTests {
        readme: "cargo test",
        program: "cargo",
        args: &["test"],
        passed: &["test result: ok. 3 passed"],
    };
    scaffold_builds_runs_and_answers("rust", tests).await;
}

/// `sluice new LANG .` into an existing empty folder: the scaffold lands there and its unit
/// tests pass in the language's own runner.
#[test]
fn sluice_new_into_the_current_empty_folder_passes_its_unit_tests() {
    let bin = sluice_binary("sluice-cli-new");
    let tmp = tempfile::tempdir().unwrap();
    let out = sluice(&bin, tmp.path(), &["new", "go", "."]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tests = UnitTests {
        readme: "go test ./...",
        program: "go",
        args: &["test", "-v", "./..."],
        passed: &["--- PASS: TestPingCountsAndUnknownTypesAreInvalidArgument"],
    };
    run_unit_tests("go", tmp.path(), &tests);
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
