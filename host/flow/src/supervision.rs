//! Restart intensity, as Erlang/OTP supervisors define it: at most `max` restarts within
//! `window`; one more and the child is stopped.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The crashes of one child within its window. Time comes in as `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartIntensity {
    max: u32,
    window: Duration,
    crashes: VecDeque<Instant>,
}

impl RestartIntensity {
    /// At most `max` restarts within `window`.
    pub fn new(max: u32, window: Duration) -> Self {
        Self {
            max,
            window,
            crashes: VecDeque::new(),
        }
    }

    /// Records a crash at `now`; false when more than `max` crashes fall within the window
    /// ending at `now` (the child must be stopped). Crashes older than the window are
    /// forgotten, so memory is bounded by `max + 1`.
    pub fn record(&mut self, now: Instant) -> bool {
        while self
            .crashes
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.window)
        {
            self.crashes.pop_front();
        }
        self.crashes.push_back(now);
        self.crashes.len() <= self.max as usize
    }

    /// Takes the limits of a redeployed child, keeping the crashes already recorded.
    pub fn set_limits(&mut self, max: u32, window: Duration) {
        self.max = max;
        self.window = window;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_intensity_counts_only_crashes_within_the_window() {
        let (t0, w) = (Instant::now(), Duration::from_secs(10));
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut c = RestartIntensity::new(3, w);
        // 3 restarts in 10 s are allowed; a 4th crash within the window is not.
        assert!(c.record(at(0)));
        assert!(c.record(at(1)));
        assert!(c.record(at(2)));
        assert!(!c.clone().record(at(3)));
        // At 11 s the crash at 0 s is more than 10 s old and no longer counts; 1, 2 and 11 do.
        assert!(c.record(at(11)));
        assert_eq!(c.crashes, [at(1), at(2), at(11)]);
        // Without restarts allowed, the first crash stops the actor.
        assert!(!RestartIntensity::new(0, w).record(at(0)));
    }
}
