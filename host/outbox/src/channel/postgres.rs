//! Postgres backend: shared by several hosts.
//!
//! # Who relays a partition
//! One host at a time: it leases the partition in `outbox_partition_owners` (renewed while it
//! relays, taken over by another host once the lease lapses) and keeps its claims on the
//! partition's rows in memory, as the SQLite backend does. A relay's claim therefore writes
//! nothing per row, and its FIFO guard is the SQLite one: the claim scans the partition's
//! pending rows in id order, so it meets each receiver's earliest row first, and a receiver
//! whose earliest row is not claimable (backing off, or leased by a dispatch) is skipped
//! whole. A host that dies takes its claims with it; another host takes the partition over
//! when its lease ends and delivers what was not acked (at least once).
//!
//! Dispatch's immediate attempts, made by whichever host runs the dispatching turn, still
//! lease their rows in `claimed_until`; a relay treats such a row as claimed.
//!
//! # Rows changed behind a claim
//! Another host may OVERWRITE a pending row this host has claimed (it cannot see the claim).
//! Every settlement of a claimed row therefore applies only if the row is still the version
//! that was claimed (`xmin`): an overwritten row stays pending with its new content and is
//! delivered again, so the last write still wins. Enqueues made through this channel see its
//! claims and insert behind a claimed row instead, as on SQLite.
//!
//! Enqueues that OVERWRITE take a shared advisory lock per partition and an exclusive one per
//! (receiver, key), so concurrent enqueues of one key do not both insert.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, QueryBuilder, Row};

use super::enqueue::{self, EnqueueTx, Insert};
use super::plan::Existing;
use super::{Backend, COLUMNS, Channel, EnqueueOptions, Promoted};
use crate::error::{Error, Result};
use crate::message::{
    DeadLetter, DlqSelector, EnqueueOutcome, NewRow, OutboxMessage, PartitionStats,
    PendingReminder, ReminderRow, Settlement,
};

/// Advisory lock class for partitions (the two-int form: class, object).
const LOCK_CLASS_PARTITION: i32 = 0x5100;
/// Advisory lock class for (receiver, idempotency key) pairs.
const LOCK_CLASS_KEY: i32 = 0x5101;

/// The shared outbox store.
#[derive(Debug, Clone)]
pub struct PostgresChannel {
    /// Enqueues, DLQ operations, stats: durable commits.
    pool: PgPool,
    /// Claims and settlements: asynchronous commits (see [`PostgresChannel::open`]).
    relay: PgPool,
    /// This channel's name in `outbox_partition_owners`: unique per open channel, or a
    /// cluster member's `node/incarnation` ([`Channel::set_lessee`]).
    owner: Arc<RwLock<Arc<str>>>,
    /// The partitions this channel has leased, or knows another host holds.
    owned: Arc<Mutex<HashMap<u32, Lease>>>,
    /// Claims on rows of owned partitions: id -> (lease end, claimed version).
    claims: Arc<Mutex<Claims>>,
}

/// A partition lease as this channel last saw it.
#[derive(Debug, Clone, Copy)]
struct Lease {
    until: i64,
    mine: bool,
    /// When another host's lease was last read: it may give the partition up before its
    /// lease ends (a cluster member handing it over), so it is asked again after
    /// [`RECHECK_MS`].
    seen: i64,
}

/// How often a host asks again for a partition another host leases.
const RECHECK_MS: i64 = 200;

/// Claims held in memory (see the module docs).
#[derive(Debug, Default)]
struct Claims(HashMap<i64, (i64, i64)>);

impl Claims {
    fn lease_of(&self, id: i64) -> i64 {
        self.0.get(&id).map_or(0, |(until, _)| *until)
    }

    fn version_of(&self, id: i64) -> Option<i64> {
        self.0.get(&id).map(|(_, v)| *v)
    }

    /// Forget leases that ended without a settlement (a relay that died), once they pile up.
    fn prune(&mut self, now_ms: i64) {
        if self.0.len() > PRUNE_AT {
            self.0.retain(|_, (until, _)| *until > now_ms);
        }
    }
}

/// Claims held before expired ones are swept.
const PRUNE_AT: usize = 4096;
/// Most rows one scan statement of a claim reads (the first reads 1.25 × the batch).
const SCAN_PAGE: i64 = 1024;

/// A scanned row and the version it was read at.
struct Scanned {
    version: i64,
    msg: OutboxMessage,
}

