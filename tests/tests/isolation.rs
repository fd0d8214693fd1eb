//! Isolation: a guest sees no environment variables, files, directories or stdio unless its
//! app config grants them, and no network at all (nothing grants it). What a type is granted
//! is all it sees (directories read-only), and another type on the same host sees none of it.
//! The `probe` guest reports what WASI shows it.

use std::time::Duration;

use serde_json::{Value, json};
use sluice_runtime::{ChildSpec, Host};
use sluice_tests::{
    SluiceRun, host_with, json, root, rust_app, sluice_binary, test_config, wait_until,
};

async fn probe(host: &Host, id: &str, msg_type: &str, arg: &str) -> Value {
    let reply = host
        .ask(
            id,
            msg_type,
            arg.as_bytes().to_vec(),
            Duration::from_secs(10),
        )
        .await
        .unwrap_or_else(|e| panic!("{id} {msg_type} {arg}: {e}"));
    json(&reply)
}

/// Asserts that `reply` is a refusal from the guest's filesystem calls.
fn refused(reply: &Value, what: &str) {
    assert_eq!(reply["ok"], false, "{what} should fail, got {reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_without_grants_sees_no_environment_files_directories_or_network() {
    // The test process has an environment and a filesystem that could leak.
    assert!(std::env::var_os("PATH").is_some());
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Probe", "probe.wasm"), "probe")],
    )
    .await;

    assert_eq!(probe(&host, "Probe/a", "env", "").await, json!({}));
    let manifest = root().join("Cargo.toml");
    for path in ["/etc/passwd", "Cargo.toml", manifest.to_str().unwrap()] {
        refused(&probe(&host, "Probe/a", "read", path).await, path);
    }
    for dir in ["/", ".", "/tmp"] {
        refused(&probe(&host, "Probe/a", "list", dir).await, dir);
    }
    // No network: not even loopback, where a listener is waiting.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    refused(&probe(&host, "Probe/a", "connect", &addr).await, "connect");
    assert!(listener.accept().is_err(), "a guest connected to {addr}");
    let target = std::env::temp_dir().join(format!("sluice-probe-{}", std::process::id()));
    let reply = probe(
        &host,
        "Probe/a",
        "write",
        &format!("{}\nwritten by a guest", target.display()),
    )
    .await;
    refused(&reply, "write");
    assert!(!target.exists(), "a guest created {}", target.display());
    host.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_env_and_directories_are_all_a_guest_sees_and_directories_are_read_only() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("hello.txt"), "hello from the host").unwrap();
    std::fs::create_dir(data.path().join("sub")).unwrap();
    let mut granted = ChildSpec::new("Granted", "probe.wasm");
    granted
        .wasi
        .env
        .insert("PROBE_GREETING".into(), "granted".into());
    granted
        .wasi
        .dirs
        .insert("/data".into(), data.path().to_path_buf());
    let host = host_with(
        test_config(),
        vec![
            (granted, "probe"),
            (ChildSpec::new("Bare", "probe.wasm"), "probe"),
        ],
    )
    .await;

    // Exactly the granted variable: nothing of the host's own environment comes with it.
    assert_eq!(
        probe(&host, "Granted/1", "env", "").await,
        json!({"PROBE_GREETING": "granted"})
    );
    let read = probe(&host, "Granted/1", "read", "/data/hello.txt").await;
    assert_eq!(read, json!({"ok": true, "value": "hello from the host"}));
    let listed = probe(&host, "Granted/1", "list", "/data").await;
    assert_eq!(listed, json!({"ok": true, "value": ["hello.txt", "sub"]}));

    // Read-only: no new file, no overwrite.
    refused(
        &probe(&host, "Granted/1", "write", "/data/new.txt\nx").await,
        "create in a granted dir",
    );
    assert!(!data.path().join("new.txt").exists());
    refused(
        &probe(&host, "Granted/1", "write", "/data/hello.txt\noverwritten").await,
        "overwrite in a granted dir",
    );
    assert_eq!(
        std::fs::read_to_string(data.path().join("hello.txt")).unwrap(),
        "hello from the host"
    );
    // Nothing outside the granted directory, however the path is spelled.
    for path in [
        "/etc/passwd",
        "/data/../../../../etc/passwd",
        "/data/sub/../../hello.txt",
    ] {
        refused(&probe(&host, "Granted/1", "read", path).await, path);
    }

    // Grants belong to their type: another type on the same host sees none of them.
    assert_eq!(probe(&host, "Bare/1", "env", "").await, json!({}));
    refused(
        &probe(&host, "Bare/1", "read", "/data/hello.txt").await,
        "read a dir granted to another type",
    );
    host.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_type_granted_stdio_reaches_the_hosts_stdout_and_stderr() {
    let app = rust_app(
        &["probe"],
        r#"
[[supervisor.children]]
name = "quiet"
actor_type = "Quiet"
module = "probe.wasm"

[[supervisor.children]]
name = "loud"
actor_type = "Loud"
module = "probe.wasm"
[supervisor.children.wasi]
stdio = true
"#,
    );
    let run = SluiceRun::start(&sluice_binary("sluice-isolation"), app.path(), &[], &[]).await;
    let http = reqwest::Client::new();
    let quiet = format!("quiet-marker-{}", std::process::id());
    let loud = format!("loud-marker-{}", std::process::id());
    // Quiet prints first; each reply comes after the guest's write and flush returned.
    for (path, text) in [("Quiet/1", &quiet), ("Loud/1", &loud)] {
        let r = http
            .post(format!("{}/actors/{path}/ask/print", run.ingress))
            .body(text.clone())
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
    }
    wait_until(
        Duration::from_secs(10),
        "the granted guest's output",
        || {
            run.stdout_has(&format!("{loud} (stdout)"))
                && run.stderr_has(&format!("{loud} (stderr)"))
        },
    )
    .await;
    assert!(!run.stdout_has(&quiet), "ungranted stdout leaked");
    assert!(!run.stderr_has(&quiet), "ungranted stderr leaked");
}
