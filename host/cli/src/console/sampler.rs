//! Once a second, turns the host's snapshots (`Host::status`, `Host::bus_stats`, the bus's
//! route summaries) and the console recorder's readings into one [`Frame`]: rates from counter
//! deltas, p50/p99 from histogram bucket deltas, AIMD limits with their interval minimum.
//! The last [`ConsoleConfig::history`] frames are kept (serialised once) for a page that
//! opens later; the newest also goes to every live stream.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use sluice_runtime::Host;
use tokio::sync::watch;

use super::frame::{
    Deploy, Frame, LimiterFrame, OutboxFrame, PartitionFrame, SubscriptionFrame, TypeFrame,
};
use super::recorder::{ConsoleRecorder, Readings, Series, quantile};

/// Default time between frames.
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// Default frames kept: five minutes at one a second.
pub const DEFAULT_HISTORY: usize = 300;
/// Default principals listed per routed subscription.
pub const DEFAULT_TOP_PRINCIPALS: usize = 5;
/// Default deploys remembered.
pub const DEFAULT_DEPLOY_LOG: usize = 50;

/// How the console samples. `Default` gives the constants above.
#[derive(Debug, Clone, Copy)]
pub struct ConsoleConfig {
    /// Time between frames (default [`DEFAULT_SAMPLE_INTERVAL`]).
    pub sample_interval: Duration,
    /// Frames kept for a page that opens later (default [`DEFAULT_HISTORY`]; at least 1).
    pub history: usize,
    /// Principals listed per routed subscription (default [`DEFAULT_TOP_PRINCIPALS`]).
    pub top_principals: usize,
    /// Deploys remembered (default [`DEFAULT_DEPLOY_LOG`]; at least 1).
    pub deploy_log: usize,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            sample_interval: DEFAULT_SAMPLE_INTERVAL,
            history: DEFAULT_HISTORY,
            top_principals: DEFAULT_TOP_PRINCIPALS,
            deploy_log: DEFAULT_DEPLOY_LOG,
        }
    }
}

/// The frames so far and the newest one, shared by the sampler and the HTTP handlers.
pub struct Frames {
    history: Mutex<VecDeque<Arc<str>>>,
    capacity: usize,
    latest: watch::Sender<Option<Arc<str>>>,
}

impl Frames {
    fn new(capacity: usize) -> Self {
        Self {
            history: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity: capacity.max(1),
            latest: watch::channel(None).0,
        }
    }

    fn push(&self, json: Arc<str>) {
        let mut h = self.history.lock();
        if h.len() == self.capacity {
            h.pop_front();
        }
        h.push_back(Arc::clone(&json));
        drop(h);
        self.latest.send_replace(Some(json));
    }

    /// Every kept frame, oldest first, as one JSON array.
    pub fn history_json(&self) -> String {
        let h = self.history.lock();
        let mut out = String::with_capacity(2 + h.iter().map(|f| f.len() + 1).sum::<usize>());
        out.push('[');
        for (i, f) in h.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(f);
        }
        out.push(']');
        out
    }

    /// A receiver of each new frame (JSON).
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<str>>> {
        self.latest.subscribe()
    }
}

/// The sampler's memory between frames.
pub struct Sampler {
    host: Host,
    recorder: ConsoleRecorder,
    config: ConsoleConfig,
    prev: Option<(Instant, Split)>,
    deploys: DeployLog,
    /// Shared with the HTTP handlers.
    pub frames: Arc<Frames>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The seconds a frame's rates are over: since the previous frame, or the configured
/// interval for the first one; never below 1 ms (a rate is a division by it).
fn interval_s(prev: Option<Instant>, now: Instant, sample_interval: Duration) -> f64 {
    prev.map_or(sample_interval.as_secs_f64(), |t| {
        now.duration_since(t).as_secs_f64()
    })
    .max(1e-3)
}

/// The deploys seen, newest first and at most `capacity`: a type whose version differs from
/// the one last seen was deployed (noted at the frame's time); what the first frame finds
/// was deployed before the console started (`at_start`).
struct DeployLog {
    versions: HashMap<String, u64>,
    deploys: VecDeque<Deploy>,
    capacity: usize,
    started: bool,
}

impl DeployLog {
    fn new(capacity: usize) -> Self {
        Self {
            versions: HashMap::new(),
            deploys: VecDeque::new(),
            capacity: capacity.max(1),
            started: false,
        }
    }