impl sqlx::FromRow<'_, sqlx::postgres::PgRow> for Scanned {
    fn from_row(row: &sqlx::postgres::PgRow) -> std::result::Result<Self, sqlx::Error> {
        Ok(Self {
            version: sqlx::Row::try_get(row, "version")?,
            msg: <OutboxMessage as sqlx::FromRow<_>>::from_row(row)?,
        })
    }
}

fn pool_options(max_connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        // sqlx already pings every connection when it goes back to the pool (and drops a
        // broken one); pinging again on acquire put a second round trip in front of every
        // claim and settle (batch 20 end to end: 16.5–20k -> 20.7–21.9k msgs/s).
        .test_before_acquire(false)
        .acquire_timeout(Duration::from_secs(30))
}

impl PostgresChannel {
    /// Connect to `url` (a pool of up to `max_connections`) and run migrations.
    pub async fn open(url: &str, max_connections: u32) -> Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        let pool = pool_options(max_connections.max(2))
            .connect_with(options.clone())
            .await?;
        super::migrations::migrator(super::migrations::POSTGRES)
            .await?
            .run(&pool)
            .await?;
        // Claims and settlements commit without waiting for the WAL flush: one lost in a
        // crash only means its rows are delivered again once their lease ends (at-least-once
        // allows it; FIFO holds, since commits are lost newest first). Enqueues, on `pool`,
        // stay synchronous: a stored message is never lost.
        // The claim scan must walk the partition's pending index in id order and stop at its
        // LIMIT: with stale statistics (a bulk enqueue before autoanalyze) the planner chose a
        // bitmap scan of the whole partition plus a sort. Settlements join on the primary key.
        let relay = pool_options(max_connections.max(2))
            .connect_with(options.options([
                ("synchronous_commit", "off"),
                ("enable_bitmapscan", "off"),
                ("enable_seqscan", "off"),
            ]))
            .await?;
        Ok(Self {
            pool,
            relay,
            owner: Arc::new(RwLock::new(Arc::from(uuid::Uuid::new_v4().to_string()))),
            owned: Arc::default(),
            claims: Arc::default(),
        })
    }

    /// Whether this channel may relay `partition` now, leasing (or renewing) it when needed.
    /// A lease is renewed once a quarter of it is used, so it always outlasts the claims made
    /// under it by at least three quarters of `lease_ms` (the relay starts no delivery later
    /// than that).
    async fn own(&self, partition: u32, now_ms: i64, lease_ms: i64) -> Result<bool> {
        if let Some(l) = self.owned.lock().get(&partition).copied() {
            if l.mine && l.until - now_ms > lease_ms * 3 / 4 {
                return Ok(true);
            }
            if !l.mine && now_ms < l.until.min(l.seen + RECHECK_MS) {
                return Ok(false);
            }
        }
        let until = now_ms + lease_ms;
        let owner = self.lessee();
        let taken: Option<i64> = sqlx::query_scalar(
            "INSERT INTO outbox_partition_owners AS o (partition, owner, lease_until) \
             VALUES ($1, $2, $3) ON CONFLICT (partition) DO UPDATE \
               SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until \
               WHERE o.owner = EXCLUDED.owner OR o.lease_until <= $4 \
             RETURNING lease_until",
        )
        .bind(i64::from(partition))
        .bind(&*owner)
        .bind(until)
        .bind(now_ms)
        .fetch_optional(&self.relay)
        .await?;
        let lease = match taken {
            Some(until) => Lease {
                until,
                mine: true,
                seen: now_ms,
            },
            None => {
                // Held by another host: do not ask again before its lease ends.
                let held: Option<i64> = sqlx::query_scalar(
                    "SELECT lease_until FROM outbox_partition_owners WHERE partition = $1",
                )
                .bind(i64::from(partition))
                .fetch_optional(&self.relay)
                .await?;
                Lease {
                    until: held.unwrap_or(now_ms),
                    mine: false,
                    seen: now_ms,
                }
            }
        };
        self.owned.lock().insert(partition, lease);
        Ok(lease.mine)
    }

    /// The name this channel leases partitions under.
    fn lessee(&self) -> Arc<str> {
        self.owner.read().clone()
    }

    /// The underlying pool (tests and benchmarks).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Close the pools.
    pub async fn close(&self) {
        self.relay.close().await;
        self.pool.close().await;
    }
}

