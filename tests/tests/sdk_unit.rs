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
}

#[test]
fn python_sdk_unit_tests() {
    run("guests/python", "python3", &["-m", "pytest", "-q", "tests"]);
}

#[test]
fn typescript_sdk_unit_tests() {
    run("guests/typescript", "npm", &["test", "--silent"]);
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
