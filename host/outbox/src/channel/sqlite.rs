//! SQLite backend: one file, one writer connection, WAL, `synchronous=NORMAL`.
//!
//! Every statement through sqlx costs ~50 µs of thread hand-off (toolchains.md), so the
//! backend batches: multi-row inserts, one scan and one fetch per claim, verdicts by id lists.
//! One connection serialises all writers; two writers gave multi-second lock stalls.
//!
//! # Claims live in the owning process
//! The embedded store belongs to one host process (hosts that share a store use Postgres).
//! So a claim is not written to the file: the channel keeps `id -> lease end` in memory and
//! the claim scan skips (and FIFO-blocks the receivers of) rows leased there. That saves a
//! row rewrite per message, and a crash releases every claim at once: the restarted process
//! starts with none, so rows in flight at the crash are visible at once (delivered at least
//! once, duplicates bounded by what was claimed). Within the process a claim still expires
//! after its lease, so a relay task that dies without settling loses nothing. The
//! `claimed_until` column stays for schema parity with Postgres and is kept at 0.
//!
//! For the same reason the FIFO guard needs no receiver-keyed index (which an ack of random
//! receivers would rewrite page by page): the claim scan walks one partition's pending rows in
//! id order and meets every receiver's earliest row first, and "does this receiver have a
//! pending row" (a dispatch's head check) is a count per receiver kept beside the claims,
//! loaded from the file at open and moved by this channel's own writes.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection, QueryBuilder, Row, Sqlite, SqliteConnection};
use tokio::sync::{MappedMutexGuard, Mutex as AsyncMutex, MutexGuard};

use super::enqueue::{self, EnqueueTx, Insert};
use super::plan::Existing;
use super::{Backend, CHUNK, COLUMNS, Channel, EnqueueOptions, Promoted};
use crate::delivery::DispatchMode;
use crate::error::Result;
use crate::message::{
    Conflict, DeadLetter, DlqSelector, EnqueueOutcome, NewRow, OutboxMessage, PartitionStats,
    PendingReminder, ReminderRow, Settlement,
};

/// The embedded outbox store.
#[derive(Debug, Clone)]
pub struct SqliteChannel {
    /// The one connection (one writer), behind an async lock rather than a sqlx pool: a pool
    /// hands a connection back through a spawned task after every statement, which cost
    /// ~80 µs per statement here against ~50 µs for the statement itself. `None` once closed.
    conn: Arc<AsyncMutex<Option<SqliteConnection>>>,
    ledger: Arc<Mutex<Ledger>>,
    /// `<file>.owner`, locked while this channel lives: a second process on the same file
    /// would hold claims this one cannot see.
    _owner: Arc<std::fs::File>,
}

/// What the owning process keeps in memory (see the module docs).
#[derive(Debug, Default)]
struct Ledger {
    /// Claimed rows: id -> (lease end, receiver).
    claims: HashMap<i64, (i64, Arc<str>)>,
    /// Pending (not acked, not dead) rows per receiver; receivers with none are absent.
    pending: HashMap<Arc<str>, u32>,
}

impl Ledger {
    /// Lease end of `id`'s claim, 0 when unclaimed.
    fn lease_of(&self, id: i64) -> i64 {
        self.claims.get(&id).map_or(0, |(until, _)| *until)
    }

    fn held(&self, id: i64, now_ms: i64) -> bool {
        self.lease_of(id) > now_ms
    }

    fn claim(&mut self, id: i64, until: i64, receiver: &str) {
        let receiver = self.receiver(receiver);
        self.claims.insert(id, (until, receiver));
    }

    /// The shared name of `receiver` (one allocation per receiver with pending rows).
    fn receiver(&self, receiver: &str) -> Arc<str> {
        self.pending
            .get_key_value(receiver)
            .map_or_else(|| Arc::from(receiver), |(k, _)| k.clone())
    }

    fn add_pending(&mut self, receiver: &str, n: u32) {
        match self.pending.get_mut(receiver) {
            Some(c) => *c += n,
            None => {
                self.pending.insert(Arc::from(receiver), n);
            }
        }
    }

