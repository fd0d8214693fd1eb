//! Bus benchmarks (plain binary, no criterion): `cargo bench -p sluice-bus --bench bus`.
//!
//! 1. Publish cost per event at 1, 100 and 5,000 active principals with the
//!    route at its byte budget (every publish evicts), through the whole
//!    `EventBus::publish` path and through the queue alone; the same queue
//!    workload on a seed-style linear-scan baseline, measured in the same run.
//! 2. Fairness: one principal publishing 100x the others into an overloaded
//!    route; Jain's index over delivered bytes among the others and their
//!    queueing delay.
//! 3. IPC rate-limiter check, uncontended and with 2 threads.
//!
//! Numbers are printed as `name: value`; the machine is shared, so read them
//! as orders of magnitude and ratios, not absolutes.

use sluice_bus::{BusConfig, DrrConfig, Event, EventBus, IpcRateLimiter, RateLimitConfig};
use sluice_flow::drr::{DrrQueue, Msg};
use std::collections::{HashMap, VecDeque};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

const PAYLOAD: usize = 100;
const BUDGET: usize = 1024 * 1024;

fn principals(n: usize) -> Vec<Arc<str>> {
    (0..n).map(|i| Arc::from(format!("user:{i}"))).collect()
}

/// Best of `reps` runs of `f`, in ns per iteration of `iters`.
fn best_ns(reps: usize, iters: usize, mut f: impl FnMut(usize)) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f(iters);
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn publish_bus(n: usize, iters: usize) -> f64 {
    let bus = EventBus::new();
    let topic: Arc<str> = Arc::from("jobs.tick");
    let ps = principals(n);
    let rx = bus.subscribe_routed("jobs.*", "bench").unwrap();
    let _idle_broadcast = bus.subscribe("bench_idle");
    let mut i = 0usize;
    let mut publish = |bus: &EventBus| {
        let p = &ps[i % n];
        i += 1;
        let ev = Event::new(Arc::clone(&topic), vec![0u8; PAYLOAD]).with_principal(Arc::clone(p));
        black_box(bus.publish(ev).unwrap());
    };
    // Fill to the budget so every measured publish evicts (or hits the cap).
    for _ in 0..(2 * BUDGET / PAYLOAD) {
        publish(&bus);
    }
    let ns = best_ns(3, iters, |k| {
        for _ in 0..k {
            publish(&bus);
        }
    });
    let stats = rx.stats();
    assert_eq!(stats.active_principals, n);
    assert!(stats.evicted_total > 0);
    ns
}

fn push_drr(n: usize, iters: usize) -> f64 {
    let mut q: DrrQueue<Arc<str>, u64> = DrrConfig::default().build();
    let ps = principals(n);
    let now = Instant::now();
    let cost = PAYLOAD + 9;
    let mut i = 0usize;
    for _ in 0..(2 * BUDGET / cost) {
        q.push(
            Arc::clone(&ps[i % n]),
            Msg::new(i as u64, cost, now),
            &mut (),
        )
        .unwrap();
        i += 1;
    }
    let ns = best_ns(3, iters, |k| {
        for _ in 0..k {
            q.push(
                Arc::clone(&ps[i % n]),
                Msg::new(i as u64, cost, now),
                &mut (),
            )
            .unwrap();
            i += 1;
        }
    });
    assert_eq!(q.active_principals(), n);
    ns
}

/// The seed's structure: per-principal queues with a head timestamp, and the
/// oldest head found by scanning every bucket.
/// `(queue of (seq, cost, value), bucket bytes)`.
type NaiveBucket = (VecDeque<(u64, usize, u64)>, usize);

struct NaiveRoute {
    fanout: HashMap<Arc<str>, NaiveBucket>,
    order: VecDeque<Arc<str>>,
    total: usize,
    seq: u64,
}

impl NaiveRoute {
    fn push(&mut self, p: &Arc<str>, value: u64, cost: usize) {
        while self.total + cost > BUDGET {
            self.evict_oldest_head();
        }
        let seq = self.seq;
        self.seq += 1;
        let bucket = self.fanout.entry(Arc::clone(p)).or_insert_with(|| {
            self.order.push_back(Arc::clone(p));
            (VecDeque::new(), 0)
        });
        bucket.0.push_back((seq, cost, value));
        bucket.1 += cost;
        self.total += cost;
        if bucket.0.len() > 256 {
            let (_, c, _) = bucket.0.pop_front().unwrap();
            bucket.1 -= c;
            self.total -= c;
        }
    }

    fn evict_oldest_head(&mut self) {
        // The O(N) scan the seed's comment flags as the follow-up.
        let victim = self
            .fanout
            .iter()
            .filter_map(|(k, (q, _))| q.front().map(|h| (h.0, k)))
            .min_by_key(|(seq, _)| *seq)
            .map(|(_, k)| Arc::clone(k))
            .unwrap();
        let bucket = self.fanout.get_mut(&victim).unwrap();
        let (_, c, _) = bucket.0.pop_front().unwrap();
        bucket.1 -= c;
        self.total -= c;
        if bucket.0.is_empty() {
            self.fanout.remove(&victim);
            self.order.retain(|k| *k != victim);
        }
    }
}

