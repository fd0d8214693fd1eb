use super::*;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;
use std::time::{Duration, Instant};

type Q = DrrQueue<u32, u64>;

#[derive(Default)]
struct Record {
    evicted: Vec<(u32, u64, EvictReason)>,
    starved: Vec<u32>,
}

impl DrrObserver<u32, u64> for Record {
    fn evicted(&mut self, principal: &u32, msg: Msg<u64>, reason: EvictReason) {
        self.evicted.push((*principal, msg.value, reason));
    }
    fn starved(&mut self, principal: &u32) {
        self.starved.push(*principal);
    }
}

fn queue(budget: usize) -> Q {
    DrrConfig {
        budget_bytes: budget,
        ..DrrConfig::default()
    }
    .build()
}

fn drain_all(q: &mut Q) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    while let Some(d) = q.pop(&mut ()) {
        out.push((d.principal, d.msg.value));
    }
    out
}

#[test]
fn five_thousand_principals_demand_allocate_one_bucket_each_and_drain_in_one_round() {
    let mut q: Q = DrrConfig::default().build();
    let now = Instant::now();
    assert_eq!(q.active_principals(), 0);
    for p in 0..5000u32 {
        q.push(p, Msg::new(p as u64, 100, now), &mut ()).unwrap();
    }
    assert_eq!(q.active_principals(), 5000);
    assert_eq!(q.len(), 5000);
    let mut out = Vec::new();
    let mut obs = Record::default();
    let served = q.try_drain(DEFAULT_BUDGET_BYTES, &mut out, &mut obs);
    assert_eq!(out.len(), 5000);
    assert_eq!(served, 5000 * 100);
    assert!(obs.starved.is_empty());
    assert!(q.is_empty());
    assert_eq!(q.active_principals(), 0, "emptied buckets are freed");
    assert_eq!(q.bytes_in_use(), 0);
}

#[test]
fn oversize_message_is_rejected_without_evicting_others() {
    let mut q = queue(1000);
    let now = Instant::now();
    for p in 0..5 {
        q.push(p, Msg::new(p as u64, 150, now), &mut ()).unwrap();
    }
    let mut obs = Record::default();
    let err = q.push(9, Msg::new(99, 1001, now), &mut obs).unwrap_err();
    assert!(matches!(
        err,
        PushError::Oversize {
            budget_bytes: 1000,
            ..
        }
    ));
    assert_eq!(err.code(), "INVALID_ARGUMENT");
    assert_eq!(err.into_msg().value, 99, "the refused message comes back");
    assert!(obs.evicted.is_empty());
    assert_eq!(q.len(), 5);
    assert_eq!(q.bytes_in_use(), 750);
    // Exactly the budget is fine (after evicting everything else).
    q.push(9, Msg::new(100, 1000, now), &mut obs).unwrap();
    assert_eq!(obs.evicted.len(), 5);
}

#[test]
fn eviction_takes_the_globally_oldest_head() {
    let mut q = queue(1000);
    let now = Instant::now();
    // Interleave: principal 1 is oldest, then 2, then 3, then 1 again...
    q.push(1, Msg::new(10, 300, now), &mut ()).unwrap();
    q.push(2, Msg::new(20, 300, now), &mut ()).unwrap();
    q.push(3, Msg::new(30, 300, now), &mut ()).unwrap();
    let mut obs = Record::default();
    q.push(2, Msg::new(21, 300, now), &mut obs).unwrap();
    assert_eq!(obs.evicted, vec![(1, 10, EvictReason::Budget)]);
    q.push(4, Msg::new(40, 300, now), &mut obs).unwrap();
    assert_eq!(obs.evicted[1], (2, 20, EvictReason::Budget));
    q.push(4, Msg::new(41, 300, now), &mut obs).unwrap();
    assert_eq!(obs.evicted[2], (3, 30, EvictReason::Budget));
    assert_eq!(q.active_principals(), 2, "evicted-empty buckets are freed");
    assert_eq!(drain_all(&mut q), vec![(2, 21), (4, 40), (4, 41)]);
}

#[test]
fn eviction_order_follows_push_order_not_timestamps() {
    let mut q = queue(200);
    let t0 = Instant::now();
    // The caller's clock went backwards; ordering still follows pushes.
    q.push(1, Msg::new(1, 100, t0 + Duration::from_secs(5)), &mut ())
        .unwrap();
    q.push(2, Msg::new(2, 100, t0), &mut ()).unwrap();
    let mut obs = Record::default();
    q.push(3, Msg::new(3, 100, t0), &mut obs).unwrap();
    assert_eq!(obs.evicted, vec![(1, 1, EvictReason::Budget)]);
    assert_eq!(q.oldest_enqueued_at(), Some(t0));
}

