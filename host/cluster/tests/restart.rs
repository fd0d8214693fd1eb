//! A nats-server restart (SIGKILL, same port and store) shorter than the member TTL: every part
//! comes back by itself — connections reconnect, the transport serves again, the member view
//! follows joins made after the restart, leases are valid again, and the directory still holds
//! every claim that was acknowledged before.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{host, nats, wait_until_async};
use sluice_cluster::directory::{ClaimOutcome, Directory};
use sluice_cluster::membership::{LeaseStatus, Membership, MembershipTimings};
use sluice_cluster::transport::{
    CallKind, Client, ClientConfig, ErrorRecord, Handler, Inbound, Outgoing, ReplyFuture, Server,
    ServerConfig, TellReceipt,
};

struct Echo;

impl Handler for Echo {
    fn tell(&self, _: Inbound) -> Result<TellReceipt, ErrorRecord> {
        Ok(TellReceipt::Queued)
    }
    fn ask(&self, call: Inbound) -> Result<ReplyFuture, ErrorRecord> {
        Ok(Box::pin(async move { Ok(call.payload) }))
    }
}

#[tokio::test]
async fn every_part_recovers_from_a_short_nats_restart() {
    let mut server = nats().await;
    let ttl = Duration::from_secs(5);
    let timings = MembershipTimings {
        heartbeat: Duration::from_millis(200),
        ttl,
        margin: Duration::from_millis(500),
    };
    let a = host(&server.url(), "r1", "a", 5_000).await;
    let b = host(&server.url(), "r1", "b", 5_000).await;
    let ma = Membership::join(&a, timings, BTreeMap::new())
        .await
        .unwrap();
    let _mb = Membership::join(&b, timings, BTreeMap::new())
        .await
        .unwrap();
    let _serving = Server::start(&b, Arc::new(Echo), ServerConfig::default())
        .await
        .unwrap();
    let client = Client::new(&a, ClientConfig::default());
    let dir = Directory::open(&a, ttl).await.unwrap();
    let mut claimed = Vec::new();
    for i in 0..50 {
        let id = format!("Counter/{i}");
        match dir.claim(&id, &ma.owner()).await.unwrap() {
            ClaimOutcome::Claimed(c) => claimed.push(c),
            held => panic!("{held:?}"),
        }
    }
    let ask = Outgoing::new(CallKind::Ask, "Echo/1", "m", Bytes::from_static(b"ping"));
    assert_eq!(&client.ask("b", ask.clone()).await.unwrap()[..], b"ping");

    server.kill();
    server.restart().await.unwrap();

    // The transport serves again once both ends have reconnected and resubscribed.
    wait_until_async(
        Duration::from_secs(20),
        "a remote ask after the restart",
        || {
            let (client, ask) = (client.clone(), ask.clone());
            async move { client.ask("b", ask).await.is_ok() }
        },
    )
    .await;
    // Leases are valid (the server still held both entries: down far shorter than the TTL).
    let mut lease = ma.lease();
    tokio::time::timeout(
        Duration::from_secs(10),
        lease.wait_for(|s| matches!(s, LeaseStatus::Valid { .. })),
    )
    .await
    .unwrap()
    .unwrap();
    // The view follows changes made after the restart.
    let c = host(&server.url(), "r1", "c", 5_000).await;
    let _mc = Membership::join(&c, timings, BTreeMap::new())
        .await
        .unwrap();
    let mut view = ma.watch_view();
    tokio::time::timeout(Duration::from_secs(20), view.wait_for(|v| v.len() == 3))
        .await
        .expect("a sees c, who joined after the restart")
        .unwrap();
    // Every acknowledged claim survived, and release still works on each.
    for claim in &claimed {
        let held = dir.lookup(&claim.actor).await.unwrap().expect("claim kept");
        assert_eq!(held.owner, Some(ma.owner()));
        assert_eq!(held.revision, claim.revision);
        dir.release(claim).await.unwrap();
    }
}
