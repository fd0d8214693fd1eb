//! The partitioned relay: one worker per partition claims batches, delivers them through the
//! partition's bulkheads, and settles the verdicts (seed 000 §2.4, §2.6).
//!
//! Per claimed batch: rows are grouped by receiver (id order kept); each receiver's rows form
//! a chain delivered in order, stopping at the first failure (the rest are released untouched,
//! so FIFO holds). Chains of different receivers run concurrently, each delivery holding a
//! permit of its actor type's limiter. No permit → released with no delay. Capacity → limit
//! halves, retry after `max(retry_after_ms, jitter)`. Transient → limit unchanged, jittered
//! retry. Unroutable (this host is cut off from its cluster) → limit unchanged, retry after a
//! pause, never counted toward `max_attempts`. Permanent → dead-lettered now. `max_attempts` failures → dead-lettered. Success →
//! ack, limit + 1. A retry (a head with `delivery_count > 0`) needs a token of the partition's
//! retry budget; without one the receiver is deferred by the backoff ceiling, not attempted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use sluice_flow::backoff::RetryBudget;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::batch::BatchSize;
use crate::delivery::Delivery;
use crate::message::{OutboxMessage, Release, Settlement};
use crate::outbox::{
    Attempted, Inner, Outbox, Verdict, apply_verdict, attempt_span, envelope_of, record_attempt,
};

/// Running relay workers, one per partition this host relays. [`RelayHandle::shutdown`]
/// stops them and waits; dropping the handle also stops them (at their next idle point) but
/// does not wait. [`RelayHandle::assign`] changes which partitions are relayed (a cluster
/// member's share of a shared Postgres outbox).
pub struct RelayHandle {
    inner: Arc<Inner>,
    delivery: Arc<dyn Delivery>,
    workers: BTreeMap<u32, Running>,
    /// The reminder pump: moves due reminders into the outbox while the handle lives,
    /// whichever partitions this host relays.
    pump: Option<Running>,
}

impl std::fmt::Debug for RelayHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayHandle")
            .field("partitions", &self.partitions())
            .finish_non_exhaustive()
    }
}

/// One partition's worker: its stop signal and its task.
struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl RelayHandle {
    /// Signal every worker to stop after its current batch, and wait until they have.
    pub async fn shutdown(mut self) {
        self.assign([]).await;
        if let Some(pump) = self.pump.take() {
            let _ = pump.stop.send(true);
            let _ = pump.task.await;
        }
    }

    /// Abort the workers without settling (tests: simulates a relay that died mid-batch).
    pub fn abort(self) {
        for w in self.workers.values().chain(&self.pump) {
            w.task.abort();
        }
    }

    /// The partitions relayed now, in order.
    pub fn partitions(&self) -> Vec<u32> {
        self.workers.keys().copied().collect()
    }

    /// Relay exactly `partitions` from now on (numbers past the configured count are
    /// ignored): a worker starts for each new one; the others stop after their current batch
    /// and give their partition up (so a host that takes it over need not wait for a lease
    /// to lapse). The returned future ends when those workers have stopped; the new ones run
    /// whether or not it is awaited.
    pub fn assign(
        &mut self,
        partitions: impl IntoIterator<Item = u32>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let count = self.inner.config.partitions;
        let wanted: BTreeSet<u32> = partitions.into_iter().filter(|p| *p < count).collect();
        let gone: Vec<u32> = self
            .workers
            .keys()
            .filter(|p| !wanted.contains(p))
            .copied()
            .collect();
        let stopping: Vec<JoinHandle<()>> = gone
            .into_iter()
            .filter_map(|p| self.workers.remove(&p))
            .map(|w| {
                let _ = w.stop.send(true);
                w.task
            })
            .collect();
        for p in wanted {
            if !self.workers.contains_key(&p) {
                let running = self.spawn(p);
                self.workers.insert(p, running);
            }
        }
        async move {
            for t in stopping {
                let _ = t.await;
            }
        }
    }

    fn spawn(&self, partition: u32) -> Running {
        let (stop, rx) = watch::channel(false);
        let worker = Worker {
            inner: self.inner.clone(),
            partition,
            delivery: self.delivery.clone(),
            budget: RetryBudget::new(self.inner.config.retry_budget),
            rng: SmallRng::from_rng(&mut rand::rng()),
        };
        Running {
            stop,
            task: tokio::spawn(worker.run(rx)),
        }
    }
}

