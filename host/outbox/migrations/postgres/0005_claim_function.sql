-- A relay's claim in one round trip: the partition's advisory lock, then the claim, in one
-- function call (it used to be BEGIN, lock, UPDATE, COMMIT: four round trips). The UPDATE is a
-- statement of its own inside the function, so its snapshot is taken after the lock is held
-- and sees the previous claim of the partition committed (the FIFO guard depends on it).
-- Bitmap and sequential scans are off for the call (see channel/postgres.rs: with stale
-- statistics the planner scanned the whole partition). `OFFSET 0` keeps the FIFO guard a
-- per-row index probe.
CREATE OR REPLACE FUNCTION sluice_outbox_claim(
    p_partition BIGINT, p_limit BIGINT, p_now BIGINT, p_until BIGINT, p_min_id BIGINT)
RETURNS SETOF outbox_messages
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(20736, p_partition::int);  -- LOCK_CLASS_PARTITION 0x5100
    RETURN QUERY
    UPDATE outbox_messages SET claimed_until = p_until WHERE id IN (
        SELECT m.id FROM outbox_messages m
        WHERE m.partition = p_partition AND m.id >= p_min_id
          AND NOT m.acked AND NOT m.dead_lettered
          AND m.send_at <= p_now AND m.claimed_until <= p_now
          AND NOT EXISTS (SELECT 1 FROM outbox_messages o
              WHERE o.receiver = m.receiver AND NOT o.acked AND NOT o.dead_lettered
                AND o.id < m.id
                AND (o.send_at > p_now OR o.claimed_until > p_now OR o.id < p_min_id)
              OFFSET 0)
        ORDER BY m.id LIMIT p_limit FOR UPDATE SKIP LOCKED)
    RETURNING *;
END
$$;
