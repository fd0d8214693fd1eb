//! [`IpcRateLimiter`]: the concurrent, sharded form of `sluice_flow::ratelimit`.
//!
//! # Why it is fast under contention
//! `(actor type, principal)` is hashed once (SipHash with a random key:
//! principal ids come from outside, so the table must resist hash flooding).
//! That one hash picks one of `SHARDS` independently locked maps and is also
//! the map key (identity-hashed; equal hashes chain in a short `Vec`), so a
//! check costs one hash and no allocation. Two callers contend on a lock word
//! only when their keys share a shard. The common case — the bucket exists — takes the
//! shard's *read* lock and updates the bucket with one compare-and-swap on an
//! `AtomicU64` holding the whole [`Window`] (window number + bytes used). The
//! write lock is taken only to insert a new bucket or to prune.
//!
//! # Memory orderings
//! Every atomic access is `Relaxed`:
//! - The bucket word is the bucket's entire state and publishes no other
//!   memory. A CAS is an atomic read-modify-write on a single location, so
//!   all CASes on it form one total modification order whatever the ordering
//!   argument; two concurrent checks can never both spend the same bytes.
//! - The map structure (and the bucket's initial value and quota) is
//!   published by the shard `RwLock`, whose acquire/release does that job.
//! - `len` and `last_prune_ms` are heuristics deciding *whether* to prune;
//!   a stale read only delays or repeats a prune. The CAS on `last_prune_ms`
//!   elects a single pruner, and pruning uses `try_write`, so it never blocks
//!   a caller.
//!
//! A bucket is updated only while its shard's read lock is held, and pruning
//! removes buckets under the write lock, so no update can land on a bucket
//! that has just been pruned.

use crate::PrincipalClass;
use crate::metrics::RATE_LIMITED_TOTAL;
use parking_lot::RwLock;
use sluice_flow::ratelimit::{RateLimitConfig, RateLimitError, Window, check_payload_size};
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, BuildHasherDefault};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

/// Number of independently locked shards (a power of two).
const SHARDS: usize = 64;

struct Bucket {
    actor_type: Box<str>,
    principal: Box<str>,
    window: AtomicU64,
    quota: u64,
}

/// Uses a precomputed `u64` hash as is.
#[derive(Default)]
struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys are hashed")
    }
    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }
}

type Shard = HashMap<u64, Vec<Bucket>, BuildHasherDefault<PassThrough>>;

fn find<'a>(shard: &'a Shard, hash: u64, actor_type: &str, principal: &str) -> Option<&'a Bucket> {
    shard
        .get(&hash)?
        .iter()
        .find(|b| &*b.actor_type == actor_type && &*b.principal == principal)
}

struct Inner {
    config: RateLimitConfig,
    shards: Box<[RwLock<Shard>]>,
    hasher: RandomState,
    epoch: Instant,
    len: AtomicUsize,
    last_prune_ms: AtomicU64,
}

/// Byte budget per (actor type, principal) per 1-second window, safe to share
/// across threads. Cheap to clone (shared state).
///
/// Refusals are counted in `sluice_ipc_rate_limited_total{class, reason}`.
#[derive(Clone)]
pub struct IpcRateLimiter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for IpcRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcRateLimiter")
            .field("buckets", &self.len())
            .finish()
    }
}

