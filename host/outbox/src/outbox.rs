//! The `Outbox` facade the runtime holds: store, dispatch, DLQ, stats, and starting the relay.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;
use tracing::Instrument;

use futures_util::future::join_all;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::sync::Notify;

use crate::bulkhead::{Bulkhead, Partition};
use crate::channel::{Backend, Channel, EnqueueOptions};
use crate::clock::{Clock, SystemClock};
use crate::config::OutboxConfig;
use crate::delivery::{Delivery, DeliveryError, Envelope};
use crate::error::{Error, Result};
use crate::message::{
    DeadLetter, DeadLetterOp, DlqSelector, EnqueueOutcome, NewMessage, NewRow, OutboxMessage,
    PartitionStats, PendingReminder, Release, Retry, Settlement, actor_type_of, dead_reason,
};
use crate::url::DatabaseUrl;

/// The least pause before a message whose delivering host was cut off
/// ([`DeliveryError::Unroutable`]) is tried again, in ms: long enough not to spin while the
/// host is away, short against a member TTL.
const UNROUTABLE_PAUSE_MS: u64 = 200;

/// Longest reminder name [`Outbox::remind`] takes, in bytes.
pub const MAX_REMINDER_NAME: usize = 256;

/// What [`Outbox::dispatch`] did with one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DispatchOutcome {
    /// Delivered by the immediate attempt; the row is acked.
    Delivered,
    /// Absorbed by its idempotency key (an APPEND duplicate, an OVERWRITE replacement or a
    /// stale OVERWRITE): nothing more happens for this target.
    Deduplicated,
    /// Left for the relay: an earlier message to the same receiver is pending, and delivering
    /// now would overtake it (FIFO per receiver).
    QueuedBehindPending,
    /// Left for the relay: not due yet (`delay_ms` > 0); the relay delivers it at its
    /// `send_at`. The WIT `dispatch` never delays, so guests never see this.
    QueuedDelayed,
    /// Left for the relay: the relay's concurrency limit for the receiver's type had no free
    /// permit.
    QueuedAtLimit,
    /// Left for the relay: the receiver refused for capacity (full mailbox, admission or
    /// activation cap); retried after its hint.
    QueuedRefused,
    /// Left for the relay: the attempt failed in a way that may pass; retried with backoff.
    QueuedFailed,
    /// Left for the relay: the caller's deadline had passed, or passed during the attempt.
    QueuedOutOfTime,
    /// Dead-lettered at once: no actor type of that name ([`DeliveryError::NotFound`]).
    NotFound,
    /// Dead-lettered at once: its ttl had passed.
    Expired,
    /// Dead-lettered at once for another permanent failure (the DLQ entry says why).
    DeadLettered,
}

impl DispatchOutcome {
    /// Bounded label for the `outcome` of `sluice_outbox_dispatch_targets_total`.
    pub fn label(self) -> &'static str {
        match self {
            DispatchOutcome::Delivered => "delivered",
            DispatchOutcome::Deduplicated => "deduplicated",
            DispatchOutcome::QueuedBehindPending => "queued_behind_pending",
            DispatchOutcome::QueuedDelayed => "queued_delayed",
            DispatchOutcome::QueuedAtLimit => "queued_at_limit",
            DispatchOutcome::QueuedRefused => "queued_refused",
            DispatchOutcome::QueuedFailed => "queued_failed",
            DispatchOutcome::QueuedOutOfTime => "queued_out_of_time",
            DispatchOutcome::NotFound => "not_found",
            DispatchOutcome::Expired => "expired",
            DispatchOutcome::DeadLettered => "dead_lettered",
        }
    }

    /// Left in the outbox for the relay (every `Queued*` outcome).
    pub fn is_queued(self) -> bool {
        matches!(
            self,
            DispatchOutcome::QueuedBehindPending
                | DispatchOutcome::QueuedDelayed
                | DispatchOutcome::QueuedAtLimit
                | DispatchOutcome::QueuedRefused
                | DispatchOutcome::QueuedFailed
                | DispatchOutcome::QueuedOutOfTime
        )
    }

    /// Dead-lettered at once (`NotFound`, `Expired`, `DeadLettered`).
    pub fn is_dead_lettered(self) -> bool {
        matches!(
            self,
            DispatchOutcome::NotFound | DispatchOutcome::Expired | DispatchOutcome::DeadLettered
        )
    }
}

