//! Shared test support: real stores (SQLite file in a temp dir, Postgres database created per
//! test from `SLUICE_TEST_POSTGRES_URL`) and a native receiver implementing `Delivery`.
//!
//! Outboxes opened here take `now` from tokio's clock ([`TokioClock`]), so a test on paused
//! time (`start_paused`) waits out backoffs, leases and delays in virtual time, and their
//! channel takes no virtual time per statement ([`frozen`]).
#![allow(dead_code)]

pub mod bodies;
pub mod frozen;

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use sluice_outbox::{
    Channel, Delivery, DeliveryError, Envelope, Outbox, OutboxConfig, PostgresChannel,
    SqliteChannel, TokioClock,
};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Where a test's outbox lives. `open` can be called again to simulate a restart; every
/// opening shares the store's clock, so time never goes backwards across a restart.
pub struct Store {
    pub kind: StoreKind,
    clock: TokioClock,
}

pub enum StoreKind {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Store {
    fn of(kind: StoreKind) -> Self {
        Self {
            kind,
            clock: TokioClock::new(),
        }
    }

    pub fn sqlite() -> Self {
        Self::of(StoreKind::Sqlite(tempfile::tempdir().expect("temp dir")))
    }

    /// A fresh database on the test server named by `SLUICE_TEST_POSTGRES_URL`. Without one
    /// the test fails: it is never skipped.
    pub async fn postgres() -> Self {
        let base = std::env::var("SLUICE_TEST_POSTGRES_URL").expect(
            "SLUICE_TEST_POSTGRES_URL is not set: run `eval \"$(scripts/postgres.sh)\"` first",
        );
        use sqlx::Connection;
        let name = format!("sluice_t_{}", uuid::Uuid::new_v4().simple());
        frozen::frozen(async {
            let mut admin = sqlx::PgConnection::connect(&base)
                .await
                .expect("connect to test Postgres");
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&mut admin)
                .await
                .expect("create test database");
        })
        .await;
        let (prefix, _) = base.rsplit_once('/').expect("URL with a database name");
        Self::of(StoreKind::Postgres(format!("{prefix}/{name}")))
    }

    pub async fn open(&self, config: OutboxConfig) -> Outbox {
        let channel: Arc<dyn Channel> = frozen::frozen(async {
            match &self.kind {
                StoreKind::Sqlite(dir) => Arc::new(
                    SqliteChannel::open(dir.path().join("outbox.db"))
                        .await
                        .expect("open sqlite outbox"),
                ) as Arc<dyn Channel>,
                StoreKind::Postgres(url) => Arc::new(
                    PostgresChannel::open(url, config.partitions + 4)
                        .await
                        .expect("open postgres outbox"),
                ),
            }
        })
        .await;
        Outbox::with_clock(
            Arc::new(frozen::Frozen(channel)),
            config,
            Arc::new(self.clock),
        )
        .await
        .expect("open outbox")
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self.kind, StoreKind::Postgres(_))
    }
}

/// A test's Postgres database is dropped with its `Store` (a 100k-row test leaves ~100 MB),
/// from a thread of its own: the test's runtime may be paused or shutting down.
impl Drop for Store {
    fn drop(&mut self) {
        let StoreKind::Postgres(url) = &self.kind else {
            return;
        };
        let Some((base, name)) = url.rsplit_once('/') else {
            return;
        };
        let admin = format!("{base}/postgres");
        let name = name.to_string();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                use sqlx::Connection;
                if let Ok(mut c) = sqlx::PgConnection::connect(&admin).await {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut c)
                        .await;
                }
            });
        })
        .join();
    }
}

/// Small, fast retry settings so tests finish quickly.
pub fn fast_config() -> sluice_outbox::OutboxConfigBuilder {
    OutboxConfig::builder()
        .retry_policy(sluice_outbox::RetryPolicy {
            max_attempts: 5,
            base_ms: 5,
            cap_ms: 50,
        })
        .relay_interval_ms(2)
        .lease_ms(5_000)
        .stats_interval_ms(50)
}