impl Outbox {
    /// Start one relay worker per partition, delivering through `delivery`.
    pub fn start_relay(&self, delivery: Arc<dyn Delivery>) -> RelayHandle {
        self.start_relay_for(delivery, 0..self.inner.config.partitions)
    }

    /// Start relay workers for some partitions only (several hosts sharing one Postgres);
    /// [`RelayHandle::assign`] changes the set later.
    pub fn start_relay_for(
        &self,
        delivery: Arc<dyn Delivery>,
        partitions: impl IntoIterator<Item = u32>,
    ) -> RelayHandle {
        let (stop, rx) = watch::channel(false);
        let pump = Running {
            stop,
            task: tokio::spawn(pump_reminders(self.inner.clone(), rx)),
        };
        let mut handle = RelayHandle {
            inner: self.inner.clone(),
            delivery,
            workers: BTreeMap::new(),
            pump: Some(pump),
        };
        // Nothing to wait for: no worker runs yet.
        drop(handle.assign(partitions));
        handle
    }
}

/// Longest the reminder pump sleeps without looking at the store: a reminder this host did
/// not arm (another host's on a shared Postgres, or one armed before a restart) is moved into
/// the outbox at most this late.
pub(crate) const REMINDER_POLL_MS: i64 = 1000;
/// Most reminders moved per statement (the next statement follows at once when it was full).
const PROMOTE_LIMIT: u32 = 1000;

/// Moves due reminders into the outbox (waking the relay workers of their partitions) until
/// `stop`: at the earliest due time it knows, when a nearer one is armed here, and at least
/// every [`REMINDER_POLL_MS`].
async fn pump_reminders(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let promoted = metrics::counter!("sluice_outbox_reminders_promoted_total");
    let lag = metrics::gauge!("sluice_outbox_reminder_lag_seconds");
    // Back-off after a failed statement, so a store that is down is not asked in a loop.
    let retry = (inner.config.relay_interval_ms as i64).max(100);
    loop {
        if *stop.borrow() {
            break;
        }
        let now = inner.clock.now_ms();
        let known_due = inner.next_reminder.load(Ordering::Acquire);
        let mut floor = 0;
        // An arm that lowers `next_reminder` while the statement runs also leaves a wake-up
        // permit, so the pump looks again at once.
        match inner.channel.promote_reminders(now, PROMOTE_LIMIT).await {
            Ok(moved) => {
                inner
                    .next_reminder
                    .store(moved.next_due.unwrap_or(i64::MAX), Ordering::Release);
                if !moved.partitions.is_empty() {
                    let n = moved.partitions.len();
                    tracing::debug!(target: "sluice::outbox", reminders = n, "reminders due");
                    promoted.increment(n as u64);
                    if known_due <= now {
                        lag.set((now - known_due) as f64 / 1000.0);
                    }
                    inner.wake(moved.partitions.iter().copied());
                    if n as u32 >= PROMOTE_LIMIT {
                        tokio::task::yield_now().await;
                        continue;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "moving due reminders into the outbox failed");
                floor = retry;
            }
        }
        let next = inner.next_reminder.load(Ordering::Acquire);
        let wait = next
            .saturating_sub(inner.clock.now_ms())
            .clamp(floor, REMINDER_POLL_MS.max(floor));
        tokio::select! {
            _ = inner.reminder_armed.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(wait as u64)) => {}
            _ = stop.changed() => break,
        }
    }
}

/// How often a worker deletes acked rows past `acked_retention_ms` (ms), and how many at most
/// per pass (one bounded statement, so the single SQLite writer is never held for long).
const COMPACT_EVERY_MS: i64 = 30_000;
const COMPACT_LIMIT: u32 = 10_000;

struct Worker {
    inner: Arc<Inner>,
    partition: u32,
    delivery: Arc<dyn Delivery>,
    budget: RetryBudget,
    rng: SmallRng,
}

