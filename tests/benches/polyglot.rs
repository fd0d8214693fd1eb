//! Per-language guest benchmarks on the real host, with the Rust guest measured in the same run
//! as the anchor: component size, build time, cold compile, cached load, activation
//! (instantiate + init + first turn) into a fresh pool slot and into a reused one, turn
//! throughput (tells), ask p50/p99, RSS per idle actor.
//!
//! `cargo bench -p sluice-tests --bench polyglot [-- --quick] [-- go python ...]`
//!
//! TypeScript is measured twice in the same run, once per JavaScript engine (QuickJS, the
//! default, then StarlingMonkey); `--js-engine quickjs|starlingmonkey` keeps one.

use std::time::{Duration, Instant};

use sluice_build::JsBackend;
use sluice_runtime::{ActorId, ChildSpec, Host, HostConfig, MailboxStrategy};
use sluice_tests::{Lang, guest_on, root, test_config};

/// Tells `n` messages into `id` as fast as they are accepted, then waits for an ask behind them:
/// messages per second end to end.
async fn tell_rate(host: &Host, id: &str, n: usize, payload: &[u8]) -> anyhow::Result<f64> {
    host.ask(id, "echo", payload.to_vec(), T).await?;
    let actor = ActorId::parse(id)?;
    let t = Instant::now();
    for _ in 0..n {
        host.tell_to(&actor, "echo", payload.to_vec()).await?;
    }
    host.ask(id, "echo", payload.to_vec(), Duration::from_secs(600))
        .await?;
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// Tells made by a guest: the language's `flood` actor tells `count` messages to the echo
/// actor `Echo/sink` in one turn (host calls from inside a turn, each with its receipt); the
/// rate is `count` over that turn's ask. The sink then drains before the next row runs.
async fn guest_tell_rate(
    host: &Host,
    lang: Lang,
    engine: JsBackend,
    count: usize,
) -> anyhow::Result<f64> {
    let bytes = std::fs::read(guest_on(lang, "flood", engine).expect("toolchain present"))?;
    host.deploy(ChildSpec::new("Flood", "flood.wasm"), bytes)
        .await?;
    let req = |count: usize| {
        serde_json::json!({"to": "Echo/sink", "msg_type": "echo", "count": count}).to_string()
    };
    host.ask("Flood/f", "flood", req(100), T).await?;
    let t = Instant::now();
    let r = host.ask("Flood/f", "flood", req(count), T).await?;
    let took = t.elapsed();
    let r: serde_json::Value = serde_json::from_slice(&r)?;
    anyhow::ensure!(r["queued"] == count, "flood: {r}");
    host.ask("Echo/sink", "echo", "", Duration::from_secs(600))
        .await?;
    Ok(count as f64 / took.as_secs_f64())
}

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

const T: Duration = Duration::from_secs(60);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // Calls are made from a task on a worker thread, as ingress handlers and actors make them
    // (`main`'s own future runs outside the worker pool, where every reply wakes a parked
    // thread).
    tokio::spawn(bench()).await?
}

