//! Module distribution against a real nats-server: bytes by content hash, the current version
//! per type (found by a host that joins later, followed by the others), per-host load reports.

mod common;

use std::time::Duration;

use common::{host, nats};
use futures_util::StreamExt;
use serde_json::json;
use sluice_cluster::modules::{CurrentModule, ModuleError, ModuleStore, content_hash};

async fn next<S>(deploys: &mut S) -> CurrentModule
where
    S: futures_util::Stream<Item = Result<CurrentModule, ModuleError>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(5), deploys.next())
        .await
        .expect("a deploy arrives")
        .expect("stream open")
        .expect("well-formed")
}

fn module(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[tokio::test]
async fn bytes_round_trip_by_content_hash_and_are_stored_once() {
    let server = nats().await;
    let a = ModuleStore::open(&host(&server.url(), "x1", "a", 1_000).await)
        .await
        .unwrap();
    let b = ModuleStore::open(&host(&server.url(), "x1", "b", 1_000).await)
        .await
        .unwrap();
    // Bigger than one object-store chunk and than core NATS's default max_payload.
    let bytes = module(1, 3 * 1024 * 1024 + 17);
    let hash = a.put(&bytes).await.unwrap();
    assert_eq!(hash, content_hash(&bytes));
    assert!(hash.starts_with("sha256:") && hash.len() == 7 + 64);
    assert_eq!(
        b.put(&bytes).await.unwrap(),
        hash,
        "a second put of the same bytes"
    );
    assert_eq!(b.get(&hash).await.unwrap(), bytes);
    let missing = content_hash(b"never stored");
    assert!(matches!(b.get(&missing).await, Err(ModuleError::NotFound(h)) if h == missing));
}

#[tokio::test]
async fn a_module_over_the_limit_or_not_matching_its_hash_is_refused() {
    let server = nats().await;
    let conn = host(&server.url(), "x2", "a", 1_000).await;
    let store = ModuleStore::open(&conn).await.unwrap();
    let bytes = module(2, 10_000);
    let hash = store.put(&bytes).await.unwrap();
    let small = store.clone().with_max_module_bytes(9_999);
    assert!(matches!(
        small.get(&hash).await,
        Err(ModuleError::TooLarge { size: 10_000, .. })
    ));
    // Someone wrote other bytes under a hash's name.
    let forged = content_hash(b"the name");
    let objects = conn
        .jetstream()
        .get_object_store(conn.names().wasm_store())
        .await
        .unwrap();
    objects
        .put(forged.replace(':', "-").as_str(), &mut &b"other bytes"[..])
        .await
        .unwrap();
    match store.get(&forged).await {
        Err(ModuleError::Corrupt { hash, got }) => {
            assert_eq!(hash, forged);
            assert_eq!(got, content_hash(b"other bytes"));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn deploys_bump_the_version_and_a_host_that_joins_later_finds_every_current_module() {
    let server = nats().await;
    let a = ModuleStore::open(&host(&server.url(), "x3", "a", 1_000).await)
        .await
        .unwrap();
    let v1 = a.put(&module(1, 1000)).await.unwrap();
    let v2 = a.put(&module(2, 1000)).await.unwrap();
    let cart = a.put(&module(3, 500)).await.unwrap();
    let spec = json!({"mailbox_capacity": 64});
    let first = a.announce("Counter", &v1, spec.clone()).await.unwrap();
    assert_eq!(
        (first.version, first.size, first.deployed_by.as_str()),
        (1, 1000, "a")
    );
    let second = a.announce("Counter", &v2, spec.clone()).await.unwrap();
    assert_eq!(second.version, 2);
    a.announce("Cart.v2", &cart, json!({})).await.unwrap();
    assert!(matches!(
        a.announce("Counter", &content_hash(b"not stored"), json!({}))
            .await,
        Err(ModuleError::NotFound(_))
    ));

    let late = ModuleStore::open(&host(&server.url(), "x3", "late", 1_000).await)
        .await
        .unwrap();
    let mut all = late.all_current().await.unwrap();
    all.sort_by(|x, y| x.actor_type.cmp(&y.actor_type));
    let got: Vec<(&str, u64, &str)> = all
        .iter()
        .map(|m| (m.actor_type.as_str(), m.version, m.hash.as_str()))
        .collect();
    assert_eq!(
        got,
        [("Cart.v2", 1, cart.as_str()), ("Counter", 2, v2.as_str())]
    );
    assert_eq!(all[1].spec, spec);
    assert_eq!(late.get(&all[1].hash).await.unwrap(), module(2, 1000));
    assert_eq!(late.current("Nope").await.unwrap(), None);
}

#[tokio::test]
async fn concurrent_deploys_of_one_type_each_get_their_own_version() {
    let server = nats().await;
    let mut stores = Vec::new();
    for n in 0..4 {
        let s = ModuleStore::open(&host(&server.url(), "x4", &format!("h{n}"), 1_000).await)
            .await
            .unwrap();
        stores.push(s);
    }
    let hash = stores[0].put(&module(9, 100)).await.unwrap();
    let mut tasks = Vec::new();
    for s in stores.clone() {
        let hash = hash.clone();
        tasks.push(tokio::spawn(async move {
            let mut versions = Vec::new();
            for _ in 0..5 {
                versions.push(
                    s.announce("Counter", &hash, json!({}))
                        .await
                        .unwrap()
                        .version,
                );
            }
            versions
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_unstable();
    assert_eq!(all, (1..=20).collect::<Vec<u64>>());
    assert_eq!(
        stores[3].current("Counter").await.unwrap().unwrap().version,
        20
    );
}

#[tokio::test]
async fn members_follow_deploys_and_report_per_host() {
    let server = nats().await;
    let deployer = ModuleStore::open(&host(&server.url(), "x5", "d", 1_000).await)
        .await
        .unwrap();
    let follower = ModuleStore::open(&host(&server.url(), "x5", "f", 1_000).await)
        .await
        .unwrap();
    let other = ModuleStore::open(&host(&server.url(), "x5", "o", 1_000).await)
        .await
        .unwrap();
    let old = deployer.put(&module(1, 100)).await.unwrap();
    deployer.announce("Counter", &old, json!({})).await.unwrap();

    let mut deploys = Box::pin(follower.watch_current().await.unwrap());
    // The current one first, then each new deploy.
    let first = next(&mut deploys).await;
    assert_eq!((first.version, first.hash.as_str()), (1, old.as_str()));
    let new = deployer.put(&module(2, 100)).await.unwrap();
    deployer.announce("Counter", &new, json!({})).await.unwrap();
    let second = next(&mut deploys).await;
    assert_eq!((second.version, second.hash.as_str()), (2, new.as_str()));

    follower.report(&second, None).await.unwrap();
    other
        .report(&second, Some("does not fit the sluice:actor world".into()))
        .await
        .unwrap();
    let reports = deployer.reports("Counter").await.unwrap();
    let summary: Vec<(&str, u64, Option<&str>)> = reports
        .iter()
        .map(|(n, r)| (n.as_str(), r.version, r.error.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [
            ("f", 2, None),
            ("o", 2, Some("does not fit the sluice:actor world"))
        ]
    );
    assert!(deployer.reports("Other").await.unwrap().is_empty());
}

/// A module operation in flight when this host's connection drops fails at once with a clear
/// error (a deploy or a load report would otherwise hang on a request that can no longer be
/// answered); one started while disconnected fails at once too.
#[tokio::test]
async fn an_operation_in_flight_when_the_connection_drops_fails_at_once() {
    let server = nats().await;
    let proxy = sluice_cluster::testing::Proxy::start(format!("127.0.0.1:{}", server.port())).await;
    let store = ModuleStore::open(&host(&proxy.url(), "x9", "a", 1_000).await)
        .await
        .unwrap();
    let hash = store.put(&module(9, 1024)).await.unwrap();
    // The server stops answering but keeps its connections: the next get waits on it.
    let pid = server.pid().expect("the server runs") as libc::pid_t;
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let started = std::time::Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        let (got, ()) = tokio::join!(store.get(&hash), async {
            // `join!` polls the get first: its request is sent by now.
            proxy.cut();
        });
        got
    })
    .await;
    let took = started.elapsed();
    // Disconnected now: another operation does not even start.
    let later = tokio::time::timeout(Duration::from_secs(10), store.current("Echo")).await;
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    for (what, r) in [
        ("get", got.map(|r| r.map(drop))),
        ("current", later.map(|r| r.map(drop))),
    ] {
        match r {
            Ok(Err(ModuleError::Nats { reason, .. })) => {
                assert!(reason.contains("NATS connection"), "{what}: {reason}")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    assert!(
        took < Duration::from_secs(2),
        "the get waited {took:?} for an answer that could not come"
    );
}
