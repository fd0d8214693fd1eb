//! Crash test: SIGKILL a host process while 100 000 messages are pending, restart it, and
//! check every message is delivered at least once, with duplicates bounded by what was
//! claimed at the moment of the kill (partitions × relay_batch_size).
//!
//! The "host" is this test binary re-executed with `SLUICE_CRASH_CHILD` set (so it needs no
//! extra dependencies): the same test, which then plays the host instead of the parent.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use sluice_outbox::{Delivery, DeliveryError, Envelope, NewMessage, Outbox, OutboxConfig};

const N: usize = 100_000;
const PARTITIONS: u32 = 4;
const BATCH: u32 = 20;

struct LogReceiver(Mutex<std::fs::File>);

#[async_trait]
impl Delivery for LogReceiver {
    async fn deliver(&self, msg: Envelope) -> Result<(), DeliveryError> {
        // One write(2) per delivery, before the ack: the log over-approximates deliveries.
        let line = format!("{}\n", msg.id);
        self.0
            .lock()
            .write_all(line.as_bytes())
            .map_err(|e| DeliveryError::Transient(e.to_string()))
    }
}

/// The child: open the outbox in `dir` (filling it on the first start) and relay until it is
/// drained, logging every delivery; writes `done` at the end.
fn crash_child_host(dir: &std::path::Path) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = OutboxConfig::builder()
            .partitions(PARTITIONS)
            .relay_batch_size(BATCH)
            .lease_ms(1_000)
            .build()
            .unwrap();
        let outbox = Outbox::open_sqlite(dir.join("outbox.db"), config)
            .await
            .unwrap();
        if outbox.channel().max_sequence().await.unwrap() == 0 {
            let msgs = (0..N)
                .map(|i| {
                    NewMessage::new(
                        format!("Worker/{}", i % 1000),
                        "job",
                        (i as u64).to_le_bytes().to_vec(),
                    )
                })
                .collect();
            outbox.enqueue(msgs).await.unwrap();
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("delivered.log"))
            .unwrap();
        let relay = outbox.start_relay(Arc::new(LogReceiver(Mutex::new(log))));
        loop {
            let depth: u64 = outbox.stats().await.unwrap().iter().map(|s| s.depth).sum();
            if depth == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        relay.shutdown().await;
    });
    std::fs::write(dir.join("done"), b"ok").unwrap();
}

fn spawn_child(dir: &std::path::Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "sigkill_mid_relay_loses_nothing_and_bounds_duplicates",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SLUICE_CRASH_CHILD", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child host")
}

fn log_lines(dir: &std::path::Path) -> usize {
    std::fs::read(dir.join("delivered.log"))
        .map_or(0, |b| b.iter().filter(|c| **c == b'\n').count())
}

#[test]
fn sigkill_mid_relay_loses_nothing_and_bounds_duplicates() {
    // Re-executed by the parent below with the directory to play the host in.
    if let Some(dir) = std::env::var_os("SLUICE_CRASH_CHILD") {
        crash_child_host(std::path::Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child(dir.path());
    // Wait (bounded) until the relay is well into the backlog, then SIGKILL it.
    let wait = sluice_test_wait::wait_until(
        Duration::from_secs(300),
        "the child host to deliver a fifth of the backlog before the kill",
        || {
            if log_lines(dir.path()) >= N / 5 {
                return true;
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "child exited before the kill"
            );
            false
        },
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(wait);
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    let at_kill = log_lines(dir.path());
    assert!(
        at_kill < N,
        "the kill came too late to test anything ({at_kill} delivered)"
    );
    assert!(!dir.path().join("done").exists());

    let status = spawn_child(dir.path()).wait().unwrap();
    assert!(status.success(), "restarted host failed: {status}");
    assert!(dir.path().join("done").exists());

    let text = std::fs::read_to_string(dir.path().join("delivered.log")).unwrap();
    let mut counts: HashMap<i64, u32> = HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        *counts.entry(line.parse().unwrap()).or_default() += 1;
    }
    assert_eq!(counts.len(), N, "every message delivered at least once");
    let duplicates: u32 = counts.values().map(|c| c - 1).sum();
    let bound = PARTITIONS * BATCH;
    assert!(
        duplicates <= bound,
        "{duplicates} duplicates, more than the claimed batches ({bound})"
    );
    eprintln!(
        "crash test: {at_kill} delivered before SIGKILL, {duplicates} duplicates after restart (bound {bound})"
    );
}
