-- Back to a B-tree for dispatch's "does this receiver have a pending row" lookup. Under
-- concurrent inserts and relay updates, bitmap scans of the partial hash index from 0006
-- intermittently missed committed pending rows that the same statement's snapshot could see
-- through a B-tree (two misses in ~60 runs of the SIGKILL cluster test, both sides measured in
-- one statement). A missed row lets a dispatch claim a receiver's head ahead of that
-- receiver's older messages, which breaks per-sender FIFO. A single-column B-tree keeps the
-- cheaper insert of 0006 (no id in the key; PostgreSQL 13+ deduplicates equal receivers).
DROP INDEX IF EXISTS outbox_pending_receiver_hash;
CREATE INDEX IF NOT EXISTS outbox_pending_receiver
    ON outbox_messages (receiver) WHERE NOT acked AND NOT dead_lettered;