/// What the receiver answers to one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Ok,
    /// Take this long (tokio time), then succeed; ignores any deadline.
    Stall(u64),
    Capacity(u64),
    Transient(&'static str),
    /// The delivering host is cut off from its cluster.
    Unroutable(&'static str),
    Permanent(&'static str),
}

/// One delivery as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub id: i64,
    pub receiver: String,
    pub payload: Vec<u8>,
    pub principal: Option<String>,
    pub attempt: u32,
    pub trace: Option<sluice_outbox::TraceParent>,
    pub ok: bool,
    /// On tokio's clock (virtual on paused time).
    pub at: Instant,
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    /// Scripted answers per receiver, consumed in order; then `Ok`.
    script: HashMap<String, VecDeque<Answer>>,
    /// Receivers that always answer this.
    always: HashMap<String, Answer>,
    in_flight: HashMap<i64, usize>,
}

/// A native receiver: records every attempt, answers from a script, and can model a shared
/// mailbox with adjustable capacity drained by a background task.
#[derive(Clone, Default)]
pub struct TestReceiver {
    state: Arc<Mutex<State>>,
    notify: Arc<Notify>,
    /// Shared "mailbox" occupancy and capacity (0 capacity = unlimited).
    pub mailbox: Arc<AtomicUsize>,
    pub capacity: Arc<AtomicUsize>,
    pub concurrent_same_id: Arc<AtomicUsize>,
}

impl TestReceiver {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn script(&self, receiver: &str, answers: impl IntoIterator<Item = Answer>) {
        self.state
            .lock()
            .script
            .entry(receiver.into())
            .or_default()
            .extend(answers);
    }

    pub fn always(&self, receiver: &str, answer: Answer) {
        self.state.lock().always.insert(receiver.into(), answer);
    }

    pub fn clear_always(&self) {
        self.state.lock().always.clear();
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().seen.clone()
    }

    pub fn delivered(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.ok).collect()
    }

    pub fn delivered_count(&self) -> usize {
        self.state.lock().seen.iter().filter(|s| s.ok).count()
    }

    /// Start a task that removes one message from the shared mailbox every `every`.
    pub fn start_drain(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let mailbox = self.mailbox.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let _ = mailbox
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            }
        })
    }

    /// Wait (bounded) until `cond` holds over the receiver's state; re-checked on every
    /// delivery and at least every 20 ms (for conditions on time).
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        cond: impl Fn(&TestReceiver) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.notify.notified();
            if cond(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, async {
                tokio::select! { _ = notified => {}, _ = tokio::time::sleep(Duration::from_millis(20)) => {} }
            })
            .await
            .is_err()
            {
                panic!("timed out after {timeout:?} waiting for: {what} (delivered {})", self.delivered_count());
            }
        }
    }
}

#[async_trait]
impl Delivery for TestReceiver {
    async fn deliver(&self, msg: Envelope) -> Result<(), DeliveryError> {
        {
            let mut st = self.state.lock();
            let n = st.in_flight.entry(msg.id).or_default();
            *n += 1;
            if *n > 1 {
                self.concurrent_same_id.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Give other chains a chance to run concurrently.
        tokio::task::yield_now().await;
        let answer = {
            let mut st = self.state.lock();
            let scripted = st.script.get_mut(&msg.receiver).and_then(|q| q.pop_front());
            scripted
                .or_else(|| st.always.get(&msg.receiver).cloned())
                .unwrap_or(Answer::Ok)
        };
        let answer = if let Answer::Stall(ms) = answer {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Answer::Ok
        } else {
            answer
        };
        let answer = if answer == Answer::Ok {
            let cap = self.capacity.load(Ordering::Relaxed);
            if cap > 0
                && self
                    .mailbox
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                        (n < cap).then_some(n + 1)
                    })
                    .is_err()
            {
                Answer::Capacity(1)
            } else {
                Answer::Ok
            }
        } else {
            answer
        };
        let result = match answer {
            Answer::Ok | Answer::Stall(_) => Ok(()),
            Answer::Capacity(ms) => Err(DeliveryError::mailbox_full(ms)),
            Answer::Transient(e) => Err(DeliveryError::Transient(e.into())),
            Answer::Unroutable(e) => Err(DeliveryError::Unroutable(e.into())),
            Answer::Permanent(e) => Err(DeliveryError::Permanent(e.into())),
        };
        {
            let mut st = self.state.lock();
            if let Some(n) = st.in_flight.get_mut(&msg.id) {
                *n -= 1;
            }
            st.seen.push(Seen {
                id: msg.id,
                receiver: msg.receiver,
                payload: msg.payload.to_vec(),
                principal: msg.principal,
                attempt: msg.attempt,
                trace: msg.trace,
                ok: result.is_ok(),
                at: Instant::now(),
            });
        }
        self.notify.notify_waiters();
        result
    }
}

/// Poll an async condition (DB state) until it holds, bounded by `timeout` of tokio time.
///
/// Not the suites' shared `sluice_test_wait` (bounded by wall-clock time): these tests run on
/// paused time, where the outbox's backoffs, leases and delays pass in virtual time, so the
/// bound is virtual time too: `tokio::time::Instant` and the 10 ms sleeps advance together.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !cond().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