    fn note(&mut self, status: &[sluice_runtime::TypeStatus], now_ms: u64) {
        for t in status {
            if self.versions.get(&t.actor_type) == Some(&t.version) {
                continue;
            }
            self.versions.insert(t.actor_type.clone(), t.version);
            if self.deploys.len() == self.capacity {
                self.deploys.pop_back();
            }
            self.deploys.push_front(Deploy {
                actor_type: t.actor_type.clone(),
                version: t.version,
                at_ms: now_ms,
                at_start: !self.started,
            });
        }
        self.started = true;
    }

    fn list(&self) -> Vec<Deploy> {
        self.deploys.iter().cloned().collect()
    }
}

/// Readings with the counters and histograms of each actor type apart, so a type's row reads
/// only its own series (`O(series)` per frame, not `O(types × series)`). Gauges stay in `rest`.
struct Split {
    by_type: HashMap<String, Readings>,
    rest: Readings,
}

impl Split {
    fn of(r: Readings) -> Self {
        let mut by_type: HashMap<String, Readings> = HashMap::new();
        let mut rest = Readings {
            gauges: r.gauges,
            ..Readings::default()
        };
        for (s, v) in r.counters {
            match s.label("actor_type").map(str::to_string) {
                Some(t) => by_type.entry(t).or_default().counters.insert(s, v),
                None => rest.counters.insert(s, v),
            };
        }
        for (s, v) in r.histograms {
            match s.label("actor_type").map(str::to_string) {
                Some(t) => by_type.entry(t).or_default().histograms.insert(s, v),
                None => rest.histograms.insert(s, v),
            };
        }
        Self { by_type, rest }
    }
}

/// Sums of counters and histograms over matching series, and their deltas.
struct Delta<'a> {
    now: &'a Readings,
    prev: Option<&'a Readings>,
}

impl Delta<'_> {
    fn matches(s: &Series, name: &str, labels: &[(&str, &str)]) -> bool {
        s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(v))
    }

    /// Counter total over every series of `name` with these labels.
    fn total(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        Self::sum(self.now, name, labels)
    }

    fn sum(r: &Readings, name: &str, labels: &[(&str, &str)]) -> u64 {
        r.counters
            .iter()
            .filter(|(s, _)| Self::matches(s, name, labels))
            .map(|(_, v)| *v)
            .sum()
    }

    /// Counter increase since the previous frame (the whole total on the first).
    fn increase(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let before = self.prev.map_or(0, |p| Self::sum(p, name, labels));
        self.total(name, labels).saturating_sub(before)
    }

    /// Histogram bucket deltas since the previous frame, summed over matching series.
    fn buckets(&self, name: &str, labels: &[(&str, &str)]) -> Vec<u64> {
        let mut out = vec![0u64; super::recorder::BUCKETS];
        for (s, counts) in &self.now.histograms {
            if !Self::matches(s, name, labels) {
                continue;
            }
            let before = self.prev.and_then(|p| p.histograms.get(s));
            for (i, n) in counts.iter().enumerate() {
                out[i] += n.saturating_sub(before.map_or(0, |b| b[i]));
            }
        }
        out
    }
}

impl Sampler {
    /// A sampler of `host` reading `recorder`.
    pub fn new(host: Host, recorder: ConsoleRecorder, config: ConsoleConfig) -> Self {
        Self {
            host,
            recorder,
            frames: Arc::new(Frames::new(config.history)),
            config,
            prev: None,
            deploys: DeployLog::new(config.deploy_log),
        }
    }

    /// Takes one frame and publishes it.
    pub fn sample(&mut self) {
        let frame = self.frame();
        match serde_json::to_string(&frame) {
            Ok(json) => self.frames.push(json.into()),
            Err(e) => tracing::warn!(error = %e, "console: frame not serialisable"),
        }
    }

