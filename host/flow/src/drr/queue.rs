//! The [`DrrQueue`] state machine (see the module docs for the policy).

use super::{DrrConfig, DrrObserver, EvictReason, Msg, PushError};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::time::Instant;

/// A message handed out by the drain, with the principal it was queued for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drained<K, T> {
    /// The principal whose bucket it came from.
    pub principal: K,
    /// The message, as pushed.
    pub msg: Msg<T>,
}

struct Entry<T> {
    seq: u64,
    msg: Msg<T>,
}

struct Bucket<T> {
    queue: VecDeque<Entry<T>>,
    bytes: usize,
    deficit: usize,
    /// Distinguishes this allocation from an earlier bucket of the same
    /// principal whose rotation slot may still be in `order`.
    generation: u64,
    /// The bucket's DRR turn has started (quantum added) and not yet ended.
    in_turn: bool,
    sent_this_turn: bool,
    /// Sequence number of the first non-control message, if any. Mirrors the
    /// bucket's entry in `DrrQueue::evictable`.
    evictable_seq: Option<u64>,
}

impl<T> Bucket<T> {
    fn first_evictable_from(&self, from: usize) -> Option<u64> {
        self.queue
            .iter()
            .skip(from)
            .find(|e| !e.msg.control)
            .map(|e| e.seq)
    }
}

/// Per-principal FIFO queues under one byte budget, drained by deficit
/// round-robin. `K` identifies a principal; `T` is the queued value.
///
/// Complexity with `N` active principals: `push` is `O(log N)` plus
/// `O(log N)` per eviction; `pop` is amortised `O(1)` plus `O(log N)` index
/// upkeep. Scans skip only control messages at the front of one bucket.
pub struct DrrQueue<K, T> {
    config: DrrConfig,
    buckets: HashMap<K, Bucket<T>>,
    /// DRR rotation: `(principal, generation)`. Entries whose bucket is gone
    /// (evicted empty) or was re-allocated are skipped lazily and compacted
    /// when they outnumber live ones, so removal from the middle is O(1).
    order: VecDeque<(K, u64)>,
    /// Sequence number of each bucket's head *when that head is a control
    /// message* → principal. With `evictable` it yields the oldest message
    /// (queue age): every entry of both maps is a queued message, and the
    /// oldest queued message is some bucket's head, which is in one of them.
    /// Kept separate so the common all-data flow pays no upkeep for it.
    pinned_heads: BTreeMap<u64, K>,
    /// Sequence number of each bucket's oldest evictable message → principal.
    /// Its first entry is the eviction victim.
    evictable: BTreeMap<u64, K>,
    bytes: usize,
    evictable_bytes: usize,
    len: usize,
    next_seq: u64,
    next_generation: u64,
    evicted_total: u64,
    starved_total: u64,
    refused_total: u64,
}

impl<K: Hash + Eq + Clone, T> DrrQueue<K, T> {
    pub(super) fn new(config: DrrConfig) -> Self {
        Self {
            config,
            buckets: HashMap::new(),
            order: VecDeque::new(),
            pinned_heads: BTreeMap::new(),
            evictable: BTreeMap::new(),
            bytes: 0,
            evictable_bytes: 0,
            len: 0,
            next_seq: 0,
            next_generation: 0,
            evicted_total: 0,
            starved_total: 0,
            refused_total: 0,
        }
    }

    /// The bounds this queue was built with.
    pub fn config(&self) -> &DrrConfig {
        &self.config
    }

    /// Messages queued across all principals.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes charged against the budget right now (never above it).
    pub fn bytes_in_use(&self) -> usize {
        self.bytes
    }

    /// Principals with at least one queued message (= allocated buckets).
    pub fn active_principals(&self) -> usize {
        self.buckets.len()
    }

    /// Messages queued for one principal.
    pub fn principal_len(&self, principal: &K) -> usize {
        self.buckets.get(principal).map_or(0, |b| b.queue.len())
    }

    /// When the oldest queued message (control or not) was enqueued.
    pub fn oldest_enqueued_at(&self) -> Option<Instant> {
        let k = match (
            self.evictable.first_key_value(),
            self.pinned_heads.first_key_value(),
        ) {
            (Some((a, ka)), Some((b, kb))) => {
                if a < b {
                    ka
                } else {
                    kb
                }
            }
            (Some((_, k)), None) | (None, Some((_, k))) => k,
            (None, None) => return None,
        };
        Some(self.buckets[k].queue.front()?.msg.enqueued_at)
    }

    /// Messages evicted since creation (budget and per-principal cap).
    pub fn evicted_total(&self) -> u64 {
        self.evicted_total
    }

