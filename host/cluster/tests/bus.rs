//! The bus across hosts against a real nats-server: an event published on one host reaches
//! the subscribed others with its principal and publisher; NATS's wildcard matching agrees
//! with the topic grammar's; a host skips its own events; garbage is a typed error.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{host, nats};
use futures_util::{Stream, StreamExt};
use sluice_cluster::bus::{Bus, BusError, BusEvent, topic_subject};
use sluice_flow::topic::TopicPattern;

const MAX: usize = 64 * 1024;

async fn next_event<S>(s: &mut S) -> Option<Result<BusEvent, BusError>>
where
    S: Stream<Item = Result<BusEvent, BusError>> + Unpin,
{
    tokio::time::timeout(Duration::from_millis(300), s.next())
        .await
        .ok()
        .flatten()
}

#[tokio::test]
async fn an_event_reaches_other_hosts_with_principal_and_publisher() {
    let server = nats().await;
    let a = Bus::new(&host(&server.url(), "b1", "a", 1_000).await, MAX);
    let b = Bus::new(&host(&server.url(), "b1", "b", 1_000).await, MAX);
    let mut on_b = Box::pin(b.subscribe("orders.*").await.unwrap());
    let mut on_a = Box::pin(a.subscribe("orders.*").await.unwrap());
    a.publish(
        "orders.eu.new",
        "alice",
        Some("Shop/1"),
        Bytes::from_static(b"{}"),
    )
    .await
    .unwrap();
    let e = next_event(&mut on_b).await.expect("b receives").unwrap();
    assert_eq!(
        e,
        BusEvent {
            topic: "orders.eu.new".into(),
            principal: "alice".into(),
            publisher: Some("Shop/1".into()),
            origin: "a".into(),
            payload: Bytes::from_static(b"{}"),
        }
    );
    // The publishing host delivered it locally already: it does not get it back.
    assert!(next_event(&mut on_a).await.is_none());
}

#[tokio::test]
async fn nats_wildcards_cover_exactly_what_the_topic_grammar_says() {
    let server = nats().await;
    let publisher = Bus::new(&host(&server.url(), "b2", "p", 1_000).await, MAX);
    let patterns = ["a.b.c", "a.*.c", "a.b.*", "*", "*.c", "a.*", "x y.*"];
    let topics = [
        "a.b.c", "a.x.c", "a.b", "a.b.c.d", "a.x.y.c", "c", "b.c", "x y.z", "a",
    ];
    let mut subs = Vec::new();
    for (i, p) in patterns.iter().enumerate() {
        let bus = Bus::new(
            &host(&server.url(), "b2", &format!("s{i}"), 1_000).await,
            MAX,
        );
        subs.push((*p, Box::pin(bus.subscribe(p).await.unwrap())));
    }
    for t in topics {
        publisher
            .publish(t, "system", None, Bytes::from(t.to_string()))
            .await
            .unwrap();
    }
    for (p, sub) in &mut subs {
        let want: Vec<&str> = topics
            .iter()
            .copied()
            .filter(|t| TopicPattern::parse(p).unwrap().matches(t))
            .collect();
        let mut got = Vec::new();
        while let Some(e) = next_event(sub).await {
            got.push(e.unwrap().topic);
        }
        assert_eq!(got, want, "pattern {p:?}");
    }
}

#[tokio::test]
async fn bad_topics_oversize_payloads_and_garbage_are_typed_errors() {
    let server = nats().await;
    let conn = host(&server.url(), "b3", "a", 1_000).await;
    let bus = Bus::new(&conn, 8);
    assert!(matches!(
        bus.publish("a..b", "p", None, Bytes::new()).await,
        Err(BusError::Topic(_))
    ));
    assert!(matches!(
        bus.publish("a.*", "p", None, Bytes::new()).await,
        Err(BusError::Topic(_))
    ));
    assert!(matches!(
        bus.subscribe("a.b*").await,
        Err(BusError::Topic(_))
    ));
    let e = bus
        .publish("a", "p", None, Bytes::from_static(b"123456789"))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "INVALID_ARGUMENT: payload of 9 bytes exceeds max_payload_bytes=8"
    );

    let receiver = Bus::new(&host(&server.url(), "b3", "r", 1_000).await, 8);
    let mut sub = Box::pin(receiver.subscribe("*").await.unwrap());
    let subject = topic_subject(conn.names(), "a").unwrap();
    conn.client()
        .publish(subject, "garbage".into())
        .await
        .unwrap();
    assert!(matches!(
        next_event(&mut sub).await,
        Some(Err(BusError::Decode(_)))
    ));
    // The stream goes on after garbage.
    bus.publish("a", "p", None, Bytes::from_static(b"ok"))
        .await
        .unwrap();
    assert_eq!(next_event(&mut sub).await.unwrap().unwrap().payload, "ok");
}
