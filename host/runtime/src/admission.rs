//! Admission control: caps that refuse *arrivals* before they are queued, so a saturated host
//! sheds new work in microseconds instead of accepting it and failing all of it at the deadline.
//!
//! An arrival is a call with an empty call chain (`CallOptions::internal == false`): the HTTP
//! ingress, `sluice call`, the Rust host API. Calls made inside a turn, outbox relay
//! deliveries, timer deliveries and the runtime's own turns are never refused — refusing them
//! would destroy work already admitted rather than shed new work. They still count in depth.
//!
//! Depth, precisely (both are "queued + running" at the moment of the refusal):
//! - **actor scope** (`max_queued` of the type, else `max_queued_per_actor`): messages in the
//!   target actor's mailbox, plus 1 while its task holds a popped message (the running turn,
//!   including an activation it waits on). Read under the inbox lock `offer` takes anyway, so
//!   the check is exact and adds no lock.
//! - **host scope** (`max_inflight_turns`): every message queued in any mailbox on this host
//!   plus every turn running. Each message carries a [`HostPermit`] from the moment it is
//!   queued until its turn ends (or it is skipped, displaced or discarded); dropping the
//!   permit releases the slot, so no exit path can leak one.
//!
//! With every cap at 0 (the default) the call path does one `Relaxed` load of a cached bool
//! and a branch: no atomic read-modify-write, no lock, no allocation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::config::HostConfig;
use crate::error::{ActorError, OverloadScope};

/// One slot of the host-wide depth, owned by a queued message (and then its turn).
pub(crate) struct HostPermit(Arc<AtomicU64>);

impl Drop for HostPermit {
    fn drop(&mut self) {
        // Relaxed: the depth is a gauge; it publishes no other memory.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The host's admission state: the host-wide cap, its depth, and the refusal counters.
pub(crate) struct Admission {
    /// `max_inflight_turns`; 0 = off (then no permit is ever taken).
    host_limit: u64,
    /// Whether any cap is configured (host config or any deployed type). Set, never cleared:
    /// a redeploy that removes a type's cap leaves the gate on, which costs a couple of loads
    /// per call and changes no outcome.
    any: AtomicBool,
    depth: Arc<AtomicU64>,
    refused_actor: metrics::Counter,
    refused_host: metrics::Counter,
}

impl Admission {
    pub fn new(cfg: &HostConfig) -> Self {
        Self {
            host_limit: cfg.max_inflight_turns,
            any: AtomicBool::new(cfg.max_inflight_turns > 0 || cfg.max_queued_per_actor > 0),
            depth: Arc::new(AtomicU64::new(0)),
            refused_actor: metrics::counter!("sluice_admission_refusals_total", "scope" => "actor"),
            refused_host: metrics::counter!("sluice_admission_refusals_total", "scope" => "host"),
        }
    }

    /// Records that a deployed type has a cap of `cap` (0 = none).
    pub fn note_type_cap(&self, cap: u64) {
        if cap > 0 {
            self.any.store(true, Ordering::Relaxed);
        }
    }

    /// Whether any cap is on. Relaxed: a deploy that turns a cap on takes effect for calls
    /// that observe it; no other memory hangs off this flag.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// The host-scope gate. An arrival past the cap is refused; anything else gets a permit
    /// (none when the host cap is off). The reservation is a single `fetch_add`, so concurrent
    /// arrivals can never overshoot the cap.
    pub fn admit_host(&self, arrival: bool) -> Result<Option<HostPermit>, ActorError> {
        if self.host_limit == 0 {
            return Ok(None);
        }
        let prev = self.depth.fetch_add(1, Ordering::Relaxed);
        if arrival && prev >= self.host_limit {
            self.depth.fetch_sub(1, Ordering::Relaxed);
            self.refused_host.increment(1);
            return Err(ActorError::overloaded(
                OverloadScope::Host,
                prev,
                self.host_limit,
            ));
        }
        Ok(Some(HostPermit(self.depth.clone())))
    }

    /// Counts an actor-scope refusal (decided under the target's inbox lock).
    pub fn count_actor_refusal(&self) {
        self.refused_actor.increment(1);
    }

    /// Queued + running turns host-wide; 0 when the host cap is off (not tracked then).
    pub fn host_depth(&self) -> u64 {
        self.depth.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_cap_refuses_arrivals_only_and_permits_release_on_drop() {
        let a = Admission::new(&HostConfig {
            max_inflight_turns: 2,
            ..HostConfig::default()
        });
        assert!(a.enabled());
        let p1 = a.admit_host(true).unwrap();
        let p2 = a.admit_host(true).unwrap();
        let e = a.admit_host(true).err().expect("third arrival refused");
        let o = e.overload.unwrap();
        assert_eq!((o.scope, o.depth, o.limit), (OverloadScope::Host, 2, 2));
        // Internal work is never refused, and counts.
        let p3 = a.admit_host(false).unwrap();
        assert_eq!(a.host_depth(), 3);
        drop((p1, p2, p3));
        assert_eq!(a.host_depth(), 0);
        assert!(a.admit_host(true).unwrap().is_some());
    }

    #[test]
    fn caps_off_take_no_permit() {
        let a = Admission::new(&HostConfig::default());
        assert!(!a.enabled());
        assert!(a.admit_host(true).unwrap().is_none());
        a.note_type_cap(0);
        assert!(!a.enabled());
        a.note_type_cap(5);
        assert!(a.enabled());
    }
}
