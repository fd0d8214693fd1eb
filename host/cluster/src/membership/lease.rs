//! A member's lease on its own liveness, as a pure state machine (time comes in as `now`).
//!
//! The server expires a member entry `ttl` after the heartbeat that last wrote it, by the
//! server's clock; that write happened after the host *sent* it. So a host that counts
//! `ttl - margin` from the send instant of its last acknowledged heartbeat stops believing it
//! is a member at least `margin` before anyone else can see it gone, whatever the network
//! delay. The runtime must have stopped every clustered actor by then (see docs/cluster.md,
//! "Single activation").

use std::time::{Duration, Instant};

/// Where the lease stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseStatus {
    /// Valid until the instant: the host may run its actors.
    Valid {
        /// When it lapses unless renewed.
        until: Instant,
    },
    /// Not renewed in time (NATS unreachable or slow): stop running clustered actors. It may
    /// become valid again if a heartbeat lands before the server expires the entry.
    Lapsed,
    /// The server no longer holds this incarnation's entry (expired, or taken by a newer
    /// incarnation of the same node id): membership is over for good; rejoin as a new
    /// incarnation after stopping every clustered actor.
    Fenced,
}

impl LeaseStatus {
    /// Whether the host may run clustered actors at `now`.
    pub fn is_valid_at(&self, now: Instant) -> bool {
        matches!(self, Self::Valid { until } if now < *until)
    }
}

/// The lease arithmetic.
#[derive(Debug, Clone)]
pub struct Lease {
    /// How long after a heartbeat's send instant the lease holds: `ttl - margin`.
    hold: Duration,
    until: Option<Instant>,
    fenced: bool,
}

impl Lease {
    /// A lease that holds `ttl - margin` after each acknowledged heartbeat's send instant.
    /// `margin` is the time the host needs to stop its actors; it is clamped below `ttl`.
    pub fn new(ttl: Duration, margin: Duration) -> Self {
        Self {
            hold: ttl.saturating_sub(margin.min(ttl)),
            until: None,
            fenced: false,
        }
    }

    /// A heartbeat sent at `sent_at` was acknowledged. Never shortens the lease (an older
    /// heartbeat's ack arriving late changes nothing) and never revives a fenced one.
    pub fn renewed(&mut self, sent_at: Instant) {
        if self.fenced {
            return;
        }
        let candidate = sent_at + self.hold;
        self.until = Some(self.until.map_or(candidate, |u| u.max(candidate)));
    }

    /// The server refused this incarnation's entry: the lease is over for good.
    pub fn fence(&mut self) {
        self.fenced = true;
        self.until = None;
    }

    /// The status at `now`.
    pub fn status(&self, now: Instant) -> LeaseStatus {
        match self.until {
            _ if self.fenced => LeaseStatus::Fenced,
            Some(until) if now < until => LeaseStatus::Valid { until },
            _ => LeaseStatus::Lapsed,
        }
    }

    /// When the lease lapses unless renewed (`None` before the first ack or once fenced).
    pub fn until(&self) -> Option<Instant> {
        self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(5);
    const MARGIN: Duration = Duration::from_secs(1);

    #[test]
    fn holds_ttl_minus_margin_from_the_send_instant() {
        let t0 = Instant::now();
        let mut l = Lease::new(TTL, MARGIN);
        assert_eq!(l.status(t0), LeaseStatus::Lapsed);
        l.renewed(t0);
        let until = t0 + Duration::from_secs(4);
        assert_eq!(
            l.status(t0 + Duration::from_secs(3)),
            LeaseStatus::Valid { until }
        );
        assert!(l.status(t0 + Duration::from_millis(3999)).is_valid_at(t0));
        assert_eq!(l.status(until), LeaseStatus::Lapsed);
    }

    #[test]
    fn a_late_ack_of_an_older_heartbeat_never_shortens_it() {
        let t0 = Instant::now();
        let mut l = Lease::new(TTL, MARGIN);
        l.renewed(t0 + Duration::from_secs(2));
        l.renewed(t0);
        assert_eq!(l.until(), Some(t0 + Duration::from_secs(6)));
    }

    #[test]
    fn a_lapsed_lease_comes_back_with_a_heartbeat_but_a_fenced_one_never_does() {
        let t0 = Instant::now();
        let mut l = Lease::new(TTL, MARGIN);
        l.renewed(t0);
        let later = t0 + Duration::from_secs(10);
        assert_eq!(l.status(later), LeaseStatus::Lapsed);
        l.renewed(later);
        assert!(l.status(later).is_valid_at(later));
        l.fence();
        l.renewed(later);
        assert_eq!(l.status(later), LeaseStatus::Fenced);
        assert!(!l.status(later).is_valid_at(later));
    }

    #[test]
    fn margin_is_clamped_below_the_ttl() {
        let t0 = Instant::now();
        let mut l = Lease::new(TTL, Duration::from_secs(60));
        l.renewed(t0);
        assert_eq!(l.status(t0), LeaseStatus::Lapsed);
    }
}
