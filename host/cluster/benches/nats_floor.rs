//! The floors the cluster's remote ask/tell will be compared against, measured on loopback
//! against a real nats-server, in the same run as this crate's own transport over the same
//! server:
//!
//! 1. round trip of a 64-byte payload: bare NATS request/reply (a responder on a second
//!    connection echoes it) vs `transport::Client::ask` → `Server` → an echo `Handler`;
//! 2. throughput of 64-byte messages: bare NATS publish to a subscriber on a second
//!    connection (end to end: until the subscriber has all of them) vs `tell_batch` of the
//!    same payloads (frames of `BATCH` tells, `WINDOW` frames in flight, receipts back).
//!
//! 3. directory writes: claims (create-only) and releases (revision-checked delete) per
//!    second, `DIR_WINDOW` in flight from one host: the rate that bounds activations.
//!
//! `cargo bench -p sluice-cluster --bench nats_floor [-- --quick]` (release). Spawns its own
//! nats-server (`scripts/nats.sh install` builds it), or uses `SLUICE_TEST_NATS_URL`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use sluice_cluster::directory::{Claim, ClaimOutcome, Directory, Owner};
use sluice_cluster::testing::NatsServer;
use sluice_cluster::transport::{
    CallKind, Client, ClientConfig, ErrorRecord, Handler, Inbound, Outgoing, ReplyFuture, Server,
    ServerConfig, TellReceipt,
};
use sluice_cluster::{ClusterConfig, Connection, connect};

const PAYLOAD: usize = 64;
const BATCH: usize = 64;
const WINDOW: usize = 16;
const DIR_WINDOW: usize = 64;

struct Echo {
    tells: AtomicU64,
}

impl Handler for Echo {
    fn tell(&self, _: Inbound) -> Result<TellReceipt, ErrorRecord> {
        // Relaxed: a count read after the receipts came back.
        self.tells.fetch_add(1, Ordering::Relaxed);
        Ok(TellReceipt::Queued)
    }
    fn ask(&self, call: Inbound) -> Result<ReplyFuture, ErrorRecord> {
        Ok(Box::pin(async move { Ok(call.payload) }))
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(name: &str, mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort_unstable();
    let (p50, p99, p999) = (
        percentile(&v, 0.5),
        percentile(&v, 0.99),
        percentile(&v, 0.999),
    );
    println!(
        "{name:<34} n={:<6} p50 {:>6.1} µs  p99 {:>6.1} µs  p99.9 {:>6.1} µs",
        v.len(),
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        p999.as_secs_f64() * 1e6
    );
    (p50, p99)
}

async fn host(url: &str, node: &str) -> Connection {
    let config = ClusterConfig::builder(url)
        .name("bench")
        .node_id(node)
        .build()
        .expect("bench config");
    connect(&config).await.expect("connect")
}

async fn bare_round_trips(url: &str, n: usize) -> Vec<Duration> {
    let responder = host(url, "responder").await;
    let requester = host(url, "requester").await;
    let mut sub = responder.client().subscribe("bench.echo").await.unwrap();
    responder.round_trip().await.unwrap();
    let nats = responder.client().clone();
    let echo = tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            if let Some(reply) = m.reply {
                nats.publish(reply, m.payload).await.unwrap();
            }
        }
    });
    let payload = Bytes::from(vec![7u8; PAYLOAD]);
    let client = requester.client();
    for _ in 0..n / 10 {
        client.request("bench.echo", payload.clone()).await.unwrap();
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = client.request("bench.echo", payload.clone()).await.unwrap();
        out.push(t.elapsed());
        assert_eq!(r.payload.len(), PAYLOAD);
    }
    echo.abort();
    out
}

async fn transport_round_trips(client: &Client, n: usize) -> Vec<Duration> {
    let call = Outgoing::new(
        CallKind::Ask,
        "Echo/1",
        "echo",
        Bytes::from(vec![7u8; PAYLOAD]),
    );
    for _ in 0..n / 10 {
        client.ask("callee", call.clone()).await.unwrap();
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = call.clone();
        c.deadline = Some(Instant::now() + Duration::from_secs(5));
        let t = Instant::now();
        let r = client.ask("callee", c).await.unwrap();
        out.push(t.elapsed());
        assert_eq!(r.len(), PAYLOAD);
    }
    out
}

/// Messages per second, publisher to subscriber, end to end. The subscriber's client buffer
/// holds every message (async-nats drops past its default 64k, which would count as loss).
async fn bare_publish(url: &str, n: usize) -> f64 {
    let sink = async_nats::ConnectOptions::new()
        .subscription_capacity(n + 1024)
        .connect(url)
        .await
        .unwrap();
    let pub_conn = host(url, "source").await;
    let mut sub = sink.subscribe("bench.flood").await.unwrap();
    // Subscribed once the server answers a later request (no responders) on the same connection.
    assert!(sink.request("_bench.sync", Bytes::new()).await.is_err());
    let payload = Bytes::from(vec![7u8; PAYLOAD]);
    let t = Instant::now();
    let count = tokio::spawn(async move {
        let mut got = 0;
        // Bounded: a lost message ends the count instead of hanging the bench.
        while got < n {
            match tokio::time::timeout(Duration::from_secs(5), sub.next()).await {
                Ok(Some(_)) => got += 1,
                _ => break,
            }
        }
        (got, t.elapsed())
    });
    let client = pub_conn.client();
    for _ in 0..n {
        client
            .publish("bench.flood", payload.clone())
            .await
            .unwrap();
    }
    client.flush().await.unwrap();
    let (got, took) = count.await.unwrap();
    assert_eq!(got, n, "the subscriber lost messages");
    n as f64 / took.as_secs_f64()
}

