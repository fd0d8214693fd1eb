//! The cluster's metrics, recorded while every part runs against a real nats-server: names
//! are `sluice_cluster_*`, labels come from a fixed set, and no label value is an actor id, a
//! key or a principal. (Its own test binary: the recorder is process-wide.)

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{host, nats};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use sluice_cluster::bus::Bus;
use sluice_cluster::directory::Directory;
use sluice_cluster::membership::{Membership, MembershipTimings};
use sluice_cluster::transport::{
    CallKind, Client, ClientConfig, ErrorRecord, Handler, Inbound, Outgoing, ReplyFuture, Server,
    ServerConfig, TellReceipt,
};

struct Full;

impl Handler for Full {
    fn tell(&self, _: Inbound) -> Result<TellReceipt, ErrorRecord> {
        Err(ErrorRecord::mailbox_full(5))
    }
    fn ask(&self, call: Inbound) -> Result<ReplyFuture, ErrorRecord> {
        Ok(Box::pin(async move { Ok(call.payload) }))
    }
}

#[tokio::test]
async fn cluster_metrics_have_bounded_labels() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::set_global_recorder(recorder).expect("first recorder in this binary");

    let server = nats().await;
    let a = host(&server.url(), "mx", "a", 1_000).await;
    let b = host(&server.url(), "mx", "b", 1_000).await;
    let timings = MembershipTimings {
        heartbeat: Duration::from_millis(100),
        ttl: Duration::from_secs(1),
        margin: Duration::from_millis(100),
    };
    let ma = Membership::join(&a, timings, BTreeMap::new())
        .await
        .unwrap();
    let _mb = Membership::join(&b, timings, BTreeMap::new())
        .await
        .unwrap();
    let _server = Server::start(&b, Arc::new(Full), ServerConfig::default())
        .await
        .unwrap();
    let client = Client::new(&a, ClientConfig::default());
    let mut call = Outgoing::new(
        CallKind::Ask,
        "Secret/alice-key",
        "m",
        Bytes::from_static(b"x"),
    );
    call.principal = Some("alice".into());
    client.ask("b", call.clone()).await.unwrap();
    client.tell("b", call.clone()).await.unwrap_err();
    // Four more tells in one frame: counted per call, though recorded once per frame.
    let refused = client.tell_batch("b", vec![call.clone(); 4]).await;
    assert!(refused.iter().all(Result::is_err), "{refused:?}");
    client.ask("nobody", call).await.unwrap_err();
    let dir = Directory::open(&a, Duration::from_secs(1)).await.unwrap();
    dir.claim("Secret/alice-key", &ma.owner()).await.unwrap();
    dir.lookup("Secret/alice-key").await.unwrap();
    let bus = Bus::new(&a, 1024);
    bus.publish(
        "orders.alice",
        "alice",
        Some("Secret/alice-key"),
        Bytes::new(),
    )
    .await
    .unwrap();
    sluice_cluster::metrics::partitions_owned(3);
    // One heartbeat acknowledged (counted before the lease is renewed).
    let mut lease = ma.lease();
    tokio::time::timeout(Duration::from_secs(5), lease.changed())
        .await
        .expect("a heartbeat")
        .unwrap();

    let allowed: BTreeMap<&str, &[&str]> = BTreeMap::from([
        (
            "event",
            &[
                "connected",
                "disconnected",
                "lame_duck",
                "draining",
                "slow_consumer",
                "server_error",
                "client_error",
                "closed",
            ][..],
        ),
        ("kind", &["tell", "ask"][..]),
        ("member", &["a", "b", "nobody"][..]),
        (
            "code",
            &[
                "RESOURCE_EXHAUSTED",
                "DEADLINE_EXCEEDED",
                "OVERLOADED",
                "NOT_FOUND",
                "INVALID_ARGUMENT",
                "UNAVAILABLE",
                "INTERNAL",
            ][..],
        ),
        (
            "op",
            &[
                "claim", "release", "takeover", "lookup", "put", "get", "announce", "report",
            ][..],
        ),
        (
            "outcome",
            &[
                "ok",
                "error",
                "held",
                "conflict",
                "not_owner",
                "owner_live",
                "exists",
                "not_found",
                "corrupt",
                "failed",
                "fenced",
            ][..],
        ),
        ("change", &["joined", "updated", "left"][..]),
        (
            "frame",
            &["request", "reply", "event", "member", "directory"][..],
        ),
        ("direction", &["in", "out"][..]),
    ]);
    let mut names = BTreeSet::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        names.insert(key.name().to_string());
        assert!(key.name().starts_with("sluice_cluster_"), "{}", key.name());
        for label in key.labels() {
            let values = allowed
                .get(label.key())
                .unwrap_or_else(|| panic!("unexpected label {} on {}", label.key(), key.name()));
            assert!(
                values.contains(&label.value()),
                "{}={} on {} is not a bounded value",
                label.key(),
                label.value(),
                key.name()
            );
        }
        let label = |k: &str| {
            key.labels()
                .find(|l| l.key() == k)
                .map(|l| l.value().to_string())
        };
        let (kind, member) = (label("kind"), label("member"));
        let (kind, member) = (kind.as_deref(), member.as_deref());
        match key.name() {
            "sluice_cluster_remote_calls_failed_total"
                if label("code").as_deref() == Some("RESOURCE_EXHAUSTED") =>
            {
                assert_eq!(value, DebugValue::Counter(5));
            }
            "sluice_cluster_remote_calls_sent_total" => {
                let want = match (kind, member) {
                    (Some("tell"), Some("b")) => 5,
                    (Some("ask"), Some("b" | "nobody")) => 1,
                    other => panic!("unexpected remote calls sent: {other:?}"),
                };
                assert_eq!(value, DebugValue::Counter(want), "{kind:?} to {member:?}");
            }
            "sluice_cluster_remote_calls_received_total" => {
                let want = if kind == Some("tell") { 5 } else { 1 };
                assert_eq!(value, DebugValue::Counter(want), "{kind:?} received");
            }
            "sluice_cluster_remote_call_seconds" if member == Some("b") => {
                let DebugValue::Histogram(samples) = &value else {
                    panic!("{value:?}")
                };
                let want = if kind == Some("tell") { 5 } else { 1 };
                assert_eq!(samples.len(), want, "{kind:?} round trips recorded");
            }
            _ => {}
        }
    }
    for want in [
        "sluice_cluster_remote_calls_sent_total",
        "sluice_cluster_remote_calls_received_total",
        "sluice_cluster_remote_calls_failed_total",
        "sluice_cluster_remote_call_seconds",
        "sluice_cluster_directory_operations_total",
        "sluice_cluster_members",
        "sluice_cluster_member_changes_total",
        "sluice_cluster_heartbeats_total",
        "sluice_cluster_partitions_owned",
        "sluice_cluster_bus_events_total",
    ] {
        assert!(names.contains(want), "{want} missing from {names:?}");
    }
}