async fn bench() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let langs: Vec<Lang> = Lang::ALL
        .into_iter()
        .filter(|l| {
            *l == Lang::Rust
                || !args.iter().any(|a| Lang::ALL.iter().any(|x| x.dir() == a))
                || args.iter().any(|a| a == l.dir())
        })
        .collect();
    let n: usize = if quick { 5_000 } else { 50_000 };
    let k: usize = if quick { 20 } else { 100 };
    println!(
        "| guest | size | build | cold compile | cached load | activation, fresh slot | activation, reused slot (p50) | tell throughput, one call per message | tell throughput, batched turns (gain) | tells from the guest | ask p50 / p99 | RSS per idle actor |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let engines: Vec<JsBackend> = match args.iter().position(|a| a == "--js-engine") {
        Some(i) => vec![args.get(i + 1).map_or("", String::as_str).parse()?],
        None => vec![JsBackend::QuickJs, JsBackend::StarlingMonkey],
    };
    let runs: Vec<(Lang, JsBackend)> = langs
        .into_iter()
        .flat_map(|l| match l {
            Lang::TypeScript => engines.iter().map(|e| (l, *e)).collect(),
            _ => vec![(l, JsBackend::default())],
        })
        .collect();
    for (lang, engine) in runs {
        let label = match lang {
            Lang::TypeScript => format!("TypeScript ({engine})"),
            _ => format!("{lang:?}"),
        };
        // Build time: a fresh build into a scratch file (the cache is not consulted).
        let build_time = if lang == Lang::Rust {
            None
        } else {
            let out = root()
                .join("target/guest-bench")
                .join(format!("{}-{engine}-echo.wasm", lang.dir()));
            let t = Instant::now();
            let opts = sluice_build::BuildOptions {
                output: Some(out),
                repo_root: Some(root()),
                js_backend: Some(engine),
                ..Default::default()
            };
            sluice_build::build(
                &root().join("guests").join(lang.dir()).join("testkit/echo"),
                &opts,
            )?;
            Some(t.elapsed())
        };
        let path = guest_on(lang, "echo", engine).expect("toolchain present");
        let bytes = std::fs::read(&path)?;
        // Cold compile: no cache dir; cached load: a warm cache dir (second deploy).
        let cold_host = Host::new(HostConfig {
            cache_dir: None,
            ..test_config()
        })?;
        let t = Instant::now();
        cold_host
            .deploy(ChildSpec::new("Echo", "echo.wasm"), bytes.clone())
            .await?;
        let cold = t.elapsed();
        cold_host.shutdown();
        let cfg = HostConfig {
            max_activations: k as u32 + 16,
            idle_deactivate_ms: 0,
            ..test_config()
        };
        let host = Host::new(cfg)?;
        let spec = ChildSpec::new("Echo", "echo.wasm").mailbox(n + 10, MailboxStrategy::Error);
        host.deploy(spec.clone(), bytes.clone()).await?; // fills the cache if needed
        let t = Instant::now();
        host.deploy(spec, bytes.clone()).await?;
        let cached = t.elapsed();

        let payload = vec![b'x'; 64];
        host.ask("Echo/tp", "echo", payload.clone(), T)
            .await
            .unwrap();
        let rate = tell_rate(&host, "Echo/tp", n, &payload).await?;
        // The same tells on a host that runs one guest call per message (no batched turns).
        let single = Host::new(HostConfig {
            max_batch_turns: 1,
            ..test_config()
        })?;
        single
            .deploy(
                ChildSpec::new("Echo", "echo.wasm").mailbox(n + 10, MailboxStrategy::Error),
                bytes.clone(),
            )
            .await?;
        let single_rate = tell_rate(&single, "Echo/tp", n, &payload).await?;
        single.shutdown();
        let guest_rate = guest_tell_rate(&host, lang, engine, n / 2).await?;
        let mut lat = Vec::with_capacity(n / 5);
        for _ in 0..n / 5 {
            let t = Instant::now();
            host.ask("Echo/tp", "echo", payload.clone(), T)
                .await
                .unwrap();
            lat.push(t.elapsed());
        }
        // Activation and RSS: k fresh keys, each activated by one ask (warm ask time subtracted).
        let warm = {
            let t = Instant::now();
            for _ in 0..k {
                host.ask("Echo/tp", "echo", "", T).await.unwrap();
            }
            t.elapsed()
        };
        let rss0 = rss_kib();
        let t = Instant::now();
        for i in 0..k {
            host.ask(&format!("Echo/a{i}"), "echo", "", T)
                .await
                .unwrap();
        }
        let act = t.elapsed().saturating_sub(warm) / k as u32;
        let rss = rss_kib().saturating_sub(rss0) as f64 / k as f64;
        host.shutdown();
        let reused = reused_slot_activation(&bytes, if quick { 10 } else { 30 }).await?;
        println!(
            "| {label} | {:.2} MB | {} | {:.0} ms | {:.1} ms | {:.0} µs | {:.0} µs | {:.0}/s | {:.0}/s ({:.1}×) | {:.0}/s | {:.1} / {:.1} µs | {:.0} KiB |",
            bytes.len() as f64 / 1e6,
            build_time.map_or("—".to_string(), |d| format!("{:.1} s", d.as_secs_f64())),
            cold.as_secs_f64() * 1e3,
            cached.as_secs_f64() * 1e3,
            act.as_secs_f64() * 1e6,
            reused.as_secs_f64() * 1e6,
            single_rate,
            rate,
            rate / single_rate,
            guest_rate,
            pct(&mut lat, 0.5).as_secs_f64() * 1e6,
            pct(&mut lat, 0.99).as_secs_f64() * 1e6,
            rss
        );
    }
    Ok(())
}

/// Activation in a host's steady state below its cap: `rounds` batches of 32 new keys, each
/// batch left idle until deactivated so the next one reuses its pool slots. The median of
/// the timed asks (the first batch only warms the slots) less the median ask to a live actor.
async fn reused_slot_activation(bytes: &[u8], rounds: usize) -> anyhow::Result<Duration> {
    let host = Host::new(HostConfig {
        max_activations: 64,
        idle_deactivate_ms: 20,
        ..test_config()
    })?;
    host.deploy(ChildSpec::new("Echo", "echo.wasm"), bytes.to_vec())
        .await?;
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        for i in 0..32 {
            let t = Instant::now();
            host.ask(&format!("Echo/r{round}k{i}"), "echo", "", T)
                .await
                .unwrap();
            if round > 0 {
                cold.push(t.elapsed());
            }
        }
        // The batch's last actor is live until it goes idle: asks to it are the call cost.
        for _ in 0..32 {
            let t = Instant::now();
            host.ask(&format!("Echo/r{round}k31"), "echo", "", T)
                .await
                .unwrap();
            warm.push(t.elapsed());
        }
        sluice_tests::wait_until(Duration::from_secs(30), "idle actors deactivated", || {
            host.status().iter().all(|s| s.active == 0)
        })
        .await;
    }
    host.shutdown();
    Ok(pct(&mut cold, 0.5).saturating_sub(pct(&mut warm, 0.5)))
}
