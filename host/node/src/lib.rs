//! A Sluice host as a member of a cluster: what `sluice run --cluster` starts.
//!
//! The runtime knows nothing of NATS; this crate stands the cluster (`sluice-cluster`) in the
//! runtime's two seams:
//! - the [`Route`](sluice_runtime::Route) every tell and ask leaves through
//!   ([`route::ClusterRoute`]): to this host under a claim it holds, else to the owner the
//!   directory names, else to the member placement picks;
//! - the [`ActivationHooks`](sluice_runtime::ActivationHooks) every activation passes
//!   ([`claims::Hooks`]): an actor starts only under a claim and a valid lease, and its claim
//!   is released once its last activation has ended.
//!
//! Calls from other hosts arrive through the transport's server ([`serve::Serve`]).
#![warn(missing_docs)]

mod batch;
pub mod claims;
pub mod errors;
pub mod rollout;
pub mod route;
pub mod serve;
mod shared;
mod supervised;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_cluster::directory::{Directory, Owner};
use sluice_cluster::membership::MemberView;
use sluice_cluster::membership::{LeaseStatus, Membership, MembershipTimings, TypeVersion};
use sluice_cluster::modules::{ModuleError, ModuleStore, content_hash};
use sluice_cluster::transport::{Client, ClientConfig, Limits, Server, ServerConfig};
use sluice_cluster::{ClusterConfig, Connection};
use sluice_runtime::{ChildSpec, Host};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::claims::{Claims, Hooks};
use crate::rollout::{Modules, RollOut};
use crate::route::ClusterRoute;
use crate::serve::Serve;
use crate::shared::Shared;

