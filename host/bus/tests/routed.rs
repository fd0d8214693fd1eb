//! Routed subscriptions: demand allocation, byte budget, eviction, DRR, wake-ups.

mod support;

use sluice_bus::{BusConfig, Event, EventBus, IpcRateLimiter, RateLimitConfig};
use std::time::Duration;
use support::{bus_with_budget, ev, tag};

#[tokio::test]
async fn five_thousand_principals_demand_allocate_and_drain_in_one_round() {
    let bus = EventBus::new();
    let mut rx = bus.subscribe_routed("agents.*", "test").unwrap();
    assert_eq!(rx.stats().active_principals, 0);
    for p in 0..5000 {
        let report = bus
            .publish(Event::new("agents.tick", vec![1; 100]).with_principal(format!("agent:{p}")))
            .unwrap();
        assert_eq!(report.routed, 1);
    }
    let stats = rx.stats();
    assert_eq!(stats.active_principals, 5000);
    assert_eq!(stats.len, 5000);
    assert_eq!(stats.evicted_total, 0);
    let drained = rx.try_drain(1024 * 1024);
    assert_eq!(drained.len(), 5000);
    let stats = rx.stats();
    assert_eq!(
        (stats.len, stats.active_principals, stats.bytes_in_use),
        (0, 0, 0)
    );
    assert_eq!(stats.starved_total, 0);
}

#[tokio::test]
async fn oversize_message_is_rejected_without_evicting_others() {
    let bus = bus_with_budget(1000);
    let mut rx = bus.subscribe_routed("t", "test").unwrap();
    for (i, p) in ["a", "b", "c"].iter().enumerate() {
        bus.publish(ev(p, 300, i as u8)).unwrap();
    }
    let report = bus.publish(ev("mallory", 1001, 9)).unwrap();
    assert_eq!((report.routed, report.routes_refused), (0, 1));
    let stats = rx.stats();
    assert_eq!(
        (stats.len, stats.evicted_total, stats.refused_total),
        (3, 0, 1)
    );
    let tags: Vec<u8> = rx.try_drain(usize::MAX).iter().map(|e| tag(e)).collect();
    assert_eq!(tags, vec![0, 1, 2]);
}

#[tokio::test]
async fn eviction_takes_the_globally_oldest_head() {
    let bus = bus_with_budget(1000);
    let mut rx = bus.subscribe_routed("t", "test").unwrap();
    bus.publish(ev("a", 300, 1)).unwrap();
    bus.publish(ev("b", 300, 2)).unwrap();
    bus.publish(ev("a", 300, 3)).unwrap();
    // 900 in use: 400 more needs one eviction, the oldest head is a's first.
    bus.publish(ev("c", 400, 4)).unwrap();
    assert_eq!(rx.stats().evicted_total, 1);
    // 1000 in use: another 300 evicts the next oldest head, b's.
    bus.publish(ev("c", 300, 5)).unwrap();
    let tags: Vec<u8> = rx.try_drain(usize::MAX).iter().map(|e| tag(e)).collect();
    let mut sorted = tags.clone();
    sorted.sort();
    assert_eq!(sorted, vec![3, 4, 5]);
}

#[tokio::test]
async fn control_messages_are_never_evicted() {
    let bus = bus_with_budget(1000);
    let mut rx = bus.subscribe_routed("t", "test").unwrap();
    bus.publish(ev("a", 300, 1).as_control()).unwrap();
    bus.publish(ev("a", 300, 2)).unwrap();
    bus.publish(ev("a", 300, 3).as_control()).unwrap(); // a stream terminator
    for i in 0..10 {
        bus.publish(ev("b", 100, 10 + i)).unwrap();
    }
    // Everything evictable is gone; only what control messages pin remains.
    let report = bus.publish(ev("c", 500, 99)).unwrap();
    assert_eq!(
        report.routes_refused, 1,
        "would need a control message's bytes"
    );
    let tags: Vec<u8> = rx.try_drain(usize::MAX).iter().map(|e| tag(e)).collect();
    assert!(tags.contains(&1) && tags.contains(&3), "{tags:?}");
    assert!(
        !tags.contains(&2),
        "the data message between them was evicted"
    );
}

