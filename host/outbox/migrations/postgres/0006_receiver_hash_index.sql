-- Since claims moved into the relaying host (0005) the pending-receiver index answers one
-- question only, dispatch's "does this receiver have a pending row" (receiver = ANY(...)),
-- never a range or an order. A hash index answers it and costs less per insert than the
-- B-tree on (receiver, id), whose random text-keyed inserts were the dearest part of an
-- enqueue.
DROP INDEX IF EXISTS outbox_pending_receiver;
CREATE INDEX IF NOT EXISTS outbox_pending_receiver_hash
    ON outbox_messages USING hash (receiver) WHERE NOT acked AND NOT dead_lettered;
