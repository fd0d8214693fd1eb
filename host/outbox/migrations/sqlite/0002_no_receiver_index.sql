-- Claims and the per-receiver FIFO guard moved into the owning process (channel/sqlite.rs):
-- nothing reads the receiver-keyed pending index any more, and every ack of a random receiver
-- rewrote one of its pages.
DROP INDEX IF EXISTS outbox_pending_receiver;
