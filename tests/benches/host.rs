//! Host benchmarks with baselines measured in the same run (see BENCHMARKS.md):
//! turn throughput vs a raw wasmtime loop, ask latency vs raw call + tokio oneshot,
//! activation cost vs raw instantiation, and the cost of a refused tell.
//!
//! `cargo bench -p sluice-tests --bench host` (release build).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_runtime::{ActorId, ChildSpec, Host, HostConfig, MailboxStrategy};
use sluice_tests::raw::RawEngine;
use sluice_tests::{host_with, rust_guest, test_config};

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

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // The calls are made from a task on a worker thread, as the ingress's handlers and actors
    // make them: `main`'s own future runs on the main thread, outside the pool, and every
    // reply would then be a cross-thread wake-up of a parked thread.
    tokio::spawn(bench()).await?
}

async fn bench() -> anyhow::Result<()> {
    // SLUICE_BENCH_RECORDER=1: record metrics as `sluice run` does (Prometheus and the
    // console's recorder), so every turn pays for the metrics it records; by default nothing
    // is installed and the runtime's metric handles do nothing.
    if std::env::var("SLUICE_BENCH_RECORDER").is_ok() {
        sluice_cli::metrics_export::handle();
        println!("metrics: recorded as `sluice run` records them");
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 20_000 } else { 200_000 };
    let echo = std::fs::read(rust_guest("echo"))?;
    if std::env::var("SLUICE_BENCH_ONLY").as_deref() == Ok("activation") {
        at_cap_activation(if quick { 200 } else { 1000 }).await;
        warm_slot_activation(&echo, quick).await?;
        steady_state_activation(if quick { 100 } else { 400 }).await;
        return Ok(());
    }
    let cfg = HostConfig {
        max_activations: 2000,
        idle_deactivate_ms: 0,
        ..test_config()
    };
    let host = host_with(
        cfg,
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
    .await;
    let payload = vec![b'x'; 64];

    // 1. Turn throughput: raw handle loop vs tells into one actor, in alternating rounds so
    // that each ratio compares two runs a fraction of a second apart (this VM's speed drifts
    // by up to 2x over a minute). The tells come from one task that does not yield, so the
    // actor's task waits in that worker's LIFO slot until the loop ends: the producer's and
    // the actor's costs add up, as they would for a producer sharing the actor's worker.
    // The raw engine is built as the host builds its own (same pool, same imports linked).
    let raw_engine = RawEngine::new(host.config())?;
    let mut raw = raw_engine.component(&echo)?.instance(&raw_engine).await?;
    for _ in 0..1000 {
        raw.call("echo", &payload).await?;
    }
    let id = ActorId::parse("Echo/tp")?;
    host.ask("Echo/tp", "echo", payload.clone(), Duration::from_secs(10))
        .await
        .unwrap();
    // A native actor on the same runtime: ractor, its tells from the same kind of loop.
    let (native, _native_task) = ractor::Actor::spawn(None, NativeEcho, ()).await?;
    let rounds = 7;
    let per = n / rounds;
    let mut ratios = Vec::with_capacity(rounds);
    let mut native_ratios = Vec::with_capacity(rounds);
    let (mut raw_best, mut tell_best, mut enqueue_best) = (0f64, 0f64, f64::MAX);
    let mut native_best = 0f64;
    for round in 1..=rounds {
        let line = sluice_test_wait::machine::core_to_core_ns();
        let t0 = Instant::now();
        for _ in 0..per {
            native.cast(Ping::Echo(payload.clone()))?;
        }
        let told = native.call(Ping::Flush, None).await?;
        assert!(matches!(told, ractor::rpc::CallResult::Success(n) if n > 0));
        let native_rate = per as f64 / t0.elapsed().as_secs_f64();
        native_best = native_best.max(native_rate);
        let t0 = Instant::now();
        for _ in 0..per {
            raw.call("echo", &payload).await?;
        }
        let raw_rate = per as f64 / t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        for _ in 0..per {
            host.tell_to(&id, "echo", payload.clone()).await.unwrap();
        }
        let enqueued = t0.elapsed();
        host.ask("Echo/tp", "echo", payload.clone(), Duration::from_secs(600))
            .await
            .unwrap();
        let tell_rate = per as f64 / t0.elapsed().as_secs_f64();
        // Rounds compare only within one state of the machine: print each with it.
        println!(
            "  round {round} (core-to-core {line} ns): ractor {native_rate:.0}/s, raw wasmtime {raw_rate:.0}/s, sluice tell {tell_rate:.0}/s: {:.2}x ractor, {:.2}x raw",
            tell_rate / native_rate,
            tell_rate / raw_rate
        );
        ratios.push(tell_rate / raw_rate);
        native_ratios.push(tell_rate / native_rate);
        raw_best = raw_best.max(raw_rate);
        tell_best = tell_best.max(tell_rate);
        enqueue_best = enqueue_best.min(enqueued.as_secs_f64() * 1e9 / per as f64);
    }
    ratios.sort_by(f64::total_cmp);
    native_ratios.sort_by(f64::total_cmp);
    let turn_rows = (per, rounds);
    println!(
        "turn throughput: raw wasmtime {raw_best:.0}/s, sluice tell {tell_best:.0}/s (best of {rounds} rounds); ratio per round: median {:.2}x, min {:.2}x, max {:.2}x; producer's own cost {enqueue_best:.0} ns per tell",
        ratios[rounds / 2],
        ratios[0],
        ratios[rounds - 1]
    );
    println!(
        "turn throughput against ractor: ractor {native_best:.0}/s (best of {rounds} rounds); sluice/ractor per round: median {:.2}x, min {:.2}x, max {:.2}x",
        native_ratios[rounds / 2],
        native_ratios[0],
        native_ratios[rounds - 1]
    );

    // 1b. Two cores contending: two producer tasks, one per worker, tell at once into two
    // actors of one type (each then asks its actor, so every tell has run), and then into one
    // actor. Every tell looks its type and key up: this is the row where those tables are
    // shared between cores.
    for (label, targets) in [
        ("two actors", ["Echo/c0", "Echo/c1"]),
        ("one actor", ["Echo/c2", "Echo/c2"]),
    ] {
        let mut best = 0f64;
        for _ in 0..rounds {
            best = best.max(contended_tells(&host, targets, &payload, per).await);
        }
        println!(
            "contended tells, two producers into {label} of one type: {best:.0} tells/s in all (best of {rounds} rounds)"
        );
    }

    if std::env::var("SLUICE_BENCH_ONLY").as_deref() == Ok("turns") {
        traced_turns(&host, &id, &payload, turn_rows, tell_best).await?;
        return Ok(());
    }

    // 2. Ask round trip vs raw call + oneshot.
    let m = n / 10;
    let mut raw_lat = Vec::with_capacity(m);
    for _ in 0..m {
        let t = Instant::now();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tx.send(raw.call("echo", &payload).await?).ok();
        std::hint::black_box(rx.await?);
        raw_lat.push(t.elapsed());
    }
    let mut ask_lat = Vec::with_capacity(m);
    for _ in 0..m {
        let t = Instant::now();
        host.ask("Echo/lat", "echo", payload.clone(), Duration::from_secs(10))
            .await
            .unwrap();
        ask_lat.push(t.elapsed());
    }
    println!(
        "ask round trip: raw call+oneshot p50 {:?} p99 {:?}; sluice ask p50 {:?} p99 {:?}",
        pct(&mut raw_lat, 0.5),
        pct(&mut raw_lat, 0.99),
        pct(&mut ask_lat, 0.5),
        pct(&mut ask_lat, 0.99)
    );

    // 3. Activation: fresh keys (each ask activates a new instance) vs raw instantiation.
    let k = if quick { 200 } else { 1000 };
    let raw_inst = raw_engine.instantiate_n(&echo, k).await?;
    let raw_act = raw_engine.activate_n(&echo, k).await?;
    let warm = {
        let t = Instant::now();
        for _ in 0..k {
            host.ask("Echo/warm", "echo", "", Duration::from_secs(10))
                .await
                .unwrap();
        }
        t.elapsed()
    };
    let rss0 = rss_kib();
    let t = Instant::now();
    for i in 0..k {
        host.ask(&format!("Echo/a{i}"), "echo", "", Duration::from_secs(10))
            .await
            .unwrap();
    }
    let act = t.elapsed().saturating_sub(warm);
    let rss_per = (rss_kib().saturating_sub(rss0)) as f64 / k as f64;
    println!(
        "activation: raw instantiate {:.1} us, raw instantiate+init+first call {:.1} us, sluice activation {:.1} us (ask time subtracted), RSS {:.1} KiB per idle actor",
        raw_inst.as_secs_f64() * 1e6 / k as f64,
        raw_act.as_secs_f64() * 1e6 / k as f64,
        act.as_secs_f64() * 1e6 / k as f64,
        rss_per
    );

    let ph = raw_engine.activation_phases(&echo, k).await?;
    println!(
        "activation phases (raw, warm slot): store {:.1} us, instantiate {:.1} us, init {:.1} us, first call {:.1} us, second call {:.1} us",
        ph[0].as_secs_f64() * 1e6,
        ph[1].as_secs_f64() * 1e6,
        ph[2].as_secs_f64() * 1e6,
        ph[3].as_secs_f64() * 1e6,
        ph[4].as_secs_f64() * 1e6
    );

    // 4. Refusal: tells into a full error mailbox.
    let slow = ActorId::parse("Slow/full")?;
    host.tell_to(&slow, "sleep", b"5000".to_vec())
        .await
        .unwrap();
    while host.inflight_turns() == 0 {
        tokio::task::yield_now().await;
    }
    let _ = host.tell_to(&slow, "sleep", Vec::new()).await;
    // Ten rounds, each timed on its own: the median round is the figure (the VM's speed
    // drifts between and within runs), the fastest and slowest are printed beside it.
    let rounds = 10;
    let r = n * 5 / rounds;
    let mut per = Vec::with_capacity(rounds);
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let mut refused = 0u64;
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..r {
            if host.tell_to(&slow, "sleep", Vec::new()).await.is_err() {
                refused += 1;
            }
        }
        per.push(t.elapsed().as_nanos() as f64 / r as f64);
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - a0;
    per.sort_by(f64::total_cmp);
    println!(
        "refusal: {:.0} ns per refused tell (median of {rounds} rounds; fastest {:.0}, slowest {:.0}; {refused}/{} refused), {allocs} heap allocations in total",
        per[rounds / 2],
        per[0],
        per[rounds - 1],
        r * rounds
    );
    at_cap_activation(k).await;

    warm_slot_activation(&echo, quick).await?;
    steady_state_activation(if quick { 100 } else { 400 }).await;

    // Last: it installs the process's tracing subscriber, which every later turn would pay.
    traced_turns(&host, &id, &payload, turn_rows, tell_best).await?;
    host.shutdown();
    Ok(())
}

/// Row 5: the turn-throughput row again with traces exported, through the `sluice` binary's
/// own OTLP setup (`sluice_cli::otlp`) sending to an in-process OTLP/HTTP sink that accepts
/// and drops every batch. Compared with the untraced tells of row 1 in this same run, whose
/// turns carried no trace context and created no span (tracing off costs one relaxed load).
async fn traced_turns(
    host: &Host,
    id: &ActorId,
    payload: &[u8],
    (per, rounds): (usize, usize),
    untraced_best: f64,
) -> anyhow::Result<()> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sink = format!("http://{}", l.local_addr()?);
    let app = axum::Router::new().route("/v1/traces", axum::routing::post(|| async { "" }));
    tokio::spawn(async move { axum::serve(l, app).await });
    let _guard = sluice_cli::otlp::init(Some(sluice_cli::otlp::Endpoint::Url(sink)))?;
    let mut best = 0f64;
    for _ in 0..rounds {
        let t0 = Instant::now();
        for _ in 0..per {
            host.tell_to(id, "echo", payload.to_vec()).await.unwrap();
        }
        host.ask(
            id.as_str(),
            "echo",
            payload.to_vec(),
            Duration::from_secs(600),
        )
        .await
        .unwrap();
        best = best.max(per as f64 / t0.elapsed().as_secs_f64());
    }
    println!(
        "turn throughput with traces exported (OTLP/HTTP to a local sink, one span per turn): {best:.0}/s, without an exporter {untraced_best:.0}/s (best of {rounds} rounds each, same run): {:.2}x",
        best / untraced_best
    );
    Ok(())
}

