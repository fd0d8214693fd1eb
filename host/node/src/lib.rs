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

pub mod claims;
pub mod errors;
pub mod route;
pub mod serve;
mod shared;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::directory::Directory;
use sluice_cluster::membership::{Membership, MembershipTimings, TypeVersion};
use sluice_cluster::transport::{Client, ClientConfig, Limits, Server, ServerConfig};
use sluice_cluster::{ClusterConfig, Connection};
use sluice_runtime::Host;

use crate::claims::{Claims, Hooks};
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
    membership: parking_lot::Mutex<Option<Membership>>,
    server: parking_lot::Mutex<Option<Server>>,
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
            membership: parking_lot::Mutex::new(Some(membership)),
            server: parking_lot::Mutex::new(Some(server)),
        })
    }

    /// Announces the actor types this host has deployed (placement's candidates).
    pub fn announce(&self, types: BTreeMap<String, TypeVersion>) {
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