impl Worker {
    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let cfg = &self.inner.config;
        let clock = self.inner.clock.clone();
        let interval = Duration::from_millis(cfg.relay_interval_ms);
        let stats_every = cfg.stats_interval_ms.max(1) as i64;
        let mut batch_size = BatchSize::new(cfg.relay_batch_size);
        let lease = cfg.lease_ms as i64;
        let retention = cfg.acked_retention_ms as i64;
        let start = clock.now_ms();
        let mut next_stats = start;
        let mut next_compact = start + COMPACT_EVERY_MS;
        let p = self.partition;
        let inner = self.inner.clone();
        let metrics = &inner.partitions[p as usize].metrics;
        metrics.batch_size.set(f64::from(batch_size.get()));
        loop {
            if *stop.borrow() {
                break;
            }
            let mut busy = false;
            let now = clock.now_ms();
            let asked = batch_size.get();
            let claimed = self.inner.channel.claim(p, asked, now, lease).await;
            metrics
                .relayed
                .set(f64::from(u8::from(self.inner.channel.holds(p, now))));
            match claimed {
                Ok(batch) => {
                    let claimed = batch.len() as u32;
                    let full = claimed >= asked;
                    let mut unattempted = 0;
                    if let (Some(first), Some(last)) = (batch.first(), batch.last()) {
                        tracing::debug!(target: "sluice::outbox", partition = p, rows = claimed,
                            first = first.id, last = last.id, "relay: claimed");
                    }
                    if !batch.is_empty() {
                        let settlement;
                        (settlement, unattempted) = self.process(batch, now + lease).await;
                        if let Err(e) = self.inner.channel.settle(&settlement, clock.now_ms()).await
                        {
                            // The rows stay claimed and reappear after their lease: at least once.
                            tracing::error!(partition = p, error = %e, "outbox settle failed");
                            self.inner.partitions[p as usize]
                                .metrics
                                .errors
                                .increment(1);
                        }
                    }
                    // Straight on while there is a backlog the receivers keep up with; rows
                    // left for want of permits wait for the next interval instead of being
                    // claimed again at once.
                    busy = full && unattempted == 0;
                    batch_size.on_cycle(claimed, unattempted);
                    metrics.batch_size.set(f64::from(batch_size.get()));
                }
                Err(e) => {
                    tracing::warn!(partition = p, error = %e, transient = e.is_transient(), "outbox claim failed");
                    self.inner.partitions[p as usize]
                        .metrics
                        .errors
                        .increment(1);
                }
            }
            let now = clock.now_ms();
            if now >= next_stats {
                next_stats = now + stats_every;
                self.publish_stats(now).await;
            }
            if retention > 0 && now >= next_compact {
                next_compact = now + COMPACT_EVERY_MS;
                let before = now - retention;
                match self.inner.channel.compact(p, before, COMPACT_LIMIT).await {
                    Ok(n) if n > 0 => {
                        tracing::debug!(partition = p, deleted = n, "outbox compacted")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(partition = p, error = %e, "outbox compaction failed"),
                }
            }
            if busy {
                tokio::task::yield_now().await;
                continue;
            }
            tokio::select! {
                _ = self.inner.wakers[p as usize].notified() => {}
                _ = tokio::time::sleep(interval) => {}
                _ = stop.changed() => break,
            }
        }
        if let Err(e) = self.inner.channel.release(p).await {
            tracing::warn!(partition = p, error = %e, "outbox partition release failed");
        }
        metrics.relayed.set(0.0);
    }

    async fn publish_stats(&self, now: i64) {
        let p = self.partition;
        let m = &self.inner.partitions[p as usize].metrics;
        if let Ok(s) = self.inner.channel.partition_stats(p, now).await {
            m.queue_depth.set(s.depth as f64);
            m.oldest_age.set(s.oldest_pending_age_ms as f64 / 1000.0);
        }
    }

