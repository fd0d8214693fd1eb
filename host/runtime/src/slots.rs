//! Activation slots: `max_activations` (host-wide and per actor type) as counted tokens.
//!
//! A cell takes its slot when it is created, synchronously, before any message is queued in
//! it, and keeps it until the cell ends. So a tell or ask to a key that cannot be activated is
//! refused at once, where the sender sees it (`RESOURCE_EXHAUSTED` with a `retry_after_ms`
//! hint, which the outbox relay treats like a full mailbox), instead of being accepted and then
//! lost when the activation fails later. At the cap, the least recently used idle activation in
//! scope is closed on the spot and its slot handed to the newcomer; its instance is dropped by
//! its own task right after, and the newcomer waits for that before instantiating.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::actor::{ActorCell, InboxState, coarse_now};
use crate::error::{ActorError, ErrorCode};
use crate::host::HostInner;
use crate::registry::{ActorId, ActorType};

/// The host-wide slot count, shared by every [`Slot`] (not the whole host, so a slot held in a
/// cell does not keep the host alive).
#[derive(Default)]
pub(crate) struct Slots {
    /// Slots taken, at most `max_activations`.
    pub taken: AtomicU32,
    /// Signalled whenever an instance is dropped (a successor may be waiting for its memory).
    pub instance_dropped: Notify,
}

