-- Durable reminders (the WIT `outbox.remind`): a message an actor sends itself after a delay,
-- waiting here for its due time. When it is due a relay moves it into outbox_messages in one
-- statement (any host may; SKIP LOCKED keeps two from moving the same row), and from there it
-- is delivered like any stored message (FIFO, retries, DLQ). Kept out of outbox_messages so
-- that neither the claim scan nor the FIFO guard ever meets a row that is not due.
CREATE TABLE IF NOT EXISTS outbox_reminders (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receiver        TEXT    NOT NULL,
    -- '' = anonymous; a name is unique per receiver (arming it again replaces it).
    name            TEXT    NOT NULL DEFAULT '',
    due_at          BIGINT  NOT NULL,
    tenant          TEXT    NOT NULL,
    namespace       TEXT    NOT NULL,
    channel         TEXT    NOT NULL,
    partition       BIGINT  NOT NULL,
    receiver_type   TEXT    NOT NULL,
    msg_type        TEXT    NOT NULL,
    payload         BYTEA   NOT NULL,
    principal       TEXT    NOT NULL DEFAULT '',
    headers         TEXT    NOT NULL DEFAULT '{}',
    sequence_number BIGINT  NOT NULL,
    created_at      BIGINT  NOT NULL,
    traceparent     TEXT
);
-- The promotion scan: due rows, oldest due first.
CREATE INDEX IF NOT EXISTS outbox_reminders_due ON outbox_reminders (due_at, id);
-- Named reminders (re-arming replaces), and the per-receiver count (max_reminders_per_actor).
CREATE UNIQUE INDEX IF NOT EXISTS outbox_reminders_named
    ON outbox_reminders (receiver, name) WHERE name <> '';
CREATE INDEX IF NOT EXISTS outbox_reminders_receiver ON outbox_reminders (receiver);
