//! Supervision and isolation: traps, runaway loops and memory hogs kill only their instance;
//! the supervisor restarts it within its restart intensity; the host keeps serving.

use std::time::Duration;

use sluice_runtime::{ChildSpec, ErrorCode, HostConfig, LoadError};
use sluice_tests::{host_with, rust_guest, test_config};

const T: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trap_restarts_the_instance_and_the_next_message_succeeds() {
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Crash", "crash.wasm"), "crash")],
    )
    .await;
    assert_eq!(host.ask("Crash/1", "ok", "", T).await.unwrap(), b"alive");
    let e = host.ask("Crash/1", "boom", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "{e}");
    assert!(e.to_string().contains("trapped"), "{e}");
    assert_eq!(host.ask("Crash/1", "ok", "", T).await.unwrap(), b"alive");
    // Another activation of the same type never noticed.
    assert_eq!(host.ask("Crash/2", "ok", "", T).await.unwrap(), b"alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_intensity_exceeded_stops_the_actor_with_unavailable() {
    let spec = ChildSpec::new("Crash", "crash.wasm").restarts(2, Duration::from_secs(60));
    let host = host_with(test_config(), vec![(spec, "crash")]).await;
    for _ in 0..3 {
        let e = host.ask("Crash/1", "boom", "", T).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::Internal, "{e}");
    }
    let e = host.ask("Crash/1", "ok", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "{e}");
    let e = host.tell("Crash/1", "ok", "").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "{e}");
    assert_eq!(host.status()[0].stopped, 1);
    // Redeploying the type gives the stopped actor a fresh start.
    host.deploy(
        ChildSpec::new("Crash", "crash.wasm"),
        std::fs::read(rust_guest("crash")).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(host.ask("Crash/1", "ok", "", T).await.unwrap(), b"alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loop_is_interrupted_and_restarted() {
    let cfg = HostConfig {
        max_turn_ms: 200,
        ..test_config()
    };
    let host = host_with(cfg, vec![(ChildSpec::new("Loop", "loop.wasm"), "loop")]).await;
    let t0 = std::time::Instant::now();
    let e = host.ask("Loop/1", "spin", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "{e}");
    assert!(e.to_string().contains("max_turn_ms=200"), "{e}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "interrupt took {:?}",
        t0.elapsed()
    );
    assert_eq!(host.ask("Loop/1", "ok", "", T).await.unwrap(), b"alive");
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_hog_gets_a_typed_error_and_host_rss_stays_bounded() {
    let spec = ChildSpec::new("Hog", "hog.wasm").memory_limit_mb(32);
    let host = host_with(test_config(), vec![(spec, "hog")]).await;
    let before = rss_kib();
    for _ in 0..3 {
        let e = host.ask("Hog/1", "eat", "", T).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::ResourceExhausted, "{e}");
        assert!(e.to_string().contains("memory limit of 32 MiB"), "{e}");
    }
    assert_eq!(host.ask("Hog/1", "ok", "", T).await.unwrap(), b"alive");
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    // Three hogs hit a 32 MiB limit; the pool resets their memory. Allow slack for the
    // test harness, never the hundreds of MiB an unbounded guest would take.
    assert!(grown_mib < 160, "host RSS grew by {grown_mib} MiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_or_core_module_is_a_typed_load_error_and_the_host_keeps_serving() {
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    let garbage = host
        .deploy(
            ChildSpec::new("Bad", "bad.wasm"),
            b"definitely not wasm".to_vec(),
        )
        .await
        .unwrap_err();
    assert!(matches!(garbage, LoadError::Invalid { .. }), "{garbage}");
    // A valid core module (not a component).
    let core = vec![0, b'a', b's', b'm', 1, 0, 0, 0];
    let e = host
        .deploy(ChildSpec::new("Core", "core.wasm"), core)
        .await
        .unwrap_err();
    assert!(
        matches!(e, LoadError::Invalid { .. }) && e.to_string().contains("core WebAssembly module"),
        "{e}"
    );
    // A truncated component.
    let mut truncated = std::fs::read(rust_guest("echo")).unwrap();
    truncated.truncate(truncated.len() / 2);
    let e = host
        .deploy(ChildSpec::new("Trunc", "t.wasm"), truncated)
        .await
        .unwrap_err();
    assert!(matches!(e, LoadError::Invalid { .. }), "{e}");
    assert_eq!(
        host.ask("Echo/1", "echo", "still here", T).await.unwrap(),
        b"still here"
    );
    let e = host.ask("Bad/1", "echo", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_payload_is_invalid_argument_before_queueing() {
    let cfg = HostConfig {
        max_payload_bytes: 1024,
        ..test_config()
    };
    let host = host_with(cfg, vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")]).await;
    let e = host
        .tell("Echo/1", "echo", vec![0u8; 1025])
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{e}");
    let e = host
        .ask("Echo/1", "echo", vec![0u8; 4096], T)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{e}");
    assert_eq!(host.status()[0].queued, 0);
    assert_eq!(
        host.ask("Echo/1", "echo", vec![7u8; 1024], T)
            .await
            .unwrap(),
        vec![7u8; 1024]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_times_out_with_deadline_exceeded_and_missing_type_is_not_found() {
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Slow", "slow.wasm"), "slow")],
    )
    .await;
    let e = host
        .ask("Slow/1", "sleep", "2000", Duration::from_millis(100))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::DeadlineExceeded, "{e}");
    assert!(!e.skipped, "the turn was running, not skipped");
    // The next message queued behind the running turn expires in the queue: skipped.
    let e = host
        .ask("Slow/1", "sleep", "1", Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(e.skipped, "{e:?}");
    let e = host.ask("Nope/1", "x", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let e = host.ask("no-slash", "x", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_errors_are_values_not_traps_and_imports_reach_the_host() {
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    let e = host.ask("Echo/1", "fail", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.to_string(), "bad input");
    // Same instance, no restart: its recorded state survives the error.
    host.ask("Echo/1", "record", "x", T).await.unwrap();
    host.ask("Echo/1", "fail", "", T).await.unwrap_err();
    let r = sluice_tests::json(&host.ask("Echo/1", "recorded", "", T).await.unwrap());
    assert_eq!(r["items"], serde_json::json!(["x"]));
    let who = sluice_tests::json(&host.ask("Echo/1", "whoami", "", T).await.unwrap());
    assert_eq!(who["self_id"], "Echo/1");
    assert_eq!(who["principal"], "system");
    // A bare host has no outbox: a typed UNAVAILABLE, not a trap.
    for (ty, req) in [
        (
            "tell_reliable",
            r#"{"to":"Echo/2","msg_type":"echo","payload":"x"}"#,
        ),
        (
            "dispatch",
            r#"{"targets":["Echo/2"],"msg_type":"echo","payload":"x"}"#,
        ),
    ] {
        let r = sluice_tests::json(&host.ask("Echo/1", ty, req, T).await.unwrap());
        assert_eq!(r["error"]["type"], "Unavailable", "{ty}: {r}");
    }
    // Every host has a bus: publishing with no subscriber succeeds and reaches nobody.
    let r = sluice_tests::json(
        &host
            .ask("Echo/1", "publish", r#"{"topic":"a.b","payload":"x"}"#, T)
            .await
            .unwrap(),
    );
    assert_eq!(r, serde_json::json!({"ok": true}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_components_are_cached_on_disk_and_a_corrupt_entry_is_recompiled() {
    use std::os::unix::fs::MetadataExt;
    let cache = tempfile::tempdir().unwrap();
    let cfg = || HostConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..test_config()
    };
    let echo = std::fs::read(rust_guest("echo")).unwrap();
    let deploy_and_ask = |host: sluice_runtime::Host| {
        let echo = echo.clone();
        async move {
            host.deploy(ChildSpec::new("Echo", "echo.wasm"), echo)
                .await
                .unwrap();
            assert_eq!(host.ask("Echo/1", "echo", "hi", T).await.unwrap(), b"hi");
        }
    };
    let entries = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    };
    deploy_and_ask(sluice_runtime::Host::new(cfg()).unwrap()).await;
    let files = entries();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().ends_with(".cwasm"));
    let compiled = std::fs::read(&files[0]).unwrap();
    let meta = |p: &std::path::Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.ino(), m.modified().unwrap())
    };
    let before = meta(&files[0]);
    // A second host loads the machine code: the entry is not rewritten (neither replaced,
    // which would give it a new inode, nor written in place, which would move its mtime).
    deploy_and_ask(sluice_runtime::Host::new(cfg()).unwrap()).await;
    assert_eq!(meta(&files[0]), before);
    // A corrupt entry is discarded and replaced, and the deploy succeeds. (Put in place by
    // rename, as the cache itself writes: the earlier hosts still map the old file, and
    // truncating a mapped file would fault them.)
    let tmp = cache.path().join("corrupt.tmp");
    std::fs::write(&tmp, b"garbage").unwrap();
    std::fs::rename(&tmp, &files[0]).unwrap();
    deploy_and_ask(sluice_runtime::Host::new(cfg()).unwrap()).await;
    assert_eq!(entries(), files);
    assert_eq!(std::fs::read(&files[0]).unwrap(), compiled);
}

/// A trap's message names its cause (a panic's `unreachable`, a stack overflow's out-of-bounds
/// access, the turn time limit) and the guest frames it happened in, instead of stopping at "error while executing
/// at wasm backtrace:"; and every turn that ran is counted once by outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traps_name_their_cause_and_frames_and_every_turn_is_counted_once_by_outcome() {
    sluice_tests::install_metrics();
    let host = host_with(
        HostConfig {
            max_turn_ms: 300,
            ..test_config()
        },
        vec![
            (ChildSpec::new("Crash9", "crash.wasm"), "crash"),
            (ChildSpec::new("Loop9", "loop.wasm"), "loop"),
        ],
    )
    .await;
    let t = Duration::from_secs(30);
    assert_eq!(host.ask("Crash9/a", "ok", "", t).await.unwrap(), b"alive");
    let panic = host.ask("Crash9/a", "boom", "", t).await.unwrap_err();
    let overflow = host.ask("Crash9/a", "recurse", "", t).await.unwrap_err();
    let spin = host.ask("Loop9/a", "spin", "", t).await.unwrap_err();
    for (e, cause, frame) in [
        (&panic, "wasm `unreachable` instruction executed", "#handle"),
        // Rust keeps its stack in linear memory: running off it is an out-of-bounds access.
        (&overflow, "out of bounds memory access", "crash::recurse"),
    ] {
        let text = e.to_string();
        let prefix = format!("INTERNAL: actor Crash9/a trapped during handle: {cause} at ");
        assert!(text.starts_with(&prefix), "{text}");
        assert!(text.ends_with("; instance restarted"), "{text}");
        // The guest's own frames are named (from the innermost one of its code: the
        // language's panic and abort machinery is left out).
        let frames = &text[prefix.len()..text.len() - "; instance restarted".len()];
        assert!(frames.contains(frame), "{text}");
        assert!(
            !frames.starts_with("std::") && !frames.contains("abort"),
            "{text}"
        );
    }
    assert_eq!(
        spin.to_string(),
        "INTERNAL: actor Loop9/a interrupted: handle ran longer than max_turn_ms=300; instance restarted"
    );
    // Each instance was restarted and answers again.
    assert_eq!(host.ask("Crash9/a", "ok", "", t).await.unwrap(), b"alive");
    let turns = |ty: &str, outcome: &str| {
        sluice_tests::metric(
            "sluice_turns_total",
            &[("actor_type", ty), ("outcome", outcome)],
        )
    };
    assert_eq!(turns("Crash9", "ok"), 2.0);
    assert_eq!(turns("Crash9", "trapped"), 2.0);
    assert_eq!(turns("Crash9", "error"), 0.0);
    assert_eq!(turns("Loop9", "interrupted"), 1.0);
    assert_eq!(turns("Loop9", "trapped"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasm_stack_overflow_is_a_trap_named_call_stack_exhausted_with_the_recursing_frames() {
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Crash10", "crash.wasm"), "crash")],
    )
    .await;
    // Bounded, the same recursion returns: the trap below is the depth, not the op.
    let bounded = host.ask("Crash10/a", "deep", "1000", T).await;
    assert!(bounded.is_ok(), "{bounded:?}");
    // Unbounded, it runs off wasm's own call stack (the engine's stack limit, not Rust's
    // stack in linear memory, which `recurse` overflows as an out-of-bounds access).
    let e = host.ask("Crash10/a", "deep", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "{e}");
    let text = e.to_string();
    let prefix = "INTERNAL: actor Crash10/a trapped during handle: call stack exhausted at ";
    assert!(text.starts_with(prefix), "{text}");
    assert!(text.ends_with("; instance restarted"), "{text}");
    // The innermost frames are the recursing function's, quoted up to the cap and the rest
    // counted.
    let frames = &text[prefix.len()..text.len() - "; instance restarted".len()];
    assert!(
        frames.starts_with("crash::deep <- crash::deep <- "),
        "{text}"
    );
    assert!(frames.contains(" more)"), "{text}");
    // The instance was restarted and answers again.
    assert_eq!(host.ask("Crash10/a", "ok", "", T).await.unwrap(), b"alive");
}
