//! Failover, measured against the member TTL: three real `sluice run --cluster` members (the
//! release binary) on one nats-server and one Postgres outbox; one of them is SIGKILLed while
//! 16 of its keys are live, and the clock runs from the kill to
//!
//! 1. a survivor's status no longer listing the dead member (its heartbeat entry expired);
//! 2. the first successful ask of each dead key through a survivor's ingress (each key asked
//!    by its own task every 5 ms, 2 s deadline per ask, so no ask stuck on the dead host
//!    delays the others);
//! 3. the survivors relaying every outbox partition between them (the dead member's leases
//!    ended when it left the view, not when the 30 s partition lease would lapse).
//!
//! Rows for the test clusters' TTL (heartbeat 300 ms, TTL 1.5 s) and the default (1 s, 5 s).
//!
//! `cargo bench -p sluice-tests --bench failover [-- --quick]` (release; needs
//! `eval "$(scripts/postgres.sh)"` and `eval "$(scripts/nats.sh install)"`, or the test
//! command's environment). `--quick`: one round per TTL instead of three.

use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_cluster::testing::NatsServer;
use sluice_tests::{SluiceRun, fresh_postgres_database, rust_app, sluice_release_binary, wait_for};

const NODES: [&str; 3] = ["h1", "h2", "h3"];
const PROBES: usize = 16;
const PARTITIONS: u32 = 8;
const BOUND: Duration = Duration::from_secs(60);

struct Ttl {
    heartbeat_ms: u64,
    member_ttl_ms: u64,
}

/// What one kill measured, in ms from the SIGKILL.
struct Round {
    gone: u64,
    asks: Vec<u64>,
    partitions: u64,
}

fn config(ttl: &Ttl) -> String {
    let cache = sluice_tests::root().join("target/sluice-bench-cache");
    format!(
        r#"
name = "failover-bench"

[host]
idle_deactivate_ms = 0
cache_dir = {cache:?}

[cluster]
heartbeat_ms = {}
member_ttl_ms = {}

[outbox]
partitions = {PARTITIONS}

[[supervisor.children]]
name = "echo"
actor_type = "Echo"
module = "echo.wasm"
"#,
        ttl.heartbeat_ms,
        ttl.member_ttl_ms,
        cache = cache.display().to_string(),
    )
}

async fn status(client: &reqwest::Client, h: &str) -> Result<Value, String> {
    let r = client
        .get(format!("{h}/admin/status"))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    r.json().await.map_err(|e| e.to_string())
}

fn members(status: &Value) -> usize {
    status["cluster"]["members"]
        .as_object()
        .map_or(0, |m| m.len())
}

fn relayed(status: &Value) -> Vec<u32> {
    serde_json::from_value(status["cluster"]["relayed"].clone()).unwrap_or_default()
}

async fn ask(client: &reqwest::Client, ingress: &str, id: &str) -> u16 {
    client
        .post(format!("{ingress}/actors/{id}/ask/whoami"))
        .header("x-sluice-deadline-ms", "2000")
        .send()
        .await
        .map_or(0, |r| r.status().as_u16())
}