    fn remove_pending(&mut self, receiver: &str) {
        if let Some(c) = self.pending.get_mut(receiver) {
            *c -= 1;
            if *c == 0 {
                self.pending.remove(receiver);
            }
        }
    }

    fn is_pending(&self, receiver: &str) -> bool {
        self.pending.contains_key(receiver)
    }

    /// Forget leases that ended without a settlement (a relay that died), once they pile up.
    fn prune(&mut self, now_ms: i64) {
        if self.claims.len() > PRUNE_AT {
            self.claims.retain(|_, (until, _)| *until > now_ms);
        }
    }
}

/// Claims held before expired ones are swept (live claims are at most partitions × batch plus
/// the dispatches in flight).
const PRUNE_AT: usize = 4096;

/// Rows sqlx's worker may queue for the async side before it waits (≥ a claim page).
const ROW_CHANNEL: usize = 2048;

/// Most index entries one claim-scan statement reads (the first reads 1.25 × the batch).
const SCAN_PAGE: i64 = 1024;

impl SqliteChannel {
    /// Open (creating if missing) the database file at `path` and run migrations.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let owner = take_ownership(path.as_ref())?;
        let opts = SqliteConnectOptions::new()
            .filename(path.as_ref())
            .create_if_missing(true)
            // sqlx defaults to journal DELETE + synchronous FULL: set both explicitly.
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            // Rows travel from sqlx's worker thread one message each; with the default 50 the
            // worker blocks mid-claim until the relay drains them (a thread hand-off per 50).
            .row_buffer_size(ROW_CHANNEL)
            // Checkpoint every 8192 pages (32 MiB of WAL) instead of 1000: a row's page is
            // written at insert and again at ack, and a checkpoint between the two copies it
            // twice. Still automatic, on the committing connection. (+~10% end to end.)
            .pragma("wal_autocheckpoint", "8192")
            .foreign_keys(false);
        let mut conn = SqliteConnection::connect_with(&opts).await?;
        super::migrations::migrator(super::migrations::SQLITE)
            .await?
            .run(&mut conn)
            .await?;
        // Claims written by versions that stored them in the file belong to a process that is
        // gone (this one owns the file now).
        sqlx::query("UPDATE outbox_messages SET claimed_until = 0 WHERE claimed_until <> 0")
            .execute(&mut conn)
            .await?;
        let mut ledger = Ledger::default();
        let counts: Vec<(String, i64)> = sqlx::query_as(
            "SELECT receiver, COUNT(*) FROM outbox_messages \
             WHERE acked = 0 AND dead_lettered = 0 GROUP BY receiver",
        )
        .fetch_all(&mut conn)
        .await?;
        for (receiver, n) in counts {
            ledger.add_pending(&receiver, n as u32);
        }
        Ok(Self {
            conn: Arc::new(AsyncMutex::new(Some(conn))),
            ledger: Arc::new(Mutex::new(ledger)),
            _owner: Arc::new(owner),
        })
    }

    /// The connection, for as long as the guard lives (every other user waits). Benchmarks
    /// use it for their raw baseline; `Error::Closed` after [`Self::close`].
    pub async fn connection(&self) -> Result<MappedMutexGuard<'_, SqliteConnection>> {
        MutexGuard::try_map(self.conn.lock().await, Option::as_mut)
            .map_err(|_| crate::Error::Closed)
    }

    /// Close the connection (the file stays); later calls fail with `Error::Closed`.
    pub async fn close(&self) {
        if let Some(conn) = self.conn.lock().await.take() {
            let _ = conn.close().await;
        }
    }
}