/// Result of [`Outbox::dispatch`]: one outcome per target, in the order of the messages given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DispatchResult {
    /// What happened to each target, in request order.
    pub outcomes: Vec<DispatchOutcome>,
}

impl DispatchResult {
    /// Targets delivered by the immediate attempt.
    pub fn delivered(&self) -> u32 {
        self.count(|o| o == DispatchOutcome::Delivered)
    }

    /// Targets absorbed by their idempotency key.
    pub fn deduplicated(&self) -> u32 {
        self.count(|o| o == DispatchOutcome::Deduplicated)
    }

    /// Targets left in the outbox for the relay.
    pub fn queued(&self) -> u32 {
        self.count(DispatchOutcome::is_queued)
    }

    /// Targets dead-lettered at once.
    pub fn dead_lettered(&self) -> u32 {
        self.count(DispatchOutcome::is_dead_lettered)
    }

    fn count(&self, f: impl Fn(DispatchOutcome) -> bool) -> u32 {
        // At most one outcome per target, and targets fit in u32 (the WIT counts are u32).
        u32::try_from(self.outcomes.iter().filter(|o| f(**o)).count()).unwrap_or(u32::MAX)
    }
}

pub(crate) struct Inner {
    pub channel: Arc<dyn Channel>,
    pub config: OutboxConfig,
    pub partitions: Vec<Partition>,
    pub wakers: Vec<Notify>,
    /// Every `now` of the outbox (stored timestamps, backoffs, leases) comes from here.
    pub clock: Arc<dyn Clock>,
    last_seq: AtomicI64,
    /// When the earliest reminder known to this host is due (`i64::MAX`: none known); the
    /// reminder pump sleeps until then (or at most `REMINDER_POLL_MS`).
    pub next_reminder: AtomicI64,
    /// Woken when a reminder armed here is due before `next_reminder` was.
    pub reminder_armed: Notify,
}

/// The durable outbox. Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub struct Outbox {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("backend", &self.inner.channel.backend())
            .field("partitions", &self.inner.config.partitions)
            .finish()
    }
}

/// What a delivery attempt did with its permit and what to record.
pub(crate) enum Verdict {
    Delivered,
    Failed(DeliveryError),
    NotAttempted,
    Expired,
}

/// What [`Inner::record`] needs of a claimed row once its verdict is in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempted {
    pub id: i64,
    pub partition: u32,
    /// Attempts before this one that did not deliver.
    pub delivery_count: i64,
    /// How many of those were capacity refusals.
    pub refusals: i64,
}

impl Attempted {
    pub fn of(m: &OutboxMessage) -> Self {
        Self {
            id: m.id,
            partition: m.partition as u32,
            delivery_count: m.delivery_count,
            refusals: m.refusals,
        }
    }
}

/// The envelope of a claimed row, its fields moved out of the row (the relay needs only
/// [`Attempted`] afterwards).
pub(crate) fn envelope_of(m: &mut OutboxMessage) -> Envelope {
    Envelope {
        id: m.id,
        receiver: std::mem::take(&mut m.receiver),
        sender: std::mem::take(&mut m.sender),
        msg_type: std::mem::take(&mut m.msg_type),
        payload: std::mem::take(&mut m.payload),
        mode: m.mode,
        principal: (!m.principal.is_empty()).then(|| std::mem::take(&mut m.principal)),
        deadline: None,
        attempt: u32::try_from(m.delivery_count + 1).unwrap_or(u32::MAX),
        // A malformed stored value (written by something else) only loses the trace.
        trace: m.traceparent.as_deref().and_then(|t| t.parse().ok()),
    }
}

