-- The sender's W3C trace context (its dispatch span), so every delivery attempt joins the
-- message's trace. NULL when traces were off; rows stored before this migration have none.
-- Nullable with no default: adding it rewrites no existing row.
ALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS traceparent TEXT;