/// Locks `<path>.owner` (created if missing) for this process, or fails with
/// [`crate::Error::InUse`] when another holder has it. The OS drops the lock with the process,
/// so a crashed host never leaves it behind.
fn take_ownership(path: &Path) -> Result<std::fs::File> {
    let mut name = path.as_os_str().to_owned();
    name.push(".owner");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&name)
        .map_err(sqlx::Error::Io)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(crate::Error::InUse(format!(
            "{} is open in another outbox (another host process, or this one); \
             hosts that share an outbox use Postgres",
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(sqlx::Error::Io(e).into()),
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

/// One enqueue's transaction on the writer connection (the storage steps of
/// [`enqueue::run`]). Claimed heads are leased in the ledger as they are inserted, before
/// the commit: the claim scan shares this connection, so it cannot see the rows before their
/// leases exist.
struct SqliteEnqueue<'c> {
    tx: sqlx::Transaction<'c, Sqlite>,
    ledger: &'c Mutex<Ledger>,
    /// Rows leased here (given back if the commit fails).
    claimed: Vec<i64>,
    /// Receivers of the inserted rows (pending once committed).
    inserted: Vec<String>,
}

#[async_trait]
impl EnqueueTx for SqliteEnqueue<'_> {
    /// One writer connection: enqueues are serialised already.
    async fn lock(&mut self, _pairs: &[(&str, &str)], _partitions: &[u32]) -> Result<()> {
        Ok(())
    }

    async fn existing(&mut self, pairs: &[(&str, &str)]) -> Result<Vec<Existing>> {
        let mut q = QueryBuilder::<Sqlite>::new(
            "SELECT id, receiver, idempotency_key, sequence_number, \
             (acked = 0 AND dead_lettered = 0) AS pending \
             FROM outbox_messages WHERE (receiver, idempotency_key) IN (VALUES ",
        );
        let mut sep = q.separated(", ");
        for (r, k) in pairs {
            sep.push("(")
                .push_bind_unseparated(*r)
                .push_unseparated(", ");
            sep.push_bind_unseparated(*k).push_unseparated(")");
        }
        q.push(") AND ((acked = 0 AND dead_lettered = 0) OR conflict = 'append')");
        let found = q.build().fetch_all(&mut *self.tx).await?;
        let ledger = self.ledger.lock();
        found
            .iter()
            .map(|row| {
                let id = row.try_get(0)?;
                Ok(Existing {
                    id,
                    receiver: row.try_get(1)?,
                    key: row.try_get(2)?,
                    sequence_number: row.try_get(3)?,
                    pending: row.try_get(4)?,
                    claimed_until: ledger.lease_of(id),
                })
            })
            .collect()
    }

    /// From the ledger's pending counts: no statement.
    async fn busy(&mut self, receivers: &[&str]) -> Result<HashSet<String>> {
        let ledger = self.ledger.lock();
        Ok(receivers
            .iter()
            .filter(|r| ledger.is_pending(r))
            .map(|r| r.to_string())
            .collect())
    }

    /// Ids of one INSERT are consecutive and ascending in VALUES order (AUTOINCREMENT, one
    /// writer), so the last id names them all (no RETURNING: each returned row is a message
    /// from sqlx's worker thread).
    async fn insert(&mut self, rows: &[Insert<'_>]) -> Result<Vec<i64>> {
        let mut q = QueryBuilder::<Sqlite>::new(
            "INSERT INTO outbox_messages (tenant, namespace, channel, partition, sender, \
             receiver, receiver_type, msg_type, payload, principal, headers, idempotency_key, \
             conflict, sequence_number, send_at, created_at, expires_at, mode, traceparent) ",
        );
        q.push_values(rows, |mut b, ins| {
            let r = ins.row;
            let m = &r.msg;
            b.push_bind(m.tenant.as_str())
                .push_bind(m.namespace.as_str())
                .push_bind(m.channel.as_str())
                .push_bind(i64::from(r.partition))
                .push_bind(m.sender.as_str())
                .push_bind(m.receiver.as_str())
                .push_bind(crate::message::actor_type_of(&m.receiver))
                .push_bind(m.msg_type.as_str())
                .push_bind(m.payload.as_ref())
                .push_bind(m.principal.as_deref().unwrap_or(""))
                .push_bind(r.headers_json.as_str())
                .push_bind(m.key())
                .push_bind(m.conflict.as_str())
                .push_bind(r.sequence_number)
                .push_bind(r.send_at)
                .push_bind(r.created_at)
                .push_bind(r.expires_at)
                .push_bind(m.mode.as_str())
                .push_bind(m.trace.map(|t| t.to_string()));
        });
        let last = q.build().execute(&mut *self.tx).await?.last_insert_rowid();
        let first = last - rows.len() as i64 + 1;
        let ids: Vec<i64> = (first..=last).collect();
        let mut ledger = self.ledger.lock();
        for (ins, id) in rows.iter().zip(&ids) {
            if ins.claimed_until > 0 {
                ledger.claim(*id, ins.claimed_until, &ins.row.msg.receiver);
                self.claimed.push(*id);
            }
            self.inserted.push(ins.row.msg.receiver.clone());
        }
        Ok(ids)
    }

    async fn overwrite(&mut self, id: i64, r: &NewRow) -> Result<()> {
        sqlx::query(
            "UPDATE outbox_messages SET payload = ?, principal = ?, headers = ?, msg_type = ?, \
             sequence_number = ?, expires_at = ?, sender = ?, mode = ?, traceparent = ? \
             WHERE id = ? AND acked = 0 AND dead_lettered = 0",
        )
        .bind(r.msg.payload.as_ref())
        .bind(r.msg.principal.as_deref().unwrap_or(""))
        .bind(r.headers_json.as_str())
        .bind(r.msg.msg_type.as_str())
        .bind(r.sequence_number)
        .bind(r.expires_at)
        .bind(r.msg.sender.as_str())
        .bind(r.msg.mode.as_str())
        .bind(r.msg.trace.map(|t| t.to_string()))
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn commit(self) -> Result<()> {
        let committed = self.tx.commit().await;
        let mut ledger = self.ledger.lock();
        match committed {
            Ok(()) => {
                for receiver in &self.inserted {
                    ledger.add_pending(receiver, 1);
                }
                Ok(())
            }
            Err(e) => {
                for id in &self.claimed {
                    ledger.claims.remove(id);
                }
                Err(e.into())
            }
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
        let mut conn = self.connection().await?;
        let tx = SqliteEnqueue {
            tx: conn.begin().await?,
            ledger: &self.ledger,
            claimed: Vec::new(),
            inserted: Vec::new(),
        };
        enqueue::run(tx, rows, opts).await
    }

    async fn claim(
        &self,
        partition: u32,
        limit: u32,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Vec<OutboxMessage>> {
        let limit = limit as usize;
        let until = now_ms + lease_ms;
        let mut chosen: Vec<OutboxMessage> = Vec::with_capacity(limit);
        // Receivers whose earlier pending row is not claimable now: their later rows wait.
        let mut blocked: HashSet<String> = HashSet::new();
        // From the start: SQLite drops index entries of settled rows at once, so the scan
        // reads only pending rows, and it sees every receiver's earliest one (the FIFO guard
        // needs no second look-up).
        let mut after = 0i64;
        // The first page expects most rows to be claimable; later pages double.
        let mut page_len = (limit as i64 + limit as i64 / 4).clamp(64, SCAN_PAGE);
        // Held across the pages: nothing else changes the rows in between.
        let mut conn = self.connection().await?;
        while chosen.len() < limit {
            // The page's whole rows, as one JSON result row: sqlx hands each result row
            // across threads on its own, which cost more than the scan itself, and reading
            // the rows in the scan saves looking each chosen one up again.
            let page = scan_json(&mut conn, partition, after, page_len).await?;
            let last_page = (page.len() as i64) < page_len;
            page_len = (page_len * 2).min(SCAN_PAGE);
            let mut ledger = self.ledger.lock();
            ledger.prune(now_ms);
            for row in page {
                after = row.id;
                if blocked.contains(&row.receiver) {
                    continue;
                }
                if row.send_at > now_ms || ledger.held(row.id, now_ms) {
                    blocked.insert(row.receiver);
                    continue;
                }
                let mut m = match row.into_message() {
                    Ok(m) => m,
                    Err(e) => {
                        for m in &chosen {
                            ledger.claims.remove(&m.id);
                        }
                        return Err(e);
                    }
                };
                ledger.claim(m.id, until, &m.receiver);
                m.claimed_until = until;
                chosen.push(m);
                if chosen.len() == limit {
                    break;
                }
            }
            drop(ledger);
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
        // Rows leaving the pending state (acked, dead) and whose receivers: claimed rows name
        // theirs; any other (a lease that ran out and was swept) is looked up below.
        let (mut leaving, unknown): (Vec<Arc<str>>, Vec<i64>) = {
            let ledger = self.ledger.lock();
            let mut leaving = Vec::with_capacity(s.acks.len() + s.dead.len());
            let mut unknown = Vec::new();
            for id in s.acks.iter().copied().chain(s.dead.iter().map(|d| d.id)) {
                match ledger.claims.get(&id) {
                    Some((_, receiver)) => leaving.push(receiver.clone()),
                    None => unknown.push(id),
                }
            }
            (leaving, unknown)
        };
        let mut conn = self.connection().await?;
        for chunk in unknown.chunks(CHUNK) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "SELECT receiver FROM outbox_messages \
                 WHERE acked = 0 AND dead_lettered = 0 AND id IN (",
            );
            let mut sep = q.separated(", ");
            for id in chunk {
                sep.push_bind(*id);
            }
            q.push(")");
            for row in q.build().fetch_all(&mut *conn).await? {
                leaving.push(Arc::from(row.try_get::<&str, _>(0)?));
            }
        }
        let superseded = if statements > 1 {
            // A transaction object, not a bare BEGIN: if this future is dropped half-way, sqlx
            // rolls back before the connection's next statement.
            let mut tx = conn.begin().await?;
            let superseded = settle_on(&mut tx, s, now_ms).await?;
            tx.commit().await?;
            superseded
        } else {
            settle_on(&mut conn, s, now_ms).await?
        };
        // Settled rows are the relay's no longer (a failed settlement keeps its leases, which
        // run out on their own).
        let mut ledger = self.ledger.lock();
        for id in s
            .acks
            .iter()
            .copied()
            .chain(s.retries.iter().map(|r| r.id))
            .chain(s.releases.iter().map(|r| r.id))
            .chain(s.dead.iter().map(|d| d.id))
        {
            ledger.claims.remove(&id);
        }
        for receiver in leaving
            .iter()
            .map(|r| &**r)
            .chain(superseded.iter().map(String::as_str))
        {
            ledger.remove_pending(receiver);
        }
        Ok(())
    }

    async fn stats(&self, now_ms: i64) -> Result<Vec<PartitionStats>> {
        let rows = sqlx::query(
            "SELECT partition, COUNT(*), MIN(created_at) FROM outbox_messages \
             WHERE acked = 0 AND dead_lettered = 0 GROUP BY partition ORDER BY partition",
        )
        .fetch_all(&mut *self.connection().await?)
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
        .fetch_one(&mut *self.connection().await?)
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
        let rows = q.build().fetch_all(&mut *self.connection().await?).await?;
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
             refusals = 0, claimed_until = 0, expires_at = 0, settled_at = 0, send_at = ",
        );
        q.push_bind(now_ms).push(" WHERE dead_lettered = 1");
        selector_clause(&mut q, selector);
        q.push(" RETURNING receiver");
        let replayed = q.build().fetch_all(&mut *self.connection().await?).await?;
        let mut ledger = self.ledger.lock();
        for row in &replayed {
            ledger.add_pending(row.try_get(0)?, 1);
        }
        Ok(replayed.len() as u64)
    }

    async fn dlq_purge(&self, selector: &DlqSelector) -> Result<u64> {
        let mut q =
            QueryBuilder::<Sqlite>::new("DELETE FROM outbox_messages WHERE dead_lettered = 1");
        selector_clause(&mut q, selector);
        Ok(q.build()
            .execute(&mut *self.connection().await?)
            .await?
            .rows_affected())
    }

    async fn get(&self, id: i64) -> Result<Option<OutboxMessage>> {
        let sql = format!("SELECT {COLUMNS} FROM outbox_messages WHERE id = ?");
        let mut found: Option<OutboxMessage> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&mut *self.connection().await?)
            .await?;
        if let Some(m) = &mut found {
            m.claimed_until = self.ledger.lock().lease_of(id);
        }
        Ok(found)
    }

    async fn max_sequence(&self) -> Result<i64> {
        let v: Option<i64> = sqlx::query_scalar("SELECT MAX(sequence_number) FROM outbox_messages")
            .fetch_one(&mut *self.connection().await?)
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
        .execute(&mut *self.connection().await?)
        .await?
        .rows_affected())
    }

    /// One statement: the count of the receiver's other reminders and the insert (or the
    /// replacement of a named one) run under the one writer, so the cap holds exactly.
    async fn arm_reminder(&self, row: &NewRow, name: &str, max_pending: u32) -> Result<bool> {
        let sql = super::arm_reminder_sql();
        let done = super::bind_reminder!(sqlx::query(&sql), row, name, max_pending)
            .execute(&mut *self.connection().await?)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn cancel_reminder(&self, receiver: &str, name: &str) -> Result<bool> {
        if name.is_empty() {
            return Ok(false);
        }
        let done = sqlx::query("DELETE FROM outbox_reminders WHERE receiver = ? AND name = ?")
            .bind(receiver)
            .bind(name)
            .execute(&mut *self.connection().await?)
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
        let rows = q
            .bind(i64::from(limit))
            .fetch_all(&mut *self.connection().await?)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| PendingReminder::from_row(r, now_ms))
            .collect())
    }

    /// The insert and the delete choose the same rows: nothing else writes between them (one
    /// writer connection, held for the transaction).
    async fn promote_reminders(&self, now_ms: i64, limit: u32) -> Result<Promoted> {
        const DUE: &str = "outbox_reminders WHERE due_at <= ?1 ORDER BY due_at, id LIMIT ?2";
        let mut conn = self.connection().await?;
        let next: Option<i64> = sqlx::query_scalar("SELECT MIN(due_at) FROM outbox_reminders")
            .fetch_one(&mut *conn)
            .await?;
        if next.is_none_or(|due| due > now_ms) {
            return Ok(Promoted {
                partitions: Vec::new(),
                next_due: next,
            });
        }
        let mut tx = conn.begin().await?;
        let moved = sqlx::query(&super::promote_sql("?1", &format!("(SELECT * FROM {DUE})")))
            .bind(now_ms)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
        sqlx::query(&format!(
            "DELETE FROM outbox_reminders WHERE id IN (SELECT id FROM {DUE})"
        ))
        .bind(now_ms)
        .bind(i64::from(limit))
        .execute(&mut *tx)
        .await?;
        let next_due: Option<i64> = sqlx::query_scalar("SELECT MIN(due_at) FROM outbox_reminders")
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut partitions = Vec::with_capacity(moved.len());
        let mut ledger = self.ledger.lock();
        for row in &moved {
            ledger.add_pending(row.try_get::<&str, _>(0)?, 1);
            partitions.push(row.try_get::<i64, _>(1)? as u32);
        }
        Ok(Promoted {
            partitions,
            next_due,
        })
    }
}

