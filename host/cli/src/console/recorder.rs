//! An in-memory `metrics` recorder the console samples: counters as atomics, gauges that also
//! remember their lowest and highest value since the last sample (so an AIMD halving that
//! recovers within a second still shows), and histograms as fixed log-scale buckets (bounded
//! memory, one atomic add per sample, p50/p99 per interval from bucket deltas).
//!
//! It sits beside the Prometheus recorder behind a fanout (`metrics_export`), so the console
//! needs no Prometheus and the runtime needs no change.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use metrics::{
    Counter, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use metrics_util::registry::{Registry, Storage};

/// Octaves covered by [`LogHistogram`]: 2^-20 s (about 1 µs) to 2^20 s (about 12 days).
const MIN_EXP: i32 = -20;
const MAX_EXP: i32 = 20;
/// Sub-buckets per octave (the top three mantissa bits): at most 12.5 % relative error.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Buckets: one underflow (zero, negative, NaN, below 2^MIN_EXP), the octaves, one overflow.
pub const BUCKETS: usize = 2 + (MAX_EXP - MIN_EXP) as usize * SUB;

/// A histogram of non-negative values (seconds) in fixed log-scale buckets, with their sum.
pub struct LogHistogram {
    buckets: Box<[AtomicU64]>,
    /// The sum of the samples in nanoseconds (negative and NaN samples add nothing): 584
    /// years fit, and adding is one atomic add rather than a float compare-and-swap loop.
    sum_ns: AtomicU64,
}

impl LogHistogram {
    fn new() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// The sum of the samples, in seconds.
    pub fn sum(&self) -> f64 {
        self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9
    }

    /// The index of the first bucket whose values are all at least `2^exp`: the buckets
    /// before it hold every sample below `2^exp` (a sample of exactly `2^exp` is in it).
    pub fn octave_start(exp: i32) -> usize {
        1 + (exp.clamp(MIN_EXP, MAX_EXP) - MIN_EXP) as usize * SUB
    }

    /// The bucket of `v`: exponent and top mantissa bits straight from the float's bits.
    pub fn index(v: f64) -> usize {
        if v.is_nan() || v <= 0.0 {
            return 0;
        }
        let bits = v.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as i32 - 1023;
        if exp < MIN_EXP {
            return 0;
        }
        if exp >= MAX_EXP {
            return BUCKETS - 1;
        }
        let sub = ((bits >> (52 - SUB_BITS)) as usize) & (SUB - 1);
        1 + (exp - MIN_EXP) as usize * SUB + sub
    }

    /// A representative value of bucket `i` (its midpoint).
    pub fn value_of(i: usize) -> f64 {
        match i {
            0 => 0.0,
            i if i >= BUCKETS - 1 => 2f64.powi(MAX_EXP),
            i => {
                let exp = MIN_EXP + ((i - 1) / SUB) as i32;
                let sub = ((i - 1) % SUB) as f64;
                2f64.powi(exp) * (1.0 + (sub + 0.5) / SUB as f64)
            }
        }
    }

    /// Cumulative counts per bucket.
    pub fn counts(&self) -> Vec<u64> {
        // Relaxed: each bucket is an independent counter; a sample racing a read lands in
        // this interval or the next, never lost.
        self.buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }
}

impl HistogramFn for LogHistogram {
    fn record(&self, value: f64) {
        self.record_many(value, 1);
    }

    /// `count` samples of `value` (a frame of remote calls answered at once) in two adds.
    fn record_many(&self, value: f64, count: usize) {
        self.buckets[Self::index(value)].fetch_add(count as u64, Ordering::Relaxed);
        if value > 0.0 {
            // `as` saturates: a sample past 584 years adds u64::MAX, not garbage.
            self.sum_ns.fetch_add(
                ((value * 1e9) as u64).saturating_mul(count as u64),
                Ordering::Relaxed,
            );
        }
    }
}

/// The `q` quantile (0..=1) of the samples counted in `counts` (bucket deltas), or `None`
/// when there are none.
pub fn quantile(counts: &[u64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (i, n) in counts.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(LogHistogram::value_of(i));
        }
    }
    None
}

