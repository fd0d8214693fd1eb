//! Remote tell/ask through the wired cluster against its floors, in one run on one
//! nats-server: two hosts in this process, each a member of the same cluster (its own NATS
//! connection), the Rust `echo` test guest deployed on both, 64-byte payloads.
//!
//! 1. ask round trip, sequential: a plain (unclustered) host's local ask; a member's ask to a
//!    key it owns (the cluster route's local path); a member's ask to a key the other member
//!    owns (remote); a bare NATS request/reply between two connections (the engine's floor).
//! 2. tell throughput, 64 and 512 concurrent senders: remote tells from one member into 16
//!    keys of another, with `tell_frames_in_flight` 1 (member c) and 8 (member a, the
//!    default), against bare NATS publish to a subscriber and against local tells into 16
//!    keys of the plain host (the same turns with no NATS in between).
//!
//! Metrics are recorded with the recorder `sluice run` installs, so each call pays for the
//! metrics it records.
//!
//! `cargo bench -p sluice-node --bench remote_ask [-- --quick]` (release). Spawns its own
//! nats-server (`scripts/nats.sh install` builds it). Issue #14's goals: remote ask p50 ≤ NATS
//! round trip + 30 µs; remote tell throughput ≥ 0.5× NATS publish.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use sluice_cluster::testing::NatsServer;
use sluice_cluster::{ClusterConfig, connect};
use sluice_node::Node;
use sluice_runtime::{ChildSpec, Host, HostConfig, MailboxStrategy};

const PAYLOAD: usize = 64;
const T: Duration = Duration::from_secs(5);

fn echo_wasm() -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../guests/rust");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
        .current_dir(&dir)
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("running cargo for the Rust guests");
    assert!(status.success(), "building the Rust test guests failed");
    std::fs::read(dir.join("target/wasm32-wasip2/release/echo.wasm")).expect("echo.wasm")
}

/// The echo actor type of every host here. Its mailboxes hold a whole flood: with 2,048
/// senders into 16 keys, the default capacity fills, and every refused sender then sleeps
/// its `retry_after_ms`, so the rows would measure those sleeps instead of the turns.
fn echo_spec() -> ChildSpec {
    ChildSpec::new("Echo", "echo.wasm").mailbox(1_000_000, MailboxStrategy::Error)
}

async fn plain_host(wasm: &[u8]) -> Host {
    let host = Host::new(HostConfig {
        idle_deactivate_ms: 0,
        ..HostConfig::default()
    })
    .expect("host");
    host.deploy(echo_spec(), wasm.to_vec())
        .await
        .expect("deploy");
    host
}

