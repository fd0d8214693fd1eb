//! The activation hooks against a real directory (a nats-server per test): an activation
//! starts only under a claim, and the claim is released only when the last activation under
//! it has ended — also when a new activation was admitted before an older one's end.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_cluster::directory::{ClaimOutcome, Directory};
use sluice_cluster::membership::{Membership, MembershipTimings};
use sluice_cluster::testing::NatsServer;
use sluice_cluster::{ClusterConfig, connect};
use sluice_node::claims::{Claims, Hooks, State};
use sluice_runtime::{ActivationHooks, ActorId, ErrorCode};

async fn wait_released(dir: &Directory, id: &str) {
    let what = format!("the directory entry of {id} to be released");
    sluice_test_wait::wait_until_async(Duration::from_secs(5), &what, || async {
        dir.lookup(id).await.unwrap().is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_released_only_after_the_last_activation_under_it_ends() {
    let nats = NatsServer::start().await.unwrap_or_else(|e| panic!("{e}"));
    let config = ClusterConfig::builder(nats.url())
        .node_id("a")
        .heartbeat_ms(100)
        .member_ttl_ms(1000)
        .build()
        .unwrap();
    let conn = connect(&config).await.unwrap();
    let membership = Membership::join(&conn, MembershipTimings::from(&config), BTreeMap::new())
        .await
        .unwrap();
    let dir = Directory::open(&conn, config.member_ttl()).await.unwrap();
    let claims = Claims::new(dir.clone(), membership.lease());
    let hooks = Hooks(claims.clone());
    let id = ActorId::parse("Counter/7").unwrap();

    // No claim: refused, typed, and nothing is written.
    let e = hooks.admit(&id).unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert!(e.to_string().contains("not claimed by this host"), "{e}");

    let ClaimOutcome::Claimed(c) = dir.claim(id.as_str(), &membership.owner()).await.unwrap()
    else {
        panic!("a fresh key is claimed");
    };
    claims.insert(&id, c);
    // Two activations overlap (a new one admitted before the old one's end is reported).
    hooks.admit(&id).unwrap();
    hooks.admit(&id).unwrap();
    hooks.ended(&id);
    assert!(matches!(claims.state(&id), State::Held));
    assert!(
        dir.lookup(id.as_str()).await.unwrap().is_some(),
        "still claimed"
    );
    hooks.ended(&id);
    // The last one ended: released, and the table is empty again.
    wait_released(&dir, id.as_str()).await;
    assert!(claims.wait_released(Duration::from_secs(5)).await);
    assert!(matches!(claims.state(&id), State::Absent));
    assert!(hooks.admit(&id).is_err(), "no activation after the release");

    // A claim won for a delivery that never activated anything goes back on settle.
    let ClaimOutcome::Claimed(c) = dir.claim(id.as_str(), &membership.owner()).await.unwrap()
    else {
        panic!("claimed again");
    };
    claims.insert(&id, c);
    hooks.admit(&id).unwrap();
    claims.settle(&id);
    assert!(
        matches!(claims.state(&id), State::Held),
        "settle keeps a claim a live activation runs under"
    );
    hooks.ended(&id);
    wait_released(&dir, id.as_str()).await;
    membership.leave().await.unwrap();
}