/// Maps an f64 to a u64 whose unsigned order is the float's order, so `fetch_min` /
/// `fetch_max` track extremes without a compare-and-swap loop.
fn ordered(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

fn unordered(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

/// A gauge that also keeps its lowest and highest value since the last [`take`](Self::take).
pub struct IntervalGauge {
    value: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
}

/// What a gauge did over one sampling interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeReading {
    /// The value now.
    pub last: f64,
    /// The lowest value it held since the previous reading.
    pub min: f64,
    /// The highest value it held since the previous reading.
    pub max: f64,
}

impl IntervalGauge {
    fn new() -> Self {
        Self {
            value: AtomicU64::new(0f64.to_bits()),
            // No value noted yet: any first one replaces these.
            min: AtomicU64::new(ordered(f64::INFINITY)),
            max: AtomicU64::new(ordered(f64::NEG_INFINITY)),
        }
    }

    fn note(&self, v: f64) {
        // Relaxed: the extremes are statistics read once a second; a set racing `take`
        // lands in this interval or the next.
        self.min.fetch_min(ordered(v), Ordering::Relaxed);
        self.max.fetch_max(ordered(v), Ordering::Relaxed);
    }

    /// The value and the interval's extremes; starts a new interval at the current value.
    pub fn take(&self) -> GaugeReading {
        let last = f64::from_bits(self.value.load(Ordering::Relaxed));
        let min = unordered(self.min.swap(ordered(last), Ordering::Relaxed));
        let max = unordered(self.max.swap(ordered(last), Ordering::Relaxed));
        GaugeReading {
            last,
            min: min.min(last),
            max: max.max(last),
        }
    }
}

impl GaugeFn for IntervalGauge {
    fn increment(&self, delta: f64) {
        let mut cur = self.value.load(Ordering::Relaxed);
        loop {
            let next = f64::from_bits(cur) + delta;
            match self.value.compare_exchange_weak(
                cur,
                next.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return self.note(next),
                Err(actual) => cur = actual,
            }
        }
    }

    fn decrement(&self, delta: f64) {
        self.increment(-delta);
    }

    fn set(&self, value: f64) {
        self.value.store(value.to_bits(), Ordering::Relaxed);
        self.note(value);
    }
}

/// Storage for the registry: the types above behind `Arc`s.
pub struct ConsoleStorage;

impl Storage<Key> for ConsoleStorage {
    type Counter = Arc<AtomicU64>;
    type Gauge = Arc<IntervalGauge>;
    type Histogram = Arc<LogHistogram>;

    fn counter(&self, _: &Key) -> Self::Counter {
        Arc::new(AtomicU64::new(0))
    }

    fn gauge(&self, _: &Key) -> Self::Gauge {
        Arc::new(IntervalGauge::new())
    }

    fn histogram(&self, _: &Key) -> Self::Histogram {
        Arc::new(LogHistogram::new())
    }
}

/// The recorder. Cheap to clone; clones share one registry.
#[derive(Clone)]
pub struct ConsoleRecorder {
    registry: Arc<Registry<Key, ConsoleStorage>>,
}

impl Default for ConsoleRecorder {
    fn default() -> Self {
        Self {
            registry: Arc::new(Registry::new(ConsoleStorage)),
        }
    }
}

/// One metric series: its name and labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Series {
    /// Metric name.
    pub name: String,
    /// Label pairs, in the order they were recorded.
    pub labels: Vec<(String, String)>,
}

impl Series {
    fn of(key: &Key) -> Self {
        Self {
            name: key.name().to_string(),
            labels: key
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect(),
        }
    }

