//! Membership against a real nats-server: joining, watching, leaving at once, a silent host
//! gone for everyone after the TTL, the lease lapsing and fencing, and bad member entries.

mod common;

use sluice_cluster::testing::Proxy;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{host, nats, wait_for};
use sluice_cluster::membership::{
    LeaseStatus, MemberChange, Membership, MembershipError, MembershipTimings, TypeVersion,
};
use sluice_cluster::{BucketError, Connection};

const TTL_MS: u64 = 1_000;

fn timings() -> MembershipTimings {
    MembershipTimings {
        heartbeat: Duration::from_millis(100),
        ttl: Duration::from_millis(TTL_MS),
        margin: Duration::from_millis(100),
    }
}

fn types(list: &[(&str, u64)]) -> BTreeMap<String, TypeVersion> {
    list.iter()
        .map(|(t, v)| {
            (
                t.to_string(),
                TypeVersion {
                    version: *v,
                    hash: format!("sha256:{v:064}"),
                    live: 0,
                },
            )
        })
        .collect()
}

async fn join(conn: &Connection, t: &[(&str, u64)]) -> Membership {
    Membership::join(conn, timings(), types(t))
        .await
        .unwrap_or_else(|e| panic!("join {}: {e}", conn.node_id()))
}

async fn members_seen(m: &Membership, want: &[&str]) {
    let mut rx = m.watch_view();
    let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|v| {
            v.members()
                .map(|m| m.record.node.clone())
                .collect::<Vec<_>>()
                == want
        }),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} never saw exactly {want:?}; sees {:?}",
            m.node_id(),
            m.view()
                .members()
                .map(|m| &m.record.node)
                .collect::<Vec<_>>()
        )
    })
    .unwrap();
}

#[tokio::test]
async fn three_hosts_see_each_other_with_their_types_and_subjects() {
    let server = nats().await;
    let url = server.url();
    let (a, b, c) = (
        host(&url, "m1", "a", TTL_MS).await,
        host(&url, "m1", "b", TTL_MS).await,
        host(&url, "m1", "c", TTL_MS).await,
    );
    let ma = join(&a, &[("Counter", 1)]).await;
    let mb = join(&b, &[("Counter", 1), ("Cart", 2)]).await;
    let mc = join(&c, &[]).await;
    for m in [&ma, &mb, &mc] {
        members_seen(m, &["a", "b", "c"]).await;
    }
    let view = mc.view();
    assert_eq!(view.candidates("Counter").collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(view.candidates("Cart").collect::<Vec<_>>(), ["b"]);
    let b_rec = &view.get("b").unwrap().record;
    assert_eq!(b_rec.subject, "sluice.m1.host.b");
    assert_eq!(b_rec.types["Cart"].version, 2);
    assert_eq!(b_rec.incarnation, mb.incarnation());
    assert!(b_rec.started_at_ms > 0);
    assert!(ma.holds_lease() && mb.holds_lease() && mc.holds_lease());
}

#[tokio::test]
async fn a_deploy_announced_by_one_host_reaches_the_others_as_an_update() {
    let server = nats().await;
    let (a, b) = (
        host(&server.url(), "m2", "a", TTL_MS).await,
        host(&server.url(), "m2", "b", TTL_MS).await,
    );
    let ma = join(&a, &[]).await;
    let mb = join(&b, &[]).await;
    members_seen(&ma, &["a", "b"]).await;
    let mut changes = ma.changes();
    mb.set_types(types(&[("Counter", 7)]));
    let change = tokio::time::timeout(Duration::from_secs(5), changes.recv())
        .await
        .unwrap()
        .unwrap();
    match change {
        MemberChange::Updated { old, new } => {
            assert_eq!(new.node, "b");
            assert!(old.types.is_empty());
            assert_eq!(new.types["Counter"].version, 7);
        }
        other => panic!("expected an update, got {other:?}"),
    }
    assert_eq!(ma.view().candidates("Counter").collect::<Vec<_>>(), ["b"]);
}

#[tokio::test]
async fn leave_is_seen_at_once_and_a_silent_host_is_gone_after_the_ttl() {
    // A longer TTL here, so "at once" and "after the TTL" stay apart on a loaded machine.
    const LONG_MS: u64 = 3_000;
    let long = MembershipTimings {
        ttl: Duration::from_millis(LONG_MS),
        ..timings()
    };
    let server = nats().await;
    let url = server.url();
    let (a, b, c) = (
        host(&url, "m3", "a", LONG_MS).await,
        host(&url, "m3", "b", LONG_MS).await,
        host(&url, "m3", "c", LONG_MS).await,
    );
    let ma = Membership::join(&a, long, BTreeMap::new()).await.unwrap();
    let mb = Membership::join(&b, long, BTreeMap::new()).await.unwrap();
    let mc = Membership::join(&c, long, BTreeMap::new()).await.unwrap();
    members_seen(&ma, &["a", "b", "c"]).await;

    // Graceful: well under the TTL.
    let start = Instant::now();
    mb.leave().await.unwrap();
    members_seen(&ma, &["a", "c"]).await;
    assert!(
        start.elapsed() < Duration::from_millis(LONG_MS / 2),
        "{:?}",
        start.elapsed()
    );

    // Silent (dropped without leaving, its connection gone): gone for everyone after the TTL,
    // not before.
    let start = Instant::now();
    drop(mc);
    drop(c);
    members_seen(&ma, &["a"]).await;
    let gone_after = start.elapsed();
    assert!(
        gone_after >= Duration::from_millis(LONG_MS - 150),
        "gone after {gone_after:?}, before the TTL"
    );
    assert!(
        gone_after < Duration::from_millis(2 * LONG_MS),
        "{gone_after:?}"
    );
}

#[tokio::test]
async fn a_node_id_held_by_a_live_member_is_refused_and_free_again_after_its_ttl() {
    let server = nats().await;
    let first = host(&server.url(), "m4", "same", TTL_MS).await;
    let m1 = join(&first, &[]).await;
    let second = host(&server.url(), "m4", "same", TTL_MS).await;
    let err = Membership::join(&second, timings(), BTreeMap::new())
        .await
        .err()
        .expect("a second live 'same' is refused");
    match &err {
        MembershipError::NodeIdInUse { node, incarnation } => {
            assert_eq!(node, "same");
            assert_eq!(*incarnation, m1.incarnation());
        }
        other => panic!("{other:?}"),
    }
    // The holder crashes; once its entry expires the id is free for a new incarnation.
    drop(m1);
    drop(first);
    let what = "the node id 'same' to be free for a new incarnation";
    let m2 = wait_for(Duration::from_secs(5), what, || async {
        match Membership::join(&second, timings(), BTreeMap::new()).await {
            Ok(m) => Ok(m),
            Err(e @ MembershipError::NodeIdInUse { .. }) => Err(e),
            Err(e) => panic!("{e}"),
        }
    })
    .await;
    assert!(m2.holds_lease());
}

#[tokio::test]
async fn hosts_configured_with_different_ttls_are_refused() {
    let server = nats().await;
    let a = host(&server.url(), "m5", "a", TTL_MS).await;
    let _ma = join(&a, &[]).await;
    let b = host(&server.url(), "m5", "b", 3 * TTL_MS).await;
    let other = MembershipTimings {
        ttl: Duration::from_millis(3 * TTL_MS),
        ..timings()
    };
    let err = Membership::join(&b, other, BTreeMap::new())
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            MembershipError::Bucket(BucketError::AgeMismatch { .. })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("same member_ttl_ms"), "{err}");
}