fn key_lock(receiver: &str, key: &str) -> i32 {
    let mut h = sluice_flow::partition::fnv1a_64(receiver.as_bytes());
    h ^= sluice_flow::partition::fnv1a_64(key.as_bytes()).rotate_left(17);
    (h as u32) as i32
}

fn selector_clause<'a>(q: &mut QueryBuilder<'a, Postgres>, selector: &'a DlqSelector) {
    match selector {
        DlqSelector::All => {}
        DlqSelector::Id(id) => {
            q.push(" AND id = ").push_bind(*id);
        }
        DlqSelector::Receiver(r) => {
            q.push(" AND receiver = ").push_bind(r.as_str());
        }
    }
}

/// One enqueue's transaction (the storage steps of [`enqueue::run`]).
struct PgEnqueue<'c> {
    tx: sqlx::Transaction<'static, Postgres>,
    /// This channel's claims: a row it has claimed is not overwritten in place.
    claims: &'c Mutex<Claims>,
}

#[async_trait]
impl EnqueueTx for PgEnqueue<'_> {
    async fn lock(&mut self, pairs: &[(&str, &str)], partitions: &[u32]) -> Result<()> {
        let mut locks: Vec<i32> = pairs.iter().map(|(r, k)| key_lock(r, k)).collect();
        locks.sort_unstable();
        locks.dedup();
        sqlx::query("SELECT pg_advisory_xact_lock($1, h) FROM unnest($2::int4[]) AS h ORDER BY h")
            .bind(LOCK_CLASS_KEY)
            .bind(&locks)
            .execute(&mut *self.tx)
            .await?;
        if !partitions.is_empty() {
            let parts: Vec<i32> = partitions.iter().map(|p| *p as i32).collect();
            sqlx::query(
                "SELECT pg_advisory_xact_lock_shared($1, p) FROM unnest($2::int4[]) AS p ORDER BY p",
            )
            .bind(LOCK_CLASS_PARTITION)
            .bind(&parts)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }

    async fn existing(&mut self, pairs: &[(&str, &str)]) -> Result<Vec<Existing>> {
        let receivers: Vec<&str> = pairs.iter().map(|p| p.0).collect();
        let keys: Vec<&str> = pairs.iter().map(|p| p.1).collect();
        let found = sqlx::query(
            "SELECT m.id, m.receiver, m.idempotency_key, m.sequence_number, \
             (NOT m.acked AND NOT m.dead_lettered) AS pending, m.claimed_until \
             FROM outbox_messages m JOIN unnest($1::text[], $2::text[]) AS k(r, key) \
               ON m.receiver = k.r AND m.idempotency_key = k.key \
             WHERE (NOT m.acked AND NOT m.dead_lettered) OR m.conflict = 'append'",
        )
        .bind(&receivers)
        .bind(&keys)
        .fetch_all(&mut *self.tx)
        .await?;
        let claims = self.claims.lock();
        found
            .iter()
            .map(|row| {
                let id = row.try_get(0)?;
                let in_row: i64 = row.try_get(5)?;
                Ok(Existing {
                    id,
                    receiver: row.try_get(1)?,
                    key: row.try_get(2)?,
                    sequence_number: row.try_get(3)?,
                    pending: row.try_get(4)?,
                    claimed_until: in_row.max(claims.lease_of(id)),
                })
            })
            .collect()
    }

    async fn busy(&mut self, receivers: &[&str]) -> Result<HashSet<String>> {
        let found = sqlx::query(
            "SELECT DISTINCT receiver FROM outbox_messages \
             WHERE NOT acked AND NOT dead_lettered AND receiver = ANY($1)",
        )
        .bind(receivers)
        .fetch_all(&mut *self.tx)
        .await?;
        found.iter().map(|row| Ok(row.try_get(0)?)).collect()
    }

    /// One statement of 19 arrays (`UNNEST`), whatever the row count: binding 19 values per
    /// row cost more than the insert itself. Identity values are drawn in the order `unnest`
    /// yields the rows, which is array order; RETURNING order is unspecified, so sort.
    async fn insert(&mut self, rows: &[Insert<'_>]) -> Result<Vec<i64>> {
        let n = rows.len();
        let mut tenant = Vec::with_capacity(n);
        let mut namespace = Vec::with_capacity(n);
        let mut channel = Vec::with_capacity(n);
        let mut partition = Vec::with_capacity(n);
        let mut sender = Vec::with_capacity(n);
        let mut receiver = Vec::with_capacity(n);
        let mut receiver_type = Vec::with_capacity(n);
        let mut msg_type = Vec::with_capacity(n);
        let mut payload = Vec::with_capacity(n);
        let mut principal = Vec::with_capacity(n);
        let mut headers = Vec::with_capacity(n);
        let mut key = Vec::with_capacity(n);
        let mut conflict = Vec::with_capacity(n);
        let mut sequence = Vec::with_capacity(n);
        let mut send_at = Vec::with_capacity(n);
        let mut created_at = Vec::with_capacity(n);
        let mut claimed_until = Vec::with_capacity(n);
        let mut expires_at = Vec::with_capacity(n);
        let mut mode = Vec::with_capacity(n);
        let mut trace: Vec<Option<String>> = Vec::with_capacity(n);
        for ins in rows {
            let r = ins.row;
            let m = &r.msg;
            tenant.push(m.tenant.as_str());
            namespace.push(m.namespace.as_str());
            channel.push(m.channel.as_str());
            partition.push(i64::from(r.partition));
            sender.push(m.sender.as_str());
            receiver.push(m.receiver.as_str());
            receiver_type.push(crate::message::actor_type_of(&m.receiver));
            msg_type.push(m.msg_type.as_str());
            payload.push(m.payload.as_ref());
            principal.push(m.principal.as_deref().unwrap_or(""));
            headers.push(r.headers_json.as_str());
            key.push(m.key());
            conflict.push(m.conflict.as_str());
            sequence.push(r.sequence_number);
            send_at.push(r.send_at);
            created_at.push(r.created_at);
            claimed_until.push(ins.claimed_until);
            expires_at.push(r.expires_at);
            mode.push(m.mode.as_str());
            trace.push(m.trace.map(|t| t.to_string()));
        }
        let mut ids: Vec<i64> = sqlx::query_scalar(
            "INSERT INTO outbox_messages (tenant, namespace, channel, partition, sender, \
             receiver, receiver_type, msg_type, payload, principal, headers, idempotency_key, \
             conflict, sequence_number, send_at, created_at, claimed_until, expires_at, mode, \
             traceparent) \
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], \
               $6::text[], $7::text[], $8::text[], $9::bytea[], $10::text[], $11::text[], \
               $12::text[], $13::text[], $14::int8[], $15::int8[], $16::int8[], $17::int8[], \
               $18::int8[], $19::text[], $20::text[]) \
             RETURNING id",
        )
        .bind(&tenant)
        .bind(&namespace)
        .bind(&channel)
        .bind(&partition)
        .bind(&sender)
        .bind(&receiver)
        .bind(&receiver_type)
        .bind(&msg_type)
        .bind(&payload)
        .bind(&principal)
        .bind(&headers)
        .bind(&key)
        .bind(&conflict)
        .bind(&sequence)
        .bind(&send_at)
        .bind(&created_at)
        .bind(&claimed_until)
        .bind(&expires_at)
        .bind(&mode)
        .bind(&trace)
        .fetch_all(&mut *self.tx)
        .await?;
        ids.sort_unstable();
        Ok(ids)
    }

    async fn overwrite(&mut self, id: i64, r: &NewRow) -> Result<()> {
        sqlx::query(
            "UPDATE outbox_messages SET payload = $1, principal = $2, headers = $3, \
             msg_type = $4, sequence_number = $5, expires_at = $6, sender = $7, mode = $8, \
             traceparent = $10 WHERE id = $9 AND NOT acked AND NOT dead_lettered",
        )
        .bind(r.msg.payload.as_ref())
        .bind(r.msg.principal.as_deref().unwrap_or(""))
        .bind(r.headers_json.as_str())
        .bind(r.msg.msg_type.as_str())
        .bind(r.sequence_number)
        .bind(r.expires_at)
        .bind(r.msg.sender.as_str())
        .bind(r.msg.mode.as_str())
        .bind(id)
        .bind(r.msg.trace.map(|t| t.to_string()))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn commit(self) -> Result<()> {
        Ok(self.tx.commit().await?)
    }
}

#[async_trait]
impl Channel for PostgresChannel {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn enqueue(&self, rows: &[NewRow], opts: EnqueueOptions) -> Result<Vec<EnqueueOutcome>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let tx = PgEnqueue {
            tx: self.pool.begin().await?,
            claims: &self.claims,
        };
        enqueue::run(tx, rows, opts).await
    }

    /// Scans the partition's pending rows in id order (pages of up to `SCAN_PAGE`, one
    /// statement each, no row written) and claims in memory. It always starts at the
    /// partition's first pending row: entries of rows settled since the last vacuum are
    /// stepped over in the index, and the scan sees every receiver's earliest pending row.
    async fn claim(
        &self,
        partition: u32,
        limit: u32,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Vec<OutboxMessage>> {
        if !self.own(partition, now_ms, lease_ms).await? {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT xmin::text::bigint AS version, {COLUMNS} FROM outbox_messages \
             WHERE partition = $1 AND id > $2 AND NOT acked AND NOT dead_lettered \
             ORDER BY id LIMIT $3"
        );
        let limit = limit as usize;
        let until = now_ms + lease_ms;
        let mut chosen: Vec<OutboxMessage> = Vec::with_capacity(limit);
        let mut blocked: HashSet<String> = HashSet::new();
        let mut after = 0i64;
        let mut page_len = (limit as i64 + limit as i64 / 4).clamp(64, SCAN_PAGE);
        while chosen.len() < limit {
            let page: Vec<Scanned> = sqlx::query_as(&sql)
                .bind(i64::from(partition))
                .bind(after)
                .bind(page_len)
                .fetch_all(&self.relay)
                .await?;
            let last_page = (page.len() as i64) < page_len;
            page_len = (page_len * 2).min(SCAN_PAGE);
            let mut claims = self.claims.lock();
            claims.prune(now_ms);
            for Scanned { version, mut msg } in page {
                after = msg.id;
                if blocked.contains(&msg.receiver) {
                    continue;
                }
                let held = claims.lease_of(msg.id) > now_ms;
                if msg.send_at > now_ms || msg.claimed_until > now_ms || held {
                    blocked.insert(msg.receiver);
                    continue;
                }
                claims.0.insert(msg.id, (until, version));
                msg.claimed_until = until;
                chosen.push(msg);
                if chosen.len() == limit {
                    break;
                }
            }
            drop(claims);
            if last_page {
                break;
            }
        }
        Ok(chosen)
    }

    async fn settle(&self, s: &Settlement, now_ms: i64) -> Result<()> {
        if s.is_empty() {
            return Ok(());
        }
        // One statement per kind of verdict; a single statement needs no BEGIN/COMMIT.
        let statements = [
            s.acks.len(),
            s.retries.len(),
            s.releases.len(),
            s.retries.len() + s.releases.len(),
            s.dead.len(),
        ]
        .iter()
        .filter(|n| **n > 0)
        .count();
        // The version each row was claimed at (rows this channel claimed); a row claimed
        // elsewhere (a dispatch's immediate attempt) settles unconditionally.
        let versions: HashMap<i64, i64> = {
            let claims = self.claims.lock();
            s.acks
                .iter()
                .copied()
                .chain(s.retries.iter().map(|r| r.id))
                .chain(s.releases.iter().map(|r| r.id))
                .chain(s.dead.iter().map(|d| d.id))
                .filter_map(|id| claims.version_of(id).map(|v| (id, v)))
                .collect()
        };
        let mut conn = self.relay.acquire().await?;
        if statements > 1 {
            sqlx::query("BEGIN").execute(&mut *conn).await?;
        }
        let result = settle_on(&mut conn, s, &versions, now_ms).await;
        if statements > 1 {
            let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
            let ended = sqlx::query(end).execute(&mut *conn).await;
            result?;
            ended?;
        } else {
            result?;
        }
        // Settled rows are claimed no longer (a failed settlement keeps its claims, which run
        // out on their own).
        let mut claims = self.claims.lock();
        for id in s
            .acks
            .iter()
            .copied()
            .chain(s.retries.iter().map(|r| r.id))
            .chain(s.releases.iter().map(|r| r.id))
            .chain(s.dead.iter().map(|d| d.id))
        {
            claims.0.remove(&id);
        }
        Ok(())
    }

    async fn stats(&self, now_ms: i64) -> Result<Vec<PartitionStats>> {
        let rows = sqlx::query(
            "SELECT partition, COUNT(*)::bigint, MIN(created_at) FROM outbox_messages \
             WHERE NOT acked AND NOT dead_lettered GROUP BY partition ORDER BY partition",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let oldest: i64 = r.try_get(2)?;
                Ok(PartitionStats {
                    partition: r.try_get::<i64, _>(0)? as u32,
                    depth: r.try_get::<i64, _>(1)? as u64,
                    oldest_pending_age_ms: now_ms.saturating_sub(oldest).max(0) as u64,
                })
            })
            .collect()
    }

    async fn partition_stats(&self, partition: u32, now_ms: i64) -> Result<PartitionStats> {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM outbox_messages \
                     WHERE partition = $1 AND NOT acked AND NOT dead_lettered), \
                    (SELECT created_at FROM outbox_messages \
                     WHERE partition = $1 AND NOT acked AND NOT dead_lettered ORDER BY id LIMIT 1)",
        )
        .bind(i64::from(partition))
        .fetch_one(&self.pool)
        .await?;
        let oldest: Option<i64> = row.try_get(1)?;
        Ok(PartitionStats {
            partition,
            depth: row.try_get::<i64, _>(0)? as u64,
            oldest_pending_age_ms: oldest.map_or(0, |o| now_ms.saturating_sub(o).max(0) as u64),
        })
    }

    async fn dlq_list(
        &self,
        receiver: Option<&str>,
        limit: u32,
        now_ms: i64,
    ) -> Result<Vec<DeadLetter>> {
        let mut q = QueryBuilder::<Postgres>::new(
            "SELECT id, receiver, msg_type, delivery_count, COALESCE(dead_reason, ''), last_error, \
             created_at FROM outbox_messages WHERE dead_lettered",
        );
        if let Some(r) = receiver {
            q.push(" AND receiver = ").push_bind(r);
        }
        q.push(" ORDER BY id LIMIT ").push_bind(i64::from(limit));
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                Ok(DeadLetter {
                    id: r.try_get(0)?,
                    receiver: r.try_get(1)?,
                    msg_type: r.try_get(2)?,
                    attempts: r.try_get(3)?,
                    reason: r.try_get(4)?,
                    last_error: r.try_get(5)?,
                    age_ms: now_ms - r.try_get::<i64, _>(6)?,
                })
            })
            .collect()
    }

    async fn dlq_replay(&self, selector: &DlqSelector, now_ms: i64) -> Result<u64> {
        let mut q = QueryBuilder::<Postgres>::new(
            "UPDATE outbox_messages SET dead_lettered = FALSE, dead_reason = NULL, \
             delivery_count = 0, refusals = 0, claimed_until = 0, expires_at = 0, settled_at = 0, \
             send_at = ",
        );
        q.push_bind(now_ms).push(" WHERE dead_lettered");
        selector_clause(&mut q, selector);
        Ok(q.build().execute(&self.pool).await?.rows_affected())
    }

    async fn dlq_purge(&self, selector: &DlqSelector) -> Result<u64> {
        let mut q =
            QueryBuilder::<Postgres>::new("DELETE FROM outbox_messages WHERE dead_lettered");
        selector_clause(&mut q, selector);
        Ok(q.build().execute(&self.pool).await?.rows_affected())
    }

    async fn get(&self, id: i64) -> Result<Option<OutboxMessage>> {
        let sql = format!("SELECT {COLUMNS} FROM outbox_messages WHERE id = $1");
        let mut found: Option<OutboxMessage> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        if let Some(m) = &mut found {
            m.claimed_until = m.claimed_until.max(self.claims.lock().lease_of(id));
        }
        Ok(found)
    }

    fn holds(&self, partition: u32, now_ms: i64) -> bool {
        self.owned
            .lock()
            .get(&partition)
            .is_some_and(|l| l.mine && l.until > now_ms)
    }

    async fn release(&self, partition: u32) -> Result<()> {
        if self.owned.lock().remove(&partition).is_some_and(|l| l.mine) {
            sqlx::query("DELETE FROM outbox_partition_owners WHERE partition = $1 AND owner = $2")
                .bind(i64::from(partition))
                .bind(&*self.lessee())
                .execute(&self.relay)
                .await?;
        }
        Ok(())
    }

    fn set_lessee(&self, name: &str) -> Result<()> {
        if name.is_empty() || name.len() > 200 {
            return Err(Error::InvalidArgument(format!(
                "a partition lessee name must be 1..=200 bytes, not {}",
                name.len()
            )));
        }
        // No relay worker runs while the name changes (the caller's contract), so no lease
        // is being taken under the old one.
        let owned = self.owned.lock();
        if owned.values().any(|l| l.mine) {
            return Err(Error::InvalidArgument(
                "the lessee name changes only while this channel leases no partition".into(),
            ));
        }
        *self.owner.write() = Arc::from(name);
        Ok(())
    }

    async fn end_leases_of(&self, name: &str) -> Result<u64> {
        if *self.lessee() == *name {
            return Err(Error::InvalidArgument(
                "a channel does not end its own partition leases (release them)".into(),
            ));
        }
        Ok(sqlx::query(
            "UPDATE outbox_partition_owners SET lease_until = 0 \
             WHERE owner = $1 AND lease_until > 0",
        )
        .bind(name)
        .execute(&self.relay)
        .await?
        .rows_affected())
    }

    /// One statement. The cap counts what the statement's snapshot sees: one actor's turns
    /// run one at a time on one host, so its own arms never race each other.
    async fn arm_reminder(&self, row: &NewRow, name: &str, max_pending: u32) -> Result<bool> {
        let sql = super::arm_reminder_sql();
        let done = super::bind_reminder!(sqlx::query(&sql), row, name, max_pending)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn cancel_reminder(&self, receiver: &str, name: &str) -> Result<bool> {
        if name.is_empty() {
            return Ok(false);
        }
        let done = sqlx::query("DELETE FROM outbox_reminders WHERE receiver = $1 AND name = $2")
            .bind(receiver)
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn reminders(
        &self,
        receiver: Option<&str>,
        limit: u32,
        now_ms: i64,
    ) -> Result<Vec<PendingReminder>> {
        let q = sqlx::query_as::<_, ReminderRow>(super::list_reminders_sql(receiver.is_some()));
        let q = match receiver {
            Some(r) => q.bind(r),
            None => q,
        };
        let rows = q.bind(i64::from(limit)).fetch_all(&self.pool).await?;
        Ok(rows
            .into_iter()
            .map(|r| PendingReminder::from_row(r, now_ms))
            .collect())
    }

    /// One statement moves the rows (delete and insert commit together); `SKIP LOCKED` lets
    /// the hosts that share the store promote at once without moving a row twice.
    async fn promote_reminders(&self, now_ms: i64, limit: u32) -> Result<Promoted> {
        const NEXT: &str = "SELECT MIN(due_at) FROM outbox_reminders";
        let next: Option<i64> = sqlx::query_scalar(NEXT).fetch_one(&self.pool).await?;
        if next.is_none_or(|due| due > now_ms) {
            return Ok(Promoted {
                partitions: Vec::new(),
                next_due: next,
            });
        }
        let sql = format!(
            "WITH due AS (DELETE FROM outbox_reminders WHERE id IN (SELECT id \
             FROM outbox_reminders WHERE due_at <= $1 ORDER BY due_at, id LIMIT $2 \
             FOR UPDATE SKIP LOCKED) RETURNING *) {}",
            super::promote_sql("$1", "due")
        );
        let moved = sqlx::query(&sql)
            .bind(now_ms)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        let partitions = moved
            .iter()
            .map(|row| Ok(row.try_get::<i64, _>(1)? as u32))
            .collect::<Result<Vec<u32>>>()?;
        let next_due: Option<i64> = sqlx::query_scalar(NEXT).fetch_one(&self.pool).await?;
        Ok(Promoted {
            partitions,
            next_due,
        })
    }

    async fn max_sequence(&self) -> Result<i64> {
        let v: Option<i64> = sqlx::query_scalar("SELECT MAX(sequence_number) FROM outbox_messages")
            .fetch_one(&self.pool)
            .await?;
        Ok(v.unwrap_or(0))
    }

    async fn compact(&self, partition: u32, before_ms: i64, limit: u32) -> Result<u64> {
        Ok(sqlx::query(
            "DELETE FROM outbox_messages WHERE id IN (SELECT id FROM outbox_messages \
             WHERE partition = $1 AND acked AND settled_at < $2 LIMIT $3)",
        )
        .bind(i64::from(partition))
        .bind(before_ms)
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await?
        .rows_affected())
    }
}

/// The statements of one settlement, on one connection (inside a transaction when there are
/// several). A row with an entry in `versions` is settled only if it is still that version
/// (`xmin`; see the module docs).
async fn settle_on(
    conn: &mut sqlx::PgConnection,
    s: &Settlement,
    versions: &HashMap<i64, i64>,
    now_ms: i64,
) -> std::result::Result<(), sqlx::Error> {
    let vers = |ids: &[i64]| -> Vec<Option<i64>> {
        ids.iter().map(|id| versions.get(id).copied()).collect()
    };
    if !s.acks.is_empty() {
        sqlx::query(
            "UPDATE outbox_messages m SET acked = TRUE, claimed_until = 0, settled_at = $1 \
                 FROM unnest($2::bigint[], $3::bigint[]) AS v(id, ver) \
                 WHERE m.id = v.id AND (v.ver IS NULL OR m.xmin::text::bigint = v.ver)",
        )
        .bind(now_ms)
        .bind(&s.acks)
        .bind(vers(&s.acks))
        .execute(&mut *conn)
        .await?;
    }
    if !s.retries.is_empty() {
        let ids: Vec<i64> = s.retries.iter().map(|r| r.id).collect();
        let at: Vec<i64> = s.retries.iter().map(|r| r.send_at).collect();
        let errs: Vec<&str> = s.retries.iter().map(|r| r.last_error.as_str()).collect();
        let refused: Vec<i64> = s.retries.iter().map(|r| i64::from(r.refused)).collect();
        sqlx::query(
            "UPDATE outbox_messages m SET delivery_count = m.delivery_count + 1, \
                 refusals = m.refusals + v.refused, send_at = v.send_at, last_error = v.err, \
                 claimed_until = 0 \
                 FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[]) \
                   AS v(id, send_at, err, refused, ver) \
                 WHERE m.id = v.id AND (v.ver IS NULL OR m.xmin::text::bigint = v.ver)",
        )
        .bind(&ids)
        .bind(&at)
        .bind(&errs)
        .bind(&refused)
        .bind(vers(&ids))
        .execute(&mut *conn)
        .await?;
    }
    if !s.releases.is_empty() {
        let ids: Vec<i64> = s.releases.iter().map(|r| r.id).collect();
        let at: Vec<i64> = s.releases.iter().map(|r| r.send_at).collect();
        sqlx::query(
            "UPDATE outbox_messages m SET send_at = v.send_at, claimed_until = 0 \
                 FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS v(id, send_at, ver) \
                 WHERE m.id = v.id AND (v.ver IS NULL OR m.xmin::text::bigint = v.ver)",
        )
        .bind(&ids)
        .bind(&at)
        .bind(vers(&ids))
        .execute(&mut *conn)
        .await?;
    }
    // An OVERWRITE row back to pending while a newer OVERWRITE of its key waits behind it is
    // superseded (see the SQLite backend).
    if !s.retries.is_empty() || !s.releases.is_empty() {
        let ids: Vec<i64> = s
            .retries
            .iter()
            .map(|r| r.id)
            .chain(s.releases.iter().map(|r| r.id))
            .collect();
        sqlx::query(
            "UPDATE outbox_messages m SET acked = TRUE, claimed_until = 0, settled_at = $1 \
                 WHERE m.id = ANY($2) AND m.acked = FALSE AND m.dead_lettered = FALSE \
                 AND m.conflict = 'overwrite' AND m.idempotency_key <> '' \
                 AND EXISTS (SELECT 1 FROM outbox_messages n WHERE n.receiver = m.receiver \
                   AND n.idempotency_key = m.idempotency_key AND n.id > m.id \
                   AND n.acked = FALSE AND n.dead_lettered = FALSE)",
        )
        .bind(now_ms)
        .bind(&ids)
        .execute(&mut *conn)
        .await?;
    }
    if !s.dead.is_empty() {
        let ids: Vec<i64> = s.dead.iter().map(|d| d.id).collect();
        let reasons: Vec<&str> = s.dead.iter().map(|d| d.reason).collect();
        let errs: Vec<Option<&str>> = s.dead.iter().map(|d| d.last_error.as_deref()).collect();
        let inc: Vec<i64> = s.dead.iter().map(|d| i64::from(d.attempted)).collect();
        sqlx::query(
            "UPDATE outbox_messages m SET dead_lettered = TRUE, dead_reason = v.reason, \
                 last_error = COALESCE(v.err, m.last_error), \
                 delivery_count = m.delivery_count + v.inc, claimed_until = 0, settled_at = $5 \
                 FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $6::bigint[]) \
                   AS v(id, reason, err, inc, ver) \
                 WHERE m.id = v.id AND (v.ver IS NULL OR m.xmin::text::bigint = v.ver)",
        )
        .bind(&ids)
        .bind(&reasons)
        .bind(&errs)
        .bind(&inc)
        .bind(now_ms)
        .bind(vers(&ids))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