#[test]
fn control_messages_are_never_evicted() {
    let mut q = queue(1000);
    let now = Instant::now();
    // Principal 1: a reply (control) in front of data, then a terminator.
    q.push(1, Msg::control(100, 200, now), &mut ()).unwrap();
    q.push(1, Msg::new(101, 200, now), &mut ()).unwrap();
    q.push(2, Msg::new(200, 200, now), &mut ()).unwrap();
    q.push(1, Msg::control(102, 200, now), &mut ()).unwrap();
    let mut obs = Record::default();
    // Needs 300 bytes: the oldest evictable message is 101 (behind a control
    // head), the next one is 200.
    q.push(3, Msg::new(300, 500, now), &mut obs).unwrap();
    assert_eq!(
        obs.evicted,
        vec![(1, 101, EvictReason::Budget), (2, 200, EvictReason::Budget)]
    );
    // 400 control bytes + 500 evictable remain; a 600-byte push fits by evicting 300.
    q.push(4, Msg::new(400, 600, now), &mut obs).unwrap();
    assert_eq!(obs.evicted.last(), Some(&(3, 300, EvictReason::Budget)));
    // Now 400 control + 600 data; 700 would need control bytes: refused, nothing evicted.
    let before = obs.evicted.len();
    let err = q.push(5, Msg::new(500, 700, now), &mut obs).unwrap_err();
    assert!(matches!(err, PushError::BudgetExhausted(_)));
    assert_eq!(obs.evicted.len(), before);
    assert!(obs.evicted.iter().all(|(_, v, _)| *v != 100 && *v != 102));
    assert_eq!(drain_all(&mut q), vec![(1, 100), (1, 102), (4, 400)]);
}

#[test]
fn a_principal_is_capped_at_256_messages_by_evicting_its_own_oldest() {
    let mut q: Q = DrrConfig::default().build();
    let now = Instant::now();
    q.push(7, Msg::new(0, 1, now), &mut ()).unwrap();
    let mut obs = Record::default();
    for i in 0..300u64 {
        q.push(1, Msg::new(i, 1, now), &mut obs).unwrap();
    }
    assert_eq!(q.principal_len(&1), 256);
    assert_eq!(obs.evicted.len(), 44);
    assert!(
        obs.evicted
            .iter()
            .enumerate()
            .all(|(i, e)| *e == (1, i as u64, EvictReason::PrincipalCap))
    );
    assert_eq!(q.principal_len(&7), 1, "other principals untouched");
    // All-control bucket at the cap refuses instead of evicting.
    for i in 0..256u64 {
        q.push(2, Msg::control(i, 1, now), &mut ()).unwrap();
    }
    assert!(matches!(
        q.push(2, Msg::new(999, 1, now), &mut ()),
        Err(PushError::PrincipalFull(_))
    ));
}

/// 8000 bytes of budget, quantum floor 1: the quantum is 8000 / active principals.
fn budget_8000() -> Q {
    DrrConfig {
        budget_bytes: 8000,
        max_per_principal: 256,
        min_quantum_bytes: 1,
    }
    .build()
}

#[test]
fn drr_lets_a_trickle_overtake_a_flooders_backlog() {
    // budget 8000 over 2 active principals: quantum = 4000 bytes per turn.
    let mut q = budget_8000();
    let now = Instant::now();
    for i in 0..7u64 {
        q.push(1, Msg::new(i, 1000, now), &mut ()).unwrap();
    }
    q.push(2, Msg::new(100, 1000, now), &mut ()).unwrap();
    let order: Vec<u32> = drain_all(&mut q).into_iter().map(|(p, _)| p).collect();
    assert_eq!(order, vec![1, 1, 1, 1, 2, 1, 1, 1]);
}