    /// Builds the next frame.
    pub fn frame(&mut self) -> Frame {
        let now = Instant::now();
        let t_ms = unix_ms();
        let readings = Split::of(self.recorder.read());
        let status = self.host.status();
        self.deploys.note(&status, t_ms);
        let interval_s = interval_s(
            self.prev.as_ref().map(|(t, _)| *t),
            now,
            self.config.sample_interval,
        );
        let prev = self.prev.as_ref().map(|(_, r)| r);
        let d = Delta {
            now: &readings.rest,
            prev: prev.map(|p| &p.rest),
        };
        let empty = Readings::default();
        let rate = |n: u64| n as f64 / interval_s;
        let types = status
            .iter()
            .map(|t| {
                let d = Delta {
                    now: readings.by_type.get(&t.actor_type).unwrap_or(&empty),
                    prev: prev.and_then(|p| p.by_type.get(&t.actor_type)),
                };
                let ty = [("actor_type", t.actor_type.as_str())];
                let ok = [("actor_type", t.actor_type.as_str()), ("outcome", "ok")];
                let err = [("actor_type", t.actor_type.as_str()), ("outcome", "error")];
                let turns = d.buckets("sluice_turn_seconds", &ty);
                let ms = |q| quantile(&turns, q).map(|s| s * 1e3);
                TypeFrame {
                    actor_type: t.actor_type.clone(),
                    version: t.version,
                    active: t.active,
                    queued: t.queued,
                    oldest_queued_ms: t.oldest_queued_ms,
                    stopped: t.stopped,
                    turns_per_s: rate(
                        d.increase("sluice_turns_total", &ok)
                            + d.increase("sluice_turns_total", &err),
                    ),
                    errors_per_s: rate(d.increase("sluice_turns_total", &err)),
                    p50_ms: ms(0.5),
                    p99_ms: ms(0.99),
                    refused: d.total("sluice_mailbox_refused_total", &ty),
                    refused_per_s: rate(d.increase("sluice_mailbox_refused_total", &ty)),
                    dropped: d.total("sluice_mailbox_dropped_total", &ty),
                    skipped: d.total("sluice_turns_skipped_total", &ty),
                    restarts: d.total("sluice_actor_restarts_total", &ty),
                    traps: d.total("sluice_actor_traps_total", &ty),
                    stopped_total: d.total("sluice_actor_stopped_total", &ty),
                }
            })
            .collect();
        let admission_refusals = ["actor", "host"]
            .into_iter()
            .map(|s| {
                (
                    s.to_string(),
                    d.total("sluice_admission_refusals_total", &[("scope", s)]),
                )
            })
            .collect();
        let outbox = self.host.outbox().map(|ob| {
            let cfg = ob.config();
            let partitions: Vec<PartitionFrame> = (0..cfg.partitions)
                .map(|p| {
                    let part = p.to_string();
                    let gauge = |name: &str| {
                        readings
                            .rest
                            .gauges
                            .iter()
                            .find(|(s, _)| {
                                s.name == name && s.label("partition") == Some(part.as_str())
                            })
                            .map_or(0.0, |(_, g)| g.last)
                    };
                    PartitionFrame {
                        partition: p,
                        depth: gauge("sluice_outbox_queue_depth") as u64,
                        oldest_age_s: gauge("sluice_outbox_oldest_pending_age_seconds"),
                    }
                })
                .collect();
            let mut limiters: BTreeMap<(u32, String), LimiterFrame> = BTreeMap::new();
            for (s, g) in &readings.rest.gauges {
                let is_limit = s.name == "sluice_outbox_limiter_current_limit";
                if !is_limit && s.name != "sluice_outbox_limiter_in_flight" {
                    continue;
                }
                let (Some(p), Some(t)) = (
                    s.label("partition").and_then(|p| p.parse().ok()),
                    s.label("actor_type"),
                ) else {
                    continue;
                };
                let l = limiters
                    .entry((p, t.to_string()))
                    .or_insert_with(|| LimiterFrame {
                        partition: p,
                        actor_type: t.to_string(),
                        limit: 0.0,
                        limit_min: 0.0,
                        in_flight: 0.0,
                        in_flight_max: 0.0,
                    });
                if is_limit {
                    (l.limit, l.limit_min) = (g.last, g.min);
                } else {
                    (l.in_flight, l.in_flight_max) = (g.last, g.max);
                }
            }
            let dead = "sluice_outbox_relay_dead_lettered_total";
            let pending = partitions.iter().map(|p| p.depth).sum();
            OutboxFrame {
                partitions,
                limiters: limiters.into_values().collect(),
                delivered_per_s: rate(d.increase("sluice_outbox_relay_delivered_total", &[])),
                retries_per_s: rate(d.increase("sluice_outbox_relay_retries_total", &[])),
                backpressure_per_s: rate(d.increase("sluice_outbox_relay_backpressure_total", &[])),
                dead_lettered_per_s: rate(d.increase(dead, &[])),
                delivered: d.total("sluice_outbox_relay_delivered_total", &[]),
                retries: d.total("sluice_outbox_relay_retries_total", &[]),
                dead_lettered: d.total(dead, &[]),
                backpressure: d.total("sluice_outbox_relay_backpressure_total", &[]),
                pending,
                min_limit: cfg.concurrency.min_limit,
                max_limit: cfg.concurrency.max_limit,
            }
        });
        let bus = self.bus();
        let frame = Frame {
            t_ms,
            interval_s,
            inflight_turns: self.host.inflight_turns(),
            admission_refusals,
            types,
            outbox,
            bus,
            deploys: self.deploys.list(),
        };
        self.prev = Some((now, readings));
        frame
    }