/// The span of one delivery attempt, a child of the message's stored trace context; a
/// disabled span (no allocation) while traces are off. Its `outcome` is recorded by
/// [`record_attempt`].
pub(crate) fn attempt_span(env: &Envelope) -> tracing::Span {
    if !sluice_trace::enabled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "outbox.attempt",
        receiver = %env.receiver,
        // i64: an OpenTelemetry integer (tracing-opentelemetry sends a u64 as text).
        attempt = i64::from(env.attempt),
        outcome = tracing::field::Empty,
        error = tracing::field::Empty,
    );
    sluice_trace::set_parent(&span, env.trace);
    span
}

/// What an immediate attempt's verdict means for its target, as [`Inner::record`] will
/// settle it (a first failure is retried unless the policy allows a single attempt).
fn attempt_outcome(inner: &Inner, verdict: &Verdict, timed_out: bool) -> DispatchOutcome {
    match verdict {
        Verdict::Delivered => DispatchOutcome::Delivered,
        Verdict::NotAttempted => DispatchOutcome::QueuedFailed,
        Verdict::Expired => DispatchOutcome::Expired,
        Verdict::Failed(DeliveryError::Capacity { .. }) => DispatchOutcome::QueuedRefused,
        Verdict::Failed(DeliveryError::Unroutable(_)) => DispatchOutcome::QueuedFailed,
        Verdict::Failed(DeliveryError::NotFound(_)) => DispatchOutcome::NotFound,
        Verdict::Failed(DeliveryError::Permanent(_)) => DispatchOutcome::DeadLettered,
        Verdict::Failed(DeliveryError::Transient(_)) => {
            if !inner.config.retry_policy.should_retry(1) {
                DispatchOutcome::DeadLettered
            } else if timed_out {
                DispatchOutcome::QueuedOutOfTime
            } else {
                DispatchOutcome::QueuedFailed
            }
        }
    }
}

/// Writes an attempt's outcome on its span: `delivered`, `refused` (capacity, retried),
/// `failed` (retried) or `dead_lettered`, as [`Inner::record`] will settle it.
pub(crate) fn record_attempt(span: &tracing::Span, inner: &Inner, m: &Attempted, v: &Verdict) {
    if span.is_disabled() {
        return;
    }
    let outcome = match v {
        Verdict::Delivered => "delivered",
        Verdict::Failed(DeliveryError::Capacity { .. }) => "refused",
        Verdict::Failed(DeliveryError::Unroutable(_)) => "unroutable",
        Verdict::Failed(DeliveryError::Permanent(_) | DeliveryError::NotFound(_)) => {
            "dead_lettered"
        }
        Verdict::Failed(DeliveryError::Transient(_)) => {
            let failures = u32::try_from(m.delivery_count - m.refusals + 1).unwrap_or(u32::MAX);
            if inner.config.retry_policy.should_retry(failures) {
                "failed"
            } else {
                "dead_lettered"
            }
        }
        Verdict::NotAttempted => "not_attempted",
        Verdict::Expired => "expired",
    };
    span.record("outcome", outcome);
    if let Verdict::Failed(e) = v {
        span.record("error", tracing::field::display(e));
    }
}

impl Outbox {
    /// An outbox over any channel, on the wall clock. Validates `config` and seeds host
    /// sequence numbers from the store.
    pub async fn new(channel: Arc<dyn Channel>, config: OutboxConfig) -> Result<Self> {
        Self::with_clock(channel, config, Arc::new(SystemClock)).await
    }

    /// As [`Outbox::new`], with every `now` taken from `clock` (e.g. a
    /// [`crate::TokioClock`] for tests on paused time).
    pub async fn with_clock(
        channel: Arc<dyn Channel>,
        config: OutboxConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        config.validate()?;
        let partitions = (0..config.partitions)
            .map(|p| Partition::new(p, &config.concurrency, &config.actor_types))
            .collect::<Result<Vec<_>>>()?;
        let wakers = (0..config.partitions).map(|_| Notify::new()).collect();
        let last_seq = AtomicI64::new(channel.max_sequence().await?);
        Ok(Self {
            inner: Arc::new(Inner {
                channel,
                config,
                partitions,
                wakers,
                clock,
                last_seq,
                next_reminder: AtomicI64::new(i64::MAX),
                reminder_armed: Notify::new(),
            }),
        })
    }