/// Why a host could not join its cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// NATS could not be reached or the configuration is invalid.
    #[error(transparent)]
    Connect(#[from] sluice_cluster::ConnectError),
    /// Joining the members bucket failed (a live member has this node id, …).
    #[error(transparent)]
    Membership(#[from] sluice_cluster::membership::MembershipError),
    /// The directory bucket could not be opened.
    #[error(transparent)]
    Directory(#[from] sluice_cluster::directory::DirectoryError),
    /// The module store could not be opened.
    #[error(transparent)]
    Modules(#[from] ModuleError),
    /// This host's subject could not be served.
    #[error(transparent)]
    Transport(#[from] sluice_cluster::transport::TransportError),
    /// The host already has a route or activation hooks.
    #[error("{0}")]
    Host(#[from] sluice_runtime::ActorError),
}

/// A member of a cluster: this host's membership, its claims, its route and its server.
pub struct Node {
    shared: Arc<Shared>,
    conn: Connection,
    node: String,
    /// Taken by [`Node::leave`].
    membership: Arc<parking_lot::Mutex<Option<Membership>>>,
    server: parking_lot::Mutex<Option<Server>>,
    modules: Arc<Modules>,
    /// The fence on lease lapse, the module follower, the live-count refresher, the relay
    /// share and the placer of supervised instances.
    tasks: parking_lot::Mutex<Vec<JoinHandle<()>>>,
    heartbeat: Duration,
}

/// What `sluice status` shows about the cluster.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClusterStatus {
    /// This host's node id.
    pub node: String,
    /// The cluster's name.
    pub cluster: String,
    /// Live members and the actor types each has deployed, by node id.
    pub members: BTreeMap<String, Vec<String>>,
    /// Where the live actors are: per member, live activations per type (as of each
    /// member's last heartbeat).
    pub actors: BTreeMap<String, BTreeMap<String, u64>>,
    /// Actors this host holds a directory claim on.
    pub claims: usize,
    /// Whether this host is connected to NATS now (remote calls and directory operations
    /// fail at once while it is not; it reconnects on its own).
    pub connected: bool,
    /// Whether this host's lease is valid (it may run clustered actors).
    pub lease_valid: bool,
    /// The outbox partitions this host's relay runs (its share of the shared outbox).
    pub relayed: Vec<u32>,
}

impl Node {
    /// Connects, joins as a member with no types yet, and installs the route and the
    /// activation hooks on `host` — before anything is deployed, so no actor runs outside
    /// the rules. Call [`Node::announce`] after deploying.
    pub async fn join(host: &Host, config: &ClusterConfig) -> Result<Self, JoinError> {
        let conn = sluice_cluster::connect(config).await?;
        let membership =
            Membership::join(&conn, MembershipTimings::from(config), BTreeMap::new()).await?;
        let directory = Directory::open(&conn, config.member_ttl()).await?;
        let limits = Limits {
            max_payload_bytes: host.config().max_payload_bytes,
            ..Limits::default()
        };
        let client = Client::new(
            &conn,
            ClientConfig {
                limits,
                ..ClientConfig::default()
            },
        )
        .watching(membership.watch_view());
        let store = ModuleStore::open(&conn).await?;
        let claims = Claims::new(directory.clone(), membership.lease());
        let shared = Arc::new(Shared::new(
            host.clone(),
            membership.watch_owner(),
            claims.clone(),
            directory,
            client,
            membership.watch_view(),
            config.tell_frames_in_flight,
        ));
        host.set_activations(Arc::new(Hooks(claims.clone())))?;
        // The relay starts with no partition; `start_following` gives it this member's share.
        host.relay_partitions([]).await;
        host.set_route(Arc::new(ClusterRoute(shared.clone())))?;
        let server = Server::start(
            &conn,
            Arc::new(Serve(shared.clone())),
            ServerConfig {
                limits,
                ..ServerConfig::default()
            },
        )
        .await?;
        let fence = tokio::spawn(fence_on_lapse(
            host.clone(),
            claims.clone(),
            membership.lease(),
        ));
        Ok(Self {
            shared,
            conn,
            node: membership.node_id().to_string(),
            membership: Arc::new(parking_lot::Mutex::new(Some(membership))),
            server: parking_lot::Mutex::new(Some(server)),
            modules: Arc::new(Modules::new(store, host.clone())),
            tasks: parking_lot::Mutex::new(vec![fence]),
            heartbeat: config.heartbeat(),
        })
    }

    /// After this host deployed its app's `children` itself: announces its types
    /// (placement's candidates), makes them the cluster's current modules where it has none
    /// yet, and from then on follows the cluster's deploys (loading each current version this
    /// host does not run; first of all any that differs from its own app folder).
    pub async fn start_following(
        &self,
        children: &[(ChildSpec, Vec<u8>)],
    ) -> Result<(), ModuleError> {
        let versions = self.local_versions();
        for (spec, bytes) in children {
            let v = versions.get(&spec.actor_type).copied().unwrap_or(1);
            let types = self.modules.deployed_here(spec, content_hash(bytes), v);
            self.announce(types);
        }
        self.modules.seed(children).await?;
        let membership = self.membership.clone();
        let shared = self.shared.clone();
        let follow = self.modules.clone().follow(move |types| {
            shared.set_types(types.keys().cloned());
            if let Some(m) = &*membership.lock() {
                m.set_types(types);
            }
        });
        let refresh = refresh_live(
            self.modules.clone(),
            self.membership.clone(),
            self.shared.host.clone(),
            self.heartbeat,
        );
        let (lease, owner) = match &*self.membership.lock() {
            Some(m) => (Some(m.lease()), Some(m.watch_owner())),
            None => (None, None),
        };
        let share = share_relay(
            self.shared.host.clone(),
            (self.node.clone(), owner),
            self.shared.view.clone(),
            lease,
        );
        let supervised = supervised::keep_placed(self.shared.clone(), self.heartbeat);
        self.tasks.lock().extend([
            tokio::spawn(follow),
            tokio::spawn(refresh),
            tokio::spawn(share),
            tokio::spawn(supervised),
        ]);
        Ok(())
    }

    /// After this host deployed `spec`/`bytes` through its admin API: makes it the
    /// cluster's current version of the type, and waits (at most `wait`) for every live
    /// member to report whether it loaded it.
    pub async fn roll_out(
        &self,
        spec: &ChildSpec,
        bytes: &[u8],
        wait: Duration,
    ) -> Result<RollOut, ModuleError> {
        let v = self
            .local_versions()
            .get(&spec.actor_type)
            .copied()
            .unwrap_or(1);
        let types = self.modules.deployed_here(spec, content_hash(bytes), v);
        self.announce(types);
        self.modules
            .roll_out(spec, bytes, &self.shared.view, wait)
            .await
    }

    fn local_versions(&self) -> BTreeMap<String, u64> {
        self.shared
            .host
            .status()
            .into_iter()
            .map(|t| (t.actor_type, t.version))
            .collect()
    }

    fn announce(&self, types: BTreeMap<String, TypeVersion>) {
        self.shared.set_types(types.keys().cloned());
        if let Some(m) = &*self.membership.lock() {
            m.set_types(types);
        }
    }

    /// This host's node id.
    pub fn node_id(&self) -> &str {
        &self.node
    }

    /// Members, claims and lease, for `sluice status`.
    pub fn status(&self) -> ClusterStatus {
        let view = self.shared.view.borrow().clone();
        ClusterStatus {
            node: self.node_id().to_string(),
            cluster: self.conn.names().cluster().to_string(),
            members: view
                .members()
                .map(|m| {
                    (
                        m.record.node.clone(),
                        m.record.types.keys().cloned().collect(),
                    )
                })
                .collect(),
            actors: view
                .members()
                .map(|m| {
                    (
                        m.record.node.clone(),
                        m.record
                            .types
                            .iter()
                            .map(|(t, v)| (t.clone(), v.live))
                            .collect(),
                    )
                })
                .collect(),
            claims: self.shared.claims.len(),
            connected: self.shared.client.is_connected(),
            lease_valid: self.shared.claims.lease_valid(),
            relayed: self.shared.host.relayed_partitions(),
        }
    }

    /// Leaves the cluster after `host` stopped: waits (at most `bound`) for the claims of the
    /// actors that ended to be released, stops serving and deletes the member entry, so the
    /// next message to any of them activates it on another member at once.
    /// A second call does nothing.
    pub async fn leave(&self, bound: Duration) {
        if !self.shared.claims.wait_released(bound).await {
            tracing::warn!(
                left = self.shared.claims.len(),
                "cluster: some claims were not released in time; they are taken over after the member TTL"
            );
        }
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
        let server = self.server.lock().take();
        if let Some(server) = server {
            server.stop().await;
        }
        let membership = self.membership.lock().take();
        if let Some(m) = membership
            && let Err(e) = m.leave().await
        {
            tracing::warn!(error = %e, "cluster: leaving the members bucket failed");
        }
    }
}

/// The outbox partitions `node` relays among `members` (itself included whether or not it
/// is listed): rendezvous hashing of each partition over the members, so a member joining or
/// leaving moves only the partitions it gains or had.
pub fn relay_share<'a>(
    node: &'a str,
    members: impl Iterator<Item = &'a str>,
    partitions: u32,
) -> Vec<u32> {
    let mut nodes: Vec<&str> = members.collect();
    if !nodes.contains(&node) {
        nodes.push(node);
    }
    (0..partitions)
        .filter(|p| {
            sluice_cluster::placement::place(&partition_key(*p), nodes.iter().copied())
                == Some(node)
        })
        .collect()
}

/// The name a partition is placed by.
fn partition_key(partition: u32) -> String {
    format!("outbox-partition/{partition}")
}

/// Fences `host` while this member's lease is not valid (`Host::fence`): its actors stop
/// within an epoch tick of the lapse, which comes at least the lease margin before any other
/// member can see this one gone and take its actors over (the single-activation rule).
/// Fenced for good (the entry expired), the incarnation's claims are void: they are dropped,
/// so nothing activates under them after the member rejoins as a new incarnation.
async fn fence_on_lapse(host: Host, claims: Arc<Claims>, mut lease: watch::Receiver<LeaseStatus>) {
    loop {
        let status = *lease.borrow_and_update();
        host.fence(!status.is_valid_at(Instant::now()));
        if status == LeaseStatus::Fenced {
            claims.forget_all();
        }
        if lease.changed().await.is_err() {
            return;
        }
    }
}

/// The name a member incarnation leases outbox partitions under: a restarted host with the
/// same node id is another lessee, so ending a dead incarnation's leases never touches its
/// successor's.
fn lessee(node: &str, incarnation: &str) -> String {
    format!("{node}/{incarnation}")
}

/// Keeps this host's relay on its share of the outbox's partitions as members come and go.
/// A partition that moves away is given up after its current batch; one that moves here is
/// taken as soon as its previous holder has given it up, or at once for a member that died:
/// a member gone from the view (silent for the member TTL) has its partition leases ended
/// rather than waited out for `lease_ms`. That is safe because a member stops relaying when
/// its own cluster lease lapses, which is at least the lease margin before the others can see
/// it gone; so one host at a time relays each partition and per-receiver FIFO holds.
async fn share_relay(
    host: Host,
    (node, owner): (String, Option<watch::Receiver<Owner>>),
    mut view: watch::Receiver<Arc<MemberView>>,
    mut lease: Option<watch::Receiver<LeaseStatus>>,
) {
    let Some(outbox) = host.outbox().cloned() else {
        return;
    };
    // The name this host's relay leases under, set while it relays nothing: at the start
    // (nothing since `join`) and after a rejoin (nothing while the lease was not valid).
    let mut named: Option<String> = None;
    let count = outbox.config().partitions;
    // The other members as of the last view: node id -> incarnation.
    let mut others: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let (share, gone) = {
            let v = view.borrow_and_update();
            let now: BTreeMap<String, String> = v
                .members()
                .filter(|m| m.record.node != node)
                .map(|m| (m.record.node.clone(), m.record.incarnation.clone()))
                .collect();
            let gone: Vec<String> = others
                .iter()
                .filter(|(n, i)| now.get(*n) != Some(*i))
                .map(|(n, i)| lessee(n, i))
                .collect();
            others = now;
            let share = relay_share(&node, v.members().map(|m| m.record.node.as_str()), count);
            (share, gone)
        };
        for name in gone {
            match outbox.channel().end_leases_of(&name).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    lessee = %name,
                    partitions = n,
                    "cluster: ended the outbox partition leases of a member that left"
                ),
                // Its leases then lapse on their own after `lease_ms`.
                Err(e) => tracing::warn!(lessee = %name, error = %e,
                    "cluster: could not end a departed member's outbox partition leases"),
            }
        }
        let valid = lease
            .as_mut()
            .is_none_or(|l| l.borrow_and_update().is_valid_at(Instant::now()));
        if valid && let Some(o) = &owner {
            let me = {
                let o = o.borrow();
                lessee(&o.node, &o.incarnation)
            };
            if named.as_ref() != Some(&me) && host.relayed_partitions().is_empty() {
                match outbox.channel().set_lessee(&me) {
                    Ok(()) => named = Some(me),
                    Err(e) => tracing::warn!(lessee = %me, error = %e,
                        "cluster: outbox partition leases keep their old name: if this host dies, its partitions wait out lease_ms"),
                }
            }
        }
        let mine = if valid { share } else { Vec::new() };
        if mine != host.relayed_partitions() {
            if valid {
                tracing::info!(node = %node, partitions = ?mine, "cluster: relaying outbox partitions");
            } else {
                tracing::warn!(node = %node, "cluster: lease lapsed: relaying no outbox partition");
            }
        }
        host.relay_partitions(mine).await;
        let lease_changed = async {
            match lease.as_mut() {
                Some(l) => l.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = view.changed() => if r.is_err() { return },
            r = lease_changed => if r.is_err() { return },
        }
    }
}

/// Keeps the member record's live counts current: each heartbeat carries the live
/// activations per type as of the one before.
async fn refresh_live(
    modules: Arc<Modules>,
    membership: Arc<parking_lot::Mutex<Option<Membership>>>,
    host: Host,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let live: BTreeMap<String, u64> = host
            .status()
            .into_iter()
            .map(|t| (t.actor_type, t.active as u64))
            .collect();
        let mut types = modules.announced();
        for (t, v) in types.iter_mut() {
            v.live = live.get(t).copied().unwrap_or(0);
        }
        match &*membership.lock() {
            Some(m) => m.refresh_types(types),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::relay_share;

    fn shares(nodes: &[&str], partitions: u32) -> Vec<Vec<u32>> {
        nodes
            .iter()
            .map(|n| relay_share(n, nodes.iter().copied(), partitions))
            .collect()
    }

    #[test]
    fn every_partition_has_exactly_one_member_and_a_joiner_takes_only_from_the_others() {
        let three = shares(&["h1", "h2", "h3"], 64);
        let mut all: Vec<u32> = three.concat();
        all.sort_unstable();
        assert_eq!(all, (0..64).collect::<Vec<_>>());
        assert!(three.iter().all(|s| !s.is_empty()), "{three:?}");
        let four = shares(&["h1", "h2", "h3", "h4"], 64);
        let mut all: Vec<u32> = four.concat();
        all.sort_unstable();
        assert_eq!(all, (0..64).collect::<Vec<_>>());
        assert!(!four[3].is_empty());
        for i in 0..3 {
            // A partition a member keeps was its before; it only loses some to h4.
            assert!(
                four[i].iter().all(|p| three[i].contains(p)),
                "h{} gained one",
                i + 1
            );
            assert!(
                three[i]
                    .iter()
                    .all(|p| four[i].contains(p) || four[3].contains(p))
            );
        }
    }

    #[test]
    fn a_member_missing_from_its_own_view_still_counts_itself() {
        let alone = relay_share("h1", std::iter::empty(), 8);
        assert_eq!(alone, (0..8).collect::<Vec<_>>());
        let with = relay_share("h4", ["h1", "h2", "h3"].into_iter(), 64);
        assert_eq!(
            with,
            relay_share("h4", ["h1", "h2", "h3", "h4"].into_iter(), 64)
        );
    }
}