/// The columns of a [`JsonRow`], in its order.
const JSON_ROW: &str = "json_array(id, tenant, namespace, channel, partition, sender, receiver, \
    receiver_type, msg_type, hex(payload), principal, headers, idempotency_key, conflict, \
    sequence_number, delivery_count, refusals, send_at, created_at, acked, dead_lettered, \
    dead_reason, last_error, expires_at, mode, traceparent)";

/// Up to `limit` pending rows of `partition` after `after`, in id order, as one JSON result
/// row.
async fn scan_json(
    conn: &mut SqliteConnection,
    partition: u32,
    after: i64,
    limit: i64,
) -> Result<Vec<JsonRow>> {
    let sql = format!(
        "SELECT json_group_array({JSON_ROW}) FROM ( \
           SELECT * FROM outbox_messages \
           WHERE partition = ? AND id > ? AND acked = 0 AND dead_lettered = 0 \
           ORDER BY id LIMIT ?)"
    );
    let json: String = sqlx::query_scalar(&sql)
        .bind(i64::from(partition))
        .bind(after)
        .bind(limit)
        .fetch_one(conn)
        .await?;
    let mut rows: Vec<JsonRow> = serde_json::from_str(&json).map_err(decode_error)?;
    rows.sort_unstable_by_key(|r| r.id);
    Ok(rows)
}