#[tokio::test]
async fn every_routed_subscription_gets_its_own_copy_and_drop_unregisters() {
    let bus = EventBus::new();
    let mut one = bus.subscribe_routed("jobs.*.done", "test").unwrap();
    let mut two = bus.clone().subscribe_routed("jobs.*.done", "test").unwrap();
    let other = bus.subscribe_routed("mail.*", "test").unwrap();
    let report = bus.publish(Event::new("jobs.7.done", vec![1])).unwrap();
    assert_eq!(report.routed, 2);
    assert_eq!(one.try_drain(usize::MAX).len(), 1);
    assert_eq!(two.try_drain(usize::MAX).len(), 1);
    assert_eq!(other.stats().len, 0);
    assert_eq!(bus.routed_subscriptions(), 3);
    drop(other);
    drop(one);
    assert_eq!(bus.routed_subscriptions(), 1);
}

#[tokio::test(start_paused = true)]
async fn recv_waits_for_a_publish_and_times_out_when_none_comes() {
    let bus = EventBus::new();
    let mut rx = bus.subscribe_routed("t.*", "test").unwrap();
    assert!(rx.recv(Some(Duration::from_millis(50))).await.is_none());
    let publisher = bus.clone();
    let task = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        publisher
            .publish(Event::new("t.x", vec![5]).with_principal("alice"))
            .unwrap();
    });
    let got = rx.recv(None).await.unwrap();
    assert_eq!(
        (&*got.principal, got.payload.as_slice()),
        ("alice", &[5u8][..])
    );
    task.await.unwrap();
}

#[tokio::test]
async fn a_quiet_principal_is_served_ahead_of_a_flooders_backlog() {
    let bus = bus_with_budget(64 * 1024);
    let mut rx = bus.subscribe_routed("t", "test").unwrap();
    for _ in 0..40 {
        bus.publish(ev("flooder", 1000, 0)).unwrap();
    }
    bus.publish(ev("quiet", 1000, 1)).unwrap();
    // quantum = max(4096, 64 KiB / 2) = 32 KiB: the flooder gets 32 messages, then quiet.
    let mut position = None;
    for i in 0..41 {
        let e = rx.recv(Some(Duration::from_secs(1))).await.unwrap();
        if &*e.principal == "quiet" {
            position = Some(i);
        }
    }
    assert_eq!(position, Some(32));
}

#[tokio::test]
async fn publish_from_applies_the_rate_limiter_before_the_bus() {
    let bus = BusConfig {
        rate_limiter: Some(IpcRateLimiter::new(
            RateLimitConfig::default().default_quota(1000),
        )),
        ..BusConfig::default()
    }
    .build();
    let mut rx = bus.subscribe_routed("t", "test").unwrap();
    bus.publish_from("svc", ev("alice", 1000, 1)).unwrap();
    let err = bus.publish_from("svc", ev("alice", 10, 2)).unwrap_err();
    assert_eq!(err.code(), "RESOURCE_EXHAUSTED");
    bus.publish_from("svc", ev("bob", 10, 3)).unwrap();
    assert_eq!(rx.try_drain(usize::MAX).len(), 2);
    let too_big = Event::new("t", vec![0; 5 * 1024 * 1024 + 1]);
    assert_eq!(bus.publish(too_big).unwrap_err().code(), "INVALID_ARGUMENT");
}

#[tokio::test]
async fn publish_stamps_the_event_once_for_queue_age() {
    let bus = EventBus::new();
    let mut rx = bus.subscribe_routed("t", "test").unwrap();
    let e = Event::new("t", vec![1]);
    assert!(e.published_at.is_none());
    let before = std::time::Instant::now();
    bus.publish(e).unwrap();
    let oldest = rx.stats().oldest_enqueued_at.unwrap();
    let got = rx.try_drain(usize::MAX).pop().unwrap();
    assert_eq!(got.published_at, Some(oldest));
    assert!(oldest >= before);
}