#[tokio::test]
async fn a_members_bucket_in_memory_storage_is_refused() {
    let server = nats().await;
    let a = host(&server.url(), "m10", "a", TTL_MS).await;
    a.jetstream()
        .create_key_value(async_nats::jetstream::kv::Config {
            bucket: a.names().members_bucket(),
            max_age: Duration::from_millis(TTL_MS),
            storage: async_nats::jetstream::stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .unwrap();
    let err = Membership::join(&a, timings(), BTreeMap::new())
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(err, MembershipError::Bucket(BucketError::MemoryStorage(_))),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_lease_lapses_without_nats_and_comes_back_after_a_short_outage() {
    let mut server = nats().await;
    let a = host(&server.url(), "m6", "a", TTL_MS).await;
    // A longer TTL for this one: the outage below must stay shorter than it.
    let long = MembershipTimings {
        ttl: Duration::from_secs(4),
        margin: Duration::from_millis(500),
        ..timings()
    };
    let ma = Membership::join(&a, long, BTreeMap::new()).await.unwrap();
    let mut lease = ma.lease();
    assert!(matches!(*lease.borrow(), LeaseStatus::Valid { .. }));

    let down = Instant::now();
    server.kill();
    tokio::time::timeout(
        Duration::from_secs(10),
        lease.wait_for(|s| *s == LeaseStatus::Lapsed),
    )
    .await
    .expect("the lease lapses without heartbeats")
    .unwrap();
    // It held about ttl - margin from the last acknowledged heartbeat: never longer.
    assert!(
        down.elapsed() <= Duration::from_millis(3_500 + 100),
        "{:?}",
        down.elapsed()
    );
    assert!(!ma.holds_lease());

    // Back before the server expires the entry: heartbeats land again, the lease is valid.
    server.restart().await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        lease.wait_for(|s| matches!(s, LeaseStatus::Valid { .. })),
    )
    .await
    .expect("the lease comes back")
    .unwrap();
    assert!(ma.holds_lease());
}

#[tokio::test]
async fn a_partitioned_member_lapses_before_others_see_it_gone_and_is_fenced_on_return() {
    let server = nats().await;
    let proxy = Proxy::start(format!("127.0.0.1:{}", server.port())).await;
    let a = host(&proxy.url(), "m7", "a", TTL_MS).await;
    let b = host(&server.url(), "m7", "b", TTL_MS).await;
    let ma = join(&a, &[]).await;
    let mb = join(&b, &[]).await;
    members_seen(&mb, &["a", "b"]).await;
    let mut lease = ma.lease();

    // Only `a` loses NATS; the server and `b` go on. Follow a's lease to its last "valid until"
    // (computed, so it does not depend on when this task wakes up).
    proxy.cut();
    let mut last_until = match *lease.borrow() {
        LeaseStatus::Valid { until } => until,
        other => panic!("{other:?}"),
    };
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            lease.changed().await.unwrap();
            match *lease.borrow() {
                LeaseStatus::Valid { until } => last_until = until,
                LeaseStatus::Lapsed => return,
                LeaseStatus::Fenced => panic!("fenced while partitioned"),
            }
        }
    })
    .await
    .expect("a's lease lapses");
    members_seen(&mb, &["b"]).await;
    let gone_seen = Instant::now();
    // The order single activation rests on: a stopped believing at least the margin before
    // the server could expire its entry (and so before b could see it gone).
    assert!(
        last_until + timings().margin <= gone_seen,
        "a valid until {last_until:?}, seen gone at {gone_seen:?}"
    );
    assert!(!ma.holds_lease());

    // The partition heals: the server no longer holds a's incarnation, so that incarnation is
    // fenced for good, never silently valid again; a rejoins as a new one.
    let old = ma.incarnation();
    proxy.heal();
    rejoined(&ma, &old).await;
    members_seen(&mb, &["a", "b"]).await;
    assert_eq!(
        mb.view().get("a").unwrap().record.incarnation,
        ma.incarnation()
    );
}

