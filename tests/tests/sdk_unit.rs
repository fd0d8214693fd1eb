//! Each guest SDK's own unit tests (error mapping, seed call shapes, per-call deadlines) and
//! each job_queue_outbox leader's, run with the language's native test runner so `cargo test`
//! covers them too.

use std::process::Command;

use sluice_tests::root;

fn run(dir: &str, program: &str, args: &[&str]) {
    let dir = root().join(dir);
    let out = Command::new(program)
        .args(args)
        .current_dir(&dir)
        .env("GOTOOLCHAIN", "go1.27.3")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {program} in {}: {e} (install it: bash scripts/guest-toolchains.sh)",
                dir.display()
            )
        });
    assert!(
        out.status.success(),
        "{program} {args:?} in {} failed:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn go_sdk_unit_tests() {
    run("guests/go", "go", &["test", "./..."]);
    // The patched wit-bindgen runtime is a module of its own: `./...` above does not reach it.
    run("guests/go/witpkg", "go", &["test", "./wit/runtime/"]);
}

#[test]
fn python_sdk_unit_tests() {
    run("guests/python", "python3", &["-m", "pytest", "-q", "tests"]);
}

#[test]
fn typescript_sdk_unit_tests() {
    run("guests/typescript", "npm", &["test", "--silent"]);
}

/// The Rust SDK's own tests (the error contract against `wit/errors.json`), natively: no host
/// import is called.
#[test]
fn rust_sdk_unit_tests() {
    let dir = root().join("guests/rust");
    let out = job_queue_outbox::cargo()
        .args(["test", "--quiet", "-p", "sluice-guest"])
        .current_dir(&dir)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("running cargo for the Rust SDK");
    assert!(
        out.status.success(),
        "cargo test -p sluice-guest in {} failed:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Rust template as a user starts from it: its unit test passes under `cargo test`, it
/// builds into a component, and on a real host it answers, refuses an unknown msg-type in the
/// canonical form, and keeps its state across that error.
#[tokio::test]
async fn rust_template_tests_builds_and_answers_on_the_real_host() {
    let dir = root().join("guests/rust/template");
    for args in [
        &["test", "--quiet"][..],
        &["build", "--quiet", "--release", "--target", "wasm32-wasip2"][..],
    ] {
        let out = job_queue_outbox::cargo()
            .args(args)
            .current_dir(&dir)
            // Its own target dir, named here: a user's crate builds into its own `target/`,
            // and no cargo config around the checkout may move it.
            .env("CARGO_TARGET_DIR", dir.join("target"))
            .output()
            .expect("running cargo for the Rust template");
        assert!(
            out.status.success(),
            "cargo {args:?} in {} failed:\n{}\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let wasm = dir.join("target/wasm32-wasip2/release/my_actor.wasm");
    let bytes = std::fs::read(&wasm).unwrap_or_else(|e| panic!("{}: {e}", wasm.display()));
    let host = sluice_runtime::Host::new(sluice_tests::test_config()).expect("host starts");
    host.deploy(
        sluice_runtime::ChildSpec::new("MyActor", "my_actor.wasm"),
        bytes,
    )
    .await
    .expect("the template deploys");
    let t = std::time::Duration::from_secs(30);
    let r = sluice_tests::json(&host.ask("MyActor/a", "ping", "", t).await.unwrap());
    assert_eq!(r["pong"], 1, "{r}");
    let e = host.ask("MyActor/a", "nope", "", t).await.unwrap_err();
    assert_eq!(e.code, sluice_runtime::ErrorCode::InvalidArgument, "{e}");
    assert_eq!(
        e.to_string(),
        r#"INVALID_ARGUMENT: unknown msg-type "nope""#
    );
    assert_eq!(host.ask("MyActor/a", "count", "", t).await.unwrap(), b"3");
}

/// `pip install ./guests/python` into a fresh venv installs the package (`sluice` with its
/// `py.typed`, its committed bindings and its fake host `sluice.testing`, and the
/// `sluice_main` entry module), and a unit test runs from the venv alone: nothing of the
/// checkout is on the path. A copy of the folder is installed, so the build leaves nothing in
/// the worktree.
#[test]
fn python_sdk_installs_with_pip_into_a_venv() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("python");
    sluice_tests::copy_source_tree(&root().join("guests/python"), &src);
    let venv = tmp.path().join("venv");
    run_in(
        tmp.path(),
        "python3",
        &["-m", "venv", venv.to_str().unwrap()],
    );
    let py = venv.join("bin/python");
    let py = py.to_str().unwrap();
    run_in(
        tmp.path(),
        py,
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            src.to_str().unwrap(),
        ],
    );
    let out = Command::new(py)
        .args([
            "-c",
            "import importlib.resources as r, importlib.util as u, sluice; \
             from sluice.testing import FakeHost; \
             print(sluice.__file__); print(r.files('sluice').joinpath('py.typed').is_file()); \
             print(u.find_spec('sluice_main') is not None); print(sluice.Internal('x').code); \
             fake = FakeHost(); fake.install(); print(sluice.host.tell('W/1', 't', 'x')); \
             print(fake.calls[0].op, fake.calls[0].payload)",
        ])
        .current_dir(tmp.path())
        .env_remove("PYTHONPATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "import failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with(venv.to_str().unwrap()),
        "imported from the venv: {stdout}"
    );
    assert_eq!(
        lines[1..],
        ["True", "True", "internal", "queued", "tell b'x'"],
        "{stdout}"
    );
}

fn run_in(dir: &std::path::Path, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn go_job_queue_outbox_unit_tests() {
    run("examples/job_queue_outbox/go", "go", &["test", "./..."]);
}

#[test]
fn python_job_queue_outbox_unit_tests() {
    run(
        "examples/job_queue_outbox/python",
        "python3",
        &["-m", "pytest", "-q", "tests/test_app.py"],
    );
}

#[test]
fn typescript_job_queue_outbox_unit_tests() {
    run(
        "examples/job_queue_outbox/typescript",
        "node",
        &["test/run.mjs"],
    );
}
