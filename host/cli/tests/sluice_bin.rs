//! The `sluice` executable itself: `--help` names every command, and an unknown command is a
//! usage error (exit 2) that names it.
//!
//! This target is also why `cargo test --workspace` links `target/debug/sluice`: an
//! integration test makes cargo build its package's binaries with the test build's features.
//! The harnesses that run real `sluice` processes (`tests/src/lib.rs`, the job_queue_outbox
//! driver) ask cargo for this target's binary, so they reuse that build instead of compiling
//! the dependency graph a second time with `sluice-cli`'s own feature set.

use std::process::Command;

fn sluice(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("running the sluice binary")
}

#[test]
fn help_names_every_command() {
    let out = sluice(&["--help"]);
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for cmd in [
        "run",
        "deploy",
        "call",
        "tell",
        "dlq",
        "reminders",
        "status",
        "build",
        "new",
    ] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{cmd} "))),
            "`sluice --help` does not list `{cmd}`:\n{help}"
        );
    }
}

#[test]
fn an_unknown_command_is_a_usage_error() {
    let out = sluice(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("frobnicate"), "{err}");
    assert!(out.stdout.is_empty());
}
