//! The heartbeat task: rewrites our entry every interval with a revision check, renews the
//! lease on each acknowledgement, publishes the lease lapsing at the exact instant, and fences
//! when the server no longer holds this incarnation's entry.

use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream::kv::{Operation, UpdateErrorKind};
use tokio::time::MissedTickBehavior;

use super::{Lease, MemberRecord, Shared};
use crate::metrics;

enum Beat {
    Ok,
    Failed,
    Fenced,
}

pub(super) async fn run(shared: Arc<Shared>) {
    let mut stop = shared.stop.subscribe();
    let mut tick = tokio::time::interval(shared.timings.heartbeat);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The first tick fires at once; join() has just written the entry.
    tick.tick().await;
    let mut warned = false;
    loop {
        // Armed only while the lease is still ahead: once lapsed, wait for the next beat.
        let lapse_at = shared.lease.lock().until().filter(|t| *t > Instant::now());
        let lapse = async {
            match lapse_at {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = lapse => {
                // Lapsed without a renewal: say so now, not at the next tick.
                shared.publish_lease(Instant::now());
                continue;
            }
            _ = tick.tick() => {}
            _ = shared.beat_now.notified() => {}
        }
        match beat(&shared).await {
            Beat::Ok => {
                metrics::heartbeat("ok");
                warned = false;
            }
            Beat::Failed => {
                metrics::heartbeat("failed");
                if !warned {
                    tracing::warn!(node = %shared.node, "cluster heartbeat failed; retrying");
                    warned = true;
                }
            }
            Beat::Fenced => {
                metrics::heartbeat("fenced");
                tracing::error!(
                    node = %shared.node,
                    "cluster membership lost: the server no longer holds this incarnation's entry; rejoining as a new one"
                );
                shared.lease.lock().fence();
                shared.publish_lease(Instant::now());
                if !rejoin(&shared, &mut stop).await {
                    return;
                }
                warned = false;
                continue;
            }
        }
        shared.publish_lease(Instant::now());
    }
}

async fn beat(shared: &Shared) -> Beat {
    let json = shared.record.lock().to_json();
    let revision = *shared.revision.lock();
    let sent_at = Instant::now();
    let update = shared.kv.update(&shared.node, json.into(), revision);
    match tokio::time::timeout(shared.timings.heartbeat, update).await {
        Ok(Ok(rev)) => {
            *shared.revision.lock() = rev;
            shared.lease.lock().renewed(sent_at);
            Beat::Ok
        }
        Ok(Err(e)) if e.kind() == UpdateErrorKind::WrongLastRevision => {
            adopt_or_fence(shared).await
        }
        _ => Beat::Failed,
    }
}

/// The entry moved on without us seeing the ack. If it is still ours (an earlier beat that
/// timed out here did land), continue from its revision without renewing the lease (we do not
/// know when that beat was sent); otherwise the entry expired or another incarnation holds it.
async fn adopt_or_fence(shared: &Shared) -> Beat {
    let entry = match shared.kv.entry(&shared.node).await {
        Ok(e) => e,
        Err(_) => return Beat::Failed,
    };
    let ours = entry
        .filter(|e| e.operation == Operation::Put)
        .and_then(|e| {
            MemberRecord::decode(&shared.node, &e.value, &shared.names)
                .ok()
                .filter(|r| r.incarnation == shared.owner_tx.borrow().incarnation)
                .map(|_| e.revision)
        });
    match ours {
        Some(rev) => {
            *shared.revision.lock() = rev;
            Beat::Failed
        }
        None => Beat::Fenced,
    }
}

/// After a fence, joins again as a new incarnation, so a member that was cut off for longer
/// than the TTL (or outlived a long NATS outage) serves again without a restart. It waits a
/// heartbeat first: the fence was published at once, and the host ends the old incarnation's
/// actors within an epoch tick of it. The entry is created only if the key is free, so while
/// another live process holds this node id (or an unacknowledged create of ours is still
/// there) it tries again each heartbeat. `false` when the membership was stopped meanwhile.
async fn rejoin(shared: &Shared, stop: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    let mut warned = false;
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return false,
            () = tokio::time::sleep(shared.timings.heartbeat) => {}
        }
        let incarnation = super::new_incarnation();
        let json = {
            let mut r = shared.record.lock();
            r.incarnation = incarnation.clone();
            r.started_at_ms = super::unix_ms();
            r.to_json()
        };
        let sent_at = Instant::now();
        let create = shared.kv.create(&shared.node, json.into());
        match tokio::time::timeout(shared.timings.heartbeat, create).await {
            Ok(Ok(revision)) => {
                *shared.revision.lock() = revision;
                shared
                    .owner_tx
                    .send_modify(|o| o.incarnation = incarnation.clone());
                {
                    let mut lease = shared.lease.lock();
                    *lease = Lease::new(shared.timings.ttl, shared.timings.margin);
                    lease.renewed(sent_at);
                }
                shared.publish_lease(Instant::now());
                metrics::heartbeat("rejoined");
                tracing::warn!(node = %shared.node, %incarnation, "cluster: rejoined as a new incarnation");
                return true;
            }
            Ok(Err(e)) if !warned => {
                tracing::warn!(node = %shared.node, error = %e, "cluster: rejoin refused; trying again each heartbeat");
                warned = true;
            }
            _ => {}
        }
    }
}
