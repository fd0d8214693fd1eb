//! Paused time that stands still while the database works.
//!
//! On paused time tokio advances the clock whenever the runtime has nothing to do. Waiting for
//! SQLite's worker thread or a Postgres socket looks like nothing to do, so the clock would
//! leap to the next timer on every statement: leases, backoffs and the tests' own timeouts
//! would run out while a claim is still in flight. A blocking task inhibits that auto-advance
//! for as long as it lives (tokio's rule, so that `spawn_blocking` work takes no virtual
//! time), so every call through [`Frozen`] holds one open until the statement is done. Virtual
//! time then moves only while the relay and the test are idle: a statement takes none.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use sluice_outbox::channel::{Backend, Channel, EnqueueOptions, Promoted};
use sluice_outbox::message::{NewRow, PendingReminder, Settlement};
use sluice_outbox::{
    DeadLetter, DlqSelector, EnqueueOutcome, OutboxMessage, PartitionStats, Result,
};

/// Run `f` with tokio's auto-advance inhibited (a no-op on a runtime whose time is not
/// paused).
pub async fn frozen<F: Future>(f: F) -> F::Output {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let hold = tokio::task::spawn_blocking(move || {
        let _ = wait.recv();
    });
    let out = f.await;
    drop(done);
    let _ = hold.await;
    out
}

/// A real channel whose every call takes no virtual time.
pub struct Frozen(pub Arc<dyn Channel>);

#[async_trait]
impl Channel for Frozen {
    fn backend(&self) -> Backend {
        self.0.backend()
    }
    async fn enqueue(&self, rows: &[NewRow], opts: EnqueueOptions) -> Result<Vec<EnqueueOutcome>> {
        frozen(self.0.enqueue(rows, opts)).await
    }
    async fn claim(
        &self,
        partition: u32,
        limit: u32,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Vec<OutboxMessage>> {
        frozen(self.0.claim(partition, limit, now_ms, lease_ms)).await
    }
    async fn settle(&self, settlement: &Settlement, now_ms: i64) -> Result<()> {
        frozen(self.0.settle(settlement, now_ms)).await
    }
    async fn stats(&self, now_ms: i64) -> Result<Vec<PartitionStats>> {
        frozen(self.0.stats(now_ms)).await
    }
    async fn partition_stats(&self, partition: u32, now_ms: i64) -> Result<PartitionStats> {
        frozen(self.0.partition_stats(partition, now_ms)).await
    }
    async fn dlq_list(
        &self,
        receiver: Option<&str>,
        limit: u32,
        now_ms: i64,
    ) -> Result<Vec<DeadLetter>> {
        frozen(self.0.dlq_list(receiver, limit, now_ms)).await
    }
    async fn dlq_replay(&self, selector: &DlqSelector, now_ms: i64) -> Result<u64> {
        frozen(self.0.dlq_replay(selector, now_ms)).await
    }
    async fn dlq_purge(&self, selector: &DlqSelector) -> Result<u64> {
        frozen(self.0.dlq_purge(selector)).await
    }
    async fn get(&self, id: i64) -> Result<Option<OutboxMessage>> {
        frozen(self.0.get(id)).await
    }
    async fn max_sequence(&self) -> Result<i64> {
        frozen(self.0.max_sequence()).await
    }
    async fn compact(&self, partition: u32, before_ms: i64, limit: u32) -> Result<u64> {
        frozen(self.0.compact(partition, before_ms, limit)).await
    }
    async fn release(&self, partition: u32) -> Result<()> {
        frozen(self.0.release(partition)).await
    }
    fn holds(&self, partition: u32, now_ms: i64) -> bool {
        self.0.holds(partition, now_ms)
    }
    fn set_lessee(&self, name: &str) -> Result<()> {
        self.0.set_lessee(name)
    }
    async fn end_leases_of(&self, name: &str) -> Result<u64> {
        frozen(self.0.end_leases_of(name)).await
    }
    async fn arm_reminder(&self, row: &NewRow, name: &str, max_pending: u32) -> Result<bool> {
        frozen(self.0.arm_reminder(row, name, max_pending)).await
    }
    async fn cancel_reminder(&self, receiver: &str, name: &str) -> Result<bool> {
        frozen(self.0.cancel_reminder(receiver, name)).await
    }
    async fn reminders(
        &self,
        receiver: Option<&str>,
        limit: u32,
        now_ms: i64,
    ) -> Result<Vec<PendingReminder>> {
        frozen(self.0.reminders(receiver, limit, now_ms)).await
    }
    async fn promote_reminders(&self, now_ms: i64, limit: u32) -> Result<Promoted> {
        frozen(self.0.promote_reminders(now_ms, limit)).await
    }
}
