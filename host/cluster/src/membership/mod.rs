//! Membership: each host heart-beats its [`MemberRecord`] into the `sluice_<cluster>_members`
//! KV bucket, whose entries expire `member_ttl` after their last write (the server then leaves
//! a delete marker, so every watcher sees the member go). Every host watches the bucket and
//! keeps a live [`MemberView`] with change notifications. `leave()` deletes the entry at once.
//!
//! A host's own standing is its [`Lease`]: valid for `member_ttl - heartbeat` after the send
//! instant of its last acknowledged heartbeat, so it lapses before anyone else can see the
//! entry expire. A heartbeat refused because the entry is no longer this incarnation's fences
//! the member for good.

mod heartbeat;
mod lease;
mod record;
mod view;
mod watcher;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv::{self, CreateErrorKind, Operation};
use parking_lot::Mutex;
use tokio::sync::{Notify, broadcast, watch};
use tokio::task::JoinHandle;

pub use lease::{Lease, LeaseStatus};
pub use record::{MAX_RECORD_BYTES, MemberRecord, RecordError, TypeVersion};
pub use view::{Member, MemberChange, MemberView};

use crate::buckets::{self, BucketError, KvSpec};
use crate::config::ClusterConfig;
use crate::connect::Connection;
use crate::directory::Owner;
use crate::names::Names;
use crate::transport::WIRE_VERSION;

/// Member changes kept for a slow reader of [`Membership::changes`]; a reader that lags
/// further gets `Lagged` and should re-read [`Membership::view`].
pub const CHANGE_CAPACITY: usize = 256;

/// Why joining, leaving or asking about members failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MembershipError {
    /// The members bucket could not be opened or disagrees with this host's TTL.
    #[error(transparent)]
    Bucket(#[from] BucketError),
    /// Another live member uses this node id.
    #[error(
        "cluster: node id {node:?} is in use by a live member (incarnation {incarnation}); pick another, or wait for its entry to expire (member_ttl after its last heartbeat)"
    )]
    NodeIdInUse {
        /// The node id.
        node: String,
        /// The live incarnation holding it.
        incarnation: String,
    },
    /// A KV operation failed (NATS unreachable, timeout).
    #[error("cluster: {op} on the members bucket failed: {reason}")]
    Kv {
        /// The operation.
        op: &'static str,
        /// The client's reason.
        reason: String,
    },
    /// Our own entry did not show up in the view in time after joining.
    #[error("cluster: joined, but the member view did not show this host within {0:?}")]
    NotSeen(Duration),
}

/// Timings of one member, from [`ClusterConfig`].
#[derive(Debug, Clone, Copy)]
pub struct MembershipTimings {
    /// Heartbeat interval.
    pub heartbeat: Duration,
    /// Member TTL (the bucket's max_age).
    pub ttl: Duration,
    /// Time the host needs to stop its actors when the lease lapses: the lease holds
    /// `ttl - margin`. Default: one heartbeat interval.
    pub margin: Duration,
}

/// A fresh incarnation id: 16 hex digits.
pub(crate) fn new_incarnation() -> String {
    let mut incarnation = uuid::Uuid::new_v4().simple().to_string();
    incarnation.truncate(16);
    incarnation
}

impl From<&ClusterConfig> for MembershipTimings {
    fn from(c: &ClusterConfig) -> Self {
        Self {
            heartbeat: c.heartbeat(),
            ttl: c.member_ttl(),
            margin: c.heartbeat(),
        }
    }
}

/// State shared by the handle, the heartbeat task and the watcher task.
pub(crate) struct Shared {
    kv: kv::Store,
    names: Names,
    node: String,
    /// The current incarnation, as directory entries name it: a new one after each rejoin.
    owner_tx: watch::Sender<Owner>,
    timings: MembershipTimings,
    /// Cold path (one write per heartbeat or deploy): a plain mutex.
    record: Mutex<MemberRecord>,
    /// Last acknowledged revision of our entry.
    revision: Mutex<u64>,
    lease: Mutex<Lease>,
    lease_tx: watch::Sender<LeaseStatus>,
    view_tx: watch::Sender<Arc<MemberView>>,
    changes: broadcast::Sender<MemberChange>,
    beat_now: Notify,
    stop: watch::Sender<bool>,
}

