//! Outbox throughput with the default configuration: SQLite end to end (enqueue → delivered
//! to a native receiver) against a raw multi-row SQLite insert into the same file, Postgres
//! end to end against a raw multi-row Postgres insert into the same database (both baselines
//! measured in the same run), and idle enqueue→delivery latency.
//!
//! Run: `cargo bench -p sluice-outbox --bench outbox_throughput` (release profile; the
//! Postgres rows need `SLUICE_TEST_POSTGRES_URL`, e.g. `eval "$(scripts/postgres.sh)"`).
//! Env: `SLUICE_BENCH_MESSAGES` (default 100000), `SLUICE_BENCH_RECEIVERS` (default 1000),
//! `SLUICE_BENCH_ONLY=sqlite|postgres`, `SLUICE_BENCH_BATCH_SIZES` (comma list of
//! `relay_batch_size` caps to run besides the default, e.g. `20,200`),
//! `SLUICE_BENCH_PARTITIONS` (default: the config's).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sluice_outbox::{
    Delivery, DeliveryError, Envelope, NewMessage, Outbox, OutboxConfig, PostgresChannel,
    SqliteChannel,
};
use tokio::sync::Notify;

struct Counter {
    n: AtomicUsize,
    target: AtomicUsize,
    done: Notify,
}