impl IpcRateLimiter {
    /// A limiter with the given quotas; its clock starts now.
    pub fn new(config: RateLimitConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
                hasher: RandomState::new(),
                epoch: Instant::now(),
                len: AtomicUsize::new(0),
                last_prune_ms: AtomicU64::new(0),
            }),
        }
    }

    /// The quotas in force.
    pub fn config(&self) -> &RateLimitConfig {
        &self.inner.config
    }

    /// Buckets currently held (approximate under concurrency).
    pub fn len(&self) -> usize {
        self.inner.len.load(Relaxed)
    }

    /// No buckets are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Charges `size` bytes to `(actor_type, principal)` now.
    pub fn check(
        &self,
        actor_type: &str,
        principal: &str,
        size: usize,
    ) -> Result<(), RateLimitError> {
        let now_ms = self.inner.epoch.elapsed().as_millis() as u64;
        self.check_at(actor_type, principal, size, now_ms)
    }

    /// Charges `size` bytes at `now_ms`, milliseconds on the caller's clock
    /// (tests and embedders with their own clock).
    pub fn check_at(
        &self,
        actor_type: &str,
        principal: &str,
        size: usize,
        now_ms: u64,
    ) -> Result<(), RateLimitError> {
        let res = self.check_inner(actor_type, principal, size, now_ms);
        if let Err(e) = &res {
            let reason = match e {
                RateLimitError::QuotaExceeded { .. } => "quota",
                RateLimitError::ExceedsQuota { .. } => "exceeds_quota",
                _ => "too_large",
            };
            metrics::counter!(RATE_LIMITED_TOTAL,
                "class" => PrincipalClass::of(principal).as_str(), "reason" => reason)
            .increment(1);
            tracing::debug!(target: "sluice.bus", actor_type, principal, size, error = %e,
                "ipc rate limit refused");
        }
        res
    }

    fn check_inner(
        &self,
        actor_type: &str,
        principal: &str,
        size: usize,
        now_ms: u64,
    ) -> Result<(), RateLimitError> {
        check_payload_size(size)?;
        let inner = &*self.inner;
        let hash = inner.hasher.hash_one((actor_type, principal));
        // Middle bits pick the shard: the map indexes by the low bits and
        // tags by the top ones, so both stay well spread within a shard.
        let shard = &inner.shards[(hash >> 32) as usize & (SHARDS - 1)];
        if let Some(bucket) = find(&shard.read(), hash, actor_type, principal) {
            return consume(bucket, now_ms, size);
        }
        self.maybe_prune(now_ms);
        let mut map = shard.write();
        // Another caller may have inserted it between our two locks.
        if find(&map, hash, actor_type, principal).is_none() {
            inner.len.fetch_add(1, Relaxed);
            map.entry(hash).or_default().push(Bucket {
                actor_type: actor_type.into(),
                principal: principal.into(),
                window: AtomicU64::new(Window::default().to_bits()),
                quota: inner.config.quota_for(principal),
            });
        }
        let bucket = find(&map, hash, actor_type, principal).expect("just inserted");
        consume(bucket, now_ms, size)
    }

    /// Drops stale buckets once there are more than the threshold and the
    /// interval has passed. Only the caller that wins the CAS prunes, and a
    /// shard that is busy is skipped rather than waited for.
    fn maybe_prune(&self, now_ms: u64) {
        let inner = &*self.inner;
        if inner.len.load(Relaxed) <= inner.config.prune_threshold {
            return;
        }
        let last = inner.last_prune_ms.load(Relaxed);
        if now_ms.saturating_sub(last) < inner.config.prune_interval_ms
            || inner
                .last_prune_ms
                .compare_exchange(last, now_ms, Relaxed, Relaxed)
                .is_err()
        {
            return;
        }
        for shard in inner.shards.iter() {
            let Some(mut map) = shard.try_write() else {
                continue;
            };
            map.retain(|_, chain| {
                let before = chain.len();
                chain.retain(|b| !Window::from_bits(b.window.load(Relaxed)).is_stale(now_ms));
                inner.len.fetch_sub(before - chain.len(), Relaxed);
                !chain.is_empty()
            });
        }
    }
}

