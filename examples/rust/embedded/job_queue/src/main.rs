//! The seed's embedded job queue: a Sluice host inside a Rust program, an AIMD-limited
//! SQLite outbox, workers with bounded mailboxes, and the job_queue_outbox scenarios.
//!
//! `job-queue-embedded GUESTS_DIR WORK_DIR` where GUESTS_DIR holds the Rust test actors
//! (`echo.wasm`, `slow.wasm`). Runs the seven scenarios of the job_queue_outbox driver and
//! prints its table, legend and overall line (`7/7 passed`), with one line per scenario on why
//! its numbers differ; exits non-zero if any invariant fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use serde_json::{Value, json};
use sluice_outbox::{
    ConcurrencyConfig, Conflict, DlqSelector, NewMessage, Outbox, OutboxConfig, RetryPolicy,
};
use sluice_runtime::{ChildSpec, Host, HostConfig, MailboxStrategy};

// The driver's table format, from its own source file: the two tables read alike, and this
// example depends on the host crates only (the driver needs the CLI).
#[allow(dead_code)]
#[path = "../../../../job_queue_outbox/driver/src/report.rs"]
mod report;
use report::SCENARIOS;

const WORKERS: usize = 100;
const MAX_ATTEMPTS: u32 = 5;
const T: Duration = Duration::from_secs(60);

fn outbox_config() -> OutboxConfig {
    // The seed's embedded settings: AIMD 10 / 1 / 50, drain every 5 ms, 20 per cycle.
    OutboxConfig {
        concurrency: ConcurrencyConfig {
            initial_limit: 10,
            min_limit: 1,
            max_limit: 50,
            ..Default::default()
        },
        // 5 attempts as in the polyglot examples' app-config.toml. With 3, the config-server
        // flood could dead-letter a download by chance: the two servers hold 2 queued + 1
        // running downloads of 20 ms each, and three short jittered backoffs (base 10 ms) can
        // all land inside that backlog.
        retry_policy: RetryPolicy {
            max_attempts: MAX_ATTEMPTS,
            base_ms: 10,
            cap_ms: 200,
        },
        relay_interval_ms: 5,
        relay_batch_size: 20,
        actor_types: vec!["Worker".into(), "ConfigServer".into(), "Collector".into()],
        ..OutboxConfig::default()
    }
}

async fn start(
    guests: &Path,
    db: &Path,
    relay: bool,
) -> anyhow::Result<(Host, std::sync::Arc<Outbox>)> {
    let host = Host::new(HostConfig {
        cache_dir: Some(guests.join(".cache")),
        ..HostConfig::default()
    })?;
    let echo = std::fs::read(guests.join("echo.wasm")).context("echo.wasm")?;
    let slow = std::fs::read(guests.join("slow.wasm")).context("slow.wasm")?;
    host.deploy(ChildSpec::new("Leader", "echo.wasm"), echo.clone())
        .await?;
    host.deploy(
        ChildSpec::new("Worker", "echo.wasm").mailbox(64, MailboxStrategy::Error),
        echo.clone(),
    )
    .await?;
    host.deploy(
        ChildSpec::new("Collector", "echo.wasm").mailbox(4, MailboxStrategy::Error),
        echo,
    )
    .await?;
    host.deploy(
        ChildSpec::new("ConfigServer", "slow.wasm").mailbox(2, MailboxStrategy::Error),
        slow,
    )
    .await?;
    let ob = Outbox::open_sqlite(db, outbox_config()).await?;
    let ob = if relay {
        host.attach_outbox(ob)
    } else {
        std::sync::Arc::new(ob)
    };
    Ok((host, ob))
}