/// A result that did not decode, as the database error sqlx would have raised.
fn decode_error(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> crate::Error {
    sqlx::Error::Decode(e.into()).into()
}

/// One row of [`scan_json`], fields in its `json_array` order ([`JSON_ROW`]).
#[derive(serde::Deserialize)]
struct JsonRow {
    id: i64,
    tenant: String,
    namespace: String,
    channel: String,
    partition: i64,
    sender: String,
    receiver: String,
    receiver_type: String,
    msg_type: String,
    payload_hex: String,
    principal: String,
    headers: String,
    idempotency_key: String,
    conflict: String,
    sequence_number: i64,
    delivery_count: i64,
    refusals: i64,
    send_at: i64,
    created_at: i64,
    acked: i64,
    dead_lettered: i64,
    dead_reason: Option<String>,
    last_error: Option<String>,
    expires_at: i64,
    mode: String,
    traceparent: Option<String>,
}

impl JsonRow {
    fn into_message(self) -> Result<OutboxMessage> {
        let conflict = Conflict::from_stored(&self.conflict).ok_or_else(|| {
            decode_error(format!(
                "row {}: unknown conflict {:?}",
                self.id, self.conflict
            ))
        })?;
        let mode = DispatchMode::from_stored(&self.mode).ok_or_else(|| {
            decode_error(format!("row {}: unknown mode {:?}", self.id, self.mode))
        })?;
        Ok(OutboxMessage {
            payload: unhex(&self.payload_hex)
                .ok_or_else(|| decode_error(format!("row {}: payload is not hex", self.id)))?
                .into(),
            principal: self.principal,
            id: self.id,
            tenant: self.tenant,
            namespace: self.namespace,
            channel: self.channel,
            partition: self.partition,
            sender: self.sender,
            receiver: self.receiver,
            receiver_type: self.receiver_type,
            msg_type: self.msg_type,
            headers: self.headers,
            idempotency_key: self.idempotency_key,
            conflict,
            sequence_number: self.sequence_number,
            delivery_count: self.delivery_count,
            refusals: self.refusals,
            send_at: self.send_at,
            created_at: self.created_at,
            claimed_until: 0,
            acked: self.acked != 0,
            dead_lettered: self.dead_lettered != 0,
            dead_reason: self.dead_reason,
            last_error: self.last_error,
            expires_at: self.expires_at,
            mode,
            traceparent: self.traceparent,
        })
    }
}

/// SQLite's `hex()` output (upper case) back to bytes.
fn unhex(s: &str) -> Option<Vec<u8>> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'A'..=b'F' => Some(c - b'A' + 10),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks_exact(2)
        .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect()
}