/// Two publisher threads and a draining thread: every accepted event is either
/// drained exactly once or counted as evicted, and each principal's events
/// come out in publish order.
#[test]
fn concurrent_publishers_lose_nothing_unaccounted_and_keep_per_principal_order() {
    const PER_THREAD: u32 = 20_000;
    let bus = bus_with_budget(64 * 1024);
    let mut rx = bus.subscribe_routed("t", "test").unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let drained = std::thread::scope(|s| {
        let consumer = s.spawn(|| {
            let mut got = Vec::new();
            loop {
                // Read the flag before draining: once it is set, one more
                // empty drain proves nothing is left.
                let finished = done.load(std::sync::atomic::Ordering::Acquire);
                let batch = rx.try_drain(8 * 1024);
                if batch.is_empty() && finished {
                    return (got, rx);
                }
                got.extend(batch);
                std::thread::yield_now();
            }
        });
        let publishers: Vec<_> = (0..2u32)
            .map(|t| {
                let bus = bus.clone();
                s.spawn(move || {
                    for i in 0..PER_THREAD {
                        // Principals are disjoint per thread, so publish order
                        // per principal is well defined.
                        let p = format!("user:{t}-{}", i % 25);
                        let mut payload = vec![0u8; 64];
                        payload[..4].copy_from_slice(&i.to_le_bytes());
                        bus.publish(Event::new("t", payload).with_principal(p))
                            .unwrap();
                    }
                })
            })
            .collect();
        for p in publishers {
            p.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Release);
        consumer.join().unwrap()
    });
    let (got, rx) = drained;
    let stats = rx.stats();
    assert_eq!(stats.len, 0);
    assert_eq!(stats.refused_total, 0);
    assert_eq!(
        got.len() as u64 + stats.evicted_total,
        u64::from(2 * PER_THREAD),
        "drained + evicted = published"
    );
    let mut last: std::collections::HashMap<&str, u32> = Default::default();
    for e in &got {
        let i = u32::from_le_bytes(e.payload[..4].try_into().unwrap());
        if let Some(prev) = last.insert(&e.principal, i) {
            assert!(prev < i, "FIFO per principal");
        }
    }
}

#[tokio::test]
async fn route_summaries_name_each_route_and_its_heaviest_principals() {
    let bus = EventBus::new();
    let _a = bus.subscribe_routed("agents.*", "Agents").unwrap();
    let mut b = bus.subscribe_routed("jobs", "Jobs").unwrap();
    for (p, n) in [("alice", 1), ("bob", 4), ("carol", 2)] {
        for _ in 0..n {
            bus.publish(Event::new("agents.tick", vec![1; 100]).with_principal(p))
                .unwrap();
        }
    }
    bus.publish(Event::new("jobs", vec![1; 50]).with_principal("dave"))
        .unwrap();
    let s = bus.route_summaries(2);
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].subscriber, s[0].pattern.as_str()),
        ("Agents", "agents.*")
    );
    assert_eq!(s[0].stats.active_principals, 3);
    let top: Vec<(&str, usize)> = s[0]
        .top_principals
        .iter()
        .map(|(p, n)| (&**p, *n))
        .collect();
    assert_eq!(
        top,
        vec![
            ("bob", s[0].stats.bytes_in_use * 4 / 7),
            ("carol", s[0].stats.bytes_in_use * 2 / 7)
        ]
    );
    assert_eq!((s[1].subscriber, s[1].pattern.as_str()), ("Jobs", "jobs"));
    assert_eq!(s[1].top_principals.len(), 1);
    b.try_drain(usize::MAX);
    assert!(bus.route_summaries(2)[1].top_principals.is_empty());
}
