//! The durable channel: one schema, two sqlx backends (SQLite embedded, Postgres shared).
//!
//! # FIFO per receiver under backoff
//! Row ids grow with enqueue order. A claim takes a pending row only if the same receiver has
//! no *older* pending row that is invisible right now (backing off: `send_at > now`, or claimed
//! by someone: `claimed_until > now`). Claims are ordered by id, so when a receiver's row is in
//! a claimed batch, every older pending row of that receiver is in the same batch, and the
//! relay delivers one receiver's rows in id order, stopping at the first failure (the rest of
//! that receiver's rows are released untouched). A receiver whose head is backing off is thus
//! skipped as a whole, and other receivers in the partition are not blocked by it.
//!
//! Dispatch's immediate attempt claims a new row at enqueue only when its receiver has no
//! pending row at all (`EnqueueTx::busy`), so it never passes an older row it can see.
//!
//! # Whose order
//! On SQLite one writer commits enqueues in id order, so the order above is every sender's
//! enqueue order. On Postgres ids are drawn when a row is inserted, and concurrent enqueues
//! from several hosts or tasks commit in any order (under load, one commit can land most of a
//! second after a later id's): a relay or a dispatch may deliver a receiver's row before an
//! older id that was not committed yet. What holds there is FIFO per (sender, receiver): a
//! sender's next enqueue starts after its previous one committed, so its rows are visible in
//! id order, and every rule above keeps them in it.
//!
//! # Where claims live
//! SQLite belongs to one host process and keeps its claims in that process (see `sqlite.rs`):
//! no row rewrite per claim, and a crashed process's claims end with it. On Postgres the host
//! that leases a partition keeps its relay claims in memory the same way, and dispatch's
//! immediate attempts lease their rows in `claimed_until` (see `postgres.rs`).

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod enqueue;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod migrations;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(feature = "postgres")]
pub use postgres::PostgresChannel;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteChannel;

use async_trait::async_trait;

use crate::error::Result;
use crate::message::{
    DeadLetter, DlqSelector, EnqueueOutcome, NewRow, OutboxMessage, PartitionStats,
    PendingReminder, Settlement,
};

/// Which database a channel stores into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// SQLite file, single writer connection, WAL.
    Sqlite,
    /// Postgres, shared by several hosts.
    Postgres,
}

