-- Sluice outbox, Postgres flavour. Keep in step with migrations/sqlite (same columns, same meaning).
-- Times are milliseconds since the Unix epoch; 0 means "none" for send_at/claimed_until/expires_at.
-- fillfactor < 100 leaves room for HOT updates: claim/ack/nack rewrite every row several times.
-- Aggressive autovacuum: every ack leaves a dead entry in the pending partial indexes, and claims
-- scan those indexes from the oldest id, so dead entries must be reclaimed quickly.
CREATE TABLE IF NOT EXISTS outbox_messages (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant          TEXT    NOT NULL,
    namespace       TEXT    NOT NULL,
    channel         TEXT    NOT NULL,
    partition       BIGINT  NOT NULL,
    sender          TEXT    NOT NULL,
    receiver        TEXT    NOT NULL,
    receiver_type   TEXT    NOT NULL,
    msg_type        TEXT    NOT NULL,
    payload         BYTEA   NOT NULL,
    headers         TEXT    NOT NULL DEFAULT '{}',
    idempotency_key TEXT    NOT NULL DEFAULT '',
    conflict        TEXT    NOT NULL DEFAULT 'append',
    sequence_number BIGINT  NOT NULL,
    delivery_count  BIGINT  NOT NULL DEFAULT 0,
    send_at         BIGINT  NOT NULL DEFAULT 0,
    created_at      BIGINT  NOT NULL,
    claimed_until   BIGINT  NOT NULL DEFAULT 0,
    acked           BOOLEAN NOT NULL DEFAULT FALSE,
    dead_lettered   BOOLEAN NOT NULL DEFAULT FALSE,
    dead_reason     TEXT,
    last_error      TEXT,
    expires_at      BIGINT  NOT NULL DEFAULT 0,
    mode            TEXT    NOT NULL DEFAULT 'cast',
    settled_at      BIGINT  NOT NULL DEFAULT 0
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0);

CREATE INDEX IF NOT EXISTS outbox_pending_partition
    ON outbox_messages (partition, id) WHERE NOT acked AND NOT dead_lettered;
CREATE INDEX IF NOT EXISTS outbox_pending_receiver
    ON outbox_messages (receiver, id) WHERE NOT acked AND NOT dead_lettered;
CREATE INDEX IF NOT EXISTS outbox_idempotency
    ON outbox_messages (receiver, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX IF NOT EXISTS outbox_dead
    ON outbox_messages (receiver, id) WHERE dead_lettered;