#[test]
fn a_head_larger_than_the_quantum_is_starved_then_served() {
    let mut q = DrrConfig {
        budget_bytes: 100_000,
        max_per_principal: 256,
        min_quantum_bytes: 1000,
    }
    .build::<u32, u64>();
    let now = Instant::now();
    q.push(1, Msg::new(1, 60_000, now), &mut ()).unwrap();
    q.push(2, Msg::new(2, 10, now), &mut ()).unwrap();
    // quantum = max(1000, 100_000 / 2) = 50_000 < 60_000.
    let mut obs = Record::default();
    let first = q.pop(&mut obs).unwrap();
    assert_eq!(first.principal, 2);
    assert_eq!(obs.starved, vec![1]);
    assert_eq!(q.pop(&mut obs).unwrap().principal, 1);
    assert_eq!(q.starved_total(), 1);
}

#[test]
fn try_drain_respects_the_byte_budget_but_always_makes_progress() {
    let mut q = queue(10_000);
    let now = Instant::now();
    for i in 0..5u64 {
        q.push(1, Msg::new(i, 1000, now), &mut ()).unwrap();
    }
    let mut out = Vec::new();
    assert_eq!(
        q.try_drain(10, &mut out, &mut ()),
        1000,
        "one message even over budget"
    );
    assert_eq!(q.try_drain(2500, &mut out, &mut ()), 2000);
    assert_eq!(out.len(), 3);
    assert_eq!(q.try_drain(usize::MAX, &mut out, &mut ()), 2000);
    assert_eq!(
        out.iter().map(|d| d.msg.value).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(q.try_drain(100, &mut out, &mut ()), 0);
}

/// Randomised model check (a property test without the dependency): under any
/// mix of pushes, evictions and drains, bytes in use never exceed the budget,
/// every accepted message leaves exactly once (drained or evicted), and each
/// principal's messages are drained in push order.
#[test]
fn drr_invariants_hold_under_random_operations() {
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let budget = rng.random_range(500..20_000);
        let cfg = DrrConfig {
            budget_bytes: budget,
            max_per_principal: rng.random_range(1..20),
            min_quantum_bytes: rng.random_range(1..3000),
        };
        model_check(&mut rng, cfg, 12, budget / 3 + 2, 3000, |_| 0.6);
    }
}

/// The same model with thousands of principals and small messages, so the
/// slab grows past its compaction threshold and is renumbered repeatedly.
#[test]
fn drr_invariants_hold_across_slab_compactions() {
    for seed in 0..3u64 {
        let mut rng = StdRng::seed_from_u64(1000 + seed);
        let cfg = DrrConfig {
            budget_bytes: 400_000,
            max_per_principal: 4,
            min_quantum_bytes: 64,
        };
        // Alternate push-only phases (the slab grows past 1024 buckets) with
        // drain-heavy ones (most buckets are freed, the slab is compacted).
        model_check(&mut rng, cfg, 3000, 200, 40_000, |step| {
            if (step / 5000) % 2 == 0 { 1.0 } else { 0.02 }
        });
    }
}

fn model_check(
    rng: &mut StdRng,
    cfg: DrrConfig,
    principals: u32,
    max_cost: usize,
    steps: usize,
    push_probability: impl Fn(usize) -> f64,
) {
    {
        let budget = cfg.budget_bytes;
        let mut q = cfg.build::<u32, u64>();
        let now = Instant::now();
        let mut accepted: HashMap<u64, u32> = HashMap::new();
        let mut gone: HashMap<u64, &'static str> = HashMap::new();
        let mut last_drained: HashMap<u32, u64> = HashMap::new();
        let mut obs = Record::default();
        let mut controls = std::collections::HashSet::new();
        let mut live = std::collections::BTreeSet::new();
        let at = |v: u64| now + Duration::from_nanos(v);
        let mut next = 0u64;
        for step in 0..steps {
            if rng.random_bool(push_probability(step)) {
                let p = rng.random_range(0..principals);
                let cost = rng.random_range(0..max_cost);
                let msg = if rng.random_bool(0.05) {
                    Msg::control(next, cost, at(next))
                } else {
                    Msg::new(next, cost, at(next))
                };
                let control = msg.control;
                match q.push(p, msg, &mut obs) {
                    Ok(()) => {
                        accepted.insert(next, p);
                        live.insert(next);
                        if control {
                            controls.insert(next);
                        }
                    }
                    Err(e) => assert_eq!(e.into_msg().value, next),
                }
                for (_, v, _) in obs.evicted.drain(..) {
                    assert!(gone.insert(v, "evicted").is_none(), "evicted twice");
                    live.remove(&v);
                    assert!(!controls.contains(&v), "control message evicted");
                }
                next += 1;
            } else {
                let mut out = Vec::new();
                let drain_budget = if rng.random_bool(0.1) {
                    usize::MAX
                } else {
                    rng.random_range(0..budget)
                };
                q.try_drain(drain_budget, &mut out, &mut obs);
                for d in out {
                    assert_eq!(accepted.get(&d.msg.value), Some(&d.principal));
                    assert!(
                        gone.insert(d.msg.value, "drained").is_none(),
                        "drained twice"
                    );
                    live.remove(&d.msg.value);
                    if let Some(prev) = last_drained.insert(d.principal, d.msg.value) {
                        assert!(prev < d.msg.value, "per-principal FIFO");
                    }
                }
            }
            assert!(q.bytes_in_use() <= budget, "budget exceeded");
            assert_eq!(q.len(), accepted.len() - gone.len());
            assert_eq!(
                q.oldest_enqueued_at(),
                live.first().map(|v| at(*v)),
                "queue age"
            );
        }
        for d in {
            let mut out = Vec::new();
            q.try_drain(usize::MAX, &mut out, &mut obs);
            out
        } {
            assert!(gone.insert(d.msg.value, "drained").is_none());
        }
        assert_eq!(
            gone.len(),
            accepted.len(),
            "every accepted message left exactly once"
        );
        assert_eq!(q.bytes_in_use(), 0);
        assert_eq!(q.active_principals(), 0);
    }
}