/// 3c. Activation into a free warm slot, against raw wasmtime doing the same: batches of
/// actors activated, left idle until deactivated, their slots reused by the next batch.
/// 3b. Activation in steady state: a host at its `max_activations`, where every new key
/// deactivates the least recently used idle actor and its activation reuses that pool slot
/// (the memory image stays mapped). Includes the eviction it causes, which the activation
/// waits for.
async fn at_cap_activation(k: usize) {
    let churn_host = host_with(
        HostConfig {
            max_activations: 64,
            idle_deactivate_ms: 0,
            ..test_config()
        },
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    for i in 0..64 {
        churn_host
            .ask(&format!("Echo/f{i}"), "echo", "", Duration::from_secs(10))
            .await
            .unwrap();
    }
    let mut live = Vec::with_capacity(k);
    for _ in 0..k {
        let t = Instant::now();
        churn_host
            .ask("Echo/f63", "echo", "", Duration::from_secs(10))
            .await
            .unwrap();
        live.push(t.elapsed());
    }
    let mut fresh = Vec::with_capacity(k);
    for i in 0..k {
        let t = Instant::now();
        churn_host
            .ask(&format!("Echo/c{i}"), "echo", "", Duration::from_secs(10))
            .await
            .unwrap();
        fresh.push(t.elapsed());
    }
    let mean = |v: &[Duration]| v.iter().sum::<Duration>().as_secs_f64() * 1e6 / v.len() as f64;
    let (fresh_mean, live_mean) = (mean(&fresh), mean(&live));
    let live_p50 = pct(&mut live, 0.5);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "activation at max_activations (LRU eviction + slot reuse): p50 {:.1} us, p90 {:.1} us, mean {:.1} us (ask time subtracted)",
        us(pct(&mut fresh, 0.5).saturating_sub(live_p50)),
        us(pct(&mut fresh, 0.9).saturating_sub(live_p50)),
        fresh_mean - live_mean
    );
    churn_host.shutdown();
}

