//! The pure parts of the activation guardrail (`max_activations`): which sampled activation
//! makes room, and when a refused sender should try again.

/// Activations of one actor type a search for room looks at (all of them, up to this many).
pub const LRU_SAMPLE: usize = 64;

/// The window of a rotating LRU sample over `len` activations: all of them up to
/// [`LRU_SAMPLE`], else `LRU_SAMPLE` consecutive ones from `cursor` (wrapping). Exact LRU for
/// small types, approximate (as Redis does) for large ones, so making room costs
/// O(`LRU_SAMPLE`), never O(live actors). Returns `(skip, take)`.
pub fn sample_window(len: usize, cursor: usize) -> (usize, usize) {
    if len > LRU_SAMPLE {
        (cursor % len, LRU_SAMPLE)
    } else {
        (0, len)
    }
}

/// When a busy activation is expected to be idle, in microseconds: its queue drained at its
/// mean turn time, less what its running turn has already taken. With no turn finished yet
/// (`mean_turn_us == 0`), the running turn is guessed to take as long again as it has run
/// (at least 1 ms). Never 0.
pub fn expected_idle_us(queued: usize, running: bool, mean_turn_us: u64, ran_us: u64) -> u64 {
    let ran = if running { ran_us } else { 0 };
    let mean = match mean_turn_us {
        0 => ran.saturating_mul(2).max(1000),
        m => m,
    };
    let turns = queued as u64 + u64::from(running);
    turns.saturating_mul(mean).saturating_sub(ran).max(1)
}

/// The hint a sender refused at the cap gets: when the soonest of the busy activations looked
/// at is expected to be idle, in ms (1 ms … 30 s); 1 s when none is expected to end (every
/// slot held by supervised instances, which only a deploy frees).
pub fn refusal_hint_ms(soonest_idle_us: Option<u64>) -> u64 {
    soonest_idle_us.map_or(1000, |us| us.div_ceil(1000).clamp(1, 30_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_types_are_scanned_whole_large_ones_by_a_rotating_window() {
        assert_eq!(sample_window(10, 7), (0, 10));
        assert_eq!(sample_window(LRU_SAMPLE, 7), (0, LRU_SAMPLE));
        assert_eq!(sample_window(100, 7), (7, LRU_SAMPLE));
        assert_eq!(sample_window(100, 107), (7, LRU_SAMPLE));
    }

    #[test]
    fn idle_estimate_drains_the_queue_less_the_running_turns_progress() {
        // 3 queued + 1 running at 2 ms each, 500 us into the running one.
        assert_eq!(expected_idle_us(3, true, 2000, 500), 7500);
        // Idle except its queue.
        assert_eq!(expected_idle_us(2, false, 2000, 999), 4000);
        // First turn still running: as long again as it has run, at least 1 ms.
        assert_eq!(expected_idle_us(0, true, 0, 5000), 5000 * 2 - 5000);
        assert_eq!(expected_idle_us(0, true, 0, 10), 990);
        // Overrun: never 0.
        assert_eq!(expected_idle_us(0, true, 100, 5000), 1);
    }

    #[test]
    fn hints_are_whole_milliseconds_within_bounds() {
        assert_eq!(refusal_hint_ms(Some(1)), 1);
        assert_eq!(refusal_hint_ms(Some(1001)), 2);
        assert_eq!(refusal_hint_ms(Some(u64::MAX)), 30_000);
        assert_eq!(refusal_hint_ms(None), 1000);
    }
}
