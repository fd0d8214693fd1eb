//! Supervised instances (`count`/`keys` of a child) spread over the cluster: a type's
//! instances are N cluster-wide, not N per member. Each runs on the member placement picks
//! for it among those that have its type deployed, started there without waiting for a
//! message; it moves when placement moves (a member joins or leaves) and is started again on
//! another member once its own is gone (its claim is taken over after the member TTL).
//!
//! Every member runs the same loop over its own view, so no member decides for another:
//! the placed member claims and starts an instance; a member holding one that placement
//! now puts elsewhere ends it once it is idle, which releases the claim for the new one.

use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::placement;

use crate::claims::State;
use crate::route::Target;
use crate::shared::Shared;

/// Places this member's share of the supervised instances whenever the member view
/// changes, and every `every` besides (a claim a dead member still holds is free only after
/// its TTL; a busy instance that must move is ended once it is idle).
pub(crate) async fn keep_placed(shared: Arc<Shared>, every: Duration) {
    let mut view = shared.view.clone();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        shared.place_supervised().await;
        tokio::select! {
            changed = view.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = tick.tick() => {}
        }
    }
}

impl Shared {
    async fn place_supervised(&self) {
        for id in self.host.supervised() {
            let placed = {
                let view = self.view.borrow();
                placement::place(id.as_str(), view.candidates(id.actor_type()))
                    .map(|n| n == self.node)
            };
            let held = matches!(self.claims.state(&id), State::Held);
            match placed {
                Some(true) => {
                    // Ask the directory, not the hint: a hint names the member that held it
                    // when this host last looked, and no call of ours would correct it.
                    if !held {
                        self.note_owner(&id, None);
                    }
                    match self.locate(&id, false).await {
                        Ok(Target::Here) => {
                            if let Err(e) = self.host.activate_supervised(&id) {
                                tracing::warn!(actor = %id, error = %e, "cluster: starting a supervised instance failed");
                                self.claims.settle(&id);
                            }
                        }
                        // Still on the member placement picked before; it ends it when idle.
                        Ok(Target::There(_)) => {}
                        Err(e) => {
                            tracing::debug!(actor = %id, error = %e, "cluster: supervised instance not placed yet");
                        }
                    }
                }
                // Placement moved it to another member: end it here when idle.
                Some(false) if held => {
                    self.host.deactivate_idle(&id);
                }
                _ => {}
            }
        }
    }
}