    /// Open the outbox `url` names (SQLite file created if missing, Postgres migrated).
    /// [`Error::BackendNotCompiled`] when this build lacks that backend's feature.
    pub async fn open(url: &DatabaseUrl, config: OutboxConfig) -> Result<Self> {
        Self::open_with_clock(url, config, Arc::new(SystemClock)).await
    }

    /// As [`Outbox::open`], with every `now` taken from `clock`.
    pub async fn open_with_clock(
        url: &DatabaseUrl,
        config: OutboxConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        let channel: Arc<dyn Channel> = match url {
            #[cfg(feature = "sqlite")]
            DatabaseUrl::Sqlite(path) => Arc::new(crate::channel::SqliteChannel::open(path).await?),
            #[cfg(feature = "postgres")]
            DatabaseUrl::Postgres(url) => {
                // One connection per relay worker, plus dispatch, stats and DLQ operations.
                let conns = (config.partitions + 4).min(32);
                Arc::new(crate::channel::PostgresChannel::open(url, conns).await?)
            }
            #[allow(unreachable_patterns)]
            other => return Err(Error::BackendNotCompiled(other.backend())),
        };
        Self::with_clock(channel, config, clock).await
    }

    /// Open (or create) the SQLite outbox file at `path`.
    #[cfg(feature = "sqlite")]
    pub async fn open_sqlite(
        path: impl AsRef<std::path::Path>,
        config: OutboxConfig,
    ) -> Result<Self> {
        Self::open(&DatabaseUrl::Sqlite(path.as_ref().into()), config).await
    }

    /// Connect to a Postgres outbox.
    #[cfg(feature = "postgres")]
    pub async fn open_postgres(url: &str, config: OutboxConfig) -> Result<Self> {
        Self::open(&DatabaseUrl::Postgres(url.into()), config).await
    }

    /// The backend underneath.
    pub fn backend(&self) -> Backend {
        self.inner.channel.backend()
    }

    /// The clock every `now` of this outbox comes from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// `now` on this outbox's clock, ms since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// The channel underneath.
    pub fn channel(&self) -> &Arc<dyn Channel> {
        &self.inner.channel
    }

    /// The configuration in force.
    pub fn config(&self) -> &OutboxConfig {
        &self.inner.config
    }

    /// Current limit of every bulkhead: (partition, actor type, limit).
    pub fn limits(&self) -> Vec<(u32, String, u32)> {
        self.inner
            .partitions
            .iter()
            .enumerate()
            .flat_map(|(p, part)| {
                part.limits()
                    .into_iter()
                    .map(move |(t, l)| (p as u32, t, l))
            })
            .collect()
    }

    /// The partition of `receiver` under this outbox's partition count.
    pub fn partition_of(&self, receiver: &str) -> u32 {
        sluice_flow::partition::partition_for(receiver, self.inner.config.partitions)
    }

    /// Store one message for the relay (tell_reliable's fallback). Durable when this returns.
    pub async fn store(&self, msg: NewMessage) -> Result<EnqueueOutcome> {
        let mut out = self.enqueue(vec![msg]).await?;
        Ok(out.pop().expect("one outcome per message"))
    }

    /// Store many messages in one transaction for the relay.
    pub async fn enqueue(&self, msgs: Vec<NewMessage>) -> Result<Vec<EnqueueOutcome>> {
        let now = self.now_ms();
        let rows = self.inner.prepare(msgs, now)?;
        let out = self
            .inner
            .channel
            .enqueue(
                &rows,
                EnqueueOptions {
                    claim_heads_until: None,
                    now_ms: now,
                },
            )
            .await?;
        self.inner.wake(rows.iter().map(|r| r.partition));
        Ok(out)
    }

