-- Relay claims live in the process that relays a partition, as on SQLite: a host leases a
-- whole partition here (renewed while it relays, taken over by another host once it lapses)
-- and keeps its claims on the partition's rows in memory. A claim then writes nothing per row
-- (it rewrote every claimed row, the most expensive statement per message) and the FIFO guard
-- is a scan in id order instead of an index probe per row. Dispatch's immediate attempts,
-- which any host makes, still lease their rows in `claimed_until`.
CREATE TABLE IF NOT EXISTS outbox_partition_owners (
    partition   BIGINT PRIMARY KEY,
    owner       TEXT   NOT NULL,
    lease_until BIGINT NOT NULL
);