impl Backend {
    /// `sqlite` or `postgres` (also the cargo feature that compiles it).
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Options of one [`Channel::enqueue`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnqueueOptions {
    /// Store each receiver's *head* row (no older pending row for that receiver, first in this
    /// batch) already claimed until this time, for an immediate delivery attempt by the caller.
    pub claim_heads_until: Option<i64>,
    /// The caller's clock, ms since epoch (for "is that pending row claimed right now").
    pub now_ms: i64,
}

/// Durable storage of outbox messages. Dyn-compatible: the runtime holds an
/// `Arc<dyn Channel>`.
#[async_trait]
pub trait Channel: Send + Sync + 'static {
    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// Store `rows` in one transaction (multi-row statements), applying APPEND/OVERWRITE
    /// conflict rules. Returns one outcome per row, in order.
    async fn enqueue(&self, rows: &[NewRow], opts: EnqueueOptions) -> Result<Vec<EnqueueOutcome>>;

    /// Claim up to `limit` visible rows of `partition`, leasing them until
    /// `now_ms + lease_ms`. Rows come back in id order and respect FIFO per receiver (see the
    /// module docs): the backend scans the partition's pending rows in id order, so it meets
    /// every receiver's earliest pending row first.
    async fn claim(
        &self,
        partition: u32,
        limit: u32,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Vec<OutboxMessage>>;

    /// Apply verdicts on claimed rows in one transaction.
    async fn settle(&self, settlement: &Settlement, now_ms: i64) -> Result<()>;

    /// Depth and oldest-pending age per partition (partitions with no pending rows omitted).
    async fn stats(&self, now_ms: i64) -> Result<Vec<PartitionStats>>;

    /// Depth and oldest-pending age of one partition (index range scans only: cheap enough
    /// for each relay worker to call every `stats_interval_ms`). The age is that of the
    /// lowest-id pending row, i.e. the oldest enqueued.
    async fn partition_stats(&self, partition: u32, now_ms: i64) -> Result<PartitionStats>;

    /// List dead letters (oldest first), optionally of one receiver, at most `limit`.
    async fn dlq_list(
        &self,
        receiver: Option<&str>,
        limit: u32,
        now_ms: i64,
    ) -> Result<Vec<DeadLetter>>;

    /// Move dead letters back to pending: delivery_count and refusals 0, visible at `now_ms`,
    /// no expiry.
    /// Returns how many.
    async fn dlq_replay(&self, selector: &DlqSelector, now_ms: i64) -> Result<u64>;

    /// Delete dead letters. Returns how many.
    async fn dlq_purge(&self, selector: &DlqSelector) -> Result<u64>;

    /// One row by id (any state).
    async fn get(&self, id: i64) -> Result<Option<OutboxMessage>>;

    /// Highest stored sequence number (0 if none); seeds host-assigned sequence numbers.
    async fn max_sequence(&self) -> Result<i64>;

    /// Delete up to `limit` acked rows of `partition` settled before `before_ms` (retention;
    /// APPEND deduplication only sees rows still stored). Returns how many.
    async fn compact(&self, partition: u32, before_ms: i64, limit: u32) -> Result<u64>;

    /// This host stops relaying `partition` (its relay worker ended): a backend that leases
    /// partitions to hosts gives the lease up, so another host need not wait for it to lapse.
    async fn release(&self, _partition: u32) -> Result<()> {
        Ok(())
    }

    /// Whether this channel holds `partition` at `now_ms` as of its last claim (a backend
    /// without partition leases always does).
    fn holds(&self, _partition: u32, _now_ms: i64) -> bool {
        true
    }

    /// Names this channel's partition leases `name` from now on, so that other hosts can end
    /// them when the cluster sees this host die (a member's node id and incarnation). Only
    /// while it leases no partition; a backend without partition leases ignores it.
    fn set_lessee(&self, _name: &str) -> Result<()> {
        Ok(())
    }

    /// Stores a durable reminder: `row` (its `send_at` is the due time) waits in the reminder
    /// table until [`Channel::promote_reminders`] moves it into the outbox. A non-empty `name`
    /// replaces the pending reminder of that name of `row.msg.receiver`. Returns `false`, and
    /// stores nothing, when the receiver has `max_pending` other reminders pending.
    async fn arm_reminder(&self, row: &NewRow, name: &str, max_pending: u32) -> Result<bool>;

    /// Deletes `receiver`'s pending reminder `name`; whether one was pending.
    async fn cancel_reminder(&self, receiver: &str, name: &str) -> Result<bool>;

    /// Pending reminders, soonest due first, optionally of one receiver, at most `limit`.
    async fn reminders(
        &self,
        receiver: Option<&str>,
        limit: u32,
        now_ms: i64,
    ) -> Result<Vec<PendingReminder>>;

    /// Moves up to `limit` reminders due at `now_ms` into the outbox in one transaction, as
    /// pending rows visible at once (so they queue behind what their receivers already have
    /// pending). Any number of hosts may call it at once: each reminder is moved once.
    async fn promote_reminders(&self, now_ms: i64, limit: u32) -> Result<Promoted>;

    /// Ends every partition lease held under `name` (a member the cluster saw die), so each
    /// partition's next owner takes it at once instead of waiting out `lease_ms`. The dead
    /// host's claims died with it; its partitions' rows are delivered again (at least once).
    /// Returns how many leases ended.
    async fn end_leases_of(&self, _name: &str) -> Result<u64> {
        Ok(0)
    }
}

/// What [`Channel::promote_reminders`] moved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Promoted {
    /// The partition of each row moved into the outbox.
    pub partitions: Vec<u32>,
    /// When the earliest reminder still waiting is due (ms since the Unix epoch), if any.
    pub next_due: Option<i64>,
}

/// The reminder columns [`Channel::arm_reminder`] writes, in the order it binds them.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const REMINDER_COLUMNS: &str = "receiver, name, due_at, tenant, namespace, channel, \
    partition, receiver_type, msg_type, payload, principal, headers, sequence_number, \
    created_at, traceparent";

/// Arming a reminder, on both backends (SQLite reads `$N` as the N-th bound value too): the
/// receiver's other pending reminders are counted and the row inserted, or a pending one of
/// the same name replaced, in one statement. Bind with [`bind_reminder!`].
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn arm_reminder_sql() -> String {
    format!(
        "INSERT INTO outbox_reminders ({REMINDER_COLUMNS}) \
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 \
         WHERE (SELECT COUNT(*) FROM outbox_reminders \
                WHERE receiver = $1 AND ($2 = '' OR name <> $2)) < $16 \
         ON CONFLICT (receiver, name) WHERE name <> '' DO UPDATE SET \
         due_at = excluded.due_at, msg_type = excluded.msg_type, payload = excluded.payload, \
         principal = excluded.principal, headers = excluded.headers, \
         sequence_number = excluded.sequence_number, created_at = excluded.created_at, \
         traceparent = excluded.traceparent"
    )
}

/// Listing pending reminders, on both backends, as [`crate::message::ReminderRow`]s: every
/// receiver's (bind the limit), or one receiver's (bind it, then the limit). Soonest due first,
/// from the due-time index or the receiver index.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn list_reminders_sql(one_receiver: bool) -> &'static str {
    if one_receiver {
        "SELECT id, receiver, name, msg_type, due_at, CAST(length(payload) AS BIGINT), created_at          FROM outbox_reminders WHERE receiver = $1 ORDER BY due_at, id LIMIT $2"
    } else {
        "SELECT id, receiver, name, msg_type, due_at, CAST(length(payload) AS BIGINT), created_at          FROM outbox_reminders ORDER BY due_at, id LIMIT $1"
    }
}