fn push_naive(n: usize, iters: usize) -> f64 {
    let mut q = NaiveRoute {
        fanout: HashMap::new(),
        order: VecDeque::new(),
        total: 0,
        seq: 0,
    };
    let ps = principals(n);
    let cost = PAYLOAD + 9;
    let mut i = 0usize;
    for _ in 0..(2 * BUDGET / cost) {
        q.push(&ps[i % n], i as u64, cost);
        i += 1;
    }
    let ns = best_ns(3, iters, |k| {
        for _ in 0..k {
            q.push(&ps[i % n], i as u64, cost);
            i += 1;
        }
    });
    assert_eq!(q.fanout.len(), n);
    ns
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    sum * sum / (xs.len() as f64 * sq)
}

fn fairness() {
    const OTHERS: usize = 49;
    const TICKS: usize = 2000;
    const MSG: usize = 1024;
    const DRAIN_PER_TICK: usize = 64 * 1024;
    let bus = BusConfig::default().build();
    let mut rx = bus.subscribe_routed("t", "bench").unwrap();
    let flooder: Arc<str> = Arc::from("user:flooder");
    let others = principals(OTHERS);
    let topic: Arc<str> = Arc::from("t");
    let mut delivered: HashMap<Arc<str>, usize> = HashMap::new();
    let mut delay_us = Vec::new();
    let mut delay_ticks = Vec::new();
    let mut published_tick: HashMap<(Arc<str>, u32), usize> = HashMap::new();
    let mut seqs: HashMap<Arc<str>, u32> = HashMap::new();
    let mk = |p: &Arc<str>, seq: u32| {
        let mut payload = vec![0u8; MSG - topic.len()];
        payload[..4].copy_from_slice(&seq.to_le_bytes());
        Event::new(Arc::clone(&topic), payload).with_principal(Arc::clone(p))
    };
    for tick in 0..TICKS {
        // Interleave: the flooder's 100 and the others' 1 each.
        for k in 0..100 {
            let s = seqs.entry(Arc::clone(&flooder)).or_default();
            bus.publish(mk(&flooder, *s)).unwrap();
            *s += 1;
            if k % 2 == 0 && k / 2 < OTHERS {
                let p = &others[k / 2];
                let s = seqs.entry(Arc::clone(p)).or_default();
                published_tick.insert((Arc::clone(p), *s), tick);
                bus.publish(mk(p, *s)).unwrap();
                *s += 1;
            }
        }
        let now = Instant::now();
        for e in rx.try_drain(DRAIN_PER_TICK) {
            *delivered.entry(Arc::clone(&e.principal)).or_default() += e.cost();
            if e.principal != flooder {
                let seq = u32::from_le_bytes(e.payload[..4].try_into().unwrap());
                let t0 = published_tick[&(Arc::clone(&e.principal), seq)];
                delay_ticks.push((tick - t0) as f64);
                delay_us.push(e.queued_for(now).as_secs_f64() * 1e6);
            }
        }
    }
    let xs: Vec<f64> = others
        .iter()
        .map(|p| *delivered.get(p).unwrap_or(&0) as f64)
        .collect();
    delay_us.sort_by(f64::total_cmp);
    delay_ticks.sort_by(f64::total_cmp);
    let offered_each = (TICKS * MSG) as f64;
    let stats = rx.stats();
    println!(
        "fairness.setup: 1 flooder x100 + {OTHERS} others, {MSG} B events, drain {DRAIN_PER_TICK} B/tick, offered {} B/tick, {TICKS} ticks",
        (100 + OTHERS) * MSG
    );
    println!("fairness.jain_index_non_flooders: {:.5}", jain(&xs));
    println!(
        "fairness.non_flooder_delivered_fraction: {:.4} (min {:.4})",
        xs.iter().sum::<f64>() / (offered_each * OTHERS as f64),
        xs.iter().cloned().fold(f64::INFINITY, f64::min) / offered_each
    );
    println!(
        "fairness.flooder_delivered_bytes_per_tick: {:.0}",
        *delivered.get(&flooder).unwrap_or(&0) as f64 / TICKS as f64
    );
    println!(
        "fairness.non_flooder_delay_ticks: p50 {} p99 {} max {}",
        percentile(&delay_ticks, 0.5),
        percentile(&delay_ticks, 0.99),
        percentile(&delay_ticks, 1.0)
    );
    println!(
        "fairness.non_flooder_delay_us: p50 {:.0} p99 {:.0} max {:.0}",
        percentile(&delay_us, 0.5),
        percentile(&delay_us, 0.99),
        percentile(&delay_us, 1.0)
    );
    println!(
        "fairness.route: evicted {} starved {} refused {}",
        stats.evicted_total, stats.starved_total, stats.refused_total
    );
    fifo_baseline(OTHERS, TICKS, MSG, DRAIN_PER_TICK);
}

