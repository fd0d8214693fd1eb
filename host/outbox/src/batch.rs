//! How many rows a relay worker claims per cycle, sized like the AIMD limit: it doubles while
//! claims come back full and every claimed row was attempted (a backlog), and halves when a
//! claim comes back less than half full (the backlog is gone) or rows were left unattempted
//! because the limiter had no permit for them or the claim's lease was running out (the batch
//! is bigger than the receivers can take). Between [`MIN_BATCH`] and the configured
//! `relay_batch_size`, which is the cap.
//!
//! Why adapt: every claim and every settle costs a round trip (a thread hand-off on SQLite, a
//! network round trip and a commit on Postgres) whatever its size, so a backlog drains fastest
//! in big batches; but a big claim of rows the limiter cannot deliver only re-claims them
//! later, and an idle partition gains nothing from a big one. Pure: fed what each cycle did.

/// The smallest batch (and the first). Idle latency does not depend on it: a lone message is
/// claimed by the first claim after its enqueue wakes the worker, whatever the size.
pub(crate) const MIN_BATCH: u32 = 16;

/// One worker's batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchSize {
    current: u32,
    min: u32,
    max: u32,
}

impl BatchSize {
    /// Starts at the minimum; `max` is `relay_batch_size` (at least 1).
    pub fn new(max: u32) -> Self {
        let max = max.max(1);
        let min = MIN_BATCH.min(max);
        Self {
            current: min,
            min,
            max,
        }
    }

    /// Rows to claim next.
    pub fn get(self) -> u32 {
        self.current
    }

    /// Feed one cycle: `claimed` rows came back for a claim of [`Self::get`]; `unattempted`
    /// of them were released because no permit (or no lease time) was left for them.
    pub fn on_cycle(&mut self, claimed: u32, unattempted: u32) {
        let asked = self.current;
        self.current = if unattempted > 0 {
            // Bigger than the receivers take: about what was attempted, at most half.
            (claimed - unattempted.min(claimed)).min(asked / 2)
        } else if claimed >= asked {
            asked.saturating_mul(2)
        } else if claimed < asked / 2 {
            asked / 2
        } else {
            asked
        }
        .clamp(self.min, self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_under_backlog_up_to_the_cap_and_shrinks_when_idle() {
        let mut b = BatchSize::new(1000);
        assert_eq!(b.get(), MIN_BATCH);
        let mut sizes = Vec::new();
        for _ in 0..8 {
            let n = b.get();
            b.on_cycle(n, 0);
            sizes.push(b.get());
        }
        assert_eq!(sizes, [32, 64, 128, 256, 512, 1000, 1000, 1000]);
        // A claim between half and full keeps the size (steady arrivals).
        b.on_cycle(600, 0);
        assert_eq!(b.get(), 1000);
        // Idle: halves per empty claim, down to the minimum.
        let mut idle = Vec::new();
        for _ in 0..8 {
            b.on_cycle(0, 0);
            idle.push(b.get());
        }
        assert_eq!(idle, [500, 250, 125, 62, 31, 16, 16, 16]);
    }

    #[test]
    fn rows_left_for_want_of_permits_shrink_it_to_what_was_attempted() {
        let mut b = BatchSize::new(1000);
        for _ in 0..7 {
            let n = b.get();
            b.on_cycle(n, 0);
        }
        assert_eq!(b.get(), 1000);
        // 1000 claimed, the limiter let 40 through.
        b.on_cycle(1000, 960);
        assert_eq!(b.get(), 40);
        // Never below the minimum, and a full, fully attempted batch grows again.
        b.on_cycle(40, 39);
        assert_eq!(b.get(), MIN_BATCH);
        b.on_cycle(MIN_BATCH, 0);
        assert_eq!(b.get(), 2 * MIN_BATCH);
    }

    #[test]
    fn a_cap_below_the_minimum_is_the_size() {
        let mut b = BatchSize::new(5);
        assert_eq!(b.get(), 5);
        b.on_cycle(5, 0);
        assert_eq!(b.get(), 5);
        b.on_cycle(0, 0);
        assert_eq!(b.get(), 5);
        assert_eq!(BatchSize::new(0).get(), 1);
    }
}