    /// Turns that ended with nothing sent since creation.
    pub fn starved_total(&self) -> u64 {
        self.starved_total
    }

    /// Pushes refused since creation.
    pub fn refused_total(&self) -> u64 {
        self.refused_total
    }

    /// The quantum a bucket earns when its turn starts.
    pub fn quantum(&self) -> usize {
        let active = self.buckets.len().max(1);
        self.config
            .min_quantum_bytes
            .max(self.config.budget_bytes / active)
    }

    /// Queues `msg` for `principal`, evicting as described in the module docs.
    /// Evictions are reported to `obs` before this returns.
    pub fn push(
        &mut self,
        principal: K,
        msg: Msg<T>,
        obs: &mut impl DrrObserver<K, T>,
    ) -> Result<(), PushError<T>> {
        let cost = msg.cost;
        let budget = self.config.budget_bytes;
        if cost > budget {
            self.refused_total += 1;
            return Err(PushError::Oversize {
                msg,
                budget_bytes: budget,
            });
        }
        // Decide feasibility before touching anything, so a refusal never
        // costs another principal a message.
        let cap_victim = match self.buckets.get(&principal) {
            Some(b) if b.queue.len() >= self.config.max_per_principal => match b.evictable_seq {
                Some(seq) => Some(seq),
                None => {
                    self.refused_total += 1;
                    return Err(PushError::PrincipalFull(msg));
                }
            },
            _ => None,
        };
        if self.bytes - self.evictable_bytes + cost > budget {
            self.refused_total += 1;
            return Err(PushError::BudgetExhausted(msg));
        }
        if let Some(seq) = cap_victim {
            self.evict(principal.clone(), seq, EvictReason::PrincipalCap, obs);
        }
        while self.bytes + cost > budget {
            // Cannot be empty: the feasibility check above guarantees enough
            // evictable bytes remain.
            let (&seq, victim) = self
                .evictable
                .first_key_value()
                .expect("evictable bytes remain while over budget");
            let victim = victim.clone();
            self.evict(victim, seq, EvictReason::Budget, obs);
        }
        self.enqueue(principal, msg);
        Ok(())
    }

    fn enqueue(&mut self, principal: K, msg: Msg<T>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.bytes += msg.cost;
        self.len += 1;
        if !msg.control {
            self.evictable_bytes += msg.cost;
        }
        let control = msg.control;
        let entry = Entry { seq, msg };
        if let Some(bucket) = self.buckets.get_mut(&principal) {
            bucket.bytes += entry.msg.cost;
            bucket.queue.push_back(entry);
            if !control && bucket.evictable_seq.is_none() {
                bucket.evictable_seq = Some(seq);
                self.evictable.insert(seq, principal);
            }
            return;
        }
        // First message of this principal: allocate its bucket.
        let generation = self.next_generation;
        self.next_generation += 1;
        let mut queue = VecDeque::with_capacity(1);
        let bytes = entry.msg.cost;
        queue.push_back(entry);
        let bucket = Bucket {
            queue,
            bytes,
            deficit: 0,
            generation,
            in_turn: false,
            sent_this_turn: false,
            evictable_seq: (!control).then_some(seq),
        };
        if !control {
            self.evictable.insert(seq, principal.clone());
        }
        if control {
            self.pinned_heads.insert(seq, principal.clone());
        }
        self.buckets.insert(principal.clone(), bucket);
        self.order.push_back((principal, generation));
        self.compact_order();
    }

    /// Drops rotation slots of freed buckets once they outnumber live ones
    /// (amortised O(1) per push).
    fn compact_order(&mut self) {
        if self.order.len() > 2 * self.buckets.len() + 32 {
            let buckets = &self.buckets;
            self.order
                .retain(|(k, g)| buckets.get(k).is_some_and(|b| b.generation == *g));
        }
    }

    /// Removes the message `seq` (the bucket's first evictable one).
    fn evict(
        &mut self,
        principal: K,
        seq: u64,
        reason: EvictReason,
        obs: &mut impl DrrObserver<K, T>,
    ) {
        let bucket = self
            .buckets
            .get_mut(&principal)
            .expect("indexed bucket exists");
        debug_assert_eq!(bucket.evictable_seq, Some(seq));
        // Only control messages stand before the first evictable one.
        let pos = bucket
            .queue
            .iter()
            .position(|e| e.seq == seq)
            .expect("indexed message exists");
        let entry = bucket.queue.remove(pos).expect("position is in range");
        bucket.bytes -= entry.msg.cost;
        self.bytes -= entry.msg.cost;
        self.evictable_bytes -= entry.msg.cost;
        self.len -= 1;
        self.evicted_total += 1;
        self.evictable.remove(&seq);
        bucket.evictable_seq = bucket.first_evictable_from(pos);
        if let Some(next) = bucket.evictable_seq {
            self.evictable.insert(next, principal.clone());
        }
        if pos == 0 {
            // The old head was evictable, so it was not pinned.
            match bucket.queue.front() {
                Some(head) => {
                    if head.msg.control {
                        self.pinned_heads.insert(head.seq, principal.clone());
                    }
                }
                None => {
                    // Its rotation slot goes stale and is skipped later.
                    self.buckets.remove(&principal);
                }
            }
        }
        obs.evicted(&principal, entry.msg, reason);
    }