/// One counted activation (host-wide and in its type); given back when dropped.
pub(crate) struct Slot {
    slots: Arc<Slots>,
    ty: Arc<ActorType>,
    /// The evicted activation whose instance still occupies engine memory; the holder waits
    /// for it to be dropped before instantiating (see [`Slot::wait_for_predecessor`]).
    predecessor: Option<Arc<ActorCell>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.ty.live.fetch_sub(1, Ordering::AcqRel);
        self.slots.taken.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long a newcomer waits for an evicted instance to be dropped before instantiating
/// anyway (the engine's pool has a few spare slots for exactly this overlap).
const PREDECESSOR_WAIT: Duration = Duration::from_secs(2);

impl Slot {
    /// The evicted activation this slot was taken from, if its instance may still be alive.
    pub fn take_predecessor(&mut self) -> Option<Arc<ActorCell>> {
        self.predecessor.take()
    }
}

/// Waits (bounded) until `prev`'s instance is dropped, so the engine's pool never holds more
/// instances than `max_activations` for long.
pub(crate) async fn wait_until_dropped(prev: &ActorCell, slots: &Slots) {
    let until = Instant::now() + PREDECESSOR_WAIT;
    loop {
        let dropped = slots.instance_dropped.notified();
        tokio::pin!(dropped);
        dropped.as_mut().enable();
        if !prev.live.load(Ordering::Acquire) {
            return;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || tokio::time::timeout(left, dropped).await.is_err() {
            tracing::debug!(actor = %prev.id, "evicted instance still not dropped; activating anyway");
            return;
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Host,
    Type,
}

/// Attempts to take a slot before refusing: each failed attempt lost a race for a victim or a
/// freed count to another activation.
const ATTEMPTS: usize = 4;

/// The hint when nothing in scope is expected to become idle (every slot held by eager
/// instances): slots free only on deploys, so retry slowly.
const HINT_NOTHING_ENDING_MS: u64 = 1000;

/// Takes a slot for a new activation of `ty`, synchronously. At the cap, closes the least
/// recently used idle activation in scope and takes over its slot; with none idle, refuses
/// `RESOURCE_EXHAUSTED` with a `retry_after_ms` hint (when the busiest-soonest-done actor in
/// scope is expected to be idle). Never waits: a refusal is the sender's to handle.
pub(crate) fn reserve(
    host: &HostInner,
    ty: &Arc<ActorType>,
    id: &ActorId,
) -> Result<Slot, ActorError> {
    let mut refusal = None;
    for _ in 0..ATTEMPTS {
        let host_cap = host.config.max_activations;
        let type_cap = ty.max_activations.load(Ordering::Relaxed);
        let scope = if !take(&host.slots.taken, host_cap) {
            if type_cap > 0 && ty.live.load(Ordering::Acquire) >= type_cap {
                Scope::Type
            } else {
                Scope::Host
            }
        } else if type_cap > 0 && !take(&ty.live, type_cap) {
            host.slots.taken.fetch_sub(1, Ordering::AcqRel);
            Scope::Type
        } else {
            if type_cap == 0 {
                ty.live.fetch_add(1, Ordering::AcqRel);
            }
            return Ok(Slot {
                slots: host.slots.clone(),
                ty: ty.clone(),
                predecessor: None,
            });
        };
        let (victim, hint_ms) = lru_idle(host, ty, scope);
        let Some(victim) = victim else {
            let (what, cap) = match scope {
                Scope::Host => ("host".to_string(), host_cap),
                Scope::Type => (format!("actor type {}", ty.name), type_cap),
            };
            refusal = Some(
                ActorError::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "{what} at max_activations={cap} with no idle actor to deactivate; cannot activate {id}"
                    ),
                )
                .with_retry_after(hint_ms),
            );
            break;
        };
        if let Some(mut slot) = close_idle(&victim).and_then(|s| retype(s, ty, type_cap)) {
            tracing::debug!(actor = %victim.id, for_actor = %id, "deactivated the least recently used idle actor to make room");
            slot.predecessor = Some(victim);
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

/// Moves a slot counted in another type into `ty` (the host count is unchanged). `None` when
/// `ty` reached its own cap meanwhile: the slot is given back.
fn retype(mut slot: Slot, ty: &Arc<ActorType>, type_cap: u32) -> Option<Slot> {
    if Arc::ptr_eq(&slot.ty, ty) {
        return Some(slot);
    }
    if type_cap > 0 {
        if !take(&ty.live, type_cap) {
            return None;
        }
    } else {
        ty.live.fetch_add(1, Ordering::AcqRel);
    }
    slot.ty.live.fetch_sub(1, Ordering::AcqRel);
    // The old type's count went down by hand; point the slot at the new one without running
    // its Drop (which would count both down).
    let old = std::mem::replace(&mut slot.ty, ty.clone());
    drop(old);
    Some(slot)
}

/// Closes `victim` if it is still idle (not eager, not mid-turn, nothing queued, open) and
/// returns its slot. Lock order: type's cell map, then the inbox (as everywhere).
fn close_idle(victim: &Arc<ActorCell>) -> Option<Slot> {
    {
        let mut cells = victim.ty.cells.lock();
        let mut inbox = victim.inbox.lock();
        if inbox.running || !inbox.mb.is_empty() || inbox.state != InboxState::Open {
            return None;
        }
        inbox.state = InboxState::Closed;
        if cells
            .get(victim.id.key())
            .is_some_and(|c| Arc::ptr_eq(c, victim))
        {
            cells.remove(victim.id.key());
        }
    }
    let slot = victim.slot.lock().take();
    victim.ty.metrics.evictions.increment(1);
    // Its task sees the closed inbox and ends, dropping the instance.
    victim.notify.notify_one();
    slot
}

/// Increments `n` unless it already reached `cap`.
fn take(n: &AtomicU32, cap: u32) -> bool {
    n.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
        (v < cap).then_some(v + 1)
    })
    .is_ok()
}

/// Activations of one type an eviction looks at (all of them, up to this many).
pub(crate) const LRU_SAMPLE: usize = 64;
/// Where the next sample starts; Relaxed: any spread of starts will do.
static LRU_CURSOR: AtomicUsize = AtomicUsize::new(0);

/// The least recently used idle activation in `scope`, and (for a refusal) in how many ms
/// the soonest-done busy activation looked at is expected to be idle.
///
/// Exact LRU up to [`LRU_SAMPLE`] activations of a type; beyond, the least recently used of
/// `LRU_SAMPLE` consecutive cells from a rotating start (approximate LRU, as Redis does), so
/// making room costs O(LRU_SAMPLE), not O(live actors). Only when no sampled cell is idle does
/// it fall back to looking at every one.
fn lru_idle(host: &HostInner, ty: &Arc<ActorType>, scope: Scope) -> (Option<Arc<ActorCell>>, u64) {
    let types = match scope {
        Scope::Host => host.types(),
        Scope::Type => vec![ty.clone()],
    };
    let mut scan = Scan::default();
    scan.run(&types, true);
    if scan.best.is_none() && types.iter().any(|t| t.cells.lock().len() > LRU_SAMPLE) {
        scan.run(&types, false);
    }
    let hint_ms = scan.soonest_idle_us.map_or(HINT_NOTHING_ENDING_MS, |us| {
        us.div_ceil(1000).clamp(1, 30_000)
    });
    (scan.best.map(|(_, c)| c), hint_ms)
}

#[derive(Default)]
struct Scan {
    best: Option<(u64, Arc<ActorCell>)>,
    soonest_idle_us: Option<u64>,
}

impl Scan {
    /// Looks at `types`' cells (a sample of each, or all).
    fn run(&mut self, types: &[Arc<ActorType>], sample: bool) {
        let now = coarse_now();
        for ty in types {
            let cells: Vec<Arc<ActorCell>> = {
                let map = ty.cells.lock();
                let n = map.len();
                let (skip, take) = if sample && n > LRU_SAMPLE {
                    (
                        LRU_CURSOR.fetch_add(LRU_SAMPLE, Ordering::Relaxed) % n,
                        LRU_SAMPLE,
                    )
                } else {
                    (0, n)
                };
                map.values()
                    .cycle()
                    .skip(skip)
                    .take(take)
                    .cloned()
                    .collect()
            };
            for c in cells {
                if c.eager {
                    continue;
                }
                let (running, queued, open) = {
                    let inbox = c.inbox.lock();
                    (
                        inbox.running,
                        inbox.mb.len(),
                        inbox.state == InboxState::Open,
                    )
                };
                if !open {
                    continue;
                }
                let at = c.last_active.load(Ordering::Relaxed);
                if !running && queued == 0 {
                    if self.best.as_ref().is_none_or(|(t, _)| at < *t) {
                        self.best = Some((at, c));
                    }
                    continue;
                }
                // Busy: expected idle after its queue drains at its mean turn time, less what
                // the running turn has already taken.
                let ran = if running {
                    now.saturating_sub(at) / 1000
                } else {
                    0
                };
                // No turn finished yet: guess the running one takes as long again (≥ 1 ms).
                let mean = match c.mean_turn_us.load(Ordering::Relaxed) {
                    0 => ran.max(1000),
                    m => m,
                };
                let turns = queued as u64 + u64::from(running);
                let left = turns.saturating_mul(mean).saturating_sub(ran).max(1);
                self.soonest_idle_us = Some(self.soonest_idle_us.map_or(left, |s| s.min(left)));
            }
        }
    }
}
