//! The one enqueue both backends run: look up what the store holds for the batch's keys,
//! decide per row ([`plan::decide`]), insert, overwrite, commit. A backend supplies only the
//! storage steps ([`EnqueueTx`]), each a statement or two inside its transaction.

use std::collections::HashSet;

use async_trait::async_trait;

use super::plan::{self, Action, Existing};
use super::{CHUNK, EnqueueOptions};
use crate::error::Result;
use crate::message::{Conflict, EnqueueOutcome, NewRow};

/// One row to insert: its content, and the lease it is stored with (0 = unclaimed; a claimed
/// row is a receiver's head kept for `dispatch`'s immediate attempt).
pub(crate) struct Insert<'a> {
    pub row: &'a NewRow,
    pub claimed_until: i64,
}

/// The storage steps of one enqueue, all inside one transaction.
#[async_trait]
pub(crate) trait EnqueueTx: Send {
    /// Serialise against concurrent enqueues of the same `(receiver, key)` pairs (the plan is
    /// check-then-insert) and, for OVERWRITEs, against claims of `overwrite_partitions` (a
    /// claim must not skip a row being overwritten). Called only when `pairs` is not empty.
    async fn lock(&mut self, pairs: &[(&str, &str)], overwrite_partitions: &[u32]) -> Result<()>;

    /// The stored rows with these `(receiver, key)` pairs that a conflict decision needs:
    /// every pending one, and settled ones of APPEND (the deduplication window).
    async fn existing(&mut self, pairs: &[(&str, &str)]) -> Result<Vec<Existing>>;

    /// Which of `receivers` have a pending row.
    async fn busy(&mut self, receivers: &[&str]) -> Result<HashSet<String>>;

    /// Insert `rows` (at most [`CHUNK`]); their ids, in the same order.
    async fn insert(&mut self, rows: &[Insert<'_>]) -> Result<Vec<i64>>;

    /// Replace the content of the pending, unclaimed row `id` with `row`'s.
    async fn overwrite(&mut self, id: i64, row: &NewRow) -> Result<()>;

    /// Make it all durable.
    async fn commit(self) -> Result<()>;
}

/// Store `rows` through `tx`; one outcome per row, in order.
pub(crate) async fn run<T: EnqueueTx>(
    mut tx: T,
    rows: &[NewRow],
    opts: EnqueueOptions,
) -> Result<Vec<EnqueueOutcome>> {
    // 1. What the store already holds for the batch's (receiver, key) pairs.
    let mut pairs: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| !r.msg.key().is_empty())
        .map(|r| (r.msg.receiver.as_str(), r.msg.key()))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut existing = Vec::new();
    if !pairs.is_empty() {
        let mut parts: Vec<u32> = rows
            .iter()
            .filter(|r| r.msg.conflict == Conflict::Overwrite && !r.msg.key().is_empty())
            .map(|r| r.partition)
            .collect();
        parts.sort_unstable();
        parts.dedup();
        tx.lock(&pairs, &parts).await?;
        for chunk in pairs.chunks(CHUNK) {
            existing.extend(tx.existing(chunk).await?);
        }
    }

    // 2. Receivers with pending rows (only when heads are to be claimed).
    let mut busy = HashSet::new();
    if opts.claim_heads_until.is_some() {
        let mut receivers: Vec<&str> = rows.iter().map(|r| r.msg.receiver.as_str()).collect();
        receivers.sort_unstable();
        receivers.dedup();
        for chunk in receivers.chunks(CHUNK) {
            busy.extend(tx.busy(chunk).await?);
        }
    }

    // 3. Decide, then fold same-batch OVERWRITEs into the row they replace.
    let claim_heads = opts.claim_heads_until.is_some();
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

    // 4. Inserts, in input order (ids grow with it: FIFO per receiver).
    let mut ids = vec![0i64; rows.len()];
    for chunk in inserts.chunks(CHUNK) {
        let batch: Vec<Insert<'_>> = chunk
            .iter()
            .map(|(i, claim)| Insert {
                row: &rows[content[*i]],
                claimed_until: if *claim {
                    opts.claim_heads_until.unwrap_or(0)
                } else {
                    0
                },
            })
            .collect();
        let new_ids = tx.insert(&batch).await?;
        for ((i, _), id) in chunk.iter().zip(new_ids) {
            ids[*i] = id;
        }
    }

    // 5. OVERWRITE of stored pending rows (never claimed ones: see plan::decide).
    for (i, a) in actions.iter().enumerate() {
        if let Action::Overwrite { id } = a {
            tx.overwrite(*id, &rows[i]).await?;
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
