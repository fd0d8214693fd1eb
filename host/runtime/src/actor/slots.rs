//! Activation slots: `max_activations` (host-wide and per actor type) as counted tokens.
//!
//! A cell takes its slot when it is created, synchronously, before any message is queued in
//! it, and keeps it until the cell ends (across crashes, restarts and deploys). So a message
//! to a key that cannot be activated is refused where its sender sees it (see
//! `eviction.rs`), never accepted and then lost when an activation fails later.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::actor_type::ActorType;

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
    /// The `live` flag of the evicted activation whose instance may still occupy engine
    /// memory; the holder waits for it to clear before instantiating.
    predecessor: Option<Arc<AtomicBool>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.ty.live.fetch_sub(1, Ordering::AcqRel);
        self.slots.taken.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Slot {
    /// Takes a free slot for `ty` under `host_cap` and the type's own cap, if one is free.
    /// `Err` says which cap is reached: `true` for the type's.
    pub fn take(slots: &Arc<Slots>, ty: &Arc<ActorType>, host_cap: u32) -> Result<Self, bool> {
        let type_cap = ty.max_activations.load(Ordering::Relaxed);
        if !bounded_increment(&slots.taken, host_cap) {
            return Err(type_cap > 0 && ty.live.load(Ordering::Acquire) >= type_cap);
        }
        if type_cap > 0 {
            if !bounded_increment(&ty.live, type_cap) {
                slots.taken.fetch_sub(1, Ordering::AcqRel);
                return Err(true);
            }
        } else {
            ty.live.fetch_add(1, Ordering::AcqRel);
        }
        Ok(Self {
            slots: slots.clone(),
            ty: ty.clone(),
            predecessor: None,
        })
    }

    /// This slot, taken over from an evicted activation whose instance may still be alive
    /// (`live`), counted in `ty` from now on (the host count is unchanged). `None` when `ty`
    /// reached its own cap meanwhile: the slot is given back.
    pub fn hand_over(mut self, ty: &Arc<ActorType>, live: Arc<AtomicBool>) -> Option<Self> {
        if !Arc::ptr_eq(&self.ty, ty) {
            let type_cap = ty.max_activations.load(Ordering::Relaxed);
            if type_cap > 0 {
                if !bounded_increment(&ty.live, type_cap) {
                    return None;
                }
            } else {
                ty.live.fetch_add(1, Ordering::AcqRel);
            }
            self.ty.live.fetch_sub(1, Ordering::AcqRel);
            self.ty = ty.clone();
        }
        self.predecessor = Some(live);
        Some(self)
    }

    /// The `live` flag of the activation this slot was taken from, if any.
    pub fn take_predecessor(&mut self) -> Option<Arc<AtomicBool>> {
        self.predecessor.take()
    }
}

/// How long a newcomer waits for an evicted instance to be dropped before instantiating
/// anyway (the engine's pool has a few spare slots for exactly this overlap).
const PREDECESSOR_WAIT: Duration = Duration::from_secs(2);

/// Waits (bounded) until the instance whose `live` flag this is has been dropped, so the
/// engine's pool never holds more instances than `max_activations` for long.
pub(crate) async fn wait_until_dropped(live: &AtomicBool, slots: &Slots) {
    let until = Instant::now() + PREDECESSOR_WAIT;
    loop {
        let dropped = slots.instance_dropped.notified();
        tokio::pin!(dropped);
        dropped.as_mut().enable();
        if !live.load(Ordering::Acquire) {
            return;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || tokio::time::timeout(left, dropped).await.is_err() {
            tracing::debug!("evicted instance still not dropped; activating anyway");
            return;
        }
    }
}

/// Increments `n` unless it already reached `cap`.
fn bounded_increment(n: &AtomicU32, cap: u32) -> bool {
    n.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
        (v < cap).then_some(v + 1)
    })
    .is_ok()
}
