//! SQLite backend: one file, one writer connection, WAL, `synchronous=NORMAL`.
//!
//! Every statement through sqlx costs ~50 µs of thread hand-off (toolchains.md), so the
//! backend batches: multi-row inserts, one UPDATE … RETURNING per claim, verdicts by id lists.
//! One connection serialises all writers; two writers gave multi-second lock stalls.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

use super::plan::{self, Action, Existing};
use super::{Backend, CHUNK, COLUMNS, Channel, EnqueueOptions};
use crate::error::Result;
use crate::message::{
    DeadLetter, DlqSelector, EnqueueOutcome, NewRow, OutboxMessage, PartitionStats, Settlement,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The embedded outbox store.
#[derive(Debug, Clone)]
pub struct SqliteChannel {
    pool: SqlitePool,
}

impl SqliteChannel {
    /// Open (creating if missing) the database file at `path` and run migrations.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let opts = SqliteConnectOptions::new()
            .filename(path.as_ref())
            .create_if_missing(true)
            // sqlx defaults to journal DELETE + synchronous FULL: set both explicitly.
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(false);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(Self { pool })
    }

    /// The underlying pool (tests and benchmarks).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Close the pool (the file stays).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn selector_clause<'a>(q: &mut QueryBuilder<'a, Sqlite>, selector: &'a DlqSelector) {
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

#[async_trait]
impl Channel for SqliteChannel {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn enqueue(&self, rows: &[NewRow], opts: EnqueueOptions) -> Result<Vec<EnqueueOutcome>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await?;

        // 1. What the store already holds for the batch's (receiver, key) pairs.
        let mut pairs: Vec<(&str, &str)> = rows
            .iter()
            .filter(|r| !r.msg.key().is_empty())
            .map(|r| (r.msg.receiver.as_str(), r.msg.key()))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut existing = Vec::new();
        for chunk in pairs.chunks(CHUNK) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "SELECT id, receiver, idempotency_key, sequence_number, \
                 (acked = 0 AND dead_lettered = 0) AS pending, claimed_until \
                 FROM outbox_messages WHERE (receiver, idempotency_key) IN (VALUES ",
            );
            let mut sep = q.separated(", ");
            for (r, k) in chunk {
                sep.push("(")
                    .push_bind_unseparated(*r)
                    .push_unseparated(", ");
                sep.push_bind_unseparated(*k).push_unseparated(")");
            }
            q.push(") AND ((acked = 0 AND dead_lettered = 0) OR conflict = 'append')");
            for row in q.build().fetch_all(&mut *tx).await? {
                existing.push(Existing {
                    id: row.try_get(0)?,
                    receiver: row.try_get(1)?,
                    key: row.try_get(2)?,
                    sequence_number: row.try_get(3)?,
                    pending: row.try_get(4)?,
                    claimed_until: row.try_get(5)?,
                });
            }
        }

        // 2. Receivers with pending rows (only when heads are to be claimed).
        let claim_heads = opts.claim_heads_until.is_some();
        let mut busy = HashSet::new();
        if claim_heads {
            let mut receivers: Vec<&str> = rows.iter().map(|r| r.msg.receiver.as_str()).collect();
            receivers.sort_unstable();
            receivers.dedup();
            for chunk in receivers.chunks(CHUNK) {
                let mut q = QueryBuilder::<Sqlite>::new(
                    "SELECT DISTINCT receiver FROM outbox_messages \
                     WHERE acked = 0 AND dead_lettered = 0 AND receiver IN (",
                );
                let mut sep = q.separated(", ");
                for r in chunk {
                    sep.push_bind(*r);
                }
                q.push(")");
                for row in q.build().fetch_all(&mut *tx).await? {
                    busy.insert(row.try_get::<String, _>(0)?);
                }
            }
        }

        // 3. Decide, then fold same-batch OVERWRITEs into the row they replace.
        let actions = plan::decide(rows, &existing, &busy, claim_heads, opts.now_ms);
        let mut content: Vec<usize> = (0..rows.len()).collect();
        for (i, a) in actions.iter().enumerate() {
            if let Action::FoldInto { into } = a {
                content[*into] = i;
            }
        }
        let inserts: Vec<(usize, bool)> = actions
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match a {
                Action::Insert { claim } => Some((i, *claim)),
                _ => None,
            })
            .collect();

        // 4. Multi-row inserts. Ids of one INSERT are consecutive and ascending in VALUES order
        //    (AUTOINCREMENT, one writer); RETURNING order is unspecified, so sort.
        let mut ids = vec![0i64; rows.len()];
        for chunk in inserts.chunks(CHUNK) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO outbox_messages (tenant, namespace, channel, partition, sender, \
                 receiver, receiver_type, msg_type, payload, headers, idempotency_key, conflict, \
                 sequence_number, send_at, created_at, claimed_until, expires_at, mode) ",
            );
            q.push_values(chunk, |mut b, (i, claim)| {
                let r = &rows[content[*i]];
                let m = &r.msg;
                b.push_bind(m.tenant.as_str())
                    .push_bind(m.namespace.as_str())
                    .push_bind(m.channel.as_str())
                    .push_bind(i64::from(r.partition))
                    .push_bind(m.sender.as_str())
                    .push_bind(m.receiver.as_str())
                    .push_bind(crate::message::actor_type_of(&m.receiver))
                    .push_bind(m.msg_type.as_str())
                    .push_bind(m.payload.as_slice())
                    .push_bind(r.headers_json.as_str())
                    .push_bind(m.key())
                    .push_bind(m.conflict.as_str())
                    .push_bind(r.sequence_number)
                    .push_bind(r.send_at)
                    .push_bind(r.created_at)
                    .push_bind(if *claim {
                        opts.claim_heads_until.unwrap_or(0)
                    } else {
                        0
                    })
                    .push_bind(r.expires_at)
                    .push_bind(m.mode.as_str());
            });
            q.push(" RETURNING id");
            let mut new_ids: Vec<i64> = q
                .build()
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(|row| row.try_get(0))
                .collect::<std::result::Result<_, _>>()?;
            new_ids.sort_unstable();
            for ((i, _), id) in chunk.iter().zip(new_ids) {
                ids[*i] = id;
            }
        }

        // 5. OVERWRITE of stored pending rows (never claimed ones: see plan::decide).
        for (i, a) in actions.iter().enumerate() {
            if let Action::Overwrite { id } = a {
                let r = &rows[i];
                sqlx::query(
                    "UPDATE outbox_messages SET payload = ?, headers = ?, msg_type = ?, \
                     sequence_number = ?, expires_at = ?, sender = ?, mode = ? \
                     WHERE id = ? AND acked = 0 AND dead_lettered = 0",
                )
                .bind(r.msg.payload.as_slice())
                .bind(r.headers_json.as_str())
                .bind(r.msg.msg_type.as_str())
                .bind(r.sequence_number)
                .bind(r.expires_at)
                .bind(r.msg.sender.as_str())
                .bind(r.msg.mode.as_str())
                .bind(*id)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;

        Ok(actions
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                Action::Insert { claim } => EnqueueOutcome::Inserted {
                    id: ids[i],
                    claimed: *claim,
                },
                Action::Overwrite { id } => EnqueueOutcome::Replaced { id: *id },
                Action::FoldInto { into } => EnqueueOutcome::Replaced { id: ids[*into] },
                Action::Skip(o) => *o,
            })
            .collect())
    }

    async fn claim(
        &self,
        partition: u32,
        limit: u32,
        now_ms: i64,
        lease_ms: i64,
        min_id: i64,
    ) -> Result<Vec<OutboxMessage>> {
        let sql = format!(
            "UPDATE outbox_messages SET claimed_until = ?1 WHERE id IN ( \
               SELECT m.id FROM outbox_messages m \
               WHERE m.partition = ?2 AND m.id >= ?5 AND m.acked = 0 AND m.dead_lettered = 0 \
                 AND m.send_at <= ?3 AND m.claimed_until <= ?3 \
                 AND NOT EXISTS (SELECT 1 FROM outbox_messages o \
                     WHERE o.receiver = m.receiver AND o.acked = 0 AND o.dead_lettered = 0 \
                       AND o.id < m.id \
                       AND (o.send_at > ?3 OR o.claimed_until > ?3 OR o.id < ?5)) \
               ORDER BY m.id LIMIT ?4) \
             RETURNING {COLUMNS}"
        );
        let mut rows: Vec<OutboxMessage> = sqlx::query_as(&sql)
            .bind(now_ms + lease_ms)
            .bind(i64::from(partition))
            .bind(now_ms)
            .bind(i64::from(limit))
            .bind(min_id)
            .fetch_all(&self.pool)
            .await?;
        rows.sort_unstable_by_key(|m| m.id);
        Ok(rows)
    }

    async fn settle(&self, s: &Settlement, now_ms: i64) -> Result<()> {
        if s.is_empty() {
            return Ok(());
        }
        // A single statement is atomic on its own: skip BEGIN/COMMIT (two round trips of
        // ~50 µs each) in the common all-acked cycle.
        let statements = [
            s.acks.len(),
            s.retries.len(),
            s.releases.len(),
            s.retries.len() + s.releases.len(),
            s.dead.len(),
        ]
        .iter()
        .map(|n| n.div_ceil(CHUNK))
        .sum::<usize>();
        let mut conn = self.pool.acquire().await?;
        if statements > 1 {
            sqlx::query("BEGIN").execute(&mut *conn).await?;
        }
        let result = settle_on(&mut conn, s, now_ms).await;
        if statements > 1 {
            let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
            let ended = sqlx::query(end).execute(&mut *conn).await;
            result?;
            ended?;
        } else {
            result?;
        }
        Ok(())
    }

    async fn stats(&self, now_ms: i64) -> Result<Vec<PartitionStats>> {
        let rows = sqlx::query(
            "SELECT partition, COUNT(*), MIN(created_at) FROM outbox_messages \
             WHERE acked = 0 AND dead_lettered = 0 GROUP BY partition ORDER BY partition",
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
                     WHERE partition = ?1 AND acked = 0 AND dead_lettered = 0), \
                    (SELECT created_at FROM outbox_messages \
                     WHERE partition = ?1 AND acked = 0 AND dead_lettered = 0 ORDER BY id LIMIT 1)",
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
        let mut q = QueryBuilder::<Sqlite>::new(
            "SELECT id, receiver, msg_type, delivery_count, COALESCE(dead_reason, ''), last_error, \
             created_at FROM outbox_messages WHERE dead_lettered = 1",
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
        let mut q = QueryBuilder::<Sqlite>::new(
            "UPDATE outbox_messages SET dead_lettered = 0, dead_reason = NULL, delivery_count = 0, \
             claimed_until = 0, expires_at = 0, settled_at = 0, send_at = ",
        );
        q.push_bind(now_ms).push(" WHERE dead_lettered = 1");
        selector_clause(&mut q, selector);
        Ok(q.build().execute(&self.pool).await?.rows_affected())
    }

    async fn dlq_purge(&self, selector: &DlqSelector) -> Result<u64> {
        let mut q =
            QueryBuilder::<Sqlite>::new("DELETE FROM outbox_messages WHERE dead_lettered = 1");
        selector_clause(&mut q, selector);
        Ok(q.build().execute(&self.pool).await?.rows_affected())
    }

    async fn get(&self, id: i64) -> Result<Option<OutboxMessage>> {
        let sql = format!("SELECT {COLUMNS} FROM outbox_messages WHERE id = ?");
        Ok(sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
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
             WHERE partition = ? AND acked = 1 AND settled_at < ? LIMIT ?)",
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
/// several).
async fn settle_on(
    conn: &mut sqlx::SqliteConnection,
    s: &Settlement,
    now_ms: i64,
) -> std::result::Result<(), sqlx::Error> {
    for chunk in s.acks.chunks(CHUNK) {
        let mut q = QueryBuilder::<Sqlite>::new(
            "UPDATE outbox_messages SET acked = 1, claimed_until = 0, settled_at = ",
        );
        q.push_bind(now_ms).push(" WHERE id IN (");
        let mut sep = q.separated(", ");
        for id in chunk {
            sep.push_bind(*id);
        }
        q.push(")");
        q.build().execute(&mut *conn).await?;
    }
    for chunk in s.retries.chunks(CHUNK) {
        let mut q = QueryBuilder::<Sqlite>::new(
            "UPDATE outbox_messages SET delivery_count = delivery_count + 1, \
                 send_at = v.column2, last_error = v.column3, claimed_until = 0 FROM (",
        );
        q.push_values(chunk, |mut b, r| {
            b.push_bind(r.id)
                .push_bind(r.send_at)
                .push_bind(r.last_error.as_str());
        });
        q.push(") AS v WHERE outbox_messages.id = v.column1");
        q.build().execute(&mut *conn).await?;
    }
    for chunk in s.releases.chunks(CHUNK) {
        let mut q = QueryBuilder::<Sqlite>::new(
            "UPDATE outbox_messages SET send_at = v.column2, claimed_until = 0 FROM (",
        );
        q.push_values(chunk, |mut b, r| {
            b.push_bind(r.id).push_bind(r.send_at);
        });
        q.push(") AS v WHERE outbox_messages.id = v.column1");
        q.build().execute(&mut *conn).await?;
    }
    // An OVERWRITE row that went back to pending (failed or not attempted) while a newer
    // OVERWRITE of its key was stored behind it (it was claimed, so that one could not replace
    // it) is superseded: last write wins, the stale one is never delivered.
    let unsettled: Vec<i64> = s
        .retries
        .iter()
        .map(|r| r.id)
        .chain(s.releases.iter().map(|r| r.id))
        .collect();
    for chunk in unsettled.chunks(CHUNK) {
        let mut q = QueryBuilder::<Sqlite>::new(
            "UPDATE outbox_messages SET acked = 1, claimed_until = 0, settled_at = ",
        );
        q.push_bind(now_ms).push(
            " WHERE acked = 0 AND dead_lettered = 0 AND conflict = 'overwrite' \
             AND idempotency_key <> '' AND EXISTS (SELECT 1 FROM outbox_messages n \
               WHERE n.receiver = outbox_messages.receiver \
                 AND n.idempotency_key = outbox_messages.idempotency_key \
                 AND n.id > outbox_messages.id AND n.acked = 0 AND n.dead_lettered = 0) \
             AND id IN (",
        );
        let mut sep = q.separated(", ");
        for id in chunk {
            sep.push_bind(*id);
        }
        q.push(")");
        q.build().execute(&mut *conn).await?;
    }
    for chunk in s.dead.chunks(CHUNK) {
        let mut q = QueryBuilder::<Sqlite>::new(
            "UPDATE outbox_messages SET dead_lettered = 1, dead_reason = v.column2, \
                 last_error = COALESCE(v.column3, last_error), \
                 delivery_count = delivery_count + v.column4, claimed_until = 0, settled_at = ",
        );
        q.push_bind(now_ms).push(" FROM (");
        q.push_values(chunk, |mut b, d| {
            b.push_bind(d.id)
                .push_bind(d.reason)
                .push_bind(d.last_error.as_deref())
                .push_bind(i64::from(d.attempted));
        });
        q.push(") AS v WHERE outbox_messages.id = v.column1");
        q.build().execute(&mut *conn).await?;
    }
    Ok(())
}