/// The lock-free step: CAS the packed window forward, or refuse.
fn consume(bucket: &Bucket, now_ms: u64, size: usize) -> Result<(), RateLimitError> {
    let mut current = bucket.window.load(Relaxed);
    loop {
        let next = Window::from_bits(current).try_consume(now_ms, size, bucket.quota)?;
        match bucket
            .window
            .compare_exchange_weak(current, next.to_bits(), Relaxed, Relaxed)
        {
            Ok(_) => return Ok(()),
            Err(actual) => current = actual,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_flow::ratelimit::MAX_IPC_PAYLOAD_BYTES;

    #[test]
    fn alices_flood_does_not_consume_bobs_budget() {
        let rl = IpcRateLimiter::new(RateLimitConfig::default().default_quota(10_000));
        let mut refused = 0;
        for _ in 0..1000 {
            if rl.check_at("svc", "alice", 100, 0).is_err() {
                refused += 1;
            }
        }
        assert_eq!(refused, 900);
        rl.check_at("svc", "bob", 10_000, 0).unwrap();
        let err = rl.check_at("svc", "alice", 1, 400).unwrap_err();
        assert_eq!(err.retry_after_ms(), Some(600));
        rl.check_at("svc", "alice", 10_000, 1000).unwrap();
    }

    #[test]
    fn the_same_principal_on_two_actor_types_has_two_budgets() {
        let rl = IpcRateLimiter::new(RateLimitConfig::default().default_quota(100));
        rl.check_at("a", "alice", 100, 0).unwrap();
        assert!(rl.check_at("a", "alice", 1, 0).is_err());
        rl.check_at("b", "alice", 100, 0).unwrap();
        assert_eq!(rl.len(), 2);
    }

    #[test]
    fn five_mib_ceiling_holds_whatever_the_quota() {
        let rl = IpcRateLimiter::new(
            RateLimitConfig::default()
                .default_quota(u64::MAX)
                .quota_override("root", u64::MAX),
        );
        rl.check_at("a", "root", MAX_IPC_PAYLOAD_BYTES, 0).unwrap();
        assert_eq!(
            rl.check_at("a", "root", MAX_IPC_PAYLOAD_BYTES + 1, 5000),
            Err(RateLimitError::PayloadTooLarge {
                size: MAX_IPC_PAYLOAD_BYTES + 1
            })
        );
    }

    #[test]
    fn concurrent_checks_never_overspend_a_window() {
        let rl = IpcRateLimiter::new(RateLimitConfig::default().default_quota(1_000_000));
        let accepted: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let rl = rl.clone();
                    s.spawn(move || {
                        (0..100_000)
                            .filter(|_| rl.check_at("a", "p", 7, 0).is_ok())
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(accepted, 1_000_000 / 7);
    }

    /// Two threads race checks over shared keys on one shared, advancing
    /// clock while the prune threshold is tiny, so checks straddle window
    /// boundaries with stale clock reads and pruning runs concurrently. A
    /// bucket's window only moves forward and holds at most the quota, so no
    /// key may accept more than `quota x windows the clock passed through`.
    #[test]
    fn concurrent_checks_and_pruning_never_overspend() {
        const QUOTA: u64 = 1000;
        const KEYS: u64 = 16;
        let rl = IpcRateLimiter::new(RateLimitConfig {
            default_quota_bytes_per_sec: QUOTA,
            prune_threshold: 4,
            prune_interval_ms: 1,
            ..RateLimitConfig::default()
        });
        let clock = AtomicU64::new(0);
        let accepted: Vec<Vec<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2u64)
                .map(|t| {
                    let (rl, clock) = (rl.clone(), &clock);
                    s.spawn(move || {
                        let mut accepted = vec![0u64; KEYS as usize];
                        for i in 0..100_000u64 {
                            // Read the clock, then advance it: the other
                            // thread may act on a newer time in between.
                            let now_ms = clock.load(Relaxed) / 20;
                            clock.fetch_add(1, Relaxed);
                            let key = (i * 7 + t) % KEYS;
                            let size = 1 + (i % 97) as usize;
                            if rl.check_at("svc", &format!("p{key}"), size, now_ms).is_ok() {
                                accepted[key as usize] += size as u64;
                            }
                        }
                        accepted
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let windows = clock.load(Relaxed) / 20 / 1000 + 1;
        for (key, (a, b)) in accepted[0].iter().zip(&accepted[1]).enumerate() {
            let total = a + b;
            assert!(
                total <= QUOTA * windows,
                "p{key}: {total} bytes over {windows} windows"
            );
            assert!(
                total >= QUOTA * (windows - 1),
                "p{key} was starved: {total}"
            );
        }
    }

    #[test]
    fn stale_buckets_are_pruned_without_blocking() {
        let rl = IpcRateLimiter::new(RateLimitConfig {
            prune_threshold: 10,
            prune_interval_ms: 60_000,
            ..RateLimitConfig::default()
        });
        for i in 0..100 {
            rl.check_at("a", &format!("p{i}"), 1, 0).unwrap();
        }
        assert_eq!(rl.len(), 100);
        rl.check_at("a", "late", 1, 60_000).unwrap();
        assert_eq!(rl.len(), 1);
    }
}