    /// Arm a durable reminder: `msg` (sent by its receiver to itself, due after its
    /// `delay_ms`) is stored before this returns and moved into the outbox when due by the
    /// reminder pump of any host relaying this store, then delivered like any stored message
    /// (at least once). A non-empty `name` (at most [`MAX_REMINDER_NAME`] bytes) replaces the
    /// receiver's pending reminder of that name. Returns `false`, storing nothing, when the
    /// receiver has `max_pending` other reminders pending.
    pub async fn remind(&self, msg: NewMessage, name: &str, max_pending: u32) -> Result<bool> {
        if name.len() > MAX_REMINDER_NAME {
            return Err(Error::InvalidArgument(format!(
                "reminder name of {} bytes exceeds {MAX_REMINDER_NAME}",
                name.len()
            )));
        }
        if msg.ttl_ms.is_some() || msg.idempotency_key.is_some() {
            return Err(Error::InvalidArgument(
                "a reminder has no ttl and no idempotency key (its name replaces)".into(),
            ));
        }
        let now = self.now_ms();
        let row = self
            .inner
            .prepare(vec![msg], now)?
            .pop()
            .expect("one row per message");
        let armed = self
            .inner
            .channel
            .arm_reminder(&row, name, max_pending)
            .await?;
        if armed {
            metrics::counter!("sluice_outbox_reminders_armed_total").increment(1);
            if self
                .inner
                .next_reminder
                .fetch_min(row.send_at, Ordering::AcqRel)
                > row.send_at
            {
                self.inner.reminder_armed.notify_one();
            }
        }
        Ok(armed)
    }

    /// Cancel `receiver`'s pending reminder `name`: whether one was pending (a reminder
    /// already moved into the outbox is being delivered and is not cancelled).
    pub async fn cancel_reminder(&self, receiver: &str, name: &str) -> Result<bool> {
        let cancelled = self.inner.channel.cancel_reminder(receiver, name).await?;
        if cancelled {
            metrics::counter!("sluice_outbox_reminders_cancelled_total").increment(1);
        }
        Ok(cancelled)
    }

    /// Pending reminders (not yet due, or due and not yet moved into the outbox), soonest
    /// due first, of one receiver or of all, at most `limit`. A reminder moved into the outbox
    /// is a stored message from then on, and is no longer listed here.
    pub async fn reminders(
        &self,
        receiver: Option<&str>,
        limit: u32,
    ) -> Result<Vec<PendingReminder>> {
        let now = self.now_ms();
        self.inner.channel.reminders(receiver, limit, now).await
    }

