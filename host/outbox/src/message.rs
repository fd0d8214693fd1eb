//! Messages as callers submit them, as they are stored, and the outcomes of storing them.

use bytes::Bytes;
use serde::Deserialize;
use sluice_trace::TraceParent;

use crate::delivery::DispatchMode;
use crate::error::{Error, Result};

/// What to do when a message repeats an idempotency key already stored for the same receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Conflict {
    /// The repeat is a duplicate: stored once; `dispatch` says `Deduplicated`.
    #[default]
    Append,
    /// Last write wins: the repeat replaces the pending (unacked, unclaimed) message with the
    /// same key and receiver, unless its sequence number is older than the stored one.
    Overwrite,
}

impl Conflict {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Conflict::Append => "append",
            Conflict::Overwrite => "overwrite",
        }
    }

    /// Parse the guest/WIT spelling; an empty string means the default (`append`).
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "" | "append" => Ok(Conflict::Append),
            "overwrite" => Ok(Conflict::Overwrite),
            other => Err(Error::InvalidArgument(format!(
                "unknown conflict resolution {other:?} (expected append or overwrite)"
            ))),
        }
    }

    /// The stored spelling back; `None` for anything this crate never writes.
    pub fn from_stored(s: &str) -> Option<Self> {
        match s {
            "append" => Some(Conflict::Append),
            "overwrite" => Some(Conflict::Overwrite),
            _ => None,
        }
    }
}

impl TryFrom<String> for Conflict {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        Self::from_stored(&s).ok_or_else(|| format!("unknown conflict {s:?} in the store"))
    }
}

/// A message to store. Build with [`NewMessage::new`] and the `with_*` setters.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    /// Tenant scope (default `default`).
    pub tenant: String,
    /// Namespace scope (default `default`).
    pub namespace: String,
    /// Channel name (default `outbox`).
    pub channel: String,
    /// Sending actor id (empty for the host itself).
    pub sender: String,
    /// Receiving actor id, `Type/key`.
    pub receiver: String,
    /// Message type the receiver's handler sees.
    pub msg_type: String,
    /// Opaque payload (shared, not copied, between the targets of a dispatch).
    pub payload: Bytes,
    /// Who the work is for (`None` = the host itself); handed to the receiver with every
    /// delivery.
    pub principal: Option<String>,
    /// Headers as a JSON object (stored as text).
    pub headers: serde_json::Map<String, serde_json::Value>,
    /// Idempotency key; `None` or empty means none.
    pub idempotency_key: Option<String>,
    /// Conflict resolution for a repeated key.
    pub conflict: Conflict,
    /// Caller's sequence number for OVERWRITE ordering; the host assigns a monotonic one if
    /// `None`.
    pub sequence_number: Option<i64>,
    /// Delay before the first delivery, in milliseconds.
    pub delay_ms: u64,
    /// Time to live in milliseconds; an expired message is dead-lettered with reason
    /// `expired` and never delivered. `None` = no expiry.
    pub ttl_ms: Option<u64>,
    /// How the message counts as delivered (default [`DispatchMode::Cast`]).
    pub mode: DispatchMode,
    /// The sender's trace context (its `dispatch` span), stored with the row so every
    /// delivery attempt is a span of the same trace. `None` when traces are off.
    pub trace: Option<TraceParent>,
}

impl NewMessage {
    /// A message to `receiver` of type `msg_type`, with default scope and no key.
    pub fn new(
        receiver: impl Into<String>,
        msg_type: impl Into<String>,
        payload: impl Into<Bytes>,
    ) -> Self {
        Self {
            tenant: "default".into(),
            namespace: "default".into(),
            channel: "outbox".into(),
            sender: String::new(),
            receiver: receiver.into(),
            msg_type: msg_type.into(),
            payload: payload.into(),
            principal: None,
            headers: serde_json::Map::new(),
            idempotency_key: None,
            conflict: Conflict::Append,
            sequence_number: None,
            delay_ms: 0,
            ttl_ms: None,
            mode: DispatchMode::Cast,
            trace: None,
        }
    }