/// The statements of one settlement, on one connection (inside a transaction when there are
/// several).
async fn settle_on(
    conn: &mut sqlx::SqliteConnection,
    s: &Settlement,
    now_ms: i64,
) -> std::result::Result<Vec<String>, sqlx::Error> {
    for chunk in s.acks.chunks(CHUNK) {
        let mut q = QueryBuilder::<Sqlite>::new(
            "UPDATE outbox_messages SET acked = 1, claimed_until = 0, settled_at = ",
        );
        q.push_bind(now_ms)
            .push(" WHERE acked = 0 AND dead_lettered = 0 AND id IN (");
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
                 refusals = refusals + v.column4, send_at = v.column2, last_error = v.column3, \
                 claimed_until = 0 FROM (",
        );
        q.push_values(chunk, |mut b, r| {
            b.push_bind(r.id)
                .push_bind(r.send_at)
                .push_bind(r.last_error.as_str())
                .push_bind(i64::from(r.refused));
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
    let mut superseded = Vec::new();
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
        q.push(") RETURNING receiver");
        for row in q.build().fetch_all(&mut *conn).await? {
            superseded.push(row.try_get(0)?);
        }
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
        q.push(
            ") AS v WHERE outbox_messages.id = v.column1 \
             AND outbox_messages.acked = 0 AND outbox_messages.dead_lettered = 0",
        );
        q.build().execute(&mut *conn).await?;
    }
    Ok(superseded)
}