impl Shared {
    /// Publishes the lease status at `now` if it changed.
    fn publish_lease(&self, now: Instant) {
        let status = self.lease.lock().status(now);
        self.lease_tx.send_if_modified(|s| {
            let changed = *s != status;
            *s = status;
            changed
        });
    }
}

/// This host's membership: its heartbeat, its lease and its view of the others.
pub struct Membership {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn kv_err(op: &'static str) -> impl Fn(&dyn std::fmt::Display) -> MembershipError {
    move |e| MembershipError::Kv {
        op,
        reason: e.to_string(),
    }
}

/// Opens the members bucket of `conn`'s cluster (created on first use).
pub(crate) async fn members_bucket(
    conn: &Connection,
    ttl: Duration,
) -> Result<kv::Store, BucketError> {
    buckets::open_kv(
        conn,
        KvSpec {
            bucket: conn.names().members_bucket(),
            description: "Sluice cluster members (expire after member_ttl)",
            max_age: ttl,
        },
    )
    .await
}

impl Membership {
    /// Joins the cluster as `conn.node_id()` announcing `types`, starts heart-beating and
    /// watching, and returns once this host sees itself in its own view.
    pub async fn join(
        conn: &Connection,
        timings: MembershipTimings,
        types: BTreeMap<String, TypeVersion>,
    ) -> Result<Self, MembershipError> {
        let kv = members_bucket(conn, timings.ttl).await?;
        let node = conn.node_id().to_string();
        let incarnation = new_incarnation();
        let record = MemberRecord {
            node: node.clone(),
            incarnation: incarnation.clone(),
            subject: conn.names().host_subject(&node),
            started_at_ms: unix_ms(),
            wire_version: WIRE_VERSION,
            types,
        };
        let mut lease = Lease::new(timings.ttl, timings.margin);
        let sent_at = Instant::now();
        let revision = match kv.create(&node, record.to_json().into()).await {
            Ok(rev) => rev,
            Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {
                let holder = kv
                    .entry(&node)
                    .await
                    .ok()
                    .flatten()
                    .filter(|e| e.operation == Operation::Put)
                    .and_then(|e| MemberRecord::decode(&node, &e.value, conn.names()).ok())
                    .map_or_else(|| "unknown".to_string(), |r| r.incarnation);
                return Err(MembershipError::NodeIdInUse {
                    node,
                    incarnation: holder,
                });
            }
            Err(e) => return Err(kv_err("join")(&e)),
        };
        lease.renewed(sent_at);
        let (lease_tx, _) = watch::channel(lease.status(Instant::now()));
        let (view_tx, mut view_rx) = watch::channel(Arc::new(MemberView::new()));
        let (changes, _) = broadcast::channel(CHANGE_CAPACITY);
        let (stop, _) = watch::channel(false);
        let (owner_tx, _) = watch::channel(Owner {
            node: node.clone(),
            incarnation,
        });
        let shared = Arc::new(Shared {
            kv,
            names: conn.names().clone(),
            node,
            owner_tx,
            timings,
            record: Mutex::new(record),
            revision: Mutex::new(revision),
            lease: Mutex::new(lease),
            lease_tx,
            view_tx,
            changes,
            beat_now: Notify::new(),
            stop,
        });
        let tasks = vec![
            tokio::spawn(heartbeat::run(shared.clone())),
            tokio::spawn(watcher::run(shared.clone())),
        ];
        let me = Self { shared, tasks };
        let bound = timings.ttl;
        let seen = tokio::time::timeout(
            bound,
            view_rx.wait_for(|v| v.is_live(&me.shared.node, &me.incarnation())),
        )
        .await;
        match seen {
            Ok(Ok(_)) => Ok(me),
            _ => {
                // Best effort: do not leave an entry behind for a host that failed to start.
                let _ = me.leave().await;
                Err(MembershipError::NotSeen(bound))
            }
        }
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.shared.node
    }