    /// Set the sender.
    pub fn with_sender(mut self, sender: impl Into<String>) -> Self {
        self.sender = sender.into();
        self
    }

    /// Set the idempotency key and conflict resolution.
    pub fn with_key(mut self, key: impl Into<String>, conflict: Conflict) -> Self {
        self.idempotency_key = Some(key.into());
        self.conflict = conflict;
        self
    }

    /// Set an explicit sequence number.
    pub fn with_sequence(mut self, seq: i64) -> Self {
        self.sequence_number = Some(seq);
        self
    }

    /// Set a time to live.
    pub fn with_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }

    /// Delay the first delivery.
    pub fn with_delay_ms(mut self, delay_ms: u64) -> Self {
        self.delay_ms = delay_ms;
        self
    }

    /// Set the tenant and namespace.
    pub fn with_scope(mut self, tenant: impl Into<String>, namespace: impl Into<String>) -> Self {
        self.tenant = tenant.into();
        self.namespace = namespace.into();
        self
    }

    /// Set the delivery mode.
    pub fn with_mode(mut self, mode: DispatchMode) -> Self {
        self.mode = mode;
        self
    }

    /// Set the trace context the deliveries continue.
    pub fn with_trace(mut self, trace: Option<TraceParent>) -> Self {
        self.trace = trace;
        self
    }

    /// Set the principal the work is for.
    pub fn with_principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Add a header.
    pub fn with_header(
        mut self,
        name: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    pub(crate) fn key(&self) -> &str {
        self.idempotency_key.as_deref().unwrap_or("")
    }
}

/// The actor type of an address `Type/key` (the whole id if it has no `/`).
pub fn actor_type_of(receiver: &str) -> &str {
    receiver.split_once('/').map_or(receiver, |(t, _)| t)
}

/// A fully resolved row, ready to insert (what [`crate::Channel::enqueue`] takes).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRow {
    /// The message.
    pub msg: NewMessage,
    /// Partition of the receiver.
    pub partition: u32,
    /// Sequence number (assigned if the caller gave none).
    pub sequence_number: i64,
    /// Creation time, ms since the Unix epoch.
    pub created_at: i64,
    /// First visibility time, ms since the Unix epoch.
    pub send_at: i64,
    /// Expiry, ms since the Unix epoch; 0 = never.
    pub expires_at: i64,
    /// Headers serialised as JSON text.
    pub headers_json: String,
}

/// A stored message as the relay claims it and [`crate::Delivery`] receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxMessage {
    /// Row id; ids grow with enqueue order, which is the FIFO order per receiver.
    pub id: i64,
    /// Tenant scope.
    pub tenant: String,
    /// Namespace scope.
    pub namespace: String,
    /// Channel name.
    pub channel: String,
    /// Partition (FNV-1a of the receiver).
    pub partition: i64,
    /// Sender id.
    pub sender: String,
    /// Receiver id.
    pub receiver: String,
    /// Receiver actor type (before the `/`).
    pub receiver_type: String,
    /// Message type.
    pub msg_type: String,
    /// Payload.
    pub payload: Bytes,
    /// Principal the work is for ('' = the host itself).
    pub principal: String,
    /// Headers, JSON object text.
    pub headers: String,
    /// Idempotency key ('' = none).
    pub idempotency_key: String,
    /// Conflict resolution of a repeated key.
    pub conflict: Conflict,
    /// Sequence number.
    pub sequence_number: i64,
    /// Delivery attempts so far that did not deliver (capacity refusals included).
    pub delivery_count: i64,
    /// How many of those attempts were capacity refusals (full mailbox, activation cap, a
    /// handler's own `RESOURCE_EXHAUSTED` with a hint). They never count toward
    /// `max_attempts`.
    pub refusals: i64,
    /// Not visible before this time (ms since epoch); backoff moves it.
    pub send_at: i64,
    /// Creation time (ms since epoch).
    pub created_at: i64,
    /// Lease end of the current claim (ms since epoch); 0 = unclaimed.
    pub claimed_until: i64,
    /// Delivered and acknowledged.
    pub acked: bool,
    /// In the dead-letter queue.
    pub dead_lettered: bool,
    /// Why it was dead-lettered (`max_attempts`, `permanent`, `expired`).
    pub dead_reason: Option<String>,
    /// Last delivery error.
    pub last_error: Option<String>,
    /// Expiry (ms since epoch); 0 = never.
    pub expires_at: i64,
    /// Delivery mode.
    pub mode: DispatchMode,
    /// The stored `traceparent` of the sender's span; `None` when traces were off.
    pub traceparent: Option<String>,
}