#[test]
fn a_burst_of_principals_does_not_pin_its_peak_memory() {
    let mut q: Q = DrrConfig::default().build();
    let now = Instant::now();
    for p in 0..5000u32 {
        q.push(p, Msg::new(u64::from(p), 100, now), &mut ())
            .unwrap();
    }
    // Principal 0 stays busy while the burst drains away.
    for i in 0..3u64 {
        q.push(0, Msg::new(10_000 + i, 100, now), &mut ()).unwrap();
    }
    assert_eq!(q.slab_len(), 5000);
    let mut seen_zero = Vec::new();
    while q.active_principals() > 1 {
        let d = q.pop(&mut ()).unwrap();
        if d.principal == 0 {
            seen_zero.push(d.msg.value);
        }
    }
    assert!(q.slab_len() < 2000, "slab compacted, now {}", q.slab_len());
    // The survivor's queue, rotation and indexes still work after renumbering.
    q.push(7, Msg::new(7, 100, now), &mut ()).unwrap();
    q.push(0, Msg::new(20_000, 100, now), &mut ()).unwrap();
    while let Some(d) = q.pop(&mut ()) {
        if d.principal == 0 {
            seen_zero.push(d.msg.value);
        }
    }
    assert_eq!(seen_zero, vec![0, 10_000, 10_001, 10_002, 20_000]);
    assert_eq!(q.bytes_in_use(), 0);
    assert_eq!(q.oldest_enqueued_at(), None);
}

#[test]
fn a_turn_started_alone_shrinks_when_others_join() {
    // Alone, principal 1 earns the whole budget (8000 bytes = 8 messages) for its turn.
    let mut q = budget_8000();
    let now = Instant::now();
    for i in 0..7u64 {
        q.push(1, Msg::new(i, 1000, now), &mut ()).unwrap();
    }
    assert_eq!(q.pop(&mut ()).unwrap().principal, 1);
    // Principal 2 arrives mid-turn: the fair share is now 4000, of which 1000 is spent.
    q.push(2, Msg::new(100, 1000, now), &mut ()).unwrap();
    let order: Vec<u32> = drain_all(&mut q).into_iter().map(|(p, _)| p).collect();
    assert_eq!(order, vec![1, 1, 1, 2, 1, 1, 1]);
}

#[test]
fn top_principals_by_bytes_lists_the_heaviest_first_and_forgets_drained_ones() {
    let mut q = queue(1 << 20);
    let now = Instant::now();
    for (p, n) in [(1u32, 3usize), (2, 10), (3, 1), (4, 6)] {
        for i in 0..n {
            q.push(p, Msg::new(i as u64, 100, now), &mut ()).unwrap();
        }
    }
    assert_eq!(q.top_principals_by_bytes(2), vec![(2, 1000), (4, 600)]);
    assert_eq!(
        q.top_principals_by_bytes(10),
        vec![(2, 1000), (4, 600), (1, 300), (3, 100)]
    );
    assert!(q.top_principals_by_bytes(0).is_empty());
    drain_all(&mut q);
    assert!(q.top_principals_by_bytes(3).is_empty());
}
