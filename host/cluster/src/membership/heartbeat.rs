//! The heartbeat task: rewrites our entry every interval with a revision check, renews the
//! lease on each acknowledgement, publishes the lease lapsing at the exact instant, and fences
//! when the server no longer holds this incarnation's entry.

use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream::kv::{Operation, UpdateErrorKind};
use tokio::time::MissedTickBehavior;

use super::{MemberRecord, Shared};
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
                    "cluster membership lost: the server no longer holds this incarnation's entry"
                );
                shared.lease.lock().fence();
                shared.publish_lease(Instant::now());
                return;
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
                .filter(|r| r.incarnation == shared.incarnation)
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
