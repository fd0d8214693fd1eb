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

/// Index of a bucket in `DrrQueue::slots`.
type Slot = u32;

/// A principal's sub-queue. Lives in a slab slot; a freed slot keeps its
/// (shrunk) `VecDeque` allocation for the next principal.
struct Bucket<K, T> {
    /// `None` while the slot is free.
    key: Option<K>,
    queue: VecDeque<Entry<T>>,
    bytes: usize,
    deficit: usize,
    /// Distinguishes this allocation of the slot from earlier ones whose
    /// rotation entries may still be in `order`.
    generation: u64,
    /// The bucket's DRR turn has started (quantum added) and not yet ended.
    in_turn: bool,
    /// The quantum granted when the current turn started. If principals join
    /// mid-turn the fair share shrinks, and so does what is left of this turn.
    turn_quantum: usize,
    sent_this_turn: bool,
    /// Sequence number of the first non-control message, if any. Mirrors the
    /// bucket's entry in `DrrQueue::evictable`.
    evictable_seq: Option<u64>,
}

impl<K, T> Bucket<K, T> {
    fn first_evictable_from(&self, from: usize) -> Option<u64> {
        self.queue
            .iter()
            .skip(from)
            .find(|e| !e.msg.control)
            .map(|e| e.seq)
    }

    fn is_live(&self, generation: u64) -> bool {
        self.key.is_some() && self.generation == generation
    }
}

/// A freed slot keeps at most this much queue capacity.
const KEEP_CAPACITY: usize = 4;
/// The slab is compacted when more than 3/4 of at least this many slots are free,
/// so a burst of principals does not pin its peak memory afterwards.
const COMPACT_MIN_SLOTS: usize = 1024;

