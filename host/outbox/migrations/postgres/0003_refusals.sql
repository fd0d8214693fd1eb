-- Capacity refusals among a message's delivery attempts (delivery_count counts every attempt).
-- They never count toward max_attempts: a full receiver says nothing about the message.
ALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS refusals BIGINT NOT NULL DEFAULT 0;
