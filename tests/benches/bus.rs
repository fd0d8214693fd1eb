//! The bus wired into the host, end to end, against a baseline measured in the same run:
//! events/s from `Host::publish` through one routed subscription into a Rust echo actor's
//! turns, vs `Host::tell_to` of the same messages straight into its mailbox, for several
//! delivery windows.
//!
//! `cargo bench -p sluice-tests --bench bus [-- --quick]` (see BENCHMARKS.md).

use std::time::{Duration, Instant};

use sluice_runtime::{
    ActorId, BusSettings, ChildSpec, ErrorCode, Host, HostConfig, MailboxStrategy, Subscription,
};
use sluice_tests::{rust_guest, test_config};

const T: Duration = Duration::from_secs(120);

/// Keeps at most this many events queued in the subscription, so the routed queue's
/// per-principal cap never evicts (the bench measures delivery, not eviction).
const MAX_BACKLOG: usize = 128;

async fn host(window: usize) -> anyhow::Result<Host> {
    let cfg = HostConfig {
        idle_deactivate_ms: 0,
        bus: BusSettings {
            delivery_window: window,
            ..BusSettings::default()
        }
        .subscribe(Subscription::routed("Echo", "sub", "bench.x")),
        ..test_config()
    };
    let host = Host::new(cfg)?;
    let spec = ChildSpec::new("Echo", "echo.wasm").mailbox(1024, MailboxStrategy::Error);
    host.deploy(spec, std::fs::read(rust_guest("echo"))?)
        .await?;
    // Activate before timing.
    host.ask("Echo/sub", "now", "", T).await?;
    Ok(host)
}

/// Tells `n` messages (msg-type `bench.x`: echoed, not recorded) into `Echo/sub`, retrying a
/// full mailbox, then waits for the last turn. Messages per second.
async fn baseline_tell(host: &Host, n: usize) -> f64 {
    let id = ActorId::parse("Echo/sub").unwrap();
    let t0 = Instant::now();
    for _ in 0..n {
        loop {
            match host
                .tell_to(&id, "bench.x", b"payload-0123456789".to_vec())
                .await
            {
                Ok(_) => break,
                Err(e) if e.code == ErrorCode::ResourceExhausted => tokio::task::yield_now().await,
                Err(e) => panic!("{e}"),
            }
        }
    }
    // FIFO: when this answers, every tell before it has run.
    host.ask("Echo/sub", "now", "", T).await.unwrap();
    n as f64 / t0.elapsed().as_secs_f64()
}

/// Publishes `n` events to the routed subscription of `Echo/sub`, pacing on its backlog,
/// and waits until every one has been handled. Events per second.
async fn bus_publish(host: &Host, n: usize) -> f64 {
    let delivered0 = host.bus_stats()[0].delivered;
    let t0 = Instant::now();
    for i in 0..n {
        if i % 32 == 0 {
            while host.bus_stats()[0].queued >= MAX_BACKLOG {
                tokio::task::yield_now().await;
            }
        }
        host.publish("bench.x", b"payload-0123456789".to_vec(), Some("alice"))
            .unwrap();
    }
    while host.bus_stats()[0].delivered < delivered0 + n as u64 {
        tokio::task::yield_now().await;
    }
    host.ask("Echo/sub", "now", "", T).await.unwrap();
    let s = &host.bus_stats()[0];
    assert_eq!(
        s.evicted, 0,
        "the pacing kept the queue within its caps: {s:?}"
    );
    n as f64 / t0.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // Publish from a task on a worker thread, as actors and ingress handlers do (`main`'s
    // own future runs outside the worker pool).
    tokio::spawn(bench()).await?
}

async fn bench() -> anyhow::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 20_000 } else { 100_000 };
    for window in [1, 4, 16] {
        let h = host(window).await?;
        // Warm up both paths, then alternate so drift hits both alike.
        baseline_tell(&h, n / 10).await;
        bus_publish(&h, n / 10).await;
        let mut tell = Vec::new();
        let mut bus = Vec::new();
        for _ in 0..3 {
            tell.push(baseline_tell(&h, n).await);
            bus.push(bus_publish(&h, n).await);
        }
        let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
        let (t, b) = (best(&tell), best(&bus));
        println!(
            "bus.e2e window={window}: publish→turn {b:.0} events/s, tell baseline {t:.0} msgs/s, ratio {:.2}",
            b / t
        );
        h.shutdown();
    }
    Ok(())
}
