-- Sluice outbox, SQLite flavour. Keep in step with migrations/postgres (same columns, same meaning).
-- Times are milliseconds since the Unix epoch; 0 means "none" for send_at/claimed_until/expires_at.
CREATE TABLE IF NOT EXISTS outbox_messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant          TEXT    NOT NULL,
    namespace       TEXT    NOT NULL,
    channel         TEXT    NOT NULL,
    partition       INTEGER NOT NULL,
    sender          TEXT    NOT NULL,
    receiver        TEXT    NOT NULL,
    receiver_type   TEXT    NOT NULL,
    msg_type        TEXT    NOT NULL,
    payload         BLOB    NOT NULL,
    headers         TEXT    NOT NULL DEFAULT '{}',
    idempotency_key TEXT    NOT NULL DEFAULT '',
    conflict        TEXT    NOT NULL DEFAULT 'append',
    sequence_number INTEGER NOT NULL,
    delivery_count  INTEGER NOT NULL DEFAULT 0,
    send_at         INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    claimed_until   INTEGER NOT NULL DEFAULT 0,
    acked           INTEGER NOT NULL DEFAULT 0,
    dead_lettered   INTEGER NOT NULL DEFAULT 0,
    dead_reason     TEXT,
    last_error      TEXT,
    expires_at      INTEGER NOT NULL DEFAULT 0,
    mode            TEXT    NOT NULL DEFAULT 'cast',
    settled_at      INTEGER NOT NULL DEFAULT 0
);

-- The claim scan: pending rows of one partition in FIFO (id) order.
CREATE INDEX IF NOT EXISTS outbox_pending_partition
    ON outbox_messages (partition, id) WHERE acked = 0 AND dead_lettered = 0;
-- The FIFO guard: "does this receiver have an older pending row that is not claimable?"
CREATE INDEX IF NOT EXISTS outbox_pending_receiver
    ON outbox_messages (receiver, id) WHERE acked = 0 AND dead_lettered = 0;
-- Idempotency look-ups.
CREATE INDEX IF NOT EXISTS outbox_idempotency
    ON outbox_messages (receiver, idempotency_key) WHERE idempotency_key <> '';
-- DLQ listing.
CREATE INDEX IF NOT EXISTS outbox_dead
    ON outbox_messages (receiver, id) WHERE dead_lettered = 1;