/// How long an actor stays idle before it is deactivated in the warm-slot benchmarks, and the
/// gap the raw baseline leaves between its batches to match.
const IDLE_GAP: Duration = Duration::from_millis(20);

async fn warm_slot_activation(echo: &[u8], quick: bool) -> anyhow::Result<()> {
    // 3c. Activation into a free warm slot: actors that went idle were deactivated
    // (`idle_deactivate_ms`), leaving their slots free with their pages resident; new keys
    // take them without evicting anyone. The steady state of a host below its cap.
    let idle_host = host_with(
        HostConfig {
            max_activations: 2000,
            idle_deactivate_ms: IDLE_GAP.as_millis() as u64,
            ..test_config()
        },
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    // Raw wasmtime in the same pattern, on an engine and pool built as the host's, its rounds
    // interleaved with the host's so both see the same machine: a batch of instances brought
    // up and kept alive, dropped together, and their slots reused by the next batch after
    // the host's round has run in between.
    let raw_engine = RawEngine::new(idle_host.config())?;
    let raw = raw_engine.component(echo)?;
    let mut raw_ref = raw.instance(&raw_engine).await?;
    // Each activation is timed on its own and the medians compared, so a scheduler hiccup in
    // one of a few hundred does not move the figure; the means are printed too. A live
    // actor's ask (or a live instance's call) is the cost subtracted.
    let w = 64;
    let rounds = if quick { 8 } else { 24 };
    let (mut cold, mut warm, mut raw_cold, mut raw_warm) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..=rounds {
        // The first round only warms the slots.
        let timed = round > 0;
        timed_asks(&idle_host, new_keys(round, w), timed.then_some(&mut cold)).await;
        // The live actor is activated untimed (it went idle during the last wait), then kept
        // busy so it does not go idle before the loop ends.
        timed_asks(&idle_host, ["Echo/ref".to_string()], None).await;
        let live = std::iter::repeat_n("Echo/ref".to_string(), w);
        timed_asks(&idle_host, live, timed.then_some(&mut warm)).await;
        // The host's actors go idle and are deactivated; the raw batch starts after the same
        // idle gap, and the host's next batch after an equal one.
        all_deactivated(&idle_host).await;
        let batch = raw.activate_batch(&raw_engine, w).await?;
        for _ in 0..w {
            let t = Instant::now();
            std::hint::black_box(raw_ref.call("echo", b"").await?);
            if round > 0 {
                raw_warm.push(t.elapsed());
            }
        }
        if round > 0 {
            raw_cold.extend(batch);
        }
        tokio::time::sleep(IDLE_GAP).await;
    }
    let mean = |v: &[Duration]| v.iter().sum::<Duration>().as_secs_f64() * 1e6 / v.len() as f64;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let report = |cold: &mut Vec<Duration>, warm: &mut Vec<Duration>| {
        let (cold_mean, warm_mean) = (mean(cold), mean(warm));
        let warm_p50 = pct(warm, 0.5);
        (
            us(pct(cold, 0.5).saturating_sub(warm_p50)),
            us(pct(cold, 0.9).saturating_sub(warm_p50)),
            cold_mean - warm_mean,
            us(warm_p50),
        )
    };
    let (p50, p90, avg, call) = report(&mut cold, &mut warm);
    let (raw_p50, raw_p90, raw_avg, raw_call) = report(&mut raw_cold, &mut raw_warm);
    println!(
        "activation into a free warm slot (after idle deactivation), {} activations, call time subtracted: sluice p50 {p50:.1} us, p90 {p90:.1} us, mean {avg:.1} us (ask p50 {call:.1} us); raw wasmtime, same pattern: p50 {raw_p50:.1} us, p90 {raw_p90:.1} us, mean {raw_avg:.1} us (call p50 {raw_call:.1} us); ratio of p50s {:.2}x",
        cold.len(),
        p50 / raw_p50
    );
    idle_host.shutdown();
    Ok(())
}

/// 3d. The warm-slot pattern of 3c on the host alone, for longer: `rounds` batches of 64 new
/// keys, each batch idle until deactivated and its slots reused by the next after the same
/// gap, with no raw wasmtime rounds in between. 3c's figure comes from 24 rounds shared with
/// the baseline; this one is the host's steady state with the most samples this machine
/// gives in a minute. The call cost subtracted is measured in the same rounds (asks to the
/// batch's last actor while it is live).
async fn steady_state_activation(rounds: usize) {
    let host = host_with(
        HostConfig {
            max_activations: 2000,
            idle_deactivate_ms: IDLE_GAP.as_millis() as u64,
            ..test_config()
        },
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    let w = 64;
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        let timed = round > 0;
        timed_asks(&host, new_keys(round, w), timed.then_some(&mut cold)).await;
        // The batch's last actor is still live: asks to it are the call cost.
        let last = std::iter::repeat_n(format!("Echo/r{round}k{}", w - 1), w);
        timed_asks(&host, last, timed.then_some(&mut warm)).await;
        all_deactivated(&host).await;
        tokio::time::sleep(IDLE_GAP).await;
    }
    let call = pct(&mut warm, 0.5);
    let us = |d: Duration| d.saturating_sub(call).as_secs_f64() * 1e6;
    println!(
        "activation into a free warm slot, host alone, {} activations in {rounds} rounds, call time subtracted: p50 {:.1} us, p90 {:.1} us (ask p50 {:.1} us)",
        cold.len(),
        us(pct(&mut cold, 0.5)),
        us(pct(&mut cold, 0.9)),
        call.as_secs_f64() * 1e6
    );
    host.shutdown();
}

/// The keys of round `round`'s batch of `w` new actors.
fn new_keys(round: usize, w: usize) -> impl Iterator<Item = String> {
    (0..w).map(move |i| format!("Echo/r{round}k{i}"))
}

/// Asks `echo` of each of `ids` in turn, timing each ask into `times` when given.
async fn timed_asks(
    host: &Host,
    ids: impl IntoIterator<Item = String>,
    mut times: Option<&mut Vec<Duration>>,
) {
    for id in ids {
        let t = Instant::now();
        host.ask(&id, "echo", "", Duration::from_secs(10))
            .await
            .unwrap();
        if let Some(v) = times.as_deref_mut() {
            v.push(t.elapsed());
        }
    }
}

/// Waits (bounded) until every actor of `host` has been deactivated for idleness.
async fn all_deactivated(host: &Host) {
    sluice_tests::wait_until(Duration::from_secs(30), "idle actors deactivated", || {
        host.status().iter().all(|s| s.active == 0)
    })
    .await;
}

/// Tells from two tasks at once, `per` each, into `targets[0]` and `targets[1]`; waits until
/// every tell has run. Returns tells per second in all.
async fn contended_tells(host: &Host, targets: [&str; 2], payload: &[u8], per: usize) -> f64 {
    let ids = targets.map(|t| ActorId::parse(t).unwrap());
    for t in targets {
        host.ask(t, "echo", payload.to_vec(), Duration::from_secs(10))
            .await
            .unwrap();
    }
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(3));
    let producers: Vec<_> = ids
        .into_iter()
        .map(|id| {
            let (host, start, payload) = (host.clone(), start.clone(), payload.to_vec());
            tokio::spawn(async move {
                start.wait().await;
                for _ in 0..per {
                    host.tell_to(&id, "echo", payload.clone()).await.unwrap();
                }
                host.ask(id.as_str(), "echo", payload, Duration::from_secs(600))
                    .await
                    .unwrap();
            })
        })
        .collect();
    start.wait().await;
    let t0 = Instant::now();
    for p in producers {
        p.await.unwrap();
    }
    (2 * per) as f64 / t0.elapsed().as_secs_f64()
}

/// The native baseline of the turn row: a ractor actor that takes each 64-byte payload as the
/// echo guest does (and drops the reply a tell has no one to send to).
struct NativeEcho;

enum Ping {
    Echo(Vec<u8>),
    /// Replies the bytes seen so far, once every earlier message has been handled.
    Flush(ractor::RpcReplyPort<u64>),
}

impl ractor::Actor for NativeEcho {
    type Msg = Ping;
    type State = u64;
    type Arguments = ();

    async fn pre_start(
        &self,
        _: ractor::ActorRef<Ping>,
        _: (),
    ) -> Result<u64, ractor::ActorProcessingErr> {
        Ok(0)
    }

    async fn handle(
        &self,
        _: ractor::ActorRef<Ping>,
        msg: Ping,
        seen: &mut u64,
    ) -> Result<(), ractor::ActorProcessingErr> {
        match msg {
            Ping::Echo(p) => *seen += std::hint::black_box(p).len() as u64,
            Ping::Flush(reply) => {
                let _ = reply.send(*seen);
            }
        }
        Ok(())
    }
}
