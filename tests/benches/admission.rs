//! Admission control and deadlines (seed 001), measured on a real host with real guests:
//! 1. refusal latency p50/p99 with 100,000 turns queued (actor scope and host scope);
//! 2. goodput of a saturated host at 5x offered load, caps on vs off, against the
//!    unsaturated peak (calls completed within their deadline per second);
//! 3. caps-off overhead: tell throughput and the mailbox-full refusal path with caps off vs
//!    caps on (set so high they never refuse), interleaved.
//!
//! `cargo bench -p sluice-tests --bench admission -- --quick`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_runtime::{ActorId, CallOptions, ChildSpec, Host, HostConfig, MailboxStrategy};
use sluice_tests::{host_with, test_config};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p) as usize]
}

fn cfg() -> HostConfig {
    HostConfig {
        max_activations: 200,
        idle_deactivate_ms: 0,
        ..test_config()
    }
}

/// Fills `to` with `depth` queued + running turns, then times `n` refused tells one by one.
async fn refusal_latency(host: &Host, fill: &ActorId, probe: &ActorId, depth: usize, n: usize) {
    host.tell_to(fill, "sleep", b"600000".to_vec())
        .await
        .unwrap();
    while host.inflight_turns() == 0 {
        tokio::task::yield_now().await;
    }
    for _ in 1..depth {
        host.tell_to(fill, "sleep", b"0".to_vec()).await.unwrap();
    }
    let e = host.tell_to(probe, "sleep", Vec::new()).await.unwrap_err();
    let o = e.overload.expect("refused by a cap");
    let mut lat = Vec::with_capacity(n);
    let a0 = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..n {
        let t = Instant::now();
        let r = host.tell_to(probe, "sleep", Vec::new()).await;
        lat.push(t.elapsed());
        debug_assert!(r.is_err());
        std::hint::black_box(r).ok();
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - a0;
    println!(
        "refusal ({:?} scope, depth {} limit {}): p50 {:?} p99 {:?} over {n} refusals, {allocs} allocations",
        o.scope,
        o.depth,
        o.limit,
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99)
    );
}

const KEYS: usize = 16;
const TURN_MS: &str = "5";
const DEADLINE_MS: u64 = 250;

async fn work_host(max_queued: u64) -> Host {
    let spec = ChildSpec::new("Work", "slow.wasm")
        .mailbox(1_000_000, MailboxStrategy::Error)
        .max_queued(max_queued);
    let h = host_with(cfg(), vec![(spec, "slow")]).await;
    for k in 0..KEYS {
        h.ask(&format!("Work/{k}"), "ok", "", Duration::from_secs(10))
            .await
            .unwrap();
    }
    h
}