#[async_trait]
impl Delivery for Counter {
    async fn deliver(&self, _msg: Envelope) -> Result<(), DeliveryError> {
        let n = self.n.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.target.load(Ordering::Relaxed) {
            self.done.notify_one();
        }
        Ok(())
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn messages(n: usize, receivers: usize) -> Vec<NewMessage> {
    (0..n)
        .map(|i| NewMessage::new(format!("Worker/{}", i % receivers), "job", vec![b'x'; 64]))
        .collect()
}

/// `n` messages in enqueue calls of 1000, built before any clock starts.
fn batches(n: usize, receivers: usize) -> Vec<Vec<NewMessage>> {
    let mut all = messages(n, receivers).into_iter();
    let mut out = Vec::new();
    loop {
        let batch: Vec<NewMessage> = all.by_ref().take(1000).collect();
        if batch.is_empty() {
            return out;
        }
        out.push(batch);
    }
}

async fn end_to_end(outbox: &Outbox, n: usize, receivers: usize) -> f64 {
    let counter = Arc::new(Counter {
        n: AtomicUsize::new(0),
        target: AtomicUsize::new(n),
        done: Notify::new(),
    });
    let batches = batches(n, receivers);
    let relay = outbox.start_relay(counter.clone());
    let t0 = Instant::now();
    for batch in batches {
        outbox.enqueue(batch).await.unwrap();
    }
    let enqueued = t0.elapsed();
    tokio::time::timeout(Duration::from_secs(600), counter.done.notified())
        .await
        .expect("all delivered");
    let total = t0.elapsed();
    relay.shutdown().await;
    println!(
        "    enqueue of {n}, relay running: {:.2}s ({:.0} msgs/s)",
        enqueued.as_secs_f64(),
        n as f64 / enqueued.as_secs_f64()
    );
    n as f64 / total.as_secs_f64()
}

/// Relay only: the backlog is stored first, then the relay drains it.
async fn drain_backlog(outbox: &Outbox, n: usize, receivers: usize) -> f64 {
    let batches = batches(n, receivers);
    let t0 = Instant::now();
    for batch in batches {
        outbox.enqueue(batch).await.unwrap();
    }
    println!(
        "    enqueue of the {n} backlog, no relay running: {:.0} msgs/s",
        n as f64 / t0.elapsed().as_secs_f64()
    );
    let counter = Arc::new(Counter {
        n: AtomicUsize::new(0),
        target: AtomicUsize::new(n),
        done: Notify::new(),
    });
    let t0 = Instant::now();
    let relay = outbox.start_relay(counter.clone());
    tokio::time::timeout(Duration::from_secs(600), counter.done.notified())
        .await
        .expect("all delivered");
    let rate = n as f64 / t0.elapsed().as_secs_f64();
    relay.shutdown().await;
    rate
}

async fn raw_sqlite_insert(ch: &SqliteChannel, n: usize, receivers: usize) -> f64 {
    sqlx::query("CREATE TABLE IF NOT EXISTS bench_raw (id INTEGER PRIMARY KEY, receiver TEXT NOT NULL, payload BLOB NOT NULL)")
        .execute(&mut *ch.connection().await.unwrap())
        .await
        .unwrap();
    let t0 = Instant::now();
    let payload = vec![b'x'; 64];
    for start in (0..n).step_by(1000) {
        let mut conn = ch.connection().await.unwrap();
        let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
        let mut q =
            sqlx::QueryBuilder::<sqlx::Sqlite>::new("INSERT INTO bench_raw (receiver, payload) ");
        q.push_values(start..(start + 1000).min(n), |mut b, i| {
            b.push_bind(format!("Worker/{}", i % receivers))
                .push_bind(payload.clone());
        });
        q.build().execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

async fn idle_latency(outbox: &Outbox, rounds: usize) -> (f64, f64) {
    let counter = Arc::new(Counter {
        n: AtomicUsize::new(0),
        target: AtomicUsize::new(1),
        done: Notify::new(),
    });
    let relay = outbox.start_relay(counter.clone());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut lat = Vec::with_capacity(rounds);
    for i in 0..rounds {
        counter.n.store(0, Ordering::Relaxed);
        let t0 = Instant::now();
        outbox
            .store(NewMessage::new(format!("Idle/{i}"), "ping", vec![1]))
            .await
            .unwrap();
        counter.done.notified().await;
        lat.push(t0.elapsed().as_secs_f64() * 1000.0);
        // Let the worker go idle again so each round measures the idle path.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    relay.shutdown().await;
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (lat[rounds / 2], lat[rounds * 99 / 100])
}

/// Inserts the same rows as the benchmark's messages (receiver, 64 B payload) into a bare
/// table, 1000 rows per statement and transaction, as arrays (`UNNEST`): the database's own
/// cost of storing them, without the outbox's columns, indexes or logic.
async fn raw_postgres_insert(ch: &PostgresChannel, n: usize, receivers: usize) -> f64 {
    let pool = ch.pool();
    sqlx::query("CREATE TABLE IF NOT EXISTS bench_raw (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, receiver TEXT NOT NULL, payload BYTEA NOT NULL)")
        .execute(pool)
        .await
        .unwrap();
    let payload = vec![b'x'; 64];
    let chunks: Vec<(Vec<String>, Vec<Vec<u8>>)> = (0..n)
        .step_by(1000)
        .map(|start| {
            let ids = start..(start + 1000).min(n);
            (
                ids.clone()
                    .map(|i| format!("Worker/{}", i % receivers))
                    .collect(),
                ids.map(|_| payload.clone()).collect(),
            )
        })
        .collect();
    let t0 = Instant::now();
    for (r, p) in &chunks {
        sqlx::query("INSERT INTO bench_raw (receiver, payload) SELECT * FROM unnest($1::text[], $2::bytea[])")
            .bind(r)
            .bind(p)
            .execute(pool)
            .await
            .unwrap();
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

/// The configs to run: the default, then each cap of `SLUICE_BENCH_BATCH_SIZES`.
fn configs() -> Vec<(String, OutboxConfig)> {
    let mut base = OutboxConfig::default();
    if let Ok(p) = std::env::var("SLUICE_BENCH_PARTITIONS") {
        base.partitions = p.parse().expect("SLUICE_BENCH_PARTITIONS");
    }
    let mut out = vec![(
        format!(
            "default config (relay_batch_size cap {}, {} partitions)",
            base.relay_batch_size, base.partitions
        ),
        base.clone(),
    )];
    for cap in std::env::var("SLUICE_BENCH_BATCH_SIZES")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let mut c = base.clone();
        c.relay_batch_size = cap.trim().parse().expect("SLUICE_BENCH_BATCH_SIZES");
        out.push((format!("relay_batch_size = {cap}"), c));
    }
    out
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let n = env_usize("SLUICE_BENCH_MESSAGES", 100_000);
        let receivers = env_usize("SLUICE_BENCH_RECEIVERS", 1000);
        println!("outbox_throughput: {n} messages of 64 B to {receivers} receivers");
        let only = std::env::var("SLUICE_BENCH_ONLY").unwrap_or_default();
        if only != "postgres" {
            for (name, config) in configs() {
                let dir = tempfile::tempdir().unwrap();
                let ch = SqliteChannel::open(dir.path().join("bench.db")).await.unwrap();
                let raw = raw_sqlite_insert(&ch, n, receivers).await;
                let outbox = Outbox::new(Arc::new(ch), config).await.unwrap();
                let e2e = end_to_end(&outbox, n, receivers).await;
                let drain = drain_backlog(&outbox, n, receivers).await;
                println!(
                    "sqlite {name}: end-to-end {e2e:.0} msgs/s | relay-only drain of a {n} backlog {drain:.0} msgs/s | raw multi-row insert (baseline, same file) {raw:.0} rows/s | e2e/raw {:.3}",
                    e2e / raw
                );
            }
            let dir = tempfile::tempdir().unwrap();
            let outbox = Outbox::open_sqlite(dir.path().join("lat.db"), OutboxConfig::default()).await.unwrap();
            let (p50, p99) = idle_latency(&outbox, 200).await;
            println!("sqlite idle latency enqueue→delivery (relay_interval_ms={}): p50 {p50:.2} ms, p99 {p99:.2} ms", OutboxConfig::default().relay_interval_ms);
        }
        if only == "sqlite" {
            return;
        }
        let base = std::env::var("SLUICE_TEST_POSTGRES_URL")
            .expect("SLUICE_TEST_POSTGRES_URL (eval \"$(scripts/postgres.sh)\"), or SLUICE_BENCH_ONLY=sqlite");
        for (name, config) in configs() {
            let url = fresh_pg_db(&base).await;
            let ch = PostgresChannel::open(&url, (config.partitions + 4).min(32)).await.unwrap();
            let raw = raw_postgres_insert(&ch, n, receivers).await;
            let outbox = Outbox::new(Arc::new(ch), config).await.unwrap();
            let e2e = end_to_end(&outbox, n, receivers).await;
            let drain = drain_backlog(&outbox, n, receivers).await;
            drop(outbox);
            drop_pg_db(&base, &url).await;
            println!(
                "postgres {name}: end-to-end {e2e:.0} msgs/s | relay-only drain {drain:.0} msgs/s | raw multi-row insert (baseline, same database) {raw:.0} rows/s | e2e/raw {:.3}",
                e2e / raw
            );
        }
        let url = fresh_pg_db(&base).await;
        let outbox = Outbox::open_postgres(&url, OutboxConfig::default()).await.unwrap();
        let (p50, p99) = idle_latency(&outbox, 200).await;
        drop(outbox);
        drop_pg_db(&base, &url).await;
        println!("postgres idle latency enqueue→delivery: p50 {p50:.2} ms, p99 {p99:.2} ms");
    });
}

/// Drops a database [`fresh_pg_db`] made (each run leaves ~300 MB otherwise).
async fn drop_pg_db(base: &str, url: &str) {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(base).await.unwrap();
    let (_, name) = url.rsplit_once('/').unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap();
}

async fn fresh_pg_db(base: &str) -> String {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(base).await.unwrap();
    let name = format!("sluice_bench_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let (prefix, _) = base.rsplit_once('/').unwrap();
    format!("{prefix}/{name}")
}