/// Decodes a row by column name ([`crate::channel`]'s `COLUMNS`), in either backend. Written
/// out rather than derived: `#[derive(sqlx::FromRow)]` needs sqlx's `macros` feature, whose
/// proc-macro crate compiles a second sqlx with both drivers and SQLite for the build host.
impl<'r, R> sqlx::FromRow<'r, R> for OutboxMessage
where
    R: sqlx::Row,
    &'static str: sqlx::ColumnIndex<R>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn from_row(row: &'r R) -> std::result::Result<Self, sqlx::Error> {
        /// A stored text that names no variant, as the error sqlx gives a column that fails
        /// to decode.
        fn parsed<T: TryFrom<String, Error = String>>(
            column: &str,
            text: String,
        ) -> std::result::Result<T, sqlx::Error> {
            T::try_from(text).map_err(|e| sqlx::Error::ColumnDecode {
                index: column.to_string(),
                source: e.into(),
            })
        }
        Ok(Self {
            id: row.try_get("id")?,
            tenant: row.try_get("tenant")?,
            namespace: row.try_get("namespace")?,
            channel: row.try_get("channel")?,
            partition: row.try_get("partition")?,
            sender: row.try_get("sender")?,
            receiver: row.try_get("receiver")?,
            receiver_type: row.try_get("receiver_type")?,
            msg_type: row.try_get("msg_type")?,
            payload: Bytes::from(row.try_get::<Vec<u8>, _>("payload")?),
            principal: row.try_get("principal")?,
            headers: row.try_get("headers")?,
            idempotency_key: row.try_get("idempotency_key")?,
            conflict: parsed("conflict", row.try_get("conflict")?)?,
            sequence_number: row.try_get("sequence_number")?,
            delivery_count: row.try_get("delivery_count")?,
            refusals: row.try_get("refusals")?,
            send_at: row.try_get("send_at")?,
            created_at: row.try_get("created_at")?,
            claimed_until: row.try_get("claimed_until")?,
            acked: row.try_get("acked")?,
            dead_lettered: row.try_get("dead_lettered")?,
            dead_reason: row.try_get("dead_reason")?,
            last_error: row.try_get("last_error")?,
            expires_at: row.try_get("expires_at")?,
            mode: parsed("mode", row.try_get("mode")?)?,
            traceparent: row.try_get("traceparent")?,
        })
    }
}

impl OutboxMessage {
    /// Whether the message has expired at `now_ms`.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expires_at > 0 && self.expires_at <= now_ms
    }
}

/// What happened to one submitted message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueOutcome {
    /// Stored as a new row. `claimed` is true when the row was stored already claimed for an
    /// immediate delivery attempt (dispatch), which happens only for a receiver's head row.
    Inserted {
        /// New row id.
        id: i64,
        /// Stored claimed for immediate delivery.
        claimed: bool,
    },
    /// APPEND with a key already stored for this receiver: not stored again.
    Duplicate,
    /// OVERWRITE replaced the pending row `id`.
    Replaced {
        /// The replaced row.
        id: i64,
    },
    /// OVERWRITE whose sequence number is older than the pending one: ignored.
    Stale,
}

/// Why a message is in the DLQ.
pub mod dead_reason {
    /// `max_attempts` failed deliveries.
    pub const MAX_ATTEMPTS: &str = "max_attempts";
    /// The receiver refused it permanently.
    pub const PERMANENT: &str = "permanent";
    /// Its TTL passed before delivery.
    pub const EXPIRED: &str = "expired";
}

