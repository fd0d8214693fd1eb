//! Shared support for the end-to-end tests: build the real guests once, start real hosts,
//! wait on conditions with a bound (never a bare sleep).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sluice_runtime::{ChildSpec, Host, HostConfig};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Builds the Rust test guests (once per test binary; cargo itself serialises concurrent
/// builds) and returns the path of guest `name` (`echo`, `slow`, `crash`, `loop`, `hog`, `flood`).
pub fn rust_guest(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    let dir = root().join("guests/rust");
    BUILT.get_or_init(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
            .current_dir(&dir)
            .env_remove("CARGO_TARGET_DIR")
            .status()
            .expect("running cargo for the Rust guests");
        assert!(status.success(), "building the Rust test guests failed");
    });
    let p = dir
        .join("target/wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(p.exists(), "guest {name} missing at {}", p.display());
    p
}

/// A host configuration for tests: small pool, shared compile cache, short idle timeout.
pub fn test_config() -> HostConfig {
    HostConfig {
        max_activations: 64,
        cache_dir: Some(root().join("target/sluice-test-cache")),
        ..HostConfig::default()
    }
}

/// Starts a host and deploys `children`, each `(spec, guest name)`.
pub async fn host_with(cfg: HostConfig, children: Vec<(ChildSpec, &str)>) -> Host {
    let host = Host::new(cfg).expect("host starts");
    for (spec, guest) in children {
        let bytes = std::fs::read(rust_guest(guest)).expect("guest readable");
        host.deploy(spec, bytes).await.expect("guest deploys");
    }
    host
}

/// Polls `cond` until it holds or `bound` passes; panics with `what` on timeout.
pub async fn wait_until<F: FnMut() -> bool>(bound: Duration, what: &str, mut cond: F) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < bound,
            "timed out after {bound:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Parses a JSON reply.
pub fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "reply is not JSON ({e}): {}",
            String::from_utf8_lossy(bytes)
        )
    })
}