/// Binds a [`NewRow`], its reminder name and the per-receiver cap to [`arm_reminder_sql`].
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! bind_reminder {
    ($query:expr, $row:expr, $name:expr, $max_pending:expr) => {{
        let row: &$crate::message::NewRow = $row;
        let m = &row.msg;
        $query
            .bind(m.receiver.as_str())
            .bind($name)
            .bind(row.send_at)
            .bind(m.tenant.as_str())
            .bind(m.namespace.as_str())
            .bind(m.channel.as_str())
            .bind(i64::from(row.partition))
            .bind($crate::message::actor_type_of(&m.receiver))
            .bind(m.msg_type.as_str())
            .bind(m.payload.as_ref())
            .bind(m.principal.as_deref().unwrap_or(""))
            .bind(row.headers_json.as_str())
            .bind(row.sequence_number)
            .bind(row.created_at)
            .bind(m.trace.map(|t| t.to_string()))
            .bind(i64::from($max_pending))
    }};
}
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use bind_reminder;

/// Moving due reminders into the outbox: the `INSERT … SELECT` both backends run over the rows
/// chosen by `FROM {from}`. A reminder becomes a cast from its receiver to itself, pending
/// from `now` (bound as `{now}`), with no key and no expiry.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn promote_sql(now: &str, from: &str) -> String {
    format!(
        "INSERT INTO outbox_messages (tenant, namespace, channel, partition, sender, receiver, \
         receiver_type, msg_type, payload, principal, headers, idempotency_key, conflict, \
         sequence_number, send_at, created_at, expires_at, mode, traceparent) \
         SELECT tenant, namespace, channel, partition, receiver, receiver, receiver_type, \
         msg_type, payload, principal, headers, '', 'append', sequence_number, 0, {now}, 0, \
         'cast', traceparent FROM {from} ORDER BY due_at, id RETURNING receiver, partition"
    )
}

/// Column list shared by every `RETURNING`/`SELECT` that builds an [`OutboxMessage`].
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const COLUMNS: &str = "id, tenant, namespace, channel, partition, sender, receiver, \
    receiver_type, msg_type, payload, principal, headers, idempotency_key, conflict, \
    sequence_number, delivery_count, refusals, send_at, created_at, claimed_until, acked, \
    dead_lettered, dead_reason, last_error, expires_at, mode, traceparent";

