//! The actors this host holds a directory claim on, and the runtime's activation hooks that
//! enforce the single-activation rule with them (docs/cluster.md, "Single activation"):
//! an activation starts only under a claim and a valid lease; the claim is released once
//! the last activation under it has ended.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_cluster::directory::{Claim, Directory};
use sluice_cluster::membership::LeaseStatus;
use sluice_runtime::{ActivationHooks, ActorError, ActorId};
use tokio::sync::watch;

/// One actor's entry.
enum Slot {
    /// Claimed by this host; `live` activations started under the claim have not ended.
    Held { claim: Claim, live: u32 },
    /// The claim is being released; the receiver turns `true` once it is gone.
    Releasing(watch::Receiver<bool>),
}

/// What [`Claims::state`] finds.
pub enum State {
    /// This host holds the claim: deliver here.
    Held,
    /// A release is under way: wait for it, then place again.
    Releasing(watch::Receiver<bool>),
    /// No claim here.
    Absent,
}

/// The claims of this host.
pub struct Claims {
    slots: Mutex<HashMap<ActorId, Slot>>,
    directory: Directory,
    lease: watch::Receiver<LeaseStatus>,
    /// Turns `true` when the table is empty (what a leaving host waits for).
    empty: watch::Sender<bool>,
}

impl Claims {
    /// An empty table releasing through `directory`, admitting only under `lease`.
    pub fn new(directory: Directory, lease: watch::Receiver<LeaseStatus>) -> Arc<Self> {
        Arc::new(Self {
            slots: Mutex::new(HashMap::new()),
            directory,
            lease,
            empty: watch::channel(true).0,
        })
    }

    /// Whether this host may run clustered actors now.
    pub fn lease_valid(&self) -> bool {
        self.lease.borrow().is_valid_at(Instant::now())
    }

    /// Where `id` stands here.
    pub fn state(&self, id: &ActorId) -> State {
        match self.slots.lock().get(id) {
            Some(Slot::Held { .. }) => State::Held,
            Some(Slot::Releasing(rx)) => State::Releasing(rx.clone()),
            None => State::Absent,
        }
    }

    /// Records a claim this host just won (no activation under it yet). A claim already held
    /// is kept as it is.
    pub fn insert(&self, id: &ActorId, claim: Claim) {
        let mut slots = self.slots.lock();
        if !matches!(slots.get(id), Some(Slot::Held { .. })) {
            slots.insert(id.clone(), Slot::Held { claim, live: 0 });
            self.empty.send_replace(false);
        }
    }

    /// Releases `id`'s claim if no activation runs under it (a claim won for a delivery that
    /// was then refused before it activated anything).
    pub fn settle(self: &Arc<Self>, id: &ActorId) {
        let mut slots = self.slots.lock();
        if let Some(Slot::Held { live: 0, .. }) = slots.get(id) {
            self.start_release(&mut slots, id);
        }
    }

    /// Drops every claim without releasing it: they named an incarnation the server no
    /// longer holds (fenced), so the directory entries are anyone's to take over, and none may
    /// admit an activation once this member rejoins as a new incarnation.
    pub fn forget_all(&self) {
        let mut slots = self.slots.lock();
        if !slots.is_empty() {
            tracing::warn!(
                claims = slots.len(),
                "cluster: fenced: dropping this incarnation's claims"
            );
            slots.clear();
        }
        self.empty.send_replace(true);
    }

    /// Number of claims held or being released.
    pub fn len(&self) -> usize {
        self.slots.lock().len()
    }

    /// Whether no claim is held or being released.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until every claim is released, at most `bound`; `false` if some remain.
    pub async fn wait_released(&self, bound: Duration) -> bool {
        let mut rx = self.empty.subscribe();
        tokio::time::timeout(bound, rx.wait_for(|e| *e))
            .await
            .is_ok()
    }

    fn start_release(self: &Arc<Self>, slots: &mut HashMap<ActorId, Slot>, id: &ActorId) {
        let (tx, rx) = watch::channel(false);
        let Some(Slot::Held { claim, .. }) = slots.insert(id.clone(), Slot::Releasing(rx)) else {
            return;
        };
        let me = self.clone();
        let id = id.clone();
        tokio::spawn(async move {
            if let Err(e) = me.directory.release(&claim).await {
                // Not ours any more (taken over after a lapse) or NATS is away: the entry
                // then names an incarnation that stops being live, and is taken over.
                tracing::warn!(actor = %id, error = %e, "cluster: directory release failed");
            }
            let mut slots = me.slots.lock();
            if matches!(slots.get(&id), Some(Slot::Releasing(_))) {
                slots.remove(&id);
            }
            if slots.is_empty() {
                me.empty.send_replace(true);
            }
            drop(slots);
            tx.send_replace(true);
        });
    }
}

/// The runtime's hooks: admit under a held claim and a valid lease, release after the last
/// activation ends.
pub struct Hooks(pub Arc<Claims>);

impl ActivationHooks for Hooks {
    fn admit(&self, id: &ActorId) -> Result<(), ActorError> {
        if !self.0.lease_valid() {
            return Err(ActorError::unavailable(
                "this host's cluster lease has lapsed: it runs no clustered actor until it is renewed",
            ));
        }
        match self.0.slots.lock().get_mut(id) {
            Some(Slot::Held { live, .. }) => {
                *live += 1;
                Ok(())
            }
            _ => Err(ActorError::unavailable(format!(
                "{id} is not claimed by this host (it moved while the call was routed)"
            ))),
        }
    }

    /// The cluster spreads supervised instances over its members (`supervised.rs`).
    fn places_supervised(&self) -> bool {
        true
    }

    fn ended(&self, id: &ActorId) {
        let claims = &self.0;
        let mut slots = claims.slots.lock();
        if let Some(Slot::Held { live, .. }) = slots.get_mut(id) {
            *live = live.saturating_sub(1);
            if *live == 0 {
                claims.start_release(&mut slots, id);
            }
        }
    }
}