    /// Store one message per target durably (one transaction), then make one immediate
    /// delivery attempt per target within the current limit of its bulkhead.
    ///
    /// Targets that could not be delivered now stay stored for the relay. Rows delivered now
    /// are acked, so the relay does not deliver them again. A receiver that already has a
    /// pending message is not attempted now (that would overtake it): it is
    /// [`DispatchOutcome::QueuedBehindPending`]. The result has one outcome per message, in
    /// the order given.
    ///
    /// `deadline` is the caller's (the dispatching turn's): the immediate attempts give up at
    /// it, holding their permits no longer, and what they did not deliver stays for the relay.
    /// It travels in each [`Envelope`]; one already past means no attempt at all.
    pub async fn dispatch(
        &self,
        msgs: Vec<NewMessage>,
        delivery: &dyn Delivery,
        deadline: Option<Instant>,
    ) -> Result<DispatchResult> {
        let inner = &*self.inner;
        let now = self.now_ms();
        let rows = inner.prepare(msgs, now)?;
        let lease_until = now + inner.config.lease_ms as i64;
        let outcomes = inner
            .channel
            .enqueue(
                &rows,
                EnqueueOptions {
                    claim_heads_until: Some(lease_until),
                    now_ms: now,
                },
            )
            .await?;
        let partitions: Vec<u32> = rows.iter().map(|r| r.partition).collect();
        let deadline_at = deadline.map(tokio::time::Instant::from_std);
        let out_of_time = deadline_at.is_some_and(|d| tokio::time::Instant::now() >= d);

        // One slot per target, in order (prepare and enqueue keep the order of `msgs`); the
        // attempted ones are filled in when their verdicts are in.
        let mut outcomes_out = vec![DispatchOutcome::QueuedFailed; rows.len()];
        let mut settlement = Settlement::default();
        let mut attempts = Vec::new();
        let mut early_verdicts = Vec::new();
        for (index, (row, outcome)) in rows.into_iter().zip(outcomes).enumerate() {
            let id = match outcome {
                EnqueueOutcome::Inserted { id, claimed: true } => id,
                EnqueueOutcome::Inserted { claimed: false, .. } => {
                    outcomes_out[index] = DispatchOutcome::QueuedBehindPending;
                    continue;
                }
                EnqueueOutcome::Duplicate
                | EnqueueOutcome::Replaced { .. }
                | EnqueueOutcome::Stale => {
                    outcomes_out[index] = DispatchOutcome::Deduplicated;
                    continue;
                }
            };
            let attempted = Attempted {
                id,
                partition: row.partition,
                delivery_count: 0,
                refusals: 0,
            };
            if row.send_at > now {
                // Delayed: not due yet, the relay delivers it at send_at.
                outcomes_out[index] = DispatchOutcome::QueuedDelayed;
                settlement.releases.push(Release {
                    id,
                    send_at: row.send_at,
                });
            } else if row.expires_at != 0 && row.expires_at <= now {
                outcomes_out[index] = DispatchOutcome::Expired;
                early_verdicts.push((attempted, Verdict::Expired));
            } else if out_of_time {
                // The caller has no time left to wait on a delivery: the relay makes it.
                outcomes_out[index] = DispatchOutcome::QueuedOutOfTime;
                settlement.releases.push(Release { id, send_at: now });
            } else {
                let part = &inner.partitions[row.partition as usize];
                let bulkhead = part.bulkhead(actor_type_of(&row.msg.receiver));
                match bulkhead.limiter.try_acquire() {
                    Some(permit) => {
                        bulkhead.publish_limit();
                        let m = row.msg;
                        let envelope = Envelope {
                            id,
                            receiver: m.receiver,
                            sender: m.sender,
                            msg_type: m.msg_type,
                            payload: m.payload,
                            mode: m.mode,
                            principal: m.principal,
                            deadline,
                            attempt: 1,
                            trace: m.trace,
                        };
                        attempts.push((index, attempted, envelope, permit, bulkhead));
                    }
                    None => {
                        bulkhead.acquire_rejected.increment(1);
                        outcomes_out[index] = DispatchOutcome::QueuedAtLimit;
                        settlement.releases.push(Release { id, send_at: now });
                    }
                }
            }
        }

        // Deliver concurrently while every permit is held: the limit bounds this fan-out, and
        // the caller's deadline bounds how long the permits are held.
        let verdicts = join_all(attempts.into_iter().map(
            |(index, attempted, envelope, permit, bulkhead)| async move {
                let t0 = Instant::now();
                let span = attempt_span(&envelope);
                let attempt = delivery.deliver(envelope).instrument(span.clone());
                let mut timed_out = false;
                let r = match deadline_at {
                    Some(d) => tokio::time::timeout_at(d, attempt)
                        .await
                        .unwrap_or_else(|_| {
                            timed_out = true;
                            Err(DeliveryError::Transient(DEADLINE_PASSED.into()))
                        }),
                    None => attempt.await,
                };
                let elapsed = t0.elapsed().as_secs_f64();
                let verdict = apply_verdict(bulkhead, permit, r);
                record_attempt(&span, inner, &attempted, &verdict);
                (index, timed_out, attempted, verdict, elapsed)
            },
        ))
        .await;

        let mut rng = SmallRng::from_rng(&mut rand::rng());
        for (m, verdict) in early_verdicts {
            inner.record(m, verdict, now, &mut rng, &mut settlement);
        }
        let now = self.now_ms();
        for (index, timed_out, m, verdict, elapsed) in verdicts {
            let part = &inner.partitions[m.partition as usize];
            part.metrics.delivery_seconds.record(elapsed);
            outcomes_out[index] = attempt_outcome(inner, &verdict, timed_out);
            tracing::debug!(target: "sluice::outbox", id = m.id, partition = m.partition,
                outcome = outcomes_out[index].label(), "dispatch: immediate attempt");
            inner.record(m, verdict, now, &mut rng, &mut settlement);
        }
        inner.channel.settle(&settlement, now).await?;
        inner.wake(partitions);
        for outcome in &outcomes_out {
            metrics::counter!("sluice_outbox_dispatch_targets_total", "outcome" => outcome.label())
                .increment(1);
        }
        Ok(DispatchResult {
            outcomes: outcomes_out,
        })
    }

