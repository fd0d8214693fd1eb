//! The actor directory against a real nats-server: of many concurrent claimers (many tasks on
//! several connections) exactly one wins; release is revision-checked; a live owner's entries
//! cannot be taken; a dead owner's are taken over only after its TTL, by exactly one taker.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{host, nats, wait_for};
use sluice_cluster::directory::{ClaimOutcome, Directory, DirectoryError, Owner};
use sluice_cluster::membership::{Membership, MembershipTimings};
use tokio::task::JoinSet;

const TTL_MS: u64 = 1_000;

fn ttl() -> Duration {
    Duration::from_millis(TTL_MS)
}

fn owner(node: &str, incarnation: &str) -> Owner {
    Owner {
        node: node.into(),
        incarnation: incarnation.into(),
    }
}

/// A directory request in flight when this host's connection drops fails at once, not at
/// JetStream's 5 s timeout (a call routed through the directory would otherwise wait that
/// out, past its own deadline, for an answer that can no longer come).
#[tokio::test]
async fn a_request_in_flight_when_the_connection_drops_fails_at_once() {
    let server = nats().await;
    let proxy = sluice_cluster::testing::Proxy::start(format!("127.0.0.1:{}", server.port())).await;
    let dir = directory(&proxy.url(), "d9", "h1").await;
    assert_eq!(dir.lookup("Counter/k").await.unwrap(), None);
    // The server stops answering but keeps its connections, so the next lookup waits on it.
    let pid = server.pid().expect("the server runs") as libc::pid_t;
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let started = Instant::now();
    let lookup = tokio::time::timeout(Duration::from_secs(10), async {
        let (lookup, ()) = tokio::join!(dir.lookup("Counter/k"), async {
            // `join!` polls the lookup first: its request is sent by now.
            proxy.cut();
        });
        lookup
    })
    .await;
    let took = started.elapsed();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    match lookup {
        Ok(Err(DirectoryError::Kv {
            op: "lookup",
            reason,
        })) => {
            assert!(reason.contains("lost its NATS connection"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        took < Duration::from_secs(2),
        "the lookup waited {took:?} for an answer that could not come"
    );
}

async fn directory(url: &str, cluster: &str, node: &str) -> Directory {
    let conn = host(url, cluster, node, TTL_MS).await;
    Directory::open(&conn, ttl()).await.unwrap()
}

#[tokio::test]
async fn of_many_concurrent_claimers_exactly_one_wins_each_key() {
    let server = nats().await;
    let keys: Vec<String> = (0..50).map(|i| format!("Counter/k{i}")).collect();
    let mut tasks = JoinSet::new();
    for c in 0..4 {
        // Each connection is a host; each task on it a distinct claimer.
        let dir = Arc::new(directory(&server.url(), "d1", &format!("h{c}")).await);
        for t in 0..8 {
            let dir = dir.clone();
            let mut keys = keys.clone();
            // Different orders, so claimers collide in every interleaving.
            keys.rotate_left((c * 8 + t) * 3 % 50);
            tasks.spawn(async move {
                let me = owner(&format!("h{c}"), &format!("t{t}"));
                let mut out = Vec::new();
                for k in keys {
                    out.push((k.clone(), me.clone(), dir.claim(&k, &me).await.unwrap()));
                }
                out
            });
        }
    }
    let mut winners: HashMap<String, Vec<Owner>> = HashMap::new();
    let mut held: Vec<(String, Option<Owner>)> = Vec::new();
    while let Some(r) = tasks.join_next().await {
        for (k, me, outcome) in r.unwrap() {
            match outcome {
                ClaimOutcome::Claimed(_) => winners.entry(k).or_default().push(me),
                ClaimOutcome::Held(h) => held.push((k, h.owner)),
            }
        }
    }
    assert_eq!(winners.len(), 50, "every key has a winner");
    for (k, w) in &winners {
        assert_eq!(w.len(), 1, "{k} was won by {w:?}");
    }
    assert_eq!(held.len(), 50 * 31);
    for (k, h) in held {
        assert_eq!(
            h.as_ref(),
            Some(&winners[&k][0]),
            "{k}: a loser was told another owner"
        );
    }
    // And the directory agrees afterwards.
    let dir = directory(&server.url(), "d1", "reader").await;
    for (k, w) in &winners {
        assert_eq!(
            dir.lookup(k).await.unwrap().unwrap().owner.as_ref(),
            Some(&w[0])
        );
    }
}

#[tokio::test]
async fn release_needs_the_claims_revision_and_frees_the_key() {
    let server = nats().await;
    let dir = directory(&server.url(), "d2", "h").await;
    let (a, b) = (owner("a", "1"), owner("b", "1"));
    let ClaimOutcome::Claimed(claim) = dir.claim("T/1", &a).await.unwrap() else {
        panic!("first claim wins")
    };
    // Claiming again as the holder is the same claim.
    assert_eq!(
        dir.claim("T/1", &a).await.unwrap(),
        ClaimOutcome::Claimed(claim.clone())
    );
    let mut stale = claim.clone();
    stale.revision += 1_000;
    assert!(matches!(
        dir.release(&stale).await,
        Err(DirectoryError::NotOwner { .. })
    ));
    dir.release(&claim).await.unwrap();
    assert_eq!(dir.lookup("T/1").await.unwrap(), None);
    assert!(matches!(
        dir.claim("T/1", &b).await.unwrap(),
        ClaimOutcome::Claimed(_)
    ));
}

#[tokio::test]
async fn a_live_owners_entry_cannot_be_taken_over() {
    let server = nats().await;
    let conn_a = host(&server.url(), "d3", "a", TTL_MS).await;
    let timings = MembershipTimings {
        heartbeat: Duration::from_millis(100),
        ttl: ttl(),
        margin: Duration::from_millis(100),
    };
    let ma = Membership::join(&conn_a, timings, BTreeMap::new())
        .await
        .unwrap();
    let dir_a = Directory::open(&conn_a, ttl()).await.unwrap();
    let a = owner("a", &ma.incarnation());
    assert!(matches!(
        dir_a.claim("T/x", &a).await.unwrap(),
        ClaimOutcome::Claimed(_)
    ));
    let dir_b = directory(&server.url(), "d3", "b").await;
    let b = owner("b", "1");
    let ClaimOutcome::Held(held) = dir_b.claim("T/x", &b).await.unwrap() else {
        panic!("held by a")
    };
    assert_eq!(held.owner.as_ref(), Some(&a));
    let err = dir_b.take_over("T/x", &b, &held).await.unwrap_err();
    assert!(
        matches!(err, DirectoryError::OwnerLive { ref node, .. } if node == "a"),
        "{err:?}"
    );
    // Twice the TTL later it is still a's: heartbeats keep it live.
    tokio::time::sleep(2 * ttl()).await;
    assert_eq!(
        dir_b.claim_or_take_over("T/x", &b).await.unwrap(),
        ClaimOutcome::Held(held)
    );
}

#[tokio::test]
async fn a_dead_owners_entries_are_taken_over_after_its_ttl_by_exactly_one_taker() {
    let server = nats().await;
    let conn_a = host(&server.url(), "d4", "a", TTL_MS).await;
    let timings = MembershipTimings {
        heartbeat: Duration::from_millis(100),
        ttl: ttl(),
        margin: Duration::from_millis(100),
    };
    let ma = Membership::join(&conn_a, timings, BTreeMap::new())
        .await
        .unwrap();
    let dir_a = Directory::open(&conn_a, ttl()).await.unwrap();
    let a = owner("a", &ma.incarnation());
    let keys: Vec<String> = (0..20).map(|i| format!("Cart/{i}")).collect();
    let mut claims = Vec::new();
    for k in &keys {
        match dir_a.claim(k, &a).await.unwrap() {
            ClaimOutcome::Claimed(c) => claims.push(c),
            held => panic!("{held:?}"),
        }
    }
    // a crashes: no leave, its heartbeats stop.
    drop(ma);
    let crashed = Instant::now();

    // Takers are live members (a host claims only while it is one): six hosts, three tasks
    // each. Tasks of one host share its identity, so "exactly one" is per member incarnation.
    let mut tasks = JoinSet::new();
    let mut memberships = Vec::new();
    for c in 0..6 {
        let conn = host(&server.url(), "d4", &format!("t{c}"), TTL_MS).await;
        let m = Membership::join(&conn, timings, BTreeMap::new())
            .await
            .unwrap();
        let me = owner(&format!("t{c}"), &m.incarnation());
        memberships.push(m);
        let dir = Arc::new(Directory::open(&conn, ttl()).await.unwrap());
        for _ in 0..3 {
            let (dir, keys, a, me) = (dir.clone(), keys.clone(), a.clone(), me.clone());
            tasks.spawn(async move {
                let mut won = Vec::new();
                for k in keys {
                    // Retry while the dead owner still holds it (at most 10 s after the
                    // crash); stop once anyone else does.
                    let what = format!("{k} no longer held by the crashed owner");
                    let bound = Duration::from_secs(10).saturating_sub(crashed.elapsed());
                    let taken = wait_for(bound, &what, || async {
                        match dir.claim_or_take_over(&k, &me).await.unwrap() {
                            ClaimOutcome::Claimed(_) => Ok(Some(Instant::now())),
                            ClaimOutcome::Held(h) if h.owner.as_ref() == Some(&a) => Err(h),
                            ClaimOutcome::Held(_) => Ok(None),
                        }
                    })
                    .await;
                    if let Some(at) = taken {
                        won.push((k, me.clone(), at));
                    }
                }
                won
            });
        }
    }
    let mut winners: HashMap<String, BTreeMap<String, Instant>> = HashMap::new();
    while let Some(r) = tasks.join_next().await {
        for (k, me, at) in r.unwrap() {
            let first = winners.entry(k).or_default().entry(me.node).or_insert(at);
            *first = (*first).min(at);
        }
    }
    assert_eq!(winners.len(), keys.len());
    let dir = directory(&server.url(), "d4", "reader").await;
    for (k, w) in &winners {
        assert_eq!(w.len(), 1, "{k} taken over by {w:?}");
        let (node, at) = w.iter().next().unwrap();
        // Not before a's entry could have expired: its last heartbeat was at most one
        // interval before the crash.
        let after = *at - crashed;
        assert!(
            after >= ttl() - Duration::from_millis(150),
            "{k} taken after {after:?}"
        );
        let now = dir.lookup(k).await.unwrap().unwrap().owner.unwrap();
        assert_eq!(&now.node, node);
    }
    drop(memberships);
    // a's old claims are worthless now: it cannot delete what was taken from it.
    for c in &claims {
        assert!(matches!(
            dir_a.release(c).await,
            Err(DirectoryError::NotOwner { .. })
        ));
    }
}

#[tokio::test]
async fn a_corrupt_entry_has_no_owner_and_is_taken_over() {
    let server = nats().await;
    let conn = host(&server.url(), "d5", "h", TTL_MS).await;
    let dir = Directory::open(&conn, ttl()).await.unwrap();
    let kv = conn
        .jetstream()
        .get_key_value(conn.names().actors_bucket())
        .await
        .unwrap();
    kv.put("T.broken", "garbage".into()).await.unwrap();
    let me = owner("h", "1");
    let ClaimOutcome::Held(h) = dir.claim("T/broken", &me).await.unwrap() else {
        panic!("held by garbage")
    };
    assert_eq!(h.owner, None);
    assert!(matches!(
        dir.claim_or_take_over("T/broken", &me).await.unwrap(),
        ClaimOutcome::Claimed(_)
    ));
}

#[tokio::test]
async fn ids_that_differ_only_in_punctuation_or_script_are_distinct_entries() {
    let server = nats().await;
    let dir = directory(&server.url(), "d6", "h").await;
    let me = owner("h", "1");
    let ids = [
        "T/a.b",
        "T/a=2Eb",
        "T/a b",
        "T/ключ",
        "T/a/b",
        "T.a/b",
        "T/>",
        "T/*",
    ];
    for id in ids {
        assert!(
            matches!(dir.claim(id, &me).await.unwrap(), ClaimOutcome::Claimed(_)),
            "{id}"
        );
    }
    let other = owner("o", "1");
    for id in ids {
        assert!(matches!(
            dir.claim(id, &other).await.unwrap(),
            ClaimOutcome::Held(_)
        ));
    }
    assert!(matches!(
        dir.claim("no-slash", &me).await,
        Err(DirectoryError::InvalidActorId(_))
    ));
}
