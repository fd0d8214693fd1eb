-- The sender's W3C trace context (its dispatch span), so every delivery attempt joins the
-- message's trace. NULL when traces were off; rows stored before this migration have none.
ALTER TABLE outbox_messages ADD COLUMN traceparent TEXT;