async fn round(ttl: &Ttl, n: usize) -> Round {
    let db = fresh_postgres_database(&format!("sluice_bench_failover_{n}"))
        .await
        .expect("the failover bench needs Postgres: eval \"$(scripts/postgres.sh)\"");
    let nats = NatsServer::start()
        .await
        .expect("the bench's nats-server (scripts/nats.sh install)");
    let bin = sluice_release_binary("sluice-failover-bench");
    let app = rust_app(&["echo"], &config(ttl));
    let mut hosts = Vec::new();
    for node in NODES {
        let args = [
            "--cluster",
            &nats.url(),
            "--node-id",
            node,
            "--database-url",
            &db,
        ];
        hosts.push(SluiceRun::start(&bin, app.path(), &args, &[]).await);
    }
    let client = reqwest::Client::new();
    for h in &hosts {
        wait_for(
            BOUND,
            "three members and every partition relayed",
            || async {
                let s = status(&client, &h.admin).await?;
                if members(&s) == 3 && !relayed(&s).is_empty() {
                    Ok(())
                } else {
                    Err(s.to_string())
                }
            },
        )
        .await;
    }
    let probes: Vec<String> = (0..)
        .map(|k| format!("Echo/failover-{k}"))
        .filter(|id| sluice_cluster::placement::place(id, NODES).unwrap() == "h3")
        .take(PROBES)
        .collect();
    let via = hosts[0].ingress.clone();
    for id in &probes {
        assert_eq!(ask(&client, &via, id).await, 200, "activating {id} on h3");
    }

    hosts[2].kill();
    let killed = Instant::now();
    let asks: Vec<_> = probes
        .iter()
        .map(|id| {
            let (client, via, id) = (client.clone(), via.clone(), id.clone());
            tokio::spawn(async move {
                loop {
                    if ask(&client, &via, &id).await == 200 {
                        return killed.elapsed().as_millis() as u64;
                    }
                    assert!(killed.elapsed() < BOUND, "{id} never came back");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();
    let admin = [hosts[0].admin.clone(), hosts[1].admin.clone()];
    let (gone, partitions) = tokio::join!(
        async {
            wait_for(BOUND, "h1 to see h3 gone", || async {
                let s = status(&client, &admin[0]).await?;
                if members(&s) == 2 {
                    Ok(())
                } else {
                    Err(s.to_string())
                }
            })
            .await;
            killed.elapsed().as_millis() as u64
        },
        async {
            wait_for(BOUND, "h1 and h2 to relay every partition", || async {
                let mut all = relayed(&status(&client, &admin[0]).await?);
                all.extend(relayed(&status(&client, &admin[1]).await?));
                all.sort_unstable();
                if all == (0..PARTITIONS).collect::<Vec<_>>() {
                    Ok(())
                } else {
                    Err(format!("{all:?}"))
                }
            })
            .await;
            killed.elapsed().as_millis() as u64
        }
    );
    let mut times = Vec::new();
    for a in asks {
        times.push(a.await.expect("a probe task"));
    }
    times.sort_unstable();
    drop(hosts);
    drop(nats);
    Round {
        gone,
        asks: times,
        partitions,
    }
}

fn range(v: impl Iterator<Item = u64>) -> String {
    let v: Vec<u64> = v.collect();
    let (lo, hi) = (v.iter().min().unwrap(), v.iter().max().unwrap());
    if lo == hi {
        format!("{lo}")
    } else {
        format!("{lo}–{hi}")
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 1 } else { 3 };
    let ttls = [
        Ttl {
            heartbeat_ms: 300,
            member_ttl_ms: 1_500,
        },
        Ttl {
            heartbeat_ms: sluice_cluster::config::DEFAULT_HEARTBEAT_MS,
            member_ttl_ms: sluice_cluster::config::DEFAULT_MEMBER_TTL_MS,
        },
    ];
    println!(
        "| heartbeat / member TTL | rounds | dead member gone (ms) | first ask of each dead key answered: p50 / max (ms) | max ÷ TTL | partitions relayed by survivors (ms) |"
    );
    println!("|---|---|---|---|---|---|");
    for (t, ttl) in ttls.iter().enumerate() {
        let mut done = Vec::new();
        for r in 0..rounds {
            done.push(round(ttl, t * rounds + r).await);
        }
        let p50s = range(done.iter().map(|r| r.asks[r.asks.len() / 2]));
        let max = done.iter().map(|r| *r.asks.last().unwrap()).max().unwrap();
        println!(
            "| {} ms / {} ms | {rounds} | {} | {p50s} / {max} | {:.2} | {} |",
            ttl.heartbeat_ms,
            ttl.member_ttl_ms,
            range(done.iter().map(|r| r.gone)),
            max as f64 / ttl.member_ttl_ms as f64,
            range(done.iter().map(|r| r.partitions)),
        );
    }
}
