//! The shared broadcast ring: lag accounting and topic filters.

use sluice_bus::{BusConfig, Event, EventBus};

#[tokio::test]
async fn a_lagging_receiver_skips_ahead_and_counts_what_it_lost() {
    let bus = BusConfig {
        broadcast_capacity: 8,
        ..BusConfig::default()
    }
    .build();
    let mut slow = bus.subscribe("test_slow");
    let mut fast = bus.subscribe("test_fast");
    for i in 0..20u8 {
        bus.publish(Event::new("a.b", vec![i])).unwrap();
        // The fast receiver keeps up.
        assert_eq!(fast.recv().await.unwrap().payload, vec![i]);
    }
    assert_eq!(slow.len(), 20, "counts what it missed too");
    assert!(fast.is_empty());
    // Ring of 8: the slow receiver lost the 12 oldest and resumes at 12.
    let first = slow.recv().await.unwrap();
    assert_eq!(first.payload, vec![12]);
    assert_eq!(slow.lagged(), 12);
    assert_eq!(slow.subscriber(), "test_slow");
    for i in 13..20u8 {
        assert_eq!(slow.recv().await.unwrap().payload, vec![i]);
    }
    assert_eq!(slow.lagged(), 12);
    assert_eq!(fast.lagged(), 0);
    assert!(slow.try_recv().is_none());
}

#[tokio::test]
async fn topic_filtered_receiver_sees_only_matching_events_and_closes_with_the_bus() {
    let bus = EventBus::new();
    let mut rx = bus.subscribe_topic("jobs.*", "test").unwrap();
    for i in 0..100u8 {
        bus.publish(Event::new("noise.x", vec![i])).unwrap();
    }
    bus.publish(Event::new("jobs.done", vec![7])).unwrap();
    assert_eq!(&*rx.recv().await.unwrap().topic, "jobs.done");
    drop(bus);
    assert!(rx.recv().await.is_none());
}

#[tokio::test]
async fn publish_rejects_bad_topics_with_invalid_argument() {
    let bus = EventBus::new();
    let deep = vec!["s"; 21].join(".");
    let err = bus.publish(Event::new(deep.as_str(), vec![])).unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
    assert!(bus.publish(Event::new("a..b", vec![])).is_err());
    assert!(bus.publish(Event::new("a.*", vec![])).is_err());
    assert_eq!(
        bus.subscribe_topic(&deep, "t").unwrap_err().code(),
        "INVALID_ARGUMENT"
    );
    assert!(bus.subscribe_routed(&deep, "t").is_err());
    assert!(
        bus.publish(Event::new(vec!["s"; 20].join(".").as_str(), vec![]))
            .is_ok()
    );
}