    /// Hands out the next message in DRR order, or `None` if the queue is empty.
    pub fn pop(&mut self, obs: &mut impl DrrObserver<K, T>) -> Option<Drained<K, T>> {
        self.pop_within(usize::MAX, obs)
    }

    /// Like [`pop`](Self::pop), but leaves the chosen message queued (turn
    /// state intact) if it costs more than `limit`.
    fn pop_within(
        &mut self,
        limit: usize,
        obs: &mut impl DrrObserver<K, T>,
    ) -> Option<Drained<K, T>> {
        if self.len == 0 {
            return None;
        }
        let quantum = self.quantum();
        loop {
            // `len > 0` guarantees a live slot exists, and deficits grow by
            // `quantum >= 1` every round, so this terminates.
            let (principal, generation) = self.order.front()?;
            let Some(bucket) = self
                .buckets
                .get_mut(principal)
                .filter(|b| b.generation == *generation)
            else {
                self.order.pop_front();
                continue;
            };
            if !bucket.in_turn {
                bucket.in_turn = true;
                bucket.sent_this_turn = false;
                bucket.deficit = bucket.deficit.saturating_add(quantum);
            }
            let head_cost = bucket
                .queue
                .front()
                .expect("live bucket is non-empty")
                .msg
                .cost;
            if head_cost <= bucket.deficit {
                if head_cost > limit {
                    return None;
                }
                let principal = principal.clone();
                return Some(self.take_head(principal));
            }
            if !bucket.sent_this_turn {
                self.starved_total += 1;
                obs.starved(principal);
            }
            bucket.in_turn = false;
            let slot = self.order.pop_front().expect("front exists");
            self.order.push_back(slot);
        }
    }

    fn take_head(&mut self, principal: K) -> Drained<K, T> {
        let bucket = self.buckets.get_mut(&principal).expect("live bucket");
        let entry = bucket.queue.pop_front().expect("non-empty");
        let cost = entry.msg.cost;
        bucket.deficit -= cost;
        bucket.bytes -= cost;
        bucket.sent_this_turn = true;
        self.bytes -= cost;
        self.len -= 1;
        if entry.msg.control {
            self.pinned_heads.remove(&entry.seq);
        } else {
            self.evictable_bytes -= cost;
        }
        if bucket.evictable_seq == Some(entry.seq) {
            self.evictable.remove(&entry.seq);
            bucket.evictable_seq = bucket.first_evictable_from(0);
            if let Some(next) = bucket.evictable_seq {
                self.evictable.insert(next, principal.clone());
            }
        }
        match bucket.queue.front() {
            Some(head) => {
                if head.msg.control {
                    self.pinned_heads.insert(head.seq, principal.clone());
                }
            }
            None => {
                // Emptied: free the bucket (its deficit goes with it) and its slot,
                // which is at the front of `order` because it was being served.
                self.buckets.remove(&principal);
                self.order.pop_front();
            }
        }
        Drained {
            principal,
            msg: entry.msg,
        }
    }

    /// Drains up to `byte_budget` bytes in DRR order into `out`, without
    /// blocking. Returns the bytes drained. At least one message is handed
    /// out if any is queued, even if it alone exceeds `byte_budget`, so a
    /// small budget never stalls the queue; after that a message is taken
    /// only if it fits the remaining budget.
    pub fn try_drain(
        &mut self,
        byte_budget: usize,
        out: &mut Vec<Drained<K, T>>,
        obs: &mut impl DrrObserver<K, T>,
    ) -> usize {
        let mut served = 0usize;
        while served < byte_budget || served == 0 {
            let limit = if served == 0 {
                usize::MAX
            } else {
                byte_budget - served
            };
            match self.pop_within(limit, obs) {
                Some(d) => {
                    served += d.msg.cost;
                    out.push(d);
                }
                None => break,
            }
        }
        served
    }
}

impl<K, T> std::fmt::Debug for DrrQueue<K, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrrQueue")
            .field("len", &self.len)
            .field("active_principals", &self.buckets.len())
            .field("bytes_in_use", &self.bytes)
            .field("budget_bytes", &self.config.budget_bytes)
            .finish()
    }
}