    /// The value of label `k`, if present.
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Everything the recorder holds at one instant (gauges: over the interval just ended).
#[derive(Default)]
pub struct Readings {
    /// Counter totals.
    pub counters: HashMap<Series, u64>,
    /// Gauges, with the interval's extremes.
    pub gauges: HashMap<Series, GaugeReading>,
    /// Cumulative histogram bucket counts.
    pub histograms: HashMap<Series, Vec<u64>>,
}

impl ConsoleRecorder {
    /// Reads every series (and starts a new gauge interval).
    pub fn read(&self) -> Readings {
        let mut r = Readings::default();
        self.registry.visit_counters(|k, c| {
            r.counters.insert(Series::of(k), c.load(Ordering::Relaxed));
        });
        self.registry.visit_gauges(|k, g| {
            r.gauges.insert(Series::of(k), g.take());
        });
        self.registry.visit_histograms(|k, h| {
            r.histograms.insert(Series::of(k), h.counts());
        });
        r
    }
}

/// One histogram's totals since the process started.
pub struct HistogramTotals {
    /// Its name and labels.
    pub series: Series,
    /// Samples per bucket ([`LogHistogram::index`] order).
    pub counts: Vec<u64>,
    /// The sum of the samples, seconds.
    pub sum: f64,
}

impl ConsoleRecorder {
    /// Every histogram's totals, read now.
    pub fn histograms(&self) -> Vec<HistogramTotals> {
        let mut out = Vec::new();
        self.registry.visit_histograms(|k, h| {
            out.push(HistogramTotals {
                series: Series::of(k),
                counts: h.counts(),
                sum: h.sum(),
            });
        });
        out
    }
}

impl Recorder for ConsoleRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.registry.get_or_create_counter(key, Arc::clone))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.registry.get_or_create_gauge(key, Arc::clone))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.registry.get_or_create_histogram(key, Arc::clone))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_within_an_eighth() {
        let mut last = 0;
        for i in 0..2000 {
            let v = 1e-6 * 1.01f64.powi(i);
            let b = LogHistogram::index(v);
            assert!(b >= last, "bucket order at {v}");
            last = b;
            let mid = LogHistogram::value_of(b);
            assert!((mid - v).abs() / v <= 0.125, "{v} -> {mid}");
        }
        assert_eq!(LogHistogram::index(0.0), 0);
        assert_eq!(LogHistogram::index(-1.0), 0);
        assert_eq!(LogHistogram::index(f64::NAN), 0);
        assert_eq!(LogHistogram::index(1e9), BUCKETS - 1);
    }

    #[test]
    fn quantiles_come_from_bucket_deltas() {
        let h = LogHistogram::new();
        for _ in 0..98 {
            h.record(0.010);
        }
        h.record(0.5);
        h.record(0.5);
        let c = h.counts();
        let p50 = quantile(&c, 0.5).unwrap();
        let p99 = quantile(&c, 0.99).unwrap();
        assert!((p50 - 0.010).abs() / 0.010 < 0.125, "{p50}");
        assert!((p99 - 0.5).abs() / 0.5 < 0.125, "{p99}");
        assert_eq!(quantile(&vec![0; BUCKETS], 0.5), None);
    }

    #[test]
    fn many_samples_at_once_count_and_sum_as_that_many_single_ones() {
        let (one_by_one, at_once) = (LogHistogram::new(), LogHistogram::new());
        for _ in 0..38 {
            one_by_one.record(0.0004);
        }
        at_once.record_many(0.0004, 38);
        at_once.record_many(-1.0, 2);
        one_by_one.record(-1.0);
        one_by_one.record(-1.0);
        assert_eq!(one_by_one.counts(), at_once.counts());
        assert_eq!(at_once.counts().iter().sum::<u64>(), 40);
        assert!(
            (at_once.sum() - 38.0 * 0.0004).abs() < 1e-9,
            "{}",
            at_once.sum()
        );
        assert_eq!(one_by_one.sum(), at_once.sum());
    }

    #[test]
    fn samples_from_many_threads_at_once_all_count() {
        let h = Arc::new(LogHistogram::new());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        h.record(0.001 * (t + 1) as f64);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(h.counts().iter().sum::<u64>(), 8000);
        let want: f64 = (1..=8).map(|t| 1000.0 * 0.001 * t as f64).sum();
        assert!((h.sum() - want).abs() < 1e-6, "{} against {want}", h.sum());
    }

    #[test]
    fn a_gauge_remembers_its_extremes_for_one_interval() {
        let g = IntervalGauge::new();
        g.set(10.0);
        g.set(5.0);
        g.set(8.0);
        assert_eq!(
            g.take(),
            GaugeReading {
                last: 8.0,
                min: 5.0,
                max: 10.0
            }
        );
        g.increment(2.0);
        g.decrement(1.0);
        assert_eq!(
            g.take(),
            GaugeReading {
                last: 9.0,
                min: 8.0,
                max: 10.0
            }
        );
        assert_eq!(
            g.take(),
            GaugeReading {
                last: 9.0,
                min: 9.0,
                max: 9.0
            }
        );
        g.set(-3.5);
        assert_eq!(g.take().min, -3.5);
    }
}