/// Waits until `m` rejoined as an incarnation other than `old` and holds its lease: the
/// lease of `old` itself never comes back.
async fn rejoined(m: &Membership, old: &str) {
    let mut owner = m.watch_owner();
    tokio::time::timeout(
        Duration::from_secs(15),
        owner.wait_for(|o| o.incarnation != old),
    )
    .await
    .expect("rejoined as a new incarnation")
    .unwrap();
    let mut lease = m.lease();
    tokio::time::timeout(
        Duration::from_secs(5),
        lease.wait_for(|s| matches!(s, LeaseStatus::Valid { .. })),
    )
    .await
    .expect("the new incarnation's lease is valid")
    .unwrap();
    assert!(m.holds_lease());
}

#[tokio::test]
async fn a_member_whose_entry_is_deleted_under_it_is_fenced_and_rejoins_as_a_new_incarnation() {
    let server = nats().await;
    let a = host(&server.url(), "m9", "a", TTL_MS).await;
    let ma = join(&a, &[]).await;
    let old = ma.incarnation();
    // An operator removed the entry (or it expired and a new incarnation may take the id).
    let other = host(&server.url(), "m9", "other", TTL_MS).await;
    let kv = other
        .jetstream()
        .get_key_value(other.names().members_bucket())
        .await
        .unwrap();
    kv.delete("a").await.unwrap();
    rejoined(&ma, &old).await;
}

#[tokio::test]
async fn a_foreign_entry_in_the_members_bucket_is_ignored_and_counted() {
    let server = nats().await;
    let a = host(&server.url(), "m8", "a", TTL_MS).await;
    let ma = join(&a, &[]).await;
    let kv = a
        .jetstream()
        .get_key_value(a.names().members_bucket())
        .await
        .unwrap();
    kv.put("intruder", "not a member record".into())
        .await
        .unwrap();
    // A record that claims another node's subject.
    let forged = serde_json::json!({
        "node": "forged", "incarnation": "x", "subject": "sluice.m8.host.a",
        "started_at_ms": 0, "wire_version": 1, "types": {}
    });
    kv.put("forged", forged.to_string().into()).await.unwrap();
    // A well-formed third member shows up: the watcher went past both bad entries.
    let b = host(&server.url(), "m8", "b", TTL_MS).await;
    let _mb = join(&b, &[]).await;
    members_seen(&ma, &["a", "b"]).await;
    assert!(ma.view().get("intruder").is_none() && ma.view().get("forged").is_none());
}