    /// Subscriptions from the host, joined with the bus's routes (same actor type and
    /// pattern, in subscription order) for the top principals.
    fn bus(&self) -> Vec<SubscriptionFrame> {
        let mut routes = self
            .host
            .event_bus()
            .route_summaries(self.config.top_principals);
        self.host
            .bus_stats()
            .into_iter()
            .map(|s| {
                let ty = s.actor.split('/').next().unwrap_or_default();
                let top = routes
                    .iter()
                    .position(|r| r.subscriber == ty && r.pattern == s.topic)
                    .map(|i| routes.remove(i).top_principals)
                    .unwrap_or_default();
                SubscriptionFrame {
                    actor: s.actor,
                    topic: s.topic,
                    mode: s.mode.to_string(),
                    delivered: s.delivered,
                    dropped: s.dropped,
                    queued: s.queued,
                    bytes_in_use: s.bytes_in_use,
                    active_principals: s.active_principals,
                    evicted: s.evicted,
                    oldest_age_ms: s.oldest_age_ms,
                    top_principals: top.into_iter().map(|(p, b)| (p.to_string(), b)).collect(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::recorder::BUCKETS;

    /// What a recorder holds after `record` runs with it installed.
    fn readings(record: impl FnOnce()) -> (ConsoleRecorder, Readings) {
        let rec = ConsoleRecorder::default();
        metrics::with_local_recorder(&rec, record);
        let r = rec.read();
        (rec, r)
    }

    fn status(ty: &str, version: u64) -> sluice_runtime::TypeStatus {
        sluice_runtime::TypeStatus {
            actor_type: ty.into(),
            version,
            active: 0,
            queued: 0,
            oldest_queued_ms: 0,
            stopped: 0,
        }
    }

    #[test]
    fn a_rate_is_the_counters_increase_over_the_interval_since_the_previous_frame() {
        let refused = || metrics::counter!("sluice_mailbox_refused_total", "actor_type" => "Slow");
        let (rec, before) = readings(|| refused().increment(3));
        metrics::with_local_recorder(&rec, || refused().increment(5));
        let after = rec.read();
        let ty = [("actor_type", "Slow")];
        let first = Delta {
            now: &before,
            prev: None,
        };
        assert_eq!(first.increase("sluice_mailbox_refused_total", &ty), 3);
        let next = Delta {
            now: &after,
            prev: Some(&before),
        };
        assert_eq!(next.total("sluice_mailbox_refused_total", &ty), 8);
        assert_eq!(next.increase("sluice_mailbox_refused_total", &ty), 5);
        assert_eq!(
            next.increase("sluice_mailbox_refused_total", &[("actor_type", "Other")]),
            0
        );
        // A counter that went backwards (a reset) is no increase, not a huge one.
        let back = Delta {
            now: &before,
            prev: Some(&after),
        };
        assert_eq!(back.increase("sluice_mailbox_refused_total", &ty), 0);

        // Over 2 s since the previous frame: 5 / 2 s. The first frame uses the configured
        // interval; a zero interval is clamped, never a division by zero.
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(2);
        let iv = interval_s(Some(t0), t1, Duration::from_secs(1));
        assert_eq!(5.0 / iv, 2.5);
        assert_eq!(interval_s(None, t1, Duration::from_millis(500)), 0.5);
        assert_eq!(interval_s(Some(t1), t1, Duration::from_secs(1)), 1e-3);
    }

    #[test]
    fn a_frames_quantiles_come_from_the_turns_of_its_own_window_only() {
        let turn = |s: f64| {
            metrics::histogram!("sluice_turn_seconds", "actor_type" => "Slow").record(s);
        };
        // Window 1: 100 turns of 10 ms. Window 2: 9 turns of 10 ms and one of 2 s.
        let (rec, w1) = readings(|| (0..100).for_each(|_| turn(0.010)));
        metrics::with_local_recorder(&rec, || {
            (0..9).for_each(|_| turn(0.010));
            turn(2.0);
        });
        let w2 = rec.read();
        let ty = [("actor_type", "Slow")];
        let d = Delta {
            now: &w2,
            prev: Some(&w1),
        };
        let b = d.buckets("sluice_turn_seconds", &ty);
        assert_eq!(b.len(), BUCKETS);
        assert_eq!(b.iter().sum::<u64>(), 10, "only window 2's turns");
        let p50 = quantile(&b, 0.5).unwrap();
        let p99 = quantile(&b, 0.99).unwrap();
        assert!((p50 - 0.010).abs() / 0.010 <= 0.125, "{p50}");
        assert!(
            (p99 - 2.0).abs() / 2.0 <= 0.125,
            "{p99}: the one slow turn of 10"
        );
        // With the whole history (no previous frame) the slow turn is under 1 %: p99 is fast.
        let all = Delta {
            now: &w2,
            prev: None,
        };
        let p99_all = quantile(&all.buckets("sluice_turn_seconds", &ty), 0.99).unwrap();
        assert!(p99_all < 0.02, "{p99_all}");
        // A window with no turns has no quantile (the page shows –).
        let idle = Delta {
            now: &w2,
            prev: Some(&w2),
        };
        assert_eq!(
            quantile(&idle.buckets("sluice_turn_seconds", &ty), 0.99),
            None
        );
    }

    #[test]
    fn each_types_counters_and_histograms_are_read_apart_and_gauges_stay_shared() {
        let (_rec, r) = readings(|| {
            metrics::counter!("sluice_turns_total", "actor_type" => "A", "outcome" => "ok")
                .increment(2);
            metrics::counter!("sluice_turns_total", "actor_type" => "B", "outcome" => "ok")
                .increment(7);
            metrics::counter!("sluice_outbox_relay_delivered_total", "partition" => "0")
                .increment(4);
            metrics::histogram!("sluice_turn_seconds", "actor_type" => "B").record(0.1);
            metrics::gauge!("sluice_outbox_queue_depth", "partition" => "0").set(3.0);
        });
        let split = Split::of(r);
        let total = |r: &Readings, name: &str| Delta { now: r, prev: None }.total(name, &[]);
        assert_eq!(total(&split.by_type["A"], "sluice_turns_total"), 2);
        assert_eq!(total(&split.by_type["B"], "sluice_turns_total"), 7);
        assert_eq!(split.by_type["A"].histograms.len(), 0);
        assert_eq!(split.by_type["B"].histograms.len(), 1);
        assert_eq!(total(&split.rest, "sluice_outbox_relay_delivered_total"), 4);
        assert_eq!(total(&split.rest, "sluice_turns_total"), 0);
        assert_eq!(split.rest.gauges.len(), 1);
    }

    #[test]
    fn a_deploy_is_noted_once_per_new_version_newest_first_and_the_log_is_bounded() {
        let mut log = DeployLog::new(3);
        // The first frame: what the app folder deployed, noted as at start.
        log.note(&[status("A", 1), status("B", 1)], 1_000);
        let first = log.list();
        assert_eq!(first.len(), 2);
        assert!(first.iter().all(|d| d.at_start && d.at_ms == 1_000));
        // The same versions again: nothing new.
        log.note(&[status("A", 1), status("B", 1)], 2_000);
        assert_eq!(log.list(), first);
        // A redeploy of B, then a new type C: noted at their frame's time, newest first.
        log.note(&[status("A", 1), status("B", 2)], 3_000);
        log.note(&[status("A", 1), status("B", 2), status("C", 1)], 4_000);
        let seen: Vec<(String, u64, u64, bool)> = log
            .list()
            .into_iter()
            .map(|d| (d.actor_type, d.version, d.at_ms, d.at_start))
            .collect();
        assert_eq!(
            seen,
            [
                ("C".to_string(), 1, 4_000, false),
                ("B".to_string(), 2, 3_000, false),
                // The log keeps 3: the oldest, A v1 (noted before B v1), fell off.
                ("B".to_string(), 1, 1_000, true),
            ]
        );
    }

    #[test]
    fn frames_keep_the_last_history_frames_in_order_and_stream_the_newest() {
        let frames = Frames::new(2);
        let rx = frames.subscribe();
        assert_eq!(frames.history_json(), "[]");
        for f in ["1", "2", "3"] {
            frames.push(f.into());
        }
        assert_eq!(frames.history_json(), "[2,3]");
        assert_eq!(rx.borrow().as_deref(), Some("3"));
        let one = Frames::new(0);
        one.push("7".into());
        one.push("8".into());
        assert_eq!(one.history_json(), "[8]", "a history of at least one frame");
    }
}