/// Closed loop, two calls in flight per actor: the unsaturated peak (calls/s, p50 turn ms).
async fn peak(host: &Host, secs: f64) -> (f64, f64) {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for i in 0..KEYS * 2 {
        let (h, done) = (host.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < stop {
                let t = Instant::now();
                h.ask(
                    &format!("Work/{}", i % KEYS),
                    "sleep",
                    TURN_MS,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
                lat.push(t.elapsed());
                done.fetch_add(1, Ordering::Relaxed);
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    // Two in flight per actor: a call's latency is about two turns.
    let p50_turn = pct(&mut lat, 0.5).as_secs_f64() * 1000.0 / 2.0;
    (done.load(Ordering::Relaxed) as f64 / secs, p50_turn)
}

/// Open loop at `rate` calls/s for `secs`: calls that succeeded within their deadline per second.
async fn goodput(host: &Host, rate: f64, secs: f64) -> (f64, u64, u64, u64) {
    let ok = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let late = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut issued = 0u64;
    let mut tasks = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    while start.elapsed().as_secs_f64() < secs {
        tick.tick().await;
        let due = (start.elapsed().as_secs_f64() * rate) as u64;
        while issued < due {
            let (h, ok, refused, late) = (host.clone(), ok.clone(), refused.clone(), late.clone());
            let key = issued as usize % KEYS;
            tasks.push(tokio::spawn(async move {
                let opts = CallOptions {
                    deadline: Some(Instant::now() + Duration::from_millis(DEADLINE_MS)),
                    ..Default::default()
                };
                match h
                    .ask_with(&format!("Work/{key}"), "sleep", TURN_MS, opts)
                    .await
                {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) if e.overload.is_some() => refused.fetch_add(1, Ordering::Relaxed),
                    Err(_) => late.fetch_add(1, Ordering::Relaxed),
                };
            }));
            issued += 1;
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let ok = ok.load(Ordering::Relaxed);
    (
        ok as f64 / secs,
        ok,
        refused.load(Ordering::Relaxed),
        late.load(Ordering::Relaxed),
    )
}

async fn tell_rate(host: &Host, id: &ActorId, n: usize) -> f64 {
    let payload = vec![b'x'; 64];
    let t0 = Instant::now();
    for _ in 0..n {
        host.tell_to(id, "echo", payload.clone()).await.unwrap();
    }
    host.ask(id.as_str(), "echo", payload, Duration::from_secs(600))
        .await
        .unwrap();
    n as f64 / t0.elapsed().as_secs_f64()
}

async fn full_refusal_ns(host: &Host, id: &ActorId, n: usize) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(host.tell_to(id, "sleep", Vec::new()).await).ok();
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // Calls are made from a task on a worker thread, as ingress handlers and actors make them
    // (`main`'s own future runs outside the worker pool, where every reply wakes a parked
    // thread).
    tokio::spawn(bench()).await?
}

async fn bench() -> anyhow::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let secs = if quick { 2.0 } else { 5.0 };

    // 1. Refusal latency with 100,000 turns queued.
    let depth = 100_000;
    let spec = ChildSpec::new("Slow", "slow.wasm")
        .mailbox(depth + 10, MailboxStrategy::Error)
        .max_queued(depth as u64);
    let h = host_with(cfg(), vec![(spec, "slow")]).await;
    let full = ActorId::parse("Slow/full")?;
    refusal_latency(&h, &full, &full, depth, depth).await;
    h.shutdown();
    let spec = ChildSpec::new("Slow", "slow.wasm").mailbox(depth + 10, MailboxStrategy::Error);
    let h = host_with(
        HostConfig {
            max_inflight_turns: depth as u64,
            ..cfg()
        },
        vec![(spec, "slow")],
    )
    .await;
    refusal_latency(&h, &full, &ActorId::parse("Slow/other")?, depth, depth).await;
    h.shutdown();

    // 2. Goodput at 5x offered load.
    let off = work_host(0).await;
    let (peak_rate, p50_turn) = peak(&off, secs).await;
    let cap = ((DEADLINE_MS as f64 / p50_turn) * 0.8).floor().max(1.0) as u64;
    println!(
        "unsaturated peak: {peak_rate:.0} calls/s ({KEYS} actors, p50 turn {p50_turn:.2} ms, deadline {DEADLINE_MS} ms)"
    );
    let offered = 5.0 * peak_rate;
    let (g_off, ok, refused, late) = goodput(&off, offered, secs).await;
    println!(
        "caps off at {offered:.0}/s offered: goodput {g_off:.0}/s ({:.0}% of peak); ok {ok}, refused {refused}, deadline-exceeded {late}",
        100.0 * g_off / peak_rate
    );
    off.shutdown();
    let on = work_host(cap).await;
    let (g_on, ok, refused, late) = goodput(&on, offered, secs).await;
    println!(
        "caps on (max_queued {cap} = 0.8 x {DEADLINE_MS} ms / p50 turn) at {offered:.0}/s offered: goodput {g_on:.0}/s ({:.0}% of peak); ok {ok}, refused {refused}, deadline-exceeded {late}",
        100.0 * g_on / peak_rate
    );
    on.shutdown();

    // 3. Caps-off overhead: interleaved rounds, best of each.
    let n = if quick { 20_000 } else { 100_000 };
    let echo = |c: HostConfig| async move {
        host_with(
            c,
            vec![
                (
                    ChildSpec::new("Echo", "echo.wasm").mailbox(n + 10, MailboxStrategy::Error),
                    "echo",
                ),
                (
                    ChildSpec::new("Slow", "slow.wasm").mailbox(1, MailboxStrategy::Error),
                    "slow",
                ),
            ],
        )
        .await
    };
    let off = echo(cfg()).await;
    let on = echo(HostConfig {
        max_queued_per_actor: u64::MAX / 2,
        max_inflight_turns: u64::MAX / 2,
        ..cfg()
    })
    .await;
    let id = ActorId::parse("Echo/tp")?;
    let slow = ActorId::parse("Slow/full")?;
    for h in [&off, &on] {
        h.ask("Echo/tp", "echo", "", Duration::from_secs(10))
            .await
            .unwrap();
        h.tell_to(&slow, "sleep", b"600000".to_vec()).await.unwrap();
        let _ = h.tell_to(&slow, "sleep", Vec::new()).await;
    }
    let (mut t_off, mut t_on, mut r_off, mut r_on) = (0f64, 0f64, f64::MAX, f64::MAX);
    for _ in 0..3 {
        t_off = t_off.max(tell_rate(&off, &id, n).await);
        t_on = t_on.max(tell_rate(&on, &id, n).await);
        r_off = r_off.min(full_refusal_ns(&off, &slow, n * 5).await);
        r_on = r_on.min(full_refusal_ns(&on, &slow, n * 5).await);
    }
    println!(
        "caps off vs on (never refusing): tell throughput {t_off:.0}/s vs {t_on:.0}/s; full-mailbox tell {r_off:.0} ns vs {r_on:.0} ns"
    );
    off.shutdown();
    on.shutdown();
    Ok(())
}