    /// Deliver one claimed batch (leased until `lease_end`). Returns the verdicts, and how
    /// many rows were left unattempted for want of a permit or of lease time.
    async fn process(&mut self, batch: Vec<OutboxMessage>, lease_end: i64) -> (Settlement, u32) {
        let now = self.inner.clock.now_ms();
        let inner = &*self.inner;
        let part = &inner.partitions[self.partition as usize];
        let policy = inner.config.retry_policy;
        let mut settlement = Settlement::default();

        // Group by receiver, keeping id order within and first-seen order across groups.
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut groups: Vec<Vec<OutboxMessage>> = Vec::new();
        for m in batch {
            let i = match index.get(m.receiver.as_str()) {
                Some(i) => *i,
                None => {
                    index.insert(m.receiver.clone(), groups.len());
                    groups.push(Vec::new());
                    groups.len() - 1
                }
            };
            groups[i].push(m);
        }

        // No delivery starts in the last quarter of the lease: a row still being delivered when
        // its lease ends could be claimed again (by another host on Postgres) and delivered
        // twice at once, or overtaken. Later rows of a long chain go back to the store.
        let give_up_at = lease_end - (lease_end - now) / 4;
        let mut chains = Vec::with_capacity(groups.len());
        for group in groups {
            let head = &group[0];
            // Retrying a failure needs budget; re-offering after capacity refusals is paced
            // by the limiter and the receiver's hints instead.
            if head.delivery_count > head.refusals && !self.budget.try_retry(now as u64) {
                part.metrics.budget_exhausted.increment(1);
                let attempt = u32::try_from(head.delivery_count).unwrap_or(u32::MAX);
                let defer = policy
                    .ceiling_ms(attempt)
                    .max(inner.config.relay_interval_ms);
                settlement.releases.push(Release {
                    id: head.id,
                    send_at: now + defer as i64,
                });
                settlement
                    .releases
                    .extend(group[1..].iter().map(|m| Release {
                        id: m.id,
                        send_at: now,
                    }));
                continue;
            }
            for m in &group {
                if m.delivery_count == 0 {
                    self.budget.on_first_attempt(now as u64);
                }
            }
            chains.push(deliver_chain(
                inner,
                self.partition,
                group,
                &*self.delivery,
                now,
                give_up_at,
            ));
        }
        let results = join_all(chains).await;
        let now = inner.clock.now_ms();
        let mut unattempted = 0;
        for (chain, starved) in results {
            unattempted += starved;
            for (m, verdict) in chain {
                inner.record(m, verdict, now, &mut self.rng, &mut settlement);
            }
        }
        (settlement, unattempted)
    }
}

/// Deliver one receiver's claimed rows in order; stop at the first row that is not delivered.
/// Also returns how many rows were left for want of a permit or of lease time (`give_up_at`).
async fn deliver_chain(
    inner: &Inner,
    partition: u32,
    group: Vec<OutboxMessage>,
    delivery: &dyn Delivery,
    now: i64,
    give_up_at: i64,
) -> (Vec<(Attempted, Verdict)>, u32) {
    let part = &inner.partitions[partition as usize];
    let bulkhead = part.bulkhead(&group[0].receiver_type);
    let mut out = Vec::with_capacity(group.len());
    let mut stopped = false;
    let mut starved = false;
    let mut unattempted = 0;
    for (i, mut m) in group.into_iter().enumerate() {
        let attempted = Attempted::of(&m);
        if stopped {
            unattempted += u32::from(starved);
            out.push((attempted, Verdict::NotAttempted));
            continue;
        }
        if m.is_expired(now) {
            out.push((attempted, Verdict::Expired));
            continue;
        }
        // The first row's check is free (`now` is when the batch was claimed).
        if i > 0 && inner.clock.now_ms() >= give_up_at {
            (stopped, starved) = (true, true);
            unattempted += 1;
            out.push((attempted, Verdict::NotAttempted));
            continue;
        }
        let Some(permit) = bulkhead.limiter.try_acquire() else {
            bulkhead.acquire_rejected.increment(1);
            (stopped, starved) = (true, true);
            unattempted += 1;
            out.push((attempted, Verdict::NotAttempted));
            continue;
        };
        bulkhead.publish_limit();
        let envelope = envelope_of(&mut m);
        let span = attempt_span(&envelope);
        let t0 = Instant::now();
        let r = delivery.deliver(envelope).instrument(span.clone()).await;
        part.metrics
            .delivery_seconds
            .record(t0.elapsed().as_secs_f64());
        let verdict = apply_verdict(bulkhead, permit, r);
        record_attempt(&span, inner, &attempted, &verdict);
        stopped = !matches!(verdict, Verdict::Delivered);
        out.push((attempted, verdict));
    }
    (out, unattempted)
}
