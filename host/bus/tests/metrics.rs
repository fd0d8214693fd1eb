//! Refusals and evictions are counted under bounded labels; principal ids never reach a label.

mod support;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use parking_lot::Mutex;
use sluice_bus::{BusConfig, Event, IpcRateLimiter, RateLimitConfig};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use support::{bus_with_budget, ev};

/// A minimal in-memory recorder: `name{k=v,...}` → value.
#[derive(Default)]
struct Capture {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
}

fn render(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Recorder for Capture {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.counters.lock().entry(render(key)).or_default().clone())
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.gauges.lock().entry(render(key)).or_default().clone())
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

impl Capture {
    fn counter(&self, key: &str) -> u64 {
        self.counters
            .lock()
            .get(key)
            .map_or(0, |v| v.load(Ordering::Relaxed))
    }
    fn gauge(&self, key: &str) -> f64 {
        self.gauges
            .lock()
            .get(key)
            .map_or(0.0, |v| f64::from_bits(v.load(Ordering::Relaxed)))
    }
    fn all_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.counters.lock().keys().cloned().collect();
        keys.extend(self.gauges.lock().keys().cloned());
        keys
    }
}

#[test]
fn evictions_refusals_and_gauges_are_labelled_by_principal_class_only() {
    let rec = Capture::default();
    metrics::with_local_recorder(&rec, || {
        let bus = bus_with_budget(1000);
        let mut rx = bus.subscribe_routed("t", "test_route").unwrap();
        bus.publish(ev("user:alice", 400, 1)).unwrap();
        bus.publish(ev("agent:7", 400, 2)).unwrap();
        assert_eq!(rx.stats().active_principals, 2);
        assert_eq!(rx.stats().bytes_in_use, 800);
        assert_eq!(
            rec.gauge("sluice_bus_active_principals{subscriber=test_route}"),
            2.0
        );
        assert_eq!(
            rec.gauge("sluice_bus_budget_in_use_bytes{subscriber=test_route}"),
            800.0
        );
        // Evicts alice's (oldest) then agent:7's.
        bus.publish(ev("system", 900, 3)).unwrap();
        bus.publish(ev("user:bob", 1001, 4)).unwrap(); // oversize: refused
        let evict = "sluice_bus_byte_evictions_total";
        assert_eq!(
            rec.counter(&format!("{evict}{{class=user,subscriber=test_route}}")),
            1
        );
        assert_eq!(
            rec.counter(&format!("{evict}{{class=agent,subscriber=test_route}}")),
            1
        );
        assert_eq!(
            rec.counter(&format!("{evict}{{class=system,subscriber=test_route}}")),
            0
        );
        assert_eq!(
            rec.counter("sluice_bus_route_refused_total{class=user,subscriber=test_route}"),
            1
        );
        assert_eq!(
            rec.counter("sluice_bus_events_published_total{kind=ipc}"),
            4
        );
        drop(rx.try_drain(usize::MAX));
        assert_eq!(
            rec.gauge("sluice_bus_budget_in_use_bytes{subscriber=test_route}"),
            0.0
        );
        // A dropped subscription takes its share out of the gauges.
        bus.publish(ev("user:carol", 100, 5)).unwrap();
        drop(rx);
        assert_eq!(
            rec.gauge("sluice_bus_active_principals{subscriber=test_route}"),
            0.0
        );

        let limited = BusConfig {
            rate_limiter: Some(IpcRateLimiter::new(
                RateLimitConfig::default().default_quota(10),
            )),
            ..BusConfig::default()
        }
        .build();
        assert!(
            limited
                .publish_from(
                    "svc",
                    Event::new("t", vec![0; 8]).with_principal("user:dave")
                )
                .is_ok()
        );
        assert!(
            limited
                .publish_from(
                    "svc",
                    Event::new("t", vec![0; 8]).with_principal("user:dave")
                )
                .is_err()
        );
        assert_eq!(
            rec.counter("sluice_ipc_rate_limited_total{class=user,reason=quota}"),
            1
        );
    });
    for key in rec.all_keys() {
        for id in ["alice", "bob", "carol", "dave", "agent:7", "svc"] {
            assert!(
                !key.contains(id),
                "principal or actor id in a metric label: {key}"
            );
        }
    }
}

#[test]
fn lag_is_counted_per_subscriber_label() {
    let rec = Capture::default();
    metrics::with_local_recorder(&rec, || {
        let bus = BusConfig {
            broadcast_capacity: 4,
            ..BusConfig::default()
        }
        .build();
        let mut rx = bus.subscribe("monitor");
        for i in 0..10u8 {
            bus.publish(Event::new("a", vec![i])).unwrap();
        }
        assert_eq!(rx.try_recv().unwrap().payload, vec![6]);
        assert_eq!(rx.lagged(), 6);
    });
    assert_eq!(
        rec.counter("sluice_bus_receiver_lagged_total{subscriber=monitor}"),
        6
    );
}
