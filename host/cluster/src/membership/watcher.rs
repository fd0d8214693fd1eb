//! The watcher task: keeps the member view in step with the bucket. Each (re)start takes a
//! snapshot (every key's current entry) and then watches from the stream position read before
//! it, so nothing between the two is missed and a restart after a long disconnection still
//! reports members that went away meanwhile.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv::{Entry, Operation};
use futures_util::{StreamExt, TryStreamExt};

use super::{MemberChange, MemberRecord, MemberView, Shared};
use crate::metrics;

/// Longest pause between watcher restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

enum Exit {
    Stopped,
    Failed(String),
}

pub(super) async fn run(shared: Arc<Shared>) {
    let mut stop = shared.stop.subscribe();
    let mut backoff = Duration::from_millis(50);
    // The watcher's own copy, applied to in place; readers get a snapshot on each change.
    let mut view = MemberView::new();
    loop {
        match watch_once(&shared, &mut view, &mut backoff).await {
            Exit::Stopped => return,
            Exit::Failed(reason) => {
                tracing::warn!(node = %shared.node, %reason, "member watch restarting");
            }
        }
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn watch_once(shared: &Shared, view: &mut MemberView, backoff: &mut Duration) -> Exit {
    let mut stop = shared.stop.subscribe();
    let fail = |e: &dyn std::fmt::Display| Exit::Failed(e.to_string());
    let last = match shared.kv.status().await {
        Ok(s) => s.info.state.last_sequence,
        Err(e) => return fail(&e),
    };
    let keys: Vec<String> = match shared.kv.keys().await {
        Ok(k) => match k.try_collect().await {
            Ok(k) => k,
            Err(e) => return fail(&e),
        },
        Err(e) => return fail(&e),
    };
    let mut snapshot = Vec::with_capacity(keys.len());
    for key in keys {
        match shared.kv.entry(key.as_str()).await {
            Ok(Some(e)) if e.operation == Operation::Put => {
                if let Some(r) = decode(shared, &e) {
                    snapshot.push((r, e.revision));
                }
            }
            Ok(_) => {}
            Err(e) => return fail(&e),
        }
    }
    let changes = view.resync(snapshot);
    shared.view_tx.send_replace(Arc::new(view.clone()));
    publish(shared, changes);
    let mut watch = match shared.kv.watch_all_from_revision(last + 1).await {
        Ok(w) => w,
        Err(e) => return fail(&e),
    };
    *backoff = Duration::from_millis(50);
    loop {
        let next = tokio::select! {
            _ = stop.wait_for(|s| *s) => return Exit::Stopped,
            n = watch.next() => n,
        };
        let entry = match next {
            Some(Ok(e)) => e,
            Some(Err(e)) => return fail(&e),
            None => return Exit::Failed("watch ended".into()),
        };
        apply(shared, view, &entry);
    }
}

fn decode(shared: &Shared, e: &Entry) -> Option<MemberRecord> {
    match MemberRecord::decode(&e.key, &e.value, &shared.names) {
        Ok(r) => Some(r),
        Err(err) => {
            metrics::decode_error("member");
            tracing::warn!(%err, "ignoring a member entry");
            None
        }
    }
}

fn apply(shared: &Shared, view: &mut MemberView, e: &Entry) {
    let change = match e.operation {
        Operation::Put => match decode(shared, e) {
            Some(r) => view.put(r, e.revision),
            // An undecodable entry replaces whatever the key held: that member is not live as
            // far as this host can tell.
            None => view.remove(&e.key, e.revision),
        },
        Operation::Delete | Operation::Purge => view.remove(&e.key, e.revision),
    };
    if let Some(change) = change {
        shared.view_tx.send_replace(Arc::new(view.clone()));
        publish(shared, vec![change]);
    }
}

fn publish(shared: &Shared, changes: Vec<MemberChange>) {
    if changes.is_empty() {
        return;
    }
    metrics::members(shared.view_tx.borrow().len());
    for c in changes {
        metrics::member_change(c.label());
        tracing::info!(
            change = c.label(),
            member = %match &c {
                MemberChange::Joined(r) | MemberChange::Left(r) => &r.node,
                MemberChange::Updated { new, .. } => &new.node,
            },
            "cluster member"
        );
        // No receiver is fine.
        let _ = shared.changes.send(c);
    }
}
