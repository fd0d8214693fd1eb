//! Bounded mailbox: a FIFO with a capacity and a strategy for what happens when it is full.
//!
//! The queue never grows past `capacity` ordinary messages. Control messages (replies,
//! supervision signals, stream terminators) bypass the bound and are never dropped by a
//! strategy: losing them would wedge a caller or a supervisor, and there are few of them.

use std::collections::VecDeque;

/// What a full mailbox does with one more message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum MailboxStrategy {
    /// Refuse the new message and give it back to the sender (`MailboxFull`).
    #[default]
    Error,
    /// Discard the oldest queued ordinary message to make room.
    DropOldest,
    /// Discard the incoming message.
    DropNewest,
}

impl MailboxStrategy {
    /// Parses the app-config spelling: `error`, `drop_oldest`, `drop_newest`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "error" => Some(Self::Error),
            "drop_oldest" | "drop-oldest" => Some(Self::DropOldest),
            "drop_newest" | "drop-newest" => Some(Self::DropNewest),
            _ => None,
        }
    }

    /// The app-config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::DropOldest => "drop_oldest",
            Self::DropNewest => "drop_newest",
        }
    }
}

/// The result of offering a message to a mailbox.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer<T> {
    /// Queued; nothing was dropped.
    Queued,
    /// Queued after the oldest ordinary message was discarded; here it is.
    DisplacedOldest(T),
    /// Not queued: the mailbox is full and its strategy is `DropNewest`.
    DroppedNewest(T),
    /// Not queued: the mailbox is full and its strategy is `Error`. The message comes back.
    Full(T),
}

/// A bounded FIFO. Not synchronised: the runtime wraps it in a lock.
#[derive(Debug)]
pub struct Mailbox<T> {
    items: VecDeque<Entry<T>>,
    capacity: usize,
    strategy: MailboxStrategy,
    /// Ordinary (non-control) entries currently queued; the bound applies to these only.
    ordinary: usize,
}

#[derive(Debug)]
struct Entry<T> {
    item: T,
    control: bool,
}

impl<T> Mailbox<T> {
    /// A mailbox holding at most `capacity` ordinary messages (at least 1).
    pub fn new(capacity: usize, strategy: MailboxStrategy) -> Self {
        let capacity = capacity.max(1);
        Self {
            // A small start: an idle actor costs little memory and activation stays cheap. The
            // queue grows to its high-water mark once and never shrinks, so a steady state
            // does not allocate.
            items: VecDeque::with_capacity(capacity.min(4)),
            capacity,
            strategy,
            ordinary: 0,
        }
    }

    /// The bound on ordinary messages.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The strategy applied when full.
    pub fn strategy(&self) -> MailboxStrategy {
        self.strategy
    }

    /// New bounds (a redeploy with other mailbox settings). Nothing queued is dropped: a
    /// mailbox already holding more than `capacity` keeps it all, and offers meet the new
    /// strategy until turns bring it under the bound.
    pub fn set_limits(&mut self, capacity: usize, strategy: MailboxStrategy) {
        self.capacity = capacity.max(1);
        self.strategy = strategy;
    }

    /// Messages queued, control ones included.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// The message that would be popped next, control ones included.
    pub fn front(&self) -> Option<&T> {
        self.items.front().map(|e| &e.item)
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// True when one more ordinary message would hit the strategy.
    pub fn is_full(&self) -> bool {
        self.ordinary >= self.capacity
    }

    /// Offers an ordinary message. Never allocates when the mailbox is full.
    pub fn offer(&mut self, item: T) -> Offer<T> {
        if self.ordinary < self.capacity {
            self.push(item, false);
            return Offer::Queued;
        }
        match self.strategy {
            MailboxStrategy::Error => Offer::Full(item),
            MailboxStrategy::DropNewest => Offer::DroppedNewest(item),
            MailboxStrategy::DropOldest => match self.items.iter().position(|e| !e.control) {
                Some(i) => {
                    let old = self.items.remove(i).expect("index from position");
                    self.ordinary -= 1;
                    self.push(item, false);
                    Offer::DisplacedOldest(old.item)
                }
                // Only control entries queued yet ordinary == capacity cannot happen;
                // refuse rather than exceed the bound.
                None => Offer::Full(item),
            },
        }
    }

    /// Queues a control message; it bypasses the bound and no strategy drops it.
    pub fn push_control(&mut self, item: T) {
        self.push(item, true);
    }

    fn push(&mut self, item: T, control: bool) {
        if !control {
            self.ordinary += 1;
        }
        self.items.push_back(Entry { item, control });
    }

    /// Takes the oldest message.
    pub fn pop(&mut self) -> Option<T> {
        let e = self.items.pop_front()?;
        if !e.control {
            self.ordinary -= 1;
        }
        Some(e.item)
    }

    /// Removes and returns everything queued, oldest first.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.ordinary = 0;
        self.items.drain(..).map(|e| e.item)
    }
}