async fn member(url: &str, node: &str, frames: usize, wasm: &[u8]) -> (Host, Node) {
    let host = Host::new(HostConfig {
        idle_deactivate_ms: 0,
        ..HostConfig::default()
    })
    .expect("host");
    let config = ClusterConfig::builder(url)
        .name("bench")
        .node_id(node)
        .tell_frames_in_flight(frames)
        .build()
        .expect("config");
    let n = Node::join(&host, &config).await.expect("join");
    let spec = echo_spec();
    host.deploy(spec.clone(), wasm.to_vec())
        .await
        .expect("deploy");
    n.start_following(&[(spec, wasm.to_vec())])
        .await
        .expect("modules");
    (host, n)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(name: &str, mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    let (p50, p99) = (percentile(&v, 0.5), percentile(&v, 0.99));
    println!(
        "{name:<40} n={:<6} p50 {:>7.1} µs  p99 {:>7.1} µs",
        v.len(),
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
    );
    p50
}

async fn asks(host: &Host, to: &str, n: usize) -> Vec<Duration> {
    let payload = vec![7u8; PAYLOAD];
    for _ in 0..n / 10 {
        host.ask(to, "echo", payload.clone(), T).await.expect("ask");
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = host.ask(to, "echo", payload.clone(), T).await.expect("ask");
        out.push(t.elapsed());
        assert_eq!(r.len(), PAYLOAD);
    }
    out
}

async fn bare_round_trips(url: &str, n: usize) -> Vec<Duration> {
    let responder = async_nats::connect(url).await.unwrap();
    let requester = async_nats::connect(url).await.unwrap();
    let mut sub = responder.subscribe("bench.echo").await.unwrap();
    responder.flush().await.unwrap();
    let nats = responder.clone();
    let echo = tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            if let Some(reply) = m.reply {
                nats.publish(reply, m.payload).await.unwrap();
            }
        }
    });
    let payload = Bytes::from(vec![7u8; PAYLOAD]);
    // Warm-up; on a loaded machine the server may not route to the new subscription at once
    // (no responders): retry that within a bound.
    let start = Instant::now();
    let mut warm = 0;
    while warm < n / 10 {
        match requester.request("bench.echo", payload.clone()).await {
            Ok(_) => warm += 1,
            Err(e) => {
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "bare responder: {e}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = requester
            .request("bench.echo", payload.clone())
            .await
            .unwrap();
        out.push(t.elapsed());
        assert_eq!(r.payload.len(), PAYLOAD);
    }
    echo.abort();
    out
}

/// Tells per second from `tellers` concurrent senders, each awaiting its receipt, spread over
/// the keys `to` (one actor's turns would be the bound otherwise): remote when another member
/// owns them, local on a plain host.
async fn tells(host: &Host, to: &[String], tellers: usize, n: usize) -> f64 {
    let t = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..tellers {
        let host = host.clone();
        let to = to[i % to.len()].clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..n / tellers {
                // The receiving mailbox may be full: retry after its hint, as a sender would.
                loop {
                    match host.tell(&to, "echo", vec![7u8; PAYLOAD]).await {
                        Ok(_) => break,
                        Err(e) => {
                            tokio::time::sleep(Duration::from_millis(e.retry_after_ms.unwrap_or(1)))
                                .await
                        }
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (n / tellers * tellers) as f64 / t.elapsed().as_secs_f64()
}

async fn bare_publish(url: &str, n: usize) -> f64 {
    let sink = async_nats::ConnectOptions::new()
        .subscription_capacity(n + 1024)
        .connect(url)
        .await
        .unwrap();
    let source = async_nats::connect(url).await.unwrap();
    let mut sub = sink.subscribe("bench.flood").await.unwrap();
    sink.flush().await.unwrap();
    let payload = Bytes::from(vec![7u8; PAYLOAD]);
    let t = Instant::now();
    // Bounded: a server that drops messages for a slow consumer must not hang the bench.
    let recv = tokio::spawn(async move {
        let mut got = 0usize;
        let mut last = Instant::now();
        while got < n {
            match tokio::time::timeout(Duration::from_secs(5), sub.next()).await {
                Ok(Some(_)) => {
                    got += 1;
                    last = Instant::now();
                }
                _ => break,
            }
        }
        (got, last)
    });
    for _ in 0..n {
        source
            .publish("bench.flood", payload.clone())
            .await
            .unwrap();
    }
    source.flush().await.unwrap();
    let (got, last) = recv.await.unwrap();
    if got < n {
        println!(
            "(bare publish: {} of {n} messages dropped by the server)",
            n - got
        );
    }
    got as f64 / last.duration_since(t).as_secs_f64()
}

#[tokio::main]
async fn main() {
    // The recorder `sluice run` installs (Prometheus and the console's).
    sluice_cli::metrics_export::handle();
    let quick = std::env::args().any(|a| a == "--quick");
    let (n, flood) = if quick {
        (3_000, 30_000)
    } else {
        (10_000, 100_000)
    };
    let nats = NatsServer::start().await.unwrap_or_else(|e| panic!("{e}"));
    let url = nats.url();
    let probe = connect(&ClusterConfig::new(url.clone())).await.unwrap();
    println!(
        "nats-server {} at {url}; payload {PAYLOAD} B",
        probe.server_version()
    );
    let wasm = echo_wasm();
    let plain = plain_host(&wasm).await;
    let (a, node_a) = member(&url, "a", 8, &wasm).await;
    let (_b, node_b) = member(&url, "b", 8, &wasm).await;
    let (c, node_c) = member(&url, "c", 1, &wasm).await;
    // Every member sees all three, with Echo deployed.
    let start = Instant::now();
    while [&node_a, &node_b, &node_c].iter().any(|n| {
        n.status()
            .members
            .values()
            .filter(|t| !t.is_empty())
            .count()
            < 3
    }) {
        assert!(start.elapsed() < Duration::from_secs(20), "members");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let keys_on = |node: &str, n: usize| -> Vec<String> {
        (0..)
            .map(|k| format!("Echo/{k}"))
            .filter(|id| sluice_cluster::placement::place(id, ["a", "b", "c"]) == Some(node))
            .take(n)
            .collect()
    };
    let (here, there) = (keys_on("a", 1).remove(0), keys_on("b", 1).remove(0));
    let flooded = keys_on("b", 16);
    // The same number of keys on the plain host: the rate this machine runs these turns at
    // with no NATS between sender and actor, the ceiling of any remote tell here.
    let local_keys: Vec<String> = (0..16).map(|k| format!("Echo/{k}")).collect();
    println!("-- ask round trip, sequential (3 rounds, interleaved)");
    let mut rows: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 1..=3 {
        let p = |d: Duration| d.as_secs_f64() * 1e6;
        let plain_p50 = summary(
            &format!("plain host, local ask #{round}"),
            asks(&plain, "Echo/1", n).await,
        );
        let local = summary(
            &format!("member, ask to its own key #{round}"),
            asks(&a, &here, n).await,
        );
        let remote = summary(
            &format!("member, ask to the other's key #{round}"),
            asks(&a, &there, n).await,
        );
        let bare = summary(
            &format!("bare NATS request/reply #{round}"),
            bare_round_trips(&url, n).await,
        );
        rows.entry("member local - plain (µs)")
            .or_default()
            .push(p(local) - p(plain_p50));
        rows.entry("remote - bare NATS (µs)")
            .or_default()
            .push(p(remote) - p(bare));
    }
    for (k, v) in rows {
        println!("{k}: {v:+.1?}");
    }
    // SLUICE_BENCH_TELLERS=64,512,4096 measures other sender counts.
    let senders: Vec<usize> = std::env::var("SLUICE_BENCH_TELLERS")
        .ok()
        .map(|v| {
            v.split(',')
                .map(|n| n.trim().parse().expect("SLUICE_BENCH_TELLERS"))
                .collect()
        })
        .unwrap_or_else(|| vec![64, 512]);
    for tellers in senders {
        println!(
            "-- tell throughput, {tellers} concurrent senders into 16 keys (3 rounds, interleaved)"
        );
        for round in 1..=3 {
            let line = sluice_test_wait::machine::core_to_core_ns();
            let bare = bare_publish(&url, flood * 4).await;
            let local = tells(&plain, &local_keys, tellers, flood).await;
            let one = tells(&c, &flooded, tellers, flood).await;
            let eight = tells(&a, &flooded, tellers, flood).await;
            println!(
                "#{round} (core-to-core {line} ns): bare NATS publish {bare:>9.0} msg/s   local tells {local:>9.0}/s ({:.2})   remote tells, 1 frame in flight {one:>9.0}/s ({:.2})   8 frames {eight:>9.0}/s ({:.2}; {:.2} of local)",
                local / bare,
                one / bare,
                eight / bare,
                eight / local
            );
        }
    }
    node_a.leave(Duration::from_secs(1)).await;
    node_b.leave(Duration::from_secs(1)).await;
    node_c.leave(Duration::from_secs(1)).await;
}