    /// The current incarnation (directory entries name it): the join's, or the last
    /// rejoin's after a fence.
    pub fn incarnation(&self) -> String {
        self.shared.owner_tx.borrow().incarnation.clone()
    }

    /// The current member incarnation as a directory owner: what it claims actors as.
    pub fn owner(&self) -> Owner {
        self.shared.owner_tx.borrow().clone()
    }

    /// Follows [`Membership::owner`]: it changes when a fenced member rejoins.
    pub fn watch_owner(&self) -> watch::Receiver<Owner> {
        self.shared.owner_tx.subscribe()
    }

    /// The live members now (a snapshot; cheap to clone).
    pub fn view(&self) -> Arc<MemberView> {
        self.shared.view_tx.borrow().clone()
    }

    /// Follows the view: `changed().await`, then `borrow()`.
    pub fn watch_view(&self) -> watch::Receiver<Arc<MemberView>> {
        self.shared.view_tx.subscribe()
    }

    /// Member changes from now on (bounded: [`CHANGE_CAPACITY`]).
    pub fn changes(&self) -> broadcast::Receiver<MemberChange> {
        self.shared.changes.subscribe()
    }

    /// Follows this host's lease (valid / lapsed / fenced).
    pub fn lease(&self) -> watch::Receiver<LeaseStatus> {
        self.shared.lease_tx.subscribe()
    }

    /// Whether this host may run clustered actors right now (exact, not the last published
    /// status: the lease is compared against the clock).
    pub fn holds_lease(&self) -> bool {
        self.shared
            .lease
            .lock()
            .status(Instant::now())
            .is_valid_at(Instant::now())
    }

    /// Replaces the types in the record without sending a heartbeat now: the next regular
    /// one carries them (live counts, which change all the time).
    pub fn refresh_types(&self, types: BTreeMap<String, TypeVersion>) {
        self.shared.record.lock().types = types;
    }

    /// Announces a new set of deployed types (after a deploy): written with the next heartbeat,
    /// which is sent at once.
    pub fn set_types(&self, types: BTreeMap<String, TypeVersion>) {
        self.shared.record.lock().types = types;
        self.shared.beat_now.notify_one();
    }

    /// Whether `node` is live in `incarnation` according to the server (a KV read, not the
    /// local view): what a directory takeover must check.
    pub async fn is_live_on_server(
        &self,
        node: &str,
        incarnation: &str,
    ) -> Result<bool, MembershipError> {
        is_live_on_server(&self.shared.kv, &self.shared.names, node, incarnation).await
    }

    /// Leaves at once: stops heart-beating and deletes this incarnation's entry (revision
    /// checked, so it never deletes a newer incarnation's). The runtime must have stopped its
    /// clustered actors and released their directory entries before calling this.
    pub async fn leave(mut self) -> Result<(), MembershipError> {
        self.stop_tasks().await;
        let revision = *self.shared.revision.lock();
        self.shared.lease.lock().fence();
        self.shared.publish_lease(Instant::now());
        self.shared
            .kv
            .delete_expect_revision(&self.shared.node, Some(revision))
            .await
            .map_err(|e| kv_err("leave")(&e))
    }

    async fn stop_tasks(&mut self) {
        self.shared.stop.send_replace(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for Membership {
    /// Dropped without `leave()` (a crash in miniature): tasks stop, the entry expires after
    /// the TTL like a dead host's.
    fn drop(&mut self) {
        self.shared.stop.send_replace(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// See [`Membership::is_live_on_server`]; usable without joining (the directory uses it).
pub(crate) async fn is_live_on_server(
    kv: &kv::Store,
    names: &Names,
    node: &str,
    incarnation: &str,
) -> Result<bool, MembershipError> {
    let entry = kv.entry(node).await.map_err(|e| kv_err("read")(&e))?;
    Ok(entry
        .filter(|e| e.operation == Operation::Put)
        .and_then(|e| MemberRecord::decode(node, &e.value, names).ok())
        .is_some_and(|r| r.incarnation == incarnation))
}