/// The same offered load through one shared FIFO with the same byte budget
/// and oldest-first eviction: what the per-principal DRR queue buys.
fn fifo_baseline(others: usize, ticks: usize, msg: usize, drain_per_tick: usize) {
    let mut q: VecDeque<(usize, usize)> = VecDeque::new(); // (principal, publish tick); 0 = flooder
    let mut delivered = vec![0usize; others + 1];
    let mut delay = Vec::new();
    for tick in 0..ticks {
        for k in 0..100 {
            let mut push = |p: usize| {
                if (q.len() + 1) * msg > BUDGET {
                    q.pop_front();
                }
                q.push_back((p, tick));
            };
            push(0);
            if k % 2 == 0 && k / 2 < others {
                push(1 + k / 2);
            }
        }
        for _ in 0..drain_per_tick / msg {
            let Some((p, t0)) = q.pop_front() else { break };
            delivered[p] += msg;
            if p != 0 {
                delay.push((tick - t0) as f64);
            }
        }
    }
    let xs: Vec<f64> = delivered[1..].iter().map(|&b| b as f64).collect();
    delay.sort_by(f64::total_cmp);
    println!(
        "fairness.fifo_baseline: jain {:.5}, non-flooder delivered fraction {:.4}, delay ticks p50 {} p99 {}",
        jain(&xs),
        xs.iter().sum::<f64>() / ((ticks * msg * others) as f64),
        percentile(&delay, 0.5),
        percentile(&delay, 0.99)
    );
}

fn ratelimit() {
    const ITERS: usize = 2_000_000;
    let cfg = || RateLimitConfig::default().default_quota(u64::from(u32::MAX));
    let rl = IpcRateLimiter::new(cfg());
    rl.check("svc", "user:alice", 100).unwrap();
    let ns_at = best_ns(3, ITERS, |k| {
        for _ in 0..k {
            black_box(rl.check_at("svc", "user:alice", black_box(1), 0)).ok();
        }
    });
    let ns_now = best_ns(3, ITERS, |k| {
        for _ in 0..k {
            black_box(rl.check("svc", "user:alice", black_box(1))).ok();
        }
    });
    println!("ratelimit.uncontended_check_at_ns: {ns_at:.1}");
    println!("ratelimit.uncontended_check_with_clock_ns: {ns_now:.1}");
    for (label, same_key) in [("same_key", true), ("distinct_keys", false)] {
        let rl = IpcRateLimiter::new(cfg());
        let per_thread: Vec<f64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|t| {
                    let rl = rl.clone();
                    s.spawn(move || {
                        let principal = if same_key {
                            "user:alice".to_string()
                        } else {
                            format!("user:{t}")
                        };
                        rl.check_at("svc", &principal, 1, 0).unwrap();
                        best_ns(3, ITERS, |k| {
                            for _ in 0..k {
                                black_box(rl.check_at("svc", &principal, black_box(1), 0)).ok();
                            }
                        })
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mean = per_thread.iter().sum::<f64>() / 2.0;
        println!(
            "ratelimit.two_threads_{label}_ns_per_check: {mean:.1} (aggregate {:.1} M checks/s)",
            2.0 * 1e3 / mean
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; accept and ignore arguments.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |section: &str| args.is_empty() || args.iter().any(|a| a == section);
    let quick = std::env::args().any(|a| a == "--quick");
    let iters = if quick { 20_000 } else { 200_000 };
    println!("# sluice-bus bench ({} iterations per point)", iters);
    if want("publish") {
        publish(iters);
    }
    // Diagnostic sections (for perf), run only when named.
    let named = |section: &str| args.iter().any(|a| a == section);
    if named("bus1") {
        println!("bus_publish_1: {:.0} ns", publish_bus(1, iters * 5));
    }
    if named("drr1") {
        println!("drr_push_1: {:.0} ns", push_drr(1, iters * 10));
    }
    if want("fairness") {
        fairness();
    }
    if want("ratelimit") {
        ratelimit();
    }
}

fn publish(iters: usize) {
    let mut bus_ns = Vec::new();
    for n in [1usize, 100, 5000] {
        let bus = publish_bus(n, iters);
        let drr = push_drr(n, iters);
        let naive = push_naive(n, if n >= 5000 { iters / 20 } else { iters });
        bus_ns.push(bus);
        println!(
            "publish.principals_{n}: bus_publish {bus:.0} ns/event | drr_push {drr:.0} ns | naive_scan_push {naive:.0} ns"
        );
    }
    let (lo, hi) = bus_ns.iter().fold((f64::INFINITY, 0f64), |(lo, hi), x| {
        (lo.min(*x), hi.max(*x))
    });
    println!("publish.flatness_max_over_min: {:.2}", hi / lo);
}