/// Per-principal FIFO queues under one byte budget, drained by deficit
/// round-robin. `K` identifies a principal; `T` is the queued value.
///
/// Complexity with `N` active principals: `push` is one hash lookup plus
/// `O(log N)` per eviction; `pop` is amortised `O(1)` plus `O(log N)` index
/// upkeep when a head changes class. Buckets live in a slab, so the indexes
/// and the rotation hold small slot numbers rather than principal keys: no
/// key clones or rehashing on the hot path. Scans skip only control messages
/// at the front of one bucket.
pub struct DrrQueue<K, T> {
    config: DrrConfig,
    /// Principal → slot of its live bucket.
    index: HashMap<K, Slot>,
    slots: Vec<Bucket<K, T>>,
    free: Vec<Slot>,
    /// DRR rotation: `(slot, generation)`. Entries whose bucket was freed
    /// (evicted empty) or whose slot was reused are skipped lazily and
    /// compacted when they outnumber live ones, so removal from the middle is
    /// O(1).
    order: VecDeque<(Slot, u64)>,
    /// Sequence number of each bucket's head *when that head is a control
    /// message* → slot. With `evictable` it yields the oldest message (queue
    /// age): every entry of both maps is a queued message, and the oldest
    /// queued message is some bucket's head, which is in one of them. Kept
    /// separate so the common all-data flow pays no upkeep for it.
    pinned_heads: BTreeMap<u64, Slot>,
    /// Sequence number of each bucket's oldest evictable message → slot.
    /// Its first entry is the eviction victim.
    evictable: BTreeMap<u64, Slot>,
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
            index: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
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
        self.index.len()
    }

    /// Messages queued for one principal.
    pub fn principal_len(&self, principal: &K) -> usize {
        self.index
            .get(principal)
            .map_or(0, |&s| self.slots[s as usize].queue.len())
    }

    /// The `n` principals holding the most queued bytes, largest first. `O(active
    /// principals)`: for a status page, not the hot path.
    pub fn top_principals_by_bytes(&self, n: usize) -> Vec<(K, usize)> {
        let mut all: Vec<(usize, Slot)> = self
            .index
            .values()
            .map(|&s| (self.slots[s as usize].bytes, s))
            .collect();
        if all.len() > n {
            all.select_nth_unstable_by_key(n, |&(bytes, _)| std::cmp::Reverse(bytes));
            all.truncate(n);
        }
        all.sort_unstable_by_key(|&(bytes, _)| std::cmp::Reverse(bytes));
        all.into_iter()
            .filter_map(|(bytes, s)| Some((self.slots[s as usize].key.clone()?, bytes)))
            .collect()
    }

    /// When the oldest queued message (control or not) was enqueued.
    pub fn oldest_enqueued_at(&self) -> Option<Instant> {
        let slot = match (
            self.evictable.first_key_value(),
            self.pinned_heads.first_key_value(),
        ) {
            (Some((a, sa)), Some((b, sb))) => {
                if a < b {
                    *sa
                } else {
                    *sb
                }
            }
            (Some((_, s)), None) | (None, Some((_, s))) => *s,
            (None, None) => return None,
        };
        Some(self.slots[slot as usize].queue.front()?.msg.enqueued_at)
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
        let active = self.index.len().max(1);
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
        // The principal's bucket, if live, with its generation so we can tell
        // whether our own evictions below freed it.
        let own = self
            .index
            .get(&principal)
            .map(|&s| (s, self.slots[s as usize].generation));
        // Decide feasibility before touching anything, so a refusal never
        // costs another principal a message.
        let mut cap_victim = None;
        if let Some((s, _)) = own {
            let b = &self.slots[s as usize];
            if b.queue.len() >= self.config.max_per_principal {
                match b.evictable_seq {
                    Some(seq) => cap_victim = Some((s, seq)),
                    None => {
                        self.refused_total += 1;
                        return Err(PushError::PrincipalFull(msg));
                    }
                }
            }
        }
        if self.bytes - self.evictable_bytes + cost > budget {
            self.refused_total += 1;
            return Err(PushError::BudgetExhausted(msg));
        }
        if let Some((s, seq)) = cap_victim {
            self.evict(s, seq, EvictReason::PrincipalCap, obs);
        }
        while self.bytes + cost > budget {
            // Cannot be empty: the feasibility check above guarantees enough
            // evictable bytes remain.
            let (&seq, &victim) = self
                .evictable
                .first_key_value()
                .expect("evictable bytes remain while over budget");
            self.evict(victim, seq, EvictReason::Budget, obs);
        }
        let slot = match own {
            Some((s, g)) if self.slots[s as usize].is_live(g) => s,
            _ => self.allocate(principal),
        };
        self.enqueue(slot, msg);
        Ok(())
    }

    /// Gives `principal` a bucket (reusing a free slot) and a rotation entry.
    fn allocate(&mut self, principal: K) -> Slot {
        let generation = self.next_generation;
        self.next_generation += 1;
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Bucket {
                    key: None,
                    queue: VecDeque::new(),
                    bytes: 0,
                    deficit: 0,
                    generation,
                    in_turn: false,
                    turn_quantum: 0,
                    sent_this_turn: false,
                    evictable_seq: None,
                });
                Slot::try_from(self.slots.len() - 1).expect("fewer than 2^32 principals")
            }
        };
        let b = &mut self.slots[slot as usize];
        debug_assert!(b.key.is_none() && b.queue.is_empty());
        b.key = Some(principal.clone());
        b.generation = generation;
        self.index.insert(principal, slot);
        self.order.push_back((slot, generation));
        self.compact_order();
        slot
    }

    /// Frees an emptied bucket's slot and returns its principal. Its deficit
    /// goes with it; its rotation entry goes stale.
    fn release(&mut self, slot: Slot) -> K {
        let b = &mut self.slots[slot as usize];
        debug_assert!(b.queue.is_empty());
        let key = b.key.take().expect("releasing a live bucket");
        b.bytes = 0;
        b.deficit = 0;
        b.in_turn = false;
        b.sent_this_turn = false;
        b.evictable_seq = None;
        if b.queue.capacity() > KEEP_CAPACITY {
            b.queue.shrink_to(KEEP_CAPACITY);
        }
        self.index.remove(&key);
        self.free.push(slot);
        if self.slots.len() >= COMPACT_MIN_SLOTS && self.free.len() * 4 > self.slots.len() * 3 {
            self.compact_slots();
        }
        key
    }

    /// Moves live buckets to the front of a fresh slab and renumbers every
    /// reference. `O(slots)`, run only after at least `3/4` of the slab was
    /// freed, so amortised `O(1)` per release.
    fn compact_slots(&mut self) {
        const GONE: Slot = Slot::MAX;
        let mut remap = vec![GONE; self.slots.len()];
        let mut live = Vec::with_capacity(self.index.len());
        for (i, b) in std::mem::take(&mut self.slots).into_iter().enumerate() {
            if b.key.is_some() {
                remap[i] = live.len() as Slot;
                live.push(b);
            }
        }
        for s in self
            .index
            .values_mut()
            .chain(self.evictable.values_mut())
            .chain(self.pinned_heads.values_mut())
        {
            *s = remap[*s as usize];
            debug_assert_ne!(*s, GONE);
        }
        self.order.retain_mut(|(s, g)| match remap[*s as usize] {
            GONE => false,
            n if live[n as usize].generation == *g => {
                *s = n;
                true
            }
            _ => false,
        });
        self.slots = live;
        self.free.clear();
    }

    #[cfg(test)]
    pub(super) fn slab_len(&self) -> usize {
        self.slots.len()
    }

    fn enqueue(&mut self, slot: Slot, msg: Msg<T>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let (cost, control) = (msg.cost, msg.control);
        self.bytes += cost;
        self.len += 1;
        if !control {
            self.evictable_bytes += cost;
        }
        let b = &mut self.slots[slot as usize];
        if b.queue.is_empty() && control {
            self.pinned_heads.insert(seq, slot);
        }
        b.bytes += cost;
        b.queue.push_back(Entry { seq, msg });
        if !control && b.evictable_seq.is_none() {
            b.evictable_seq = Some(seq);
            self.evictable.insert(seq, slot);
        }
    }

    /// Drops stale rotation entries once they outnumber live ones
    /// (amortised O(1) per allocation).
    fn compact_order(&mut self) {
        if self.order.len() > 2 * self.index.len() + 32 {
            let slots = &self.slots;
            self.order.retain(|&(s, g)| slots[s as usize].is_live(g));
        }
    }

    /// Removes the message `seq` (the bucket's first evictable one).
    fn evict(
        &mut self,
        slot: Slot,
        seq: u64,
        reason: EvictReason,
        obs: &mut impl DrrObserver<K, T>,
    ) {
        let b = &mut self.slots[slot as usize];
        debug_assert_eq!(b.evictable_seq, Some(seq));
        // Only control messages stand before the first evictable one.
        let pos = b
            .queue
            .iter()
            .position(|e| e.seq == seq)
            .expect("indexed message exists");
        let entry = b.queue.remove(pos).expect("position is in range");
        let cost = entry.msg.cost;
        b.bytes -= cost;
        self.bytes -= cost;
        self.evictable_bytes -= cost;
        self.len -= 1;
        self.evicted_total += 1;
        self.evictable.remove(&seq);
        b.evictable_seq = b.first_evictable_from(pos);
        if let Some(next) = b.evictable_seq {
            self.evictable.insert(next, slot);
        }
        // The old head, if it was this message, was evictable, so not pinned.
        if pos == 0 {
            match b.queue.front() {
                Some(head) if head.msg.control => {
                    self.pinned_heads.insert(head.seq, slot);
                }
                Some(_) => {}
                None => {
                    let key = self.release(slot);
                    obs.evicted(&key, entry.msg, reason);
                    return;
                }
            }
        }
        let key = self.slots[slot as usize].key.as_ref().expect("live bucket");
        obs.evicted(key, entry.msg, reason);
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
            // `len > 0` guarantees a live entry exists, and deficits grow by
            // `quantum >= 1` every round, so this terminates.
            let &(slot, generation) = self.order.front()?;
            let b = &mut self.slots[slot as usize];
            if !b.is_live(generation) {
                self.order.pop_front();
                continue;
            }
            if !b.in_turn {
                b.in_turn = true;
                b.sent_this_turn = false;
                b.turn_quantum = quantum;
                b.deficit = b.deficit.saturating_add(quantum);
            } else if quantum < b.turn_quantum {
                // Principals joined mid-turn: this turn's allowance shrinks to the new
                // fair share. Deficit carried over from starved turns is kept.
                b.deficit = b.deficit.saturating_sub(b.turn_quantum - quantum);
                b.turn_quantum = quantum;
            }
            let head_cost = b.queue.front().expect("live bucket is non-empty").msg.cost;
            if head_cost <= b.deficit {
                if head_cost > limit {
                    return None;
                }
                return Some(self.take_head(slot));
            }
            if !b.sent_this_turn {
                self.starved_total += 1;
                obs.starved(b.key.as_ref().expect("live bucket"));
            }
            b.in_turn = false;
            self.order.rotate_left(1);
        }
    }

    fn take_head(&mut self, slot: Slot) -> Drained<K, T> {
        let b = &mut self.slots[slot as usize];
        let entry = b.queue.pop_front().expect("non-empty");
        let cost = entry.msg.cost;
        b.deficit -= cost;
        b.bytes -= cost;
        b.sent_this_turn = true;
        self.bytes -= cost;
        self.len -= 1;
        if entry.msg.control {
            self.pinned_heads.remove(&entry.seq);
        } else {
            self.evictable_bytes -= cost;
        }
        if b.evictable_seq == Some(entry.seq) {
            self.evictable.remove(&entry.seq);
            b.evictable_seq = b.first_evictable_from(0);
            if let Some(next) = b.evictable_seq {
                self.evictable.insert(next, slot);
            }
        }
        let principal = match b.queue.front() {
            Some(head) => {
                if head.msg.control {
                    self.pinned_heads.insert(head.seq, slot);
                }
                b.key.clone().expect("live bucket")
            }
            None => {
                // Emptied: free the bucket and its rotation entry, which is at
                // the front of `order` because it was being served.
                self.order.pop_front();
                self.release(slot)
            }
        };
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
            .field("active_principals", &self.index.len())
            .field("bytes_in_use", &self.bytes)
            .field("budget_bytes", &self.config.budget_bytes)
            .finish()
    }
}
