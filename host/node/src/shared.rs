//! What the route, the serving handler and the hooks of one clustered host share.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sluice_cluster::directory::{Directory, Owner};
use sluice_cluster::membership::MemberView;
use sluice_cluster::transport::Client;
use sluice_runtime::{ActorId, Host};
use tokio::sync::watch;

use crate::batch::Batcher;
use crate::claims::Claims;

/// Remembered owners of remote actors: a routing hint (a stale one costs one `Moved` hop,
/// never a second activation). Bounded: cleared when it reaches this size.
const MAX_HINTS: usize = 100_000;

pub(crate) struct Shared {
    pub host: Host,
    /// This host's node id.
    pub node: String,
    /// This member's current incarnation, as directory entries name it (a fenced member
    /// rejoins as a new one).
    me: watch::Receiver<Owner>,
    pub claims: Arc<Claims>,
    pub directory: Directory,
    pub client: Client,
    /// Tells share frames per destination host.
    pub batcher: Batcher,
    pub view: watch::Receiver<Arc<MemberView>>,
    owners: Mutex<HashMap<ActorId, Arc<str>>>,
    /// Actor types deployed on this host.
    types: RwLock<HashSet<String>>,
}

impl Shared {
    pub fn new(
        host: Host,
        me: watch::Receiver<Owner>,
        claims: Arc<Claims>,
        directory: Directory,
        client: Client,
        view: watch::Receiver<Arc<MemberView>>,
        frames_in_flight: usize,
    ) -> Self {
        let node = me.borrow().node.clone();
        Self {
            host,
            node,
            me,
            claims,
            directory,
            batcher: Batcher::new(client.clone(), frames_in_flight),
            client,
            view,
            owners: Mutex::new(HashMap::new()),
            types: RwLock::new(HashSet::new()),
        }
    }

    /// What this host claims actors as now.
    pub fn me(&self) -> Owner {
        self.me.borrow().clone()
    }

    pub fn owner_hint(&self, id: &ActorId) -> Option<Arc<str>> {
        self.owners.lock().get(id).cloned()
    }

    /// Remembers (or, with `None`, forgets) where `id` runs.
    pub fn note_owner(&self, id: &ActorId, node: Option<Arc<str>>) {
        let mut owners = self.owners.lock();
        match node {
            Some(n) => {
                if owners.len() >= MAX_HINTS {
                    owners.clear();
                }
                owners.insert(id.clone(), n);
            }
            None => {
                owners.remove(id);
            }
        }
    }

    pub fn has_type(&self, actor_type: &str) -> bool {
        self.types.read().contains(actor_type)
    }

    pub fn set_types(&self, types: impl IntoIterator<Item = String>) {
        *self.types.write() = types.into_iter().collect();
    }
}