    /// Depth and oldest-pending age of every partition (zeros for empty ones).
    pub async fn stats(&self) -> Result<Vec<PartitionStats>> {
        let found = self.inner.channel.stats(self.now_ms()).await?;
        Ok((0..self.inner.config.partitions)
            .map(|p| {
                found
                    .iter()
                    .find(|s| s.partition == p)
                    .copied()
                    .unwrap_or(PartitionStats {
                        partition: p,
                        ..Default::default()
                    })
            })
            .collect())
    }

    /// Dead letters, oldest first (optionally of one receiver), at most `limit`.
    pub async fn dlq_list(&self, receiver: Option<&str>, limit: u32) -> Result<Vec<DeadLetter>> {
        self.inner
            .channel
            .dlq_list(receiver, limit, self.now_ms())
            .await
    }

    /// Replay dead letters: delivery count reset, visible now, expiry cleared. Returns how many.
    pub async fn dlq_replay(&self, selector: DlqSelector) -> Result<u64> {
        let n = self
            .inner
            .channel
            .dlq_replay(&selector, self.now_ms())
            .await?;
        self.inner.wake(0..self.inner.config.partitions);
        Ok(n)
    }

    /// Delete dead letters. Returns how many.
    pub async fn dlq_purge(&self, selector: DlqSelector) -> Result<u64> {
        self.inner.channel.dlq_purge(&selector).await
    }
}

/// What an immediate attempt that outlived its caller's deadline records (a transient
/// failure: it backs off and the relay delivers it).
const DEADLINE_PASSED: &str =
    "DEADLINE_EXCEEDED: the dispatching turn's deadline passed during the immediate attempt";

/// Settle the permit with the verdict of one delivery.
pub(crate) fn apply_verdict(
    bulkhead: &Bulkhead,
    permit: sluice_flow::limiter::Permit<'_>,
    r: std::result::Result<(), DeliveryError>,
) -> Verdict {
    let v = match r {
        Ok(()) => {
            bulkhead.limiter.on_success(permit);
            bulkhead.success.increment(1);
            Verdict::Delivered
        }
        Err(e @ DeliveryError::Capacity { .. }) => {
            bulkhead.limiter.on_rejection(permit);
            bulkhead.rejection.increment(1);
            Verdict::Failed(e)
        }
        // Not a congestion signal: the permit is released, the limit does not move.
        Err(e) => {
            drop(permit);
            Verdict::Failed(e)
        }
    };
    bulkhead.publish_limit();
    v
}

