//! The `sluice` binary's client side against a real `sluice run`: `call`, `tell` and `status`
//! print what the host answered and exit 0; a typed error is printed as the host's JSON with
//! exit code 1 and no stack trace; `RUST_LOG` decides what the host logs.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use sluice_tests::{SluiceRun, rust_app, sluice_binary};

const APP: &str =
    "[[supervisor.children]]\nname = \"echo\"\nactor_type = \"Echo\"\nmodule = \"echo.wasm\"\n";

/// Runs `sluice ARGS…` to completion. RUST_BACKTRACE is set, as many Rust developers have it:
/// a failed command must still print only its error.
fn sluice(bin: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("running sluice")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_tell_and_status_print_the_hosts_answer_and_errors_exit_1_without_a_stack_trace() {
    let dir = rust_app(&["echo"], APP);
    let bin = sluice_binary("sluice-cli-client");
    let run = SluiceRun::start(&bin, dir.path(), &[], &[]).await;
    let host = run.ingress.as_str();

    let out = sluice(
        &bin,
        &[
            "call",
            "Echo/1",
            "echo",
            r#"{"hello":"cli"}"#,
            "--host",
            host,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "{\"hello\":\"cli\"}\n");

    for item in ["first", "second"] {
        let out = sluice(&bin, &["tell", "Echo/1", "record", item, "--host", host]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    // Tells to one actor run in order, before a later ask to it.
    let out = sluice(&bin, &["call", "Echo/1", "recorded", "--host", host]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recorded: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(recorded["items"], serde_json::json!(["first", "second"]));

    let out = sluice(&bin, &["status", "--host", &run.admin]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let echo = status["actor_types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["actor_type"] == "Echo")
        .unwrap_or_else(|| panic!("no Echo in {status}"));
    assert_eq!(echo["active"], 1, "{status}");

    // A typed error: the host's JSON and the HTTP status, exit code 1, nothing else.
    let out = sluice(&bin, &["call", "Nope/1", "echo", "--host", host]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("NOT_FOUND: no such actor type"), "{stderr}");
    assert!(stderr.contains("HTTP 404"), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
    assert!(stderr.lines().count() <= 2, "{stderr}");
    assert!(out.stdout.is_empty());

    // No host there: exit 1 with the reason, not a panic or a stack trace.
    let out = sluice(
        &bin,
        &["call", "Echo/1", "echo", "--host", "http://127.0.0.1:9"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_log_decides_what_the_host_logs() {
    let dir = rust_app(&["echo"], APP);
    let bin = sluice_binary("sluice-cli-rust-log");
    // The default (info) logs each module deployed.
    let info = SluiceRun::start(&bin, dir.path(), &[], &[("RUST_LOG", "info")]).await;
    let deployed = "module deployed";
    sluice_tests::wait_until(
        std::time::Duration::from_secs(10),
        "the deploy log line",
        || info.stderr_has(deployed),
    )
    .await;
    // Plain text into a pipe: no terminal colour codes.
    let lines = info.stderr_lines();
    assert!(!lines.iter().any(|l| l.contains('\u{1b}')), "{lines:?}");
    drop(info);
    // `warn` keeps it quiet: the host is up (it printed where it listens) and logged nothing
    // below warn.
    let quiet = SluiceRun::start(&bin, dir.path(), &[], &[("RUST_LOG", "warn")]).await;
    let out = sluice(
        &bin,
        &["call", "Echo/1", "echo", "x", "--host", &quiet.ingress],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = quiet.stderr_lines();
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("INFO") || l.contains(deployed)),
        "{lines:?}"
    );
}

#[test]
fn run_refuses_an_admin_api_off_loopback_without_a_token() {
    let dir = rust_app(&["echo"], APP);
    let bin = sluice_binary("sluice-cli-admin");
    let mut child = Command::new(&bin)
        .arg("run")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "0.0.0.0:0"])
        .env_remove("SLUICE_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running sluice run");
    // Bounded: a host that started serving instead of refusing must fail the test, not hang
    // it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("sluice run started with a non-loopback admin API and no token");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr).trim(),
        "error: the admin API on 0.0.0.0:0 is not loopback: set --admin-token (or SLUICE_ADMIN_TOKEN)"
    );
    assert!(!text(&out.stdout).contains(" on "), "{}", text(&out.stdout));
}

/// The version of `ty` that `sluice status` reports with `token`.
fn version(bin: &Path, admin: &str, token: &str, ty: &str) -> Value {
    let out = sluice(bin, &["status", "--host", admin, "--token", token]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    status["actor_types"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["actor_type"] == ty))
        .unwrap_or_else(|| panic!("no {ty} in {status}"))["version"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_token_guards_status_and_deploy_through_the_binary() {
    let dir = rust_app(&["echo"], APP);
    let bin = sluice_binary("sluice-cli-admin");
    let run = SluiceRun::start(&bin, dir.path(), &["--admin-token", "s3cret"], &[]).await;
    let admin = run.admin.as_str();
    assert_eq!(version(&bin, admin, "s3cret", "Echo"), 1);
    let refused = "UNAUTHENTICATED: missing or wrong bearer token";
    for args in [
        vec!["status", "--host", admin],
        vec!["status", "--host", admin, "--token", "wrong"],
        vec!["deploy", dir.path().to_str().unwrap(), "--host", admin],
        vec![
            "deploy",
            dir.path().to_str().unwrap(),
            "--host",
            admin,
            "--token",
            "wrong",
        ],
    ] {
        let out = Command::new(&bin)
            .args(&args)
            .env_remove("SLUICE_ADMIN_TOKEN")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains(refused),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // Nothing was deployed by the refused attempts; the right token deploys (a changed spec:
    // the same bytes again would keep version 1).
    assert_eq!(version(&bin, admin, "s3cret", "Echo"), 1);
    std::fs::write(
        dir.path().join("app-config.toml"),
        format!("{APP}init = {{ v = \"2\" }}\n"),
    )
    .unwrap();
    let out = Command::new(&bin)
        .args(["deploy", dir.path().to_str().unwrap(), "--host", admin])
        .env("SLUICE_ADMIN_TOKEN", "s3cret")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(version(&bin, admin, "s3cret", "Echo"), 2);
}
