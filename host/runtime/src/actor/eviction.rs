//! Making room under `max_activations`: a new activation takes a free slot, or the slot of the
//! least recently used idle activation in scope, closed on the spot; with none idle it is
//! refused `RESOURCE_EXHAUSTED` with a hint of when one is expected to be idle. Synchronous:
//! the sender learns of a refusal before anything is queued, so the outbox relay sees it as
//! the capacity signal it is (the limit halves, the message backs off) and nothing is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_flow::activation::{LRU_SAMPLE, expected_idle_us, refusal_hint_ms, sample_window};

use super::cell::{ActorCell, InboxState};
use super::registry::{Registry, TypeEntry};
use super::slots::{Slot, Slots};
use crate::clock::coarse_now;
use crate::error::{ActorError, ErrorCode};
use crate::id::ActorId;

/// Where the next LRU sample starts; Relaxed: any spread of starts will do.
static LRU_CURSOR: AtomicUsize = AtomicUsize::new(0);

/// Attempts before refusing: each failed attempt lost a race for a victim or a freed count.
const ATTEMPTS: usize = 4;

/// Takes a slot for a new activation `id` of `entry`'s type, making room if the host or the
/// type is at its cap. Never waits.
pub(crate) fn reserve(
    registry: &Registry,
    slots: &Arc<Slots>,
    host_cap: u32,
    entry: &Arc<TypeEntry>,
    id: &ActorId,
) -> Result<Slot, ActorError> {
    let ty = &entry.ty;
    let mut refusal = None;
    for _ in 0..ATTEMPTS {
        let type_full = match Slot::take(slots, ty, host_cap) {
            Ok(slot) => return Ok(slot),
            Err(type_full) => type_full,
        };
        // At the type's cap only one of its own can make room; at the host's, anyone's.
        let scope = if type_full {
            vec![entry.clone()]
        } else {
            registry.all()
        };
        let scan = Scan::of(&scope);
        let Some(victim) = scan.best else {
            let (what, cap) = if type_full {
                (
                    format!("actor type {}", ty.name),
                    ty.max_activations.load(Ordering::Relaxed),
                )
            } else {
                ("host".to_string(), host_cap)
            };
            refusal = Some(
                ActorError::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "{what} at max_activations={cap} with no idle actor to deactivate; cannot activate {id}"
                    ),
                )
                .with_retry_after(refusal_hint_ms(scan.soonest_idle_us)),
            );
            break;
        };
        if let Some(slot) =
            close_idle(registry, &victim).and_then(|s| s.hand_over(ty, victim.live.clone()))
        {
            tracing::debug!(actor = %victim.id, for_actor = %id, "deactivated the least recently used idle actor to make room");
            return Ok(slot);
        }
    }
    Err(refusal.unwrap_or_else(|| {
        ActorError::new(
            ErrorCode::ResourceExhausted,
            format!("max_activations reached; cannot activate {id} (contended)"),
        )
        .with_retry_after(1)
    }))
}

/// Closes `victim` if it is still idle (not mid-turn, nothing queued) and takes its slot.
fn close_idle(registry: &Registry, victim: &Arc<ActorCell>) -> Option<Slot> {
    let entry = registry.get(&victim.ty.name)?;
    if !entry.close_if(victim, |inbox| !inbox.running && inbox.mb.is_empty()) {
        return None;
    }
    let slot = victim.slot.lock().take();
    victim.ty.metrics.evictions.increment(1);
    // Its task sees the closed inbox and ends, dropping the instance.
    victim.notify.notify_one();
    slot
}

/// One pass over (a sample of) the activations in scope.
#[derive(Default)]
struct Scan {
    /// The least recently used idle activation, with its last-active stamp.
    best: Option<Arc<ActorCell>>,
    best_at: u64,
    /// When the soonest busy activation looked at is expected to be idle.
    soonest_idle_us: Option<u64>,
}

impl Scan {
    /// A sample of each type first; every activation only when the sample held none idle.
    fn of(scope: &[Arc<TypeEntry>]) -> Self {
        let mut scan = Self::default();
        scan.visit(scope, true);
        if scan.best.is_none() && scope.iter().any(|t| t.len() > LRU_SAMPLE) {
            scan.visit(scope, false);
        }
        scan
    }

    fn visit(&mut self, scope: &[Arc<TypeEntry>], sample: bool) {
        let now = coarse_now();
        for entry in scope {
            let cells = if sample {
                let (skip, take) = sample_window(
                    entry.len(),
                    LRU_CURSOR.fetch_add(LRU_SAMPLE, Ordering::Relaxed),
                );
                entry.sample(skip, take)
            } else {
                entry.cells()
            };
            for c in cells {
                self.look_at(c, now);
            }
        }
    }

    fn look_at(&mut self, c: Arc<ActorCell>, now: u64) {
        if c.eager {
            return;
        }
        let (running, queued) = {
            let inbox = c.inbox.lock();
            if inbox.state != InboxState::Open {
                return;
            }
            (inbox.running, inbox.mb.len())
        };
        let at = c.last_active.load(Ordering::Relaxed);
        if !running && queued == 0 {
            if self.best.is_none() || at < self.best_at {
                self.best = Some(c);
                self.best_at = at;
            }
            return;
        }
        let ran_us = now.saturating_sub(at) / 1000;
        let idle_in = expected_idle_us(
            queued,
            running,
            c.mean_turn_us.load(Ordering::Relaxed),
            ran_us,
        );
        self.soonest_idle_us = Some(self.soonest_idle_us.map_or(idle_in, |s| s.min(idle_in)));
    }
}