/// One dead-lettered message as `dlq list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Row id.
    pub id: i64,
    /// Receiver id.
    pub receiver: String,
    /// Message type.
    pub msg_type: String,
    /// Delivery attempts made.
    pub attempts: i64,
    /// Reason (`max_attempts`, `permanent`, `expired`).
    pub reason: String,
    /// Last delivery error, if any.
    pub last_error: Option<String>,
    /// Age since creation, ms.
    pub age_ms: i64,
}

/// A reminder waiting for its due time, as [`crate::Outbox::reminders`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingReminder {
    /// Row id (in the reminder table; it gets a new id once moved into the outbox).
    pub id: i64,
    /// The actor it is for (and from).
    pub receiver: String,
    /// Its name; empty for an anonymous reminder.
    pub name: String,
    /// Message type.
    pub msg_type: String,
    /// When it is due, ms since the Unix epoch.
    pub due_at_ms: i64,
    /// Until it is due, at the time of listing; negative when it is due and the relay has not
    /// moved it into the outbox yet.
    pub due_in_ms: i64,
    /// Payload size, bytes.
    pub payload_bytes: i64,
    /// Since it was armed (or last re-armed), ms.
    pub age_ms: i64,
}

/// A reminder row as both backends select it ([`crate::channel`]'s listing statements).
pub(crate) type ReminderRow = (i64, String, String, String, i64, i64, i64);

impl PendingReminder {
    pub(crate) fn from_row(
        (id, receiver, name, msg_type, due_at_ms, payload_bytes, created_at): ReminderRow,
        now_ms: i64,
    ) -> Self {
        Self {
            id,
            receiver,
            name,
            msg_type,
            due_at_ms,
            due_in_ms: due_at_ms - now_ms,
            payload_bytes,
            age_ms: now_ms - created_at,
        }
    }
}

/// Which dead letters a DLQ operation applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DlqSelector {
    /// Every dead letter.
    All,
    /// One message.
    Id(i64),
    /// All dead letters of one receiver.
    Receiver(String),
}

/// Depth and age of one partition's pending messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionStats {
    /// Partition index.
    pub partition: u32,
    /// Pending (unacked, not dead) messages.
    pub depth: u64,
    /// Age of the oldest pending message, ms (0 when empty).
    pub oldest_pending_age_ms: u64,
}

/// Verdicts on claimed rows, applied in one transaction by [`crate::Channel::settle`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settlement {
    /// Delivered: acknowledge.
    pub acks: Vec<i64>,
    /// Failed attempt, to retry: delivery_count + 1 (and refusals + 1 for a capacity
    /// refusal), visible again at `send_at`.
    pub retries: Vec<Retry>,
    /// Not attempted (no permit, budget, FIFO): unclaim, visible at `send_at`, count unchanged.
    pub releases: Vec<Release>,
    /// Dead-letter now.
    pub dead: Vec<DeadLetterOp>,
}

impl Settlement {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.acks.is_empty()
            && self.retries.is_empty()
            && self.releases.is_empty()
            && self.dead.is_empty()
    }
}

/// A failed attempt to retry later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// Row id.
    pub id: i64,
    /// Visible again at (ms since epoch).
    pub send_at: i64,
    /// The delivery error.
    pub last_error: String,
    /// The attempt was a capacity refusal (refusals + 1). It does not count toward
    /// `max_attempts`: the receiver being full says nothing about the message, so flow control
    /// never turns it into a dead letter.
    pub refused: bool,
}

/// A claim given back without an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// Row id.
    pub id: i64,
    /// Visible again at (ms since epoch).
    pub send_at: i64,
}

/// A claimed row to dead-letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterOp {
    /// Row id.
    pub id: i64,
    /// Reason, one of [`dead_reason`].
    pub reason: &'static str,
    /// Last error, if any.
    pub last_error: Option<String>,
    /// Whether this verdict follows a delivery attempt (delivery_count + 1).
    pub attempted: bool,
}