async fn drained(ob: &Outbox) -> anyhow::Result<()> {
    let t0 = Instant::now();
    loop {
        let depth: u64 = ob.stats().await?.iter().map(|p| p.depth).sum();
        if depth == 0 {
            return Ok(());
        }
        ensure!(
            t0.elapsed() < T,
            "outbox still holds {depth} messages after {T:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn ask_json(host: &Host, to: &str, msg_type: &str, payload: Value) -> anyhow::Result<Value> {
    let r = host
        .ask(to, msg_type, payload.to_string(), T)
        .await
        .map_err(|e| anyhow::anyhow!("{to} {msg_type}: {e}"))?;
    Ok(serde_json::from_slice(&r)?)
}

async fn items(host: &Host, to: &str) -> anyhow::Result<Vec<String>> {
    let r = ask_json(host, to, "recorded", json!(null)).await?;
    Ok(r["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default())
}

fn workers() -> Vec<String> {
    (0..WORKERS).map(|i| format!("Worker/worker-{i}")).collect()
}

async fn thundering_herd(host: &Host, ob: &Outbox) -> anyhow::Result<Value> {
    let req = json!({"targets": workers(), "msg_type": "record", "payload": "thundering_herd", "idempotency_key": "herd-1"});
    let t0 = Instant::now();
    let r = ask_json(host, "Leader/job-queue", "dispatch", req.clone()).await?;
    let wall_ms = t0.elapsed().as_millis() as u64;
    ensure!(r["ok"] == true, "dispatch failed: {r}");
    let n = |k: &str| r[k].as_u64().unwrap_or(0);
    let (d, q) = (n("delivered"), n("queued"));
    ensure!(
        r["outcomes"].as_array().map(Vec::len) == Some(WORKERS)
            && d + q + n("deduplicated") + n("dead_lettered") == WORKERS as u64,
        "the counts do not add up to the targets: {r}"
    );
    ensure!(n("dead_lettered") == 0, "a worker was dead-lettered: {r}");
    // The herd again with the same key: redelivery is deduplicated.
    let again = ask_json(host, "Leader/job-queue", "dispatch", req).await?;
    ensure!(
        again["deduplicated"] == WORKERS,
        "the key did not absorb the redelivery: {again}"
    );
    drained(ob).await?;
    for w in workers() {
        let it = items(host, &w).await?;
        ensure!(
            it == ["thundering_herd"],
            "{w} processed the task {} times",
            it.len()
        );
    }
    Ok(json!({"targets": WORKERS, "delivered": d, "queued": q, "wall_ms": wall_ms}))
}

async fn config_wave_deploy(host: &Host, ob: &Outbox) -> anyhow::Result<Value> {
    let mut waves = Vec::new();
    let all = workers();
    let deploy = Instant::now();
    let (mut total_d, mut total_q) = (0, 0);
    for (n, wave) in all.chunks(20).enumerate() {
        let t0 = Instant::now();
        let req = json!({"targets": wave, "msg_type": "record", "payload": "config 2.1.0", "idempotency_key": "config-2.1.0"});
        let r = ask_json(host, "Leader/job-queue", "dispatch", req).await?;
        total_d += r["delivered"].as_u64().unwrap_or(0);
        total_q += r["queued"].as_u64().unwrap_or(0);
        waves.push(json!({"wave": n, "delivered": r["delivered"], "queued": r["queued"], "wall_ms": t0.elapsed().as_millis()}));
    }
    // Config servers have two-slot mailboxes: flood them through the outbox so the relay's
    // AIMD limiter meets MailboxFull and backs off, and still delivers everything.
    let servers: Vec<String> = (0..2).map(|i| format!("ConfigServer/{i}")).collect();
    let mut server_queued = 0;
    for i in 0..10 {
        let req = json!({"targets": servers, "msg_type": "download", "payload": "20", "idempotency_key": format!("dl-{i}")});
        server_queued += ask_json(host, "Leader/job-queue", "dispatch", req).await?["queued"]
            .as_u64()
            .unwrap_or(0);
    }
    drained(ob).await?;
    for w in &all {
        ensure!(
            items(host, w).await?.last().map(String::as_str) == Some("config 2.1.0"),
            "{w} lacks the new config"
        );
    }
    let dead = ob.dlq_list(None, 10).await?;
    ensure!(
        dead.is_empty(),
        "config wave dead-lettered messages: {dead:?}"
    );
    Ok(
        json!({"waves": waves, "total": {"delivered": total_d, "queued": total_q},
        "config_server_queued": server_queued, "deploy_ms": deploy.elapsed().as_millis() as u64}),
    )
}

async fn send_heartbeat(host: &Host, ob: &Outbox) -> anyhow::Result<Value> {
    // Three heartbeats to every worker, one idempotency key with OVERWRITE: a heartbeat still
    // pending is replaced by the newer one; each worker ends on the last and never goes back.
    let mut last = Value::Null;
    for seq in 1..=3 {
        let req = json!({"targets": workers(), "msg_type": "record", "payload": format!("heartbeat-{seq}"),
            "idempotency_key": "heartbeat", "conflict": "overwrite"});
        last = ask_json(host, "Leader/job-queue", "dispatch", req).await?;
        ensure!(last["ok"] == true, "dispatch failed: {last}");
    }
    drained(ob).await?;
    let mut delivered = 0;
    for w in workers() {
        let seqs: Vec<u64> = items(host, &w)
            .await?
            .iter()
            .filter_map(|i| i.strip_prefix("heartbeat-")?.parse().ok())
            .collect();
        ensure!(
            seqs.last() == Some(&3),
            "{w} heartbeats {seqs:?} do not end with 3"
        );
        ensure!(
            seqs.windows(2).all(|p| p[0] < p[1]),
            "{w} heartbeats went backwards: {seqs:?}"
        );
        delivered += seqs.len();
    }
    Ok(
        json!({"seq": 3, "sends": 3, "delivered": last["delivered"], "queued": last["queued"],
        "heartbeats_delivered": delivered}),
    )
}

async fn heartbeats(guests: &Path, dir: &Path) -> anyhow::Result<Value> {
    // 50 rapid heartbeats with one key and OVERWRITE while the receiver's host is down: only
    // the newest survives; it is delivered once the host is back.
    let db = dir.join("heartbeats.db");
    {
        let ob = Outbox::open_sqlite(&db, outbox_config()).await?;
        for seq in 1..=50 {
            let hb = json!({"type": "heartbeat", "seq": seq, "cpu": 0.42}).to_string();
            ob.store(
                NewMessage::new("Leader/hb", "record", hb.into_bytes())
                    .with_key("hb-leader-worker-101", Conflict::Overwrite),
            )
            .await?;
        }
    }
    let (host, ob) = start(guests, &db, true).await?;
    drained(&ob).await?;
    let got = items(&host, "Leader/hb").await?;
    let seqs: Vec<u64> = got
        .iter()
        .filter_map(|s| serde_json::from_str::<Value>(s).ok()?["seq"].as_u64())
        .collect();
    ensure!(
        !seqs.is_empty() && seqs.len() <= 5,
        "leader processed {} heartbeats",
        seqs.len()
    );
    ensure!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "heartbeats went backwards: {seqs:?}"
    );
    ensure!(
        *seqs.last().unwrap() == 50,
        "last processed heartbeat is {:?}",
        seqs.last()
    );
    host.stop().await;
    // Stored with no host running: none delivered at once, all 50 left for the relay.
    Ok(
        json!({"sent": 50, "delivered": 0, "queued": 50, "processed": seqs.len(),
        "seqs": seqs}),
    )
}

async fn telemetry_test(host: &Host, ob: &Outbox) -> anyhow::Result<Value> {
    let count = 200;
    let (mut fast, mut fallback) = (0, 0);
    for i in 0..count {
        let payload = json!({"type": "telemetry", "seq": i}).to_string();
        // Fast path: a direct ask; any failure falls back to the durable outbox.
        match host
            .ask(
                "Collector/main",
                "record",
                payload.clone(),
                Duration::from_millis(2000),
            )
            .await
        {
            Ok(_) => fast += 1,
            Err(_) => {
                ob.store(NewMessage::new(
                    "Collector/main",
                    "record",
                    payload.into_bytes(),
                ))
                .await?;
                fallback += 1;
            }
        }
        // Every tenth sample is a burst of tells that fills the four-slot mailbox.
        if i % 10 == 0 {
            for _ in 0..8 {
                match host
                    .tell_reliable(
                        "Collector/main",
                        "record",
                        json!({"type": "burst", "seq": i}).to_string(),
                    )
                    .await?
                {
                    sluice_runtime::DeliveryPath::Direct => fast += 1,
                    sluice_runtime::DeliveryPath::Outbox => fallback += 1,
                }
            }
        }
    }
    drained(ob).await?;
    let total = count + (count / 10) * 8;
    let got = items(host, "Collector/main").await?.len();
    ensure!(
        fast + fallback == total,
        "fast {fast} + fallback {fallback} != {total}"
    );
    ensure!(got == total, "collector holds {got} of {total}");
    Ok(
        json!({"count": total, "fast_path_success": fast, "outbox_fallback": fallback, "collected": got}),
    )
}

async fn offline_delivery(guests: &Path, dir: &Path) -> anyhow::Result<Value> {
    // Workers "go offline" with the host mid-deployment: messages stored, host gone; a new
    // host on the same database delivers every one, in order, with delivery counts kept.
    let db = dir.join("offline.db");
    let t0 = Instant::now();
    {
        let ob = Outbox::open_sqlite(&db, outbox_config()).await?;
        for i in 0..20 {
            for w in 0..10 {
                ob.store(NewMessage::new(
                    format!("Worker/offline-{w}"),
                    "record",
                    format!("firmware-{i}").into_bytes(),
                ))
                .await?;
            }
        }
    }
    let rollout_ms = t0.elapsed().as_millis() as u64;
    let t1 = Instant::now();
    let (host, ob) = start(guests, &db, true).await?;
    drained(&ob).await?;
    for w in 0..10 {
        let got = items(&host, &format!("Worker/offline-{w}")).await?;
        let want: Vec<String> = (0..20).map(|i| format!("firmware-{i}")).collect();
        ensure!(got == want, "Worker/offline-{w} got {got:?}");
    }
    let recovery_ms = t1.elapsed().as_millis() as u64;
    host.stop().await;
    Ok(
        json!({"stored": 200, "delivered": 0, "queued": 200, "rollout_ms": rollout_ms,
        "recovery_ms": recovery_ms, "delivered_after_restart": 200}),
    )
}

async fn poison_message(
    host: &Host,
    ob: &Outbox,
    guests: &std::path::Path,
) -> anyhow::Result<Value> {
    // `call` mode: delivered only if the handler succeeds; `fail` always fails.
    let req = json!({"targets": ["Worker/poison"], "msg_type": "fail", "payload": "{malformed", "mode": "call"});
    ask_json(host, "Leader/job-queue", "dispatch", req).await?;
    let t0 = Instant::now();
    let dl = loop {
        let dl = ob.dlq_list(Some("Worker/poison"), 10).await?;
        if !dl.is_empty() {
            break dl;
        }
        ensure!(t0.elapsed() < T, "poison message never reached the DLQ");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let dead_ms = t0.elapsed().as_millis() as u64;
    ensure!(
        dl[0].attempts == i64::from(MAX_ATTEMPTS),
        "attempts {}",
        dl[0].attempts
    );
    // The fix: a message for a type that was missing is dead-lettered as permanent; deploying
    // the type and replaying delivers it.
    ob.store(NewMessage::new("Patched/1", "record", b"task".to_vec()))
        .await?;
    let t0 = Instant::now();
    while ob.dlq_list(Some("Patched/1"), 1).await?.is_empty() {
        ensure!(t0.elapsed() < T, "unknown-type message never dead-lettered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let echo = std::fs::read(guests.join("echo.wasm"))?;
    host.deploy(ChildSpec::new("Patched", "echo.wasm"), echo)
        .await?;
    let replayed = ob
        .dlq_replay(DlqSelector::Receiver("Patched/1".into()))
        .await?;
    drained(ob).await?;
    ensure!(
        items(host, "Patched/1").await? == ["task"],
        "replayed message not delivered"
    );
    let purged = ob.dlq_purge(DlqSelector::All).await?;
    Ok(
        json!({"attempts": dl[0].attempts, "last_error": dl[0].last_error, "dead_ms": dead_ms,
        "replayed": replayed, "purged": purged}),
    )
}

/// Why a number here differs from the driver's column for the same scenario, one line each.
const NOTES: &str = "\
why these numbers differ from the job_queue_outbox table above:
  thundering_herd     the leader is the echo test actor; workers hold 64 messages (there: 16)
  config_wave_deploy  csN: 20 downloads to the servers in 10 dispatches of 2, not one per worker
  send_heartbeat      the same three heartbeats; the 64-slot mailboxes take more of them at once
  heartbeat_burst     the 50 are stored while no host runs: 0+50, and 1-5 processed (not 1-10)
  telemetry_test      fastN obN count 360: 200 samples and 8 burst tells after every tenth one
  offline_delivery    T1 stores 200 messages with no host up (no `sluice run` to SIGKILL)
  poison_message      the replay is of a second letter, to a type deployed after it died
";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let guests = PathBuf::from(
        args.next()
            .context("usage: job-queue-embedded GUESTS_DIR WORK_DIR")?,
    );
    let dir = PathBuf::from(
        args.next()
            .context("usage: job-queue-embedded GUESTS_DIR WORK_DIR")?,
    );
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("job-queue.db");
    let _ = std::fs::remove_file(&db);
    let started = Instant::now();
    let (host, ob) = start(&guests, &db, true).await?;
    let mut runs: Vec<(&str, anyhow::Result<Value>)> = Vec::new();
    let mut run = |name: &'static str, r: anyhow::Result<Value>| {
        match &r {
            Ok(_) => eprintln!("   embedded   {name:<20} PASS"),
            Err(e) => eprintln!("   embedded   {name:<20} FAIL: {e:#}"),
        }
        runs.push((name, r));
    };
    run("thundering_herd", thundering_herd(&host, &ob).await);
    run("config_wave_deploy", config_wave_deploy(&host, &ob).await);
    run("send_heartbeat", send_heartbeat(&host, &ob).await);
    run("telemetry_test", telemetry_test(&host, &ob).await);
    run("poison_message", poison_message(&host, &ob, &guests).await);
    host.stop().await;
    run("heartbeat_burst", heartbeats(&guests, &dir).await);
    run("offline_delivery", offline_delivery(&guests, &dir).await);

    // The driver's format: one row per scenario, in its order, then the legend, the reasons
    // this column differs, and one overall line.
    let results: Vec<Vec<report::Outcome>> = SCENARIOS
        .iter()
        .map(|s| {
            let (_, r) = runs
                .iter()
                .find(|(n, _)| n == s)
                .expect("every scenario ran");
            vec![match r {
                Ok(v) => report::Outcome {
                    pass: true,
                    text: report::cell(s, v),
                    detail: v.to_string(),
                },
                Err(e) => report::Outcome {
                    pass: false,
                    text: "see failures".into(),
                    detail: format!("{e:#}"),
                },
            }]
        })
        .collect();
    let title = format!(
        "job_queue embedded: the same scenarios, host embedded as a library ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    let legend = format!("{}\n{NOTES}", report::LEGEND);
    println!(
        "{}",
        report::render(
            &title,
            &["rust (embedded)".to_string()],
            &SCENARIOS,
            &results,
            &legend
        )
    );
    if results.iter().flatten().any(|o| !o.pass) {
        std::process::exit(1);
    }
    Ok(())
}