/// Estimates how long until a full mailbox has room: queue depth × the observed mean turn
/// time, but never less than what the turn in progress is expected to still take (its mean
/// minus what it has run, or, once it has outrun the mean or when no turn has finished yet,
/// as long again as it has run: a sender should not come back every millisecond to an actor
/// that has been busy for seconds). At least 1 ms, so a sender never spins on a zero hint.
/// `running_micros` is how long the current turn has run, 0 when none is running.
pub fn retry_after_ms(depth: usize, mean_turn_micros: u64, running_micros: u64) -> u64 {
    let queued = (depth as u64).saturating_mul(mean_turn_micros.max(1));
    let current = if mean_turn_micros > running_micros {
        mean_turn_micros - running_micros
    } else {
        running_micros
    };
    queued.max(current).div_ceil(1000).max(1)
}

/// Exponentially weighted mean of turn durations, weight 1/8 for the newest sample.
pub fn ewma_micros(previous: u64, sample: u64) -> u64 {
    if previous == 0 {
        return sample;
    }
    previous - previous / 8 + sample / 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_strategy_gives_the_message_back_when_full() {
        let mut m = Mailbox::new(2, MailboxStrategy::Error);
        assert_eq!(m.offer(1), Offer::Queued);
        assert_eq!(m.offer(2), Offer::Queued);
        assert_eq!(m.offer(3), Offer::Full(3));
        assert_eq!(m.pop(), Some(1));
        assert_eq!(m.offer(4), Offer::Queued);
        assert_eq!(m.drain().collect::<Vec<_>>(), vec![2, 4]);
    }

    #[test]
    fn drop_oldest_discards_the_oldest_ordinary_message_and_keeps_control() {
        let mut m = Mailbox::new(2, MailboxStrategy::DropOldest);
        m.push_control(100);
        m.offer(1);
        m.offer(2);
        assert_eq!(m.offer(3), Offer::DisplacedOldest(1));
        assert_eq!(m.drain().collect::<Vec<_>>(), vec![100, 2, 3]);
    }

    #[test]
    fn drop_newest_discards_the_incoming_message() {
        let mut m = Mailbox::new(1, MailboxStrategy::DropNewest);
        m.offer(1);
        assert_eq!(m.offer(2), Offer::DroppedNewest(2));
        assert_eq!(m.pop(), Some(1));
        assert_eq!(m.pop(), None);
    }

    #[test]
    fn control_messages_bypass_the_bound() {
        let mut m = Mailbox::new(1, MailboxStrategy::Error);
        m.offer(1);
        m.push_control(2);
        m.push_control(3);
        assert_eq!(m.len(), 3);
        assert!(m.is_full());
        assert_eq!(m.offer(4), Offer::Full(4));
    }

    #[test]
    fn retry_hint_scales_with_depth_and_is_never_zero() {
        assert_eq!(retry_after_ms(0, 0, 0), 1);
        assert_eq!(retry_after_ms(10, 1500, 0), 15);
        assert_eq!(retry_after_ms(3, 100, 0), 1);
    }

    #[test]
    fn retry_hint_covers_the_turn_in_progress() {
        // No turn finished yet (mean unknown), one running for 300 ms: wait about as long.
        assert_eq!(retry_after_ms(1, 0, 300_000), 300);
        // Mean 100 ms, the turn has run 30: the queue estimate (2 × 100) dominates.
        assert_eq!(retry_after_ms(2, 100_000, 30_000), 200);
        // An outlier: mean 1 ms, this turn already 250 ms in.
        assert_eq!(retry_after_ms(1, 1_000, 250_000), 250);
    }

    #[test]
    fn ewma_moves_toward_samples() {
        let mut m = 0;
        m = ewma_micros(m, 800);
        assert_eq!(m, 800);
        m = ewma_micros(m, 0);
        assert_eq!(m, 700);
    }

    #[test]
    fn new_limits_apply_to_later_offers_and_drop_nothing_queued() {
        let mut m = Mailbox::new(4, MailboxStrategy::Error);
        for i in 0..4 {
            assert_eq!(m.offer(i), Offer::Queued);
        }
        m.set_limits(2, MailboxStrategy::DropNewest);
        assert_eq!(m.len(), 4, "shrinking keeps what is queued");
        assert_eq!(m.offer(9), Offer::DroppedNewest(9));
        assert_eq!(m.pop(), Some(0));
        assert_eq!(m.pop(), Some(1));
        assert_eq!(m.pop(), Some(2));
        assert_eq!(m.offer(5), Offer::Queued);
        assert_eq!(m.offer(6), Offer::DroppedNewest(6));
        m.set_limits(3, MailboxStrategy::DropOldest);
        assert_eq!(m.offer(7), Offer::Queued);
        assert_eq!(m.offer(8), Offer::DisplacedOldest(3));
        assert_eq!(m.capacity(), 3);
    }
}