#[cfg(any(feature = "sqlite", feature = "postgres"))]
/// Rows per multi-row statement (SQLite allows 32 766 bound values, Postgres 65 535).
pub(crate) const CHUNK: usize = 1000;

/// Conflict resolution shared by both backends: what the database already holds for the
/// keys of a batch, and the decisions taken row by row.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod plan {
    use std::collections::{HashMap, HashSet};

    use crate::message::{Conflict, EnqueueOutcome, NewRow};

    /// A stored row with an idempotency key, as the look-up returns it.
    #[derive(Debug, Clone)]
    pub struct Existing {
        pub id: i64,
        pub receiver: String,
        pub key: String,
        pub sequence_number: i64,
        pub pending: bool,
        pub claimed_until: i64,
    }

    /// What to do with each input row.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Action {
        /// Insert; `claim` = store it claimed (head of its receiver, dispatch).
        Insert { claim: bool },
        /// Update the stored row `id` with this row's content.
        Overwrite { id: i64 },
        /// Fold into the earlier input row at index `into` (OVERWRITE within one batch).
        FoldInto { into: usize },
        /// Nothing to store.
        Skip(EnqueueOutcome),
    }

    /// Decide per row. `existing` = stored rows with the batch's (receiver, key) pairs;
    /// `busy_receivers` = receivers with a pending row in the store (only needed for heads).
    pub fn decide(
        rows: &[NewRow],
        existing: &[Existing],
        busy_receivers: &HashSet<String>,
        claim_heads: bool,
        now_ms: i64,
    ) -> Vec<Action> {
        // (receiver, key) -> state
        #[derive(Default)]
        struct Slot {
            any: bool,
            /// newest pending sequence number
            pending_seq: Option<i64>,
            /// a pending, unclaimed stored row we may overwrite
            overwritable: Option<i64>,
            /// an input row of this batch that is going to be inserted (pending, unclaimed
            /// unless it is a claimed head)
            batch_row: Option<usize>,
        }
        let mut slots: HashMap<(&str, &str), Slot> = HashMap::new();
        for e in existing {
            let s = slots.entry((&e.receiver, &e.key)).or_default();
            s.any = true;
            if e.pending {
                s.pending_seq = Some(
                    s.pending_seq
                        .map_or(e.sequence_number, |q| q.max(e.sequence_number)),
                );
                if e.claimed_until <= now_ms {
                    // Prefer the newest overwritable row.
                    s.overwritable = Some(s.overwritable.map_or(e.id, |i| i.max(e.id)));
                }
            }
        }
        let mut seen_receivers: HashSet<&str> = HashSet::new();
        let mut actions = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let key = row.msg.key();
            let receiver = row.msg.receiver.as_str();
            let head = claim_heads
                && !busy_receivers.contains(receiver)
                && !seen_receivers.contains(receiver);
            if key.is_empty() {
                seen_receivers.insert(receiver);
                actions.push(Action::Insert { claim: head });
                continue;
            }
            let slot = slots.entry((receiver, key)).or_default();
            let action = match row.msg.conflict {
                Conflict::Append if slot.any => Action::Skip(EnqueueOutcome::Duplicate),
                Conflict::Append => {
                    slot.any = true;
                    slot.batch_row = Some(i);
                    Action::Insert { claim: head }
                }
                Conflict::Overwrite => {
                    let seq = row.sequence_number;
                    if slot.pending_seq.is_some_and(|p| seq < p) {
                        Action::Skip(EnqueueOutcome::Stale)
                    } else if let Some(b) = slot.batch_row {
                        slot.pending_seq = Some(seq);
                        Action::FoldInto { into: b }
                    } else if let Some(id) = slot.overwritable {
                        slot.pending_seq = Some(seq);
                        Action::Overwrite { id }
                    } else {
                        slot.any = true;
                        slot.pending_seq = Some(seq);
                        slot.batch_row = Some(i);
                        Action::Insert { claim: head }
                    }
                }
            };
            if matches!(action, Action::Insert { .. }) {
                seen_receivers.insert(receiver);
            }
            actions.push(action);
        }
        actions
    }
}