impl Inner {
    /// Host-assigned sequence numbers: microseconds since the epoch, forced strictly
    /// increasing (and above anything stored) so a restart never goes backwards.
    fn next_seq(&self, now_ms: i64) -> i64 {
        let floor = now_ms.saturating_mul(1000);
        let prev = self
            .last_seq
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some(floor.max(last + 1))
            })
            .expect("closure always returns Some");
        floor.max(prev + 1)
    }

    pub fn prepare(&self, msgs: Vec<NewMessage>, now: i64) -> Result<Vec<NewRow>> {
        msgs.into_iter()
            .map(|msg| {
                if msg.receiver.is_empty() {
                    return Err(Error::InvalidArgument("receiver must not be empty".into()));
                }
                let partition =
                    sluice_flow::partition::partition_for(&msg.receiver, self.config.partitions);
                let sequence_number = match msg.sequence_number {
                    Some(s) => s,
                    None => self.next_seq(now),
                };
                let headers_json = serde_json::to_string(&msg.headers)
                    .map_err(|e| Error::InvalidArgument(format!("headers: {e}")))?;
                Ok(NewRow {
                    partition,
                    sequence_number,
                    created_at: now,
                    send_at: now + msg.delay_ms as i64,
                    expires_at: msg.ttl_ms.map_or(0, |t| now + t as i64),
                    headers_json,
                    msg,
                })
            })
            .collect()
    }

    pub fn wake(&self, partitions: impl IntoIterator<Item = u32>) {
        let mut seen = 0u128;
        for p in partitions {
            let bit = 1u128 << (p % 128);
            if p >= 128 || seen & bit == 0 {
                seen |= bit;
                // notify_one stores a permit if the worker is busy: no lost wake-ups.
                self.wakers[p as usize].notify_one();
            }
        }
    }

    /// Turn one verdict into a settlement entry and metrics.
    pub fn record(
        &self,
        m: Attempted,
        verdict: Verdict,
        now: i64,
        rng: &mut SmallRng,
        s: &mut Settlement,
    ) {
        let metrics = &self.partitions[m.partition as usize].metrics;
        let policy = &self.config.retry_policy;
        match verdict {
            Verdict::Delivered => {
                metrics.delivered.increment(1);
                s.acks.push(m.id);
            }
            Verdict::NotAttempted => s.releases.push(Release {
                id: m.id,
                send_at: now,
            }),
            Verdict::Expired => {
                metrics.dead(dead_reason::EXPIRED).increment(1);
                s.dead.push(DeadLetterOp {
                    id: m.id,
                    reason: dead_reason::EXPIRED,
                    last_error: None,
                    attempted: false,
                });
            }
            Verdict::Failed(err) => {
                // Every attempt backs off further; only failures count toward max_attempts.
                let attempt = u32::try_from(m.delivery_count + 1).unwrap_or(u32::MAX);
                let failures = u32::try_from(m.delivery_count - m.refusals + 1).unwrap_or(u32::MAX);
                // Backpressure (a capacity refusal) or this host's own outage (unroutable) is
                // not a failure of this message: back off, never sooner than the hint, and try
                // again however often it takes; it never counts toward max_attempts (a TTL
                // still bounds it).
                let uncounted = match &err {
                    DeliveryError::Capacity { retry_after_ms, .. } => {
                        metrics.backpressure.increment(1);
                        Some(*retry_after_ms)
                    }
                    DeliveryError::Unroutable(_) => {
                        metrics.errors.increment(1);
                        Some(UNROUTABLE_PAUSE_MS)
                    }
                    _ => None,
                };
                if let Some(hint) = uncounted {
                    metrics.retries.increment(1);
                    let d = policy.backoff_after_capacity_ms(attempt, hint, rng);
                    s.retries.push(Retry {
                        id: m.id,
                        send_at: now + d as i64,
                        last_error: err.to_string(),
                        refused: true,
                    });
                    return;
                }
                // Transient: retried until max_attempts; permanent or not found: dead at once.
                metrics.errors.increment(1);
                let delay = matches!(err, DeliveryError::Transient(_))
                    .then(|| policy.backoff_ms(attempt, rng));
                let text = err.to_string();
                match delay {
                    Some(d) if policy.should_retry(failures) => {
                        metrics.retries.increment(1);
                        s.retries.push(Retry {
                            id: m.id,
                            send_at: now + d as i64,
                            last_error: text,
                            refused: false,
                        });
                    }
                    _ => {
                        let reason = if delay.is_none() {
                            dead_reason::PERMANENT
                        } else {
                            dead_reason::MAX_ATTEMPTS
                        };
                        metrics.dead(reason).increment(1);
                        tracing::warn!(id = m.id, partition = m.partition, attempt, reason, error = %text,
                            "outbox message dead-lettered");
                        s.dead.push(DeadLetterOp {
                            id: m.id,
                            reason,
                            last_error: Some(text),
                            attempted: true,
                        });
                    }
                }
            }
        }
    }
}
