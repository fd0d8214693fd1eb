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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::directory::Directory;
use sluice_cluster::membership::{Membership, MembershipTimings, TypeVersion};
use sluice_cluster::modules::{ModuleError, ModuleStore, content_hash};
use sluice_cluster::transport::{Client, ClientConfig, Limits, Server, ServerConfig};
use sluice_cluster::{ClusterConfig, Connection};
use sluice_runtime::{ChildSpec, Host};
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
    /// The module follower and the live-count refresher.
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
    /// Whether this host's lease is valid (it may run clustered actors).
    pub lease_valid: bool,
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
        );
        let store = ModuleStore::open(&conn).await?;
        let claims = Claims::new(directory.clone(), membership.lease());
        let shared = Arc::new(Shared::new(
            host.clone(),
            membership.owner(),
            claims.clone(),
            directory,
            client,
            membership.watch_view(),
        ));
        host.set_activations(Arc::new(Hooks(claims)))?;
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
        Ok(Self {
            shared,
            conn,
            node: membership.node_id().to_string(),
            membership: Arc::new(parking_lot::Mutex::new(Some(membership))),
            server: parking_lot::Mutex::new(Some(server)),
            modules: Arc::new(Modules::new(store, host.clone())),
            tasks: parking_lot::Mutex::new(Vec::new()),
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
        self.tasks
            .lock()
            .extend([tokio::spawn(follow), tokio::spawn(refresh)]);
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
            lease_valid: self.shared.claims.lease_valid(),
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