/// Tells per second with receipts, `BATCH` per frame, `WINDOW` frames in flight.
async fn transport_tells(client: &Client, echo: &Echo, n: usize) -> f64 {
    let before = echo.tells.load(Ordering::Relaxed);
    let frames = n / BATCH;
    let t = Instant::now();
    let mut inflight = futures_util::stream::iter(0..frames)
        .map(|_| {
            let client = client.clone();
            async move {
                let batch = (0..BATCH)
                    .map(|_| {
                        Outgoing::new(
                            CallKind::Tell,
                            "Echo/1",
                            "t",
                            Bytes::from(vec![7u8; PAYLOAD]),
                        )
                    })
                    .collect();
                let receipts = client.tell_batch("callee", batch).await;
                assert!(receipts.iter().all(|r| *r == Ok(TellReceipt::Queued)));
            }
        })
        .buffer_unordered(WINDOW);
    while inflight.next().await.is_some() {}
    let rate = (frames * BATCH) as f64 / t.elapsed().as_secs_f64();
    assert_eq!(
        echo.tells.load(Ordering::Relaxed) - before,
        (frames * BATCH) as u64
    );
    rate
}

/// Claims then releases of `n` fresh keys; (claims/s, releases/s).
async fn directory_ops(conn: &Connection, n: usize, round: usize) -> (f64, f64) {
    let dir = Directory::open(conn, Duration::from_secs(5)).await.unwrap();
    let me = Owner {
        node: conn.node_id().to_string(),
        incarnation: "bench".into(),
    };
    let t = Instant::now();
    let claims: Vec<Claim> = futures_util::stream::iter(0..n)
        .map(|i| {
            let (dir, me) = (dir.clone(), me.clone());
            async move {
                match dir
                    .claim(&format!("Counter/r{round}-{i}"), &me)
                    .await
                    .unwrap()
                {
                    ClaimOutcome::Claimed(c) => c,
                    ClaimOutcome::Held(h) => panic!("fresh key held: {h:?}"),
                }
            }
        })
        .buffer_unordered(DIR_WINDOW)
        .collect()
        .await;
    let claim_rate = n as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    futures_util::stream::iter(claims)
        .map(|c| {
            let dir = dir.clone();
            async move { dir.release(&c).await.unwrap() }
        })
        .buffer_unordered(DIR_WINDOW)
        .for_each(|_| async {})
        .await;
    (claim_rate, n as f64 / t.elapsed().as_secs_f64())
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rt_n, flood_n) = if quick {
        (5_000, 200_000)
    } else {
        (20_000, 1_000_000)
    };
    let own;
    let url = match std::env::var("SLUICE_TEST_NATS_URL") {
        Ok(u) => u,
        Err(_) => {
            own = NatsServer::start().await.unwrap_or_else(|e| panic!("{e}"));
            own.url()
        }
    };
    let callee = host(&url, "callee").await;
    println!(
        "nats-server {} at {url}; payload {PAYLOAD} B",
        callee.server_version()
    );
    let echo = Arc::new(Echo {
        tells: AtomicU64::new(0),
    });
    let _server = Server::start(&callee, echo.clone(), ServerConfig::default())
        .await
        .unwrap();
    let caller = host(&url, "caller").await;
    let client = Client::new(&caller, ClientConfig::default());

    println!("-- round trip, sequential (3 rounds, interleaved)");
    let mut ratios = Vec::new();
    for round in 1..=3 {
        let (b50, b99) = summary(
            &format!("bare NATS request/reply #{round}"),
            bare_round_trips(&url, rt_n).await,
        );
        let (t50, t99) = summary(
            &format!("transport ask #{round}"),
            transport_round_trips(&client, rt_n).await,
        );
        ratios.push((
            (t50.as_secs_f64() - b50.as_secs_f64()) * 1e6,
            (t99.as_secs_f64() - b99.as_secs_f64()) * 1e6,
        ));
    }
    for (d50, d99) in ratios {
        println!("transport ask - bare: p50 {d50:+.1} µs, p99 {d99:+.1} µs");
    }

    println!("-- throughput, {PAYLOAD} B messages (3 rounds, interleaved)");
    for round in 1..=3 {
        let bare = bare_publish(&url, flood_n).await;
        let tells = transport_tells(&client, &echo, flood_n / 4).await;
        println!(
            "#{round}: bare NATS publish {:>9.0} msg/s   transport tell_batch ({BATCH}/frame, {WINDOW} in flight) {:>9.0} tells/s   ratio {:.2}",
            bare,
            tells,
            tells / bare
        );
    }

    println!(
        "-- directory, {DIR_WINDOW} operations in flight from one host (file store, 1 replica)"
    );
    for round in 1..=3 {
        let (claims, releases) =
            directory_ops(&caller, if quick { 5_000 } else { 20_000 }, round).await;
        println!("#{round}: claims {claims:>7.0}/s   releases {releases:>7.0}/s");
    }
}
