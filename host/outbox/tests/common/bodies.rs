//! Test bodies written once and run against each backend (tests/sqlite.rs, tests/postgres.rs).

use std::sync::Arc;
use std::time::Duration;

use sluice_outbox::{
    ConcurrencyConfig, ConcurrencyStrategy, Conflict, DispatchOutcome, DlqSelector, EnqueueOutcome,
    NewMessage, RetryBudgetConfig, RetryPolicy,
};

use super::{Answer, Store, TestReceiver, eventually, fast_config};

const T: Duration = Duration::from_secs(20);

fn msg(receiver: &str, payload: &str) -> NewMessage {
    NewMessage::new(receiver, "job", payload.as_bytes().to_vec())
}

fn payloads_of(rx: &TestReceiver, receiver: &str) -> Vec<String> {
    rx.delivered()
        .into_iter()
        .filter(|s| s.receiver == receiver)
        .map(|s| String::from_utf8(s.payload).unwrap())
        .collect()
}

pub async fn relay_delivers_every_stored_message_once_in_order_per_receiver(store: Store) {
    let outbox = store
        .open(fast_config().partitions(4).build().unwrap())
        .await;
    let rx = TestReceiver::new();
    let msgs: Vec<NewMessage> = (0..600)
        .map(|i| msg(&format!("Worker/{}", i % 30), &format!("{:04}", i / 30)))
        .collect();
    let outcomes = outbox.enqueue(msgs).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, EnqueueOutcome::Inserted { claimed: false, .. }))
    );
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("600 deliveries", T, |r| r.delivered_count() >= 600)
        .await;
    relay.shutdown().await;
    assert_eq!(rx.delivered_count(), 600, "each message exactly once");
    for w in 0..30 {
        let got = payloads_of(&rx, &format!("Worker/{w}"));
        let want: Vec<String> = (0..20).map(|i| format!("{i:04}")).collect();
        assert_eq!(got, want, "FIFO for Worker/{w}");
    }
    let stats = outbox.stats().await.unwrap();
    assert_eq!(stats.len(), 4);
    assert!(stats.iter().all(|s| s.depth == 0), "{stats:?}");
}

pub async fn later_message_never_overtakes_an_earlier_one_backing_off(store: Store) {
    let config = fast_config()
        .retry_policy(RetryPolicy {
            max_attempts: 10,
            base_ms: 40,
            cap_ms: 80,
        })
        .partitions(1) // both receivers share a partition: B must not be blocked by A
        .build()
        .unwrap();
    let outbox = store.open(config).await;
    let rx = TestReceiver::new();
    rx.script(
        "A/1",
        [
            Answer::Transient("restarting"),
            Answer::Transient("restarting"),
        ],
    );
    let mut msgs = Vec::new();
    for i in 0..5 {
        msgs.push(msg("A/1", &format!("a{i}")));
        msgs.push(msg("B/1", &format!("b{i}")));
    }
    outbox.enqueue(msgs).await.unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("all 10 delivered", T, |r| r.delivered_count() >= 10)
        .await;
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "A/1"), ["a0", "a1", "a2", "a3", "a4"]);
    assert_eq!(payloads_of(&rx, "B/1"), ["b0", "b1", "b2", "b3", "b4"]);
    let seen = rx.seen();
    // A's later messages were never even attempted before a0 succeeded.
    let a0_ok = seen
        .iter()
        .position(|s| s.receiver == "A/1" && s.ok)
        .unwrap();
    assert!(
        seen[..a0_ok]
            .iter()
            .filter(|s| s.receiver == "A/1")
            .all(|s| s.payload == b"a0")
    );
    // B finished while A was still backing off.
    let b_last = seen.iter().rposition(|s| s.receiver == "B/1").unwrap();
    assert!(b_last < a0_ok, "B was blocked behind A's backoff");
}

pub async fn capacity_halves_the_limit_and_backs_off_at_least_retry_after(store: Store) {
    let outbox = store
        .open(fast_config().partitions(1).build().unwrap())
        .await;
    let rx = TestReceiver::new();
    rx.script("Slow/1", [Answer::Capacity(300)]);
    outbox.store(msg("Slow/1", "x")).await.unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("delivered after backoff", T, |r| r.delivered_count() == 1)
        .await;
    relay.shutdown().await;
    let seen = rx.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(
        gap >= Duration::from_millis(290),
        "retried after {gap:?}, hint was 300 ms"
    );
    // 10 halved to 5 by the rejection, then +1 for the success.
    let limits = outbox.limits();
    assert_eq!(limits, vec![(0, "other".to_string(), 6)]);
}

pub async fn the_trace_context_is_stored_and_handed_to_every_attempt(store: Store) {
    let outbox = store
        .open(fast_config().partitions(1).build().unwrap())
        .await;
    let rx = TestReceiver::new();
    let tp: sluice_outbox::TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        .parse()
        .unwrap();
    rx.script("Slow/1", [Answer::Capacity(10)]);
    outbox
        .store(msg("Slow/1", "traced").with_trace(Some(tp)))
        .await
        .unwrap();
    outbox.store(msg("Slow/2", "untraced")).await.unwrap();
    // An OVERWRITE keeps the newer message's context.
    let newer: sluice_outbox::TraceParent =
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            .parse()
            .unwrap();
    outbox
        .store(
            msg("Slow/3", "v1")
                .with_key("k", Conflict::Overwrite)
                .with_trace(Some(tp)),
        )
        .await
        .unwrap();
    outbox
        .store(
            msg("Slow/3", "v2")
                .with_key("k", Conflict::Overwrite)
                .with_trace(Some(newer)),
        )
        .await
        .unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("all three delivered", T, |r| r.delivered_count() == 3)
        .await;
    relay.shutdown().await;
    let seen = rx.seen();
    let traced: Vec<_> = seen.iter().filter(|s| s.receiver == "Slow/1").collect();
    assert_eq!(traced.len(), 2, "refused, then delivered");
    assert!(traced.iter().all(|s| s.trace == Some(tp)), "{traced:?}");
    assert_eq!(
        traced.iter().map(|s| s.attempt).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let plain = seen.iter().find(|s| s.receiver == "Slow/2").unwrap();
    assert_eq!(plain.trace, None);
    let replaced = seen.iter().find(|s| s.receiver == "Slow/3").unwrap();
    assert_eq!(replaced.payload, b"v2");
    assert_eq!(replaced.trace, Some(newer));
}

pub async fn transient_failure_backs_off_without_moving_the_limit(store: Store) {
    let outbox = store
        .open(fast_config().partitions(1).build().unwrap())
        .await;
    let rx = TestReceiver::new();
    rx.script("W/1", [Answer::Transient("timeout")]);
    let id = match outbox.store(msg("W/1", "x")).await.unwrap() {
        EnqueueOutcome::Inserted { id, .. } => id,
        o => panic!("{o:?}"),
    };
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("delivered", T, |r| r.delivered_count() == 1)
        .await;
    relay.shutdown().await;
    assert_eq!(rx.seen().len(), 2);
    assert_eq!(
        outbox.limits()[0].2,
        11,
        "transient: unchanged; success: +1"
    );
    let row = outbox.channel().get(id).await.unwrap().unwrap();
    assert!(row.acked);
    assert_eq!(row.delivery_count, 1);
    assert_eq!(row.last_error.as_deref(), Some("timeout"));
}

pub async fn permanent_failure_is_dead_lettered_at_once(store: Store) {
    let outbox = store.open(fast_config().build().unwrap()).await;
    let rx = TestReceiver::new();
    rx.always("Bad/1", Answer::Permanent("undecodable payload"));
    outbox.store(msg("Bad/1", "x")).await.unwrap();
    outbox.store(msg("Bad/1", "next")).await.unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    eventually("two dead letters", T, || async {
        outbox.dlq_list(None, 10).await.unwrap().len() == 2
    })
    .await;
    relay.shutdown().await;
    assert_eq!(rx.seen().len(), 2, "one attempt each");
    let dl = outbox.dlq_list(Some("Bad/1"), 10).await.unwrap();
    assert_eq!(dl[0].reason, "permanent");
    assert_eq!(dl[0].attempts, 1);
    assert_eq!(dl[0].last_error.as_deref(), Some("undecodable payload"));
    assert!(dl[0].age_ms >= 0);
}

pub async fn max_attempts_dead_letters_and_unblocks_the_receiver(store: Store) {
    let config = fast_config()
        .retry_policy(RetryPolicy {
            max_attempts: 3,
            base_ms: 2,
            cap_ms: 10,
        })
        .build()
        .unwrap();
    let outbox = store.open(config).await;
    let rx = TestReceiver::new();
    // The capacity refusal in the middle is backpressure, not a failed attempt: it does not
    // count toward max_attempts, so the poison message gets three real attempts.
    rx.script(
        "W/1",
        [
            Answer::Transient("e1"),
            Answer::Capacity(1),
            Answer::Transient("e2"),
            Answer::Transient("e3"),
        ],
    );
    outbox.store(msg("W/1", "poison")).await.unwrap();
    outbox.store(msg("W/1", "after")).await.unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("the next message delivered", T, |r| {
        r.delivered_count() == 1
    })
    .await;
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "W/1"), ["after"]);
    let dl = outbox.dlq_list(None, 10).await.unwrap();
    assert_eq!(dl.len(), 1);
    // Four attempts: three failures (max_attempts) and the capacity refusal between them.
    assert_eq!((dl[0].attempts, dl[0].reason.as_str()), (4, "max_attempts"));
    assert_eq!(dl[0].last_error.as_deref(), Some("e3"));
    assert_eq!(
        rx.seen().len(),
        5,
        "4 attempts of the poison message, 1 of the next"
    );
}

/// An outbox of one partition whose messages are dead-lettered after 2 counted attempts, a
/// receiver that answers `receiver`'s first `n` attempts with `answer`, and the id of one
/// message stored for it.
async fn refused_n_times(
    store: &Store,
    receiver: &str,
    answer: Answer,
    n: usize,
) -> (sluice_outbox::Outbox, TestReceiver, i64) {
    let config = fast_config()
        .partitions(1)
        .retry_policy(RetryPolicy {
            max_attempts: 2,
            base_ms: 1,
            cap_ms: 2,
        })
        .build()
        .unwrap();
    let outbox = store.open(config).await;
    let rx = TestReceiver::new();
    rx.script(receiver, std::iter::repeat_n(answer, n));
    let EnqueueOutcome::Inserted { id, .. } = outbox.store(msg(receiver, "m")).await.unwrap()
    else {
        panic!("not inserted")
    };
    (outbox, rx, id)
}

pub async fn capacity_refusals_never_dead_letter(store: Store) {
    // Flow control must never turn a capacity limit into a dead letter: a receiver refusing
    // for capacity far more often than max_attempts gets the message once it has room.
    let (outbox, rx, id) = refused_n_times(&store, "Full/1", Answer::Capacity(1), 12).await;
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("delivered after 12 refusals", T, |r| {
        r.delivered_count() == 1
    })
    .await;
    relay.shutdown().await;
    assert_eq!(rx.seen().len(), 13);
    assert!(outbox.dlq_list(None, 10).await.unwrap().is_empty());
    let row = outbox.channel().get(id).await.unwrap().unwrap();
    assert!(row.acked);
    assert_eq!(
        (row.delivery_count, row.refusals),
        (12, 12),
        "12 attempts, all refused"
    );
}

/// A delivering host cut off from its cluster (no NATS, a lapsed lease) fails every attempt
/// at once, however long the outage: that must not dead-letter the message. Its attempts do
/// not count toward max_attempts, back off at least the unroutable pause, and leave the
/// limit alone; once the host is back the message is delivered.
pub async fn a_cut_off_hosts_failed_attempts_never_dead_letter(store: Store) {
    let cut = "UNAVAILABLE: this host is not connected to NATS now";
    let (outbox, rx, id) = refused_n_times(&store, "Far/1", Answer::Unroutable(cut), 8).await;
    let limit_before = outbox.limits();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("delivered after 8 unroutable attempts", T, |r| {
        r.delivered_count() == 1
    })
    .await;
    relay.shutdown().await;
    assert_eq!(rx.seen().len(), 9);
    assert!(outbox.dlq_list(None, 10).await.unwrap().is_empty());
    let row = outbox.channel().get(id).await.unwrap().unwrap();
    assert!(row.acked);
    assert_eq!((row.delivery_count, row.refusals), (8, 8), "none counted");
    let seen = rx.seen();
    for pair in seen.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(gap >= Duration::from_millis(200), "retried after {gap:?}");
    }
    // No congestion signal: a capacity refusal would have halved the limit 8 times.
    for ((_, ty, before), (_, _, after)) in limit_before.iter().zip(outbox.limits()) {
        assert!(after >= *before, "{ty}: limit {before} -> {after}");
    }
}

pub async fn append_stores_a_repeated_key_once(store: Store) {
    let outbox = store.open(fast_config().build().unwrap()).await;
    let rx = TestReceiver::new();
    let a = msg("W/1", "first").with_key("k1", Conflict::Append);
    let b = msg("W/1", "second").with_key("k1", Conflict::Append);
    let other = msg("W/2", "same key, other receiver").with_key("k1", Conflict::Append);
    let out = outbox.enqueue(vec![a, b.clone(), other]).await.unwrap();
    assert!(matches!(out[0], EnqueueOutcome::Inserted { .. }));
    assert_eq!(out[1], EnqueueOutcome::Duplicate);
    assert!(matches!(out[2], EnqueueOutcome::Inserted { .. }));
    assert_eq!(
        outbox.store(b.clone()).await.unwrap(),
        EnqueueOutcome::Duplicate
    );
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("two deliveries", T, |r| r.delivered_count() >= 2)
        .await;
    // Still a duplicate after the first was delivered and acked.
    assert_eq!(outbox.store(b).await.unwrap(), EnqueueOutcome::Duplicate);
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "W/1"), ["first"]);
    let res = outbox
        .dispatch(
            vec![msg("W/1", "third").with_key("k1", Conflict::Append)],
            &rx,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        res.outcomes,
        [DispatchOutcome::Deduplicated],
        "a duplicate is absorbed by its key"
    );
    assert_eq!(rx.delivered_count(), 2);
}

pub async fn overwrite_replaces_pending_and_never_with_an_older_sequence(store: Store) {
    let outbox = store.open(fast_config().build().unwrap()).await;
    let rx = TestReceiver::new();
    let hb = |p: &str, seq: i64| {
        msg("Leader/1", p)
            .with_key("hb", Conflict::Overwrite)
            .with_sequence(seq)
    };
    let first = outbox.store(hb("seq5", 5)).await.unwrap();
    let EnqueueOutcome::Inserted { id, .. } = first else {
        panic!("{first:?}")
    };
    assert_eq!(
        outbox.store(hb("seq7", 7)).await.unwrap(),
        EnqueueOutcome::Replaced { id }
    );
    assert_eq!(
        outbox.store(hb("seq6", 6)).await.unwrap(),
        EnqueueOutcome::Stale
    );
    // Host-assigned sequence numbers are monotonic: 50 rapid heartbeats, only the last stays.
    let beats: Vec<NewMessage> = (0..50)
        .map(|i| msg("Leader/2", &format!("beat{i}")).with_key("hb", Conflict::Overwrite))
        .collect();
    let out = outbox.enqueue(beats).await.unwrap();
    assert!(matches!(out[0], EnqueueOutcome::Inserted { .. }));
    assert!(
        out[1..]
            .iter()
            .all(|o| matches!(o, EnqueueOutcome::Replaced { .. }))
    );
    for i in 50..60 {
        let o = outbox
            .store(msg("Leader/2", &format!("beat{i}")).with_key("hb", Conflict::Overwrite))
            .await
            .unwrap();
        assert!(matches!(o, EnqueueOutcome::Replaced { .. }), "{o:?}");
    }
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("both leaders", T, |r| r.delivered_count() >= 2)
        .await;
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "Leader/1"), ["seq7"]);
    assert_eq!(payloads_of(&rx, "Leader/2"), ["beat59"]);
    // After delivery, a new heartbeat is a new pending row again.
    let o = outbox.store(hb("seq8", 8)).await.unwrap();
    assert!(matches!(o, EnqueueOutcome::Inserted { .. }), "{o:?}");
    // An OVERWRITE replacement in dispatch is deduplicated.
    let res = outbox
        .dispatch(vec![hb("seq9", 9)], &rx, None)
        .await
        .unwrap();
    assert_eq!(res.outcomes, [DispatchOutcome::Deduplicated]);
}

pub async fn expired_messages_are_dead_lettered_never_delivered(store: Store) {
    let outbox = store.open(fast_config().build().unwrap()).await;
    let rx = TestReceiver::new();
    // Visible only after its expiry.
    outbox
        .store(msg("W/1", "stale").with_delay_ms(60).with_ttl_ms(20))
        .await
        .unwrap();
    outbox
        .store(msg("W/1", "fresh").with_delay_ms(60))
        .await
        .unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("fresh delivered", T, |r| r.delivered_count() == 1)
        .await;
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "W/1"), ["fresh"]);
    assert_eq!(rx.seen().len(), 1, "the expired one was never attempted");
    let dl = outbox.dlq_list(None, 10).await.unwrap();
    assert_eq!(dl.len(), 1);
    assert_eq!((dl[0].reason.as_str(), dl[0].attempts), ("expired", 0));
}

pub async fn dlq_lists_replays_and_purges(store: Store) {
    let outbox = store.open(fast_config().build().unwrap()).await;
    let rx = TestReceiver::new();
    for r in ["A/1", "B/1", "C/1"] {
        rx.always(r, Answer::Permanent("nope"));
    }
    let mut msgs = Vec::new();
    for r in ["A/1", "B/1", "C/1"] {
        msgs.push(msg(r, "m0"));
        msgs.push(msg(r, "m1"));
    }
    outbox.enqueue(msgs).await.unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    eventually("six dead letters", T, || async {
        outbox.dlq_list(None, 100).await.unwrap().len() == 6
    })
    .await;
    rx.clear_always();

    let a = outbox.dlq_list(Some("A/1"), 100).await.unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(
        outbox.dlq_replay(DlqSelector::Id(a[0].id)).await.unwrap(),
        1
    );
    rx.wait_for("A/1 m0 replayed", T, |r| r.delivered_count() == 1)
        .await;
    assert_eq!(
        outbox
            .dlq_replay(DlqSelector::Receiver("B/1".into()))
            .await
            .unwrap(),
        2
    );
    rx.wait_for("B/1 replayed", T, |r| r.delivered_count() == 3)
        .await;
    assert_eq!(outbox.dlq_purge(DlqSelector::Id(a[1].id)).await.unwrap(), 1);
    assert_eq!(
        outbox
            .dlq_purge(DlqSelector::Receiver("C/1".into()))
            .await
            .unwrap(),
        2
    );
    assert!(outbox.dlq_list(None, 100).await.unwrap().is_empty());

    rx.always("D/1", Answer::Permanent("nope"));
    outbox.store(msg("D/1", "x")).await.unwrap();
    eventually("D/1 dead", T, || async {
        outbox.dlq_list(None, 100).await.unwrap().len() == 1
    })
    .await;
    rx.clear_always();
    assert_eq!(outbox.dlq_replay(DlqSelector::All).await.unwrap(), 1);
    rx.wait_for("D/1 replayed", T, |r| r.delivered_count() == 4)
        .await;
    rx.always("E/1", Answer::Permanent("nope"));
    outbox.store(msg("E/1", "x")).await.unwrap();
    eventually("E/1 dead", T, || async {
        outbox.dlq_list(None, 100).await.unwrap().len() == 1
    })
    .await;
    assert_eq!(outbox.dlq_purge(DlqSelector::All).await.unwrap(), 1);
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "A/1"), ["m0"]);
    assert_eq!(payloads_of(&rx, "B/1"), ["m0", "m1"]);
}

pub async fn dispatch_delivers_within_the_limit_and_leaves_the_rest_to_the_relay(store: Store) {
    let config = fast_config()
        .partitions(1)
        .concurrency(ConcurrencyConfig {
            initial_limit: 10,
            min_limit: 1,
            max_limit: 100,
            strategy: ConcurrencyStrategy::Fixed,
        })
        .build()
        .unwrap();
    let outbox = store.open(config).await;
    let rx = TestReceiver::new();
    rx.script("W/3", [Answer::Capacity(1)]);
    let targets: Vec<NewMessage> = (0..30).map(|i| msg(&format!("W/{i}"), "cfg")).collect();
    let res = outbox.dispatch(targets, &rx, None).await.unwrap();
    assert_eq!(res.outcomes.len(), 30);
    // 10 attempted (limit 10), one of them refused for capacity; the rest wait for a permit.
    assert_eq!((res.delivered(), res.queued()), (9, 21));
    assert_eq!(res.outcomes[3], DispatchOutcome::QueuedRefused);
    assert_eq!(
        res.outcomes
            .iter()
            .filter(|o| **o == DispatchOutcome::QueuedAtLimit)
            .count(),
        20
    );
    assert_eq!(rx.seen().len(), 10);
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("all 30 delivered", T, |r| r.delivered_count() >= 30)
        .await;
    relay.shutdown().await;
    assert_eq!(
        rx.delivered_count(),
        30,
        "the 9 delivered by dispatch were acked, not relayed again"
    );
    // A receiver with a pending message is not attempted now (FIFO): queued behind it.
    outbox
        .store(msg("Q/1", "first").with_delay_ms(60_000))
        .await
        .unwrap();
    let res = outbox
        .dispatch(vec![msg("Q/1", "second")], &rx, None)
        .await
        .unwrap();
    assert_eq!(res.outcomes, [DispatchOutcome::QueuedBehindPending]);
    assert!(payloads_of(&rx, "Q/1").is_empty());
    // A delayed dispatch is not delivered now; an already expired one is dead-lettered.
    let res = outbox
        .dispatch(
            vec![
                msg("D/1", "later").with_delay_ms(60_000),
                msg("E/1", "gone").with_ttl_ms(0),
            ],
            &rx,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        res.outcomes,
        [DispatchOutcome::QueuedDelayed, DispatchOutcome::Expired]
    );
    assert_eq!((res.queued(), res.dead_lettered()), (1, 1));
    assert!(payloads_of(&rx, "D/1").is_empty() && payloads_of(&rx, "E/1").is_empty());
    let dl = outbox.dlq_list(Some("E/1"), 10).await.unwrap();
    assert_eq!(dl.len(), 1);
    assert_eq!(dl[0].reason, "expired");
}

/// A dispatch attempts a receiver's message at once only when nothing older of that receiver
/// is pending. The store must know that across a restart, after a replay from the DLQ, and
/// must forget it once the older rows are delivered.
pub async fn dispatch_sees_pending_rows_after_restart_and_replay(store: Store) {
    let config = fast_config().partitions(2).build().unwrap();
    let outbox = store.open(config.clone()).await;
    outbox
        .store(msg("Q/1", "first").with_delay_ms(60_000))
        .await
        .unwrap();
    drop(outbox);
    let outbox = store.open(config).await;
    let rx = TestReceiver::new();
    let res = outbox
        .dispatch(vec![msg("Q/1", "second")], &rx, None)
        .await
        .unwrap();
    assert_eq!(
        res.outcomes,
        [DispatchOutcome::QueuedBehindPending],
        "Q/1 has an older pending row"
    );
    assert!(rx.seen().is_empty());

    // R/1's only message dies: nothing of R/1 is pending, then the replay makes it pending.
    rx.always("R/1", Answer::Permanent("nope"));
    outbox.store(msg("R/1", "m0")).await.unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    eventually("R/1 m0 dead", T, || async {
        outbox.dlq_list(Some("R/1"), 10).await.unwrap().len() == 1
    })
    .await;
    relay.shutdown().await;
    rx.clear_always();
    assert_eq!(
        outbox
            .dlq_replay(DlqSelector::Receiver("R/1".into()))
            .await
            .unwrap(),
        1
    );
    let res = outbox
        .dispatch(vec![msg("R/1", "m1")], &rx, None)
        .await
        .unwrap();
    assert_eq!(
        res.outcomes,
        [DispatchOutcome::QueuedBehindPending],
        "the replayed m0 is pending"
    );
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("m0 then m1", T, |r| r.delivered_count() == 2)
        .await;
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "R/1"), ["m0", "m1"]);
    // Both delivered: R/1 has nothing pending, so the next dispatch goes straight through.
    let res = outbox
        .dispatch(vec![msg("R/1", "m2")], &rx, None)
        .await
        .unwrap();
    assert_eq!(res.outcomes, [DispatchOutcome::Delivered]);
    assert_eq!(payloads_of(&rx, "R/1"), ["m0", "m1", "m2"]);
}

pub async fn dead_relays_claims_reappear_after_the_lease(store: Store) {
    let outbox = store
        .open(fast_config().partitions(1).lease_ms(300).build().unwrap())
        .await;
    let rx = TestReceiver::new();
    outbox.store(msg("W/1", "x")).await.unwrap();
    // A relay claims the row and dies without settling. The lease runs from `now`.
    let t0 = tokio::time::Instant::now();
    let now = outbox.now_ms();
    let claimed = outbox.channel().claim(0, 10, now, 300).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(
        outbox
            .channel()
            .claim(0, 10, now, 300)
            .await
            .unwrap()
            .is_empty(),
        "leased"
    );
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("delivered after lease", T, |r| r.delivered_count() == 1)
        .await;
    relay.shutdown().await;
    assert!(
        rx.seen()[0].at - t0 >= Duration::from_millis(295),
        "delivered before the lease ended"
    );
}

pub async fn restart_keeps_delivery_count_and_send_at(store: Store) {
    let config = fast_config()
        .retry_policy(RetryPolicy {
            max_attempts: 5,
            base_ms: 60_000,
            cap_ms: 60_000,
        })
        .build()
        .unwrap();
    let outbox = store.open(config.clone()).await;
    let rx = TestReceiver::new();
    rx.script("W/1", [Answer::Capacity(2_000)]);
    let EnqueueOutcome::Inserted { id, .. } = outbox.store(msg("W/1", "x")).await.unwrap() else {
        panic!()
    };
    outbox
        .store(msg("W/2", "pending").with_delay_ms(60_000))
        .await
        .unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    eventually("first attempt failed", T, || async {
        outbox
            .channel()
            .get(id)
            .await
            .unwrap()
            .unwrap()
            .delivery_count
            == 1
    })
    .await;
    relay.shutdown().await;
    let before = outbox.channel().get(id).await.unwrap().unwrap();
    drop(outbox);
    let reopened = store.open(config).await;
    let after = reopened.channel().get(id).await.unwrap().unwrap();
    assert_eq!((after.delivery_count, after.refusals), (1, 1));
    assert_eq!(after.send_at, before.send_at);
    assert!(after.send_at >= before.created_at + 2_000);
    assert_eq!(
        after.last_error.as_deref(),
        Some("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=2000)")
    );
    // Nothing lost: the reopened outbox still holds both as pending.
    let depth: u64 = reopened
        .stats()
        .await
        .unwrap()
        .iter()
        .map(|s| s.depth)
        .sum();
    assert_eq!(depth, 2);
}

pub async fn aimd_limit_follows_a_receiver_whose_capacity_steps_down_then_up(store: Store) {
    let config = fast_config()
        .partitions(1)
        .relay_batch_size(64)
        .concurrency(ConcurrencyConfig {
            initial_limit: 16,
            min_limit: 1,
            max_limit: 64,
            strategy: ConcurrencyStrategy::Aimd,
        })
        .retry_policy(RetryPolicy {
            max_attempts: 1000,
            base_ms: 1,
            cap_ms: 10,
        })
        .retry_budget(RetryBudgetConfig {
            enabled: false,
            ..Default::default()
        })
        .actor_types(["Worker"])
        .build()
        .unwrap();
    let outbox = store.open(config).await;
    let rx = TestReceiver::new();
    // Phase 1: a tiny shared mailbox drained slowly.
    rx.capacity.store(2, std::sync::atomic::Ordering::Relaxed);
    let drain = rx.start_drain(Duration::from_millis(1));
    let total = 1500;
    let msgs: Vec<NewMessage> = (0..total)
        .map(|i| msg(&format!("Worker/{}", i % 300), &i.to_string()))
        .collect();
    outbox.enqueue(msgs).await.unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    // Sample the Worker bulkhead's limit every millisecond, tagged with the phase.
    let phase = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let samples = Arc::new(parking_lot::Mutex::new(Vec::<(usize, u32)>::new()));
    let sampler = {
        let (outbox, phase, samples) = (outbox.clone(), phase.clone(), samples.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            loop {
                tick.tick().await;
                let l = outbox
                    .limits()
                    .into_iter()
                    .find(|l| l.1 == "Worker")
                    .unwrap()
                    .2;
                samples
                    .lock()
                    .push((phase.load(std::sync::atomic::Ordering::Relaxed), l));
            }
        })
    };
    rx.wait_for("300 delivered under low capacity", T, |r| {
        r.delivered_count() >= 300
    })
    .await;
    // Phase 2: capacity recovers.
    phase.store(2, std::sync::atomic::Ordering::Relaxed);
    rx.capacity.store(0, std::sync::atomic::Ordering::Relaxed);
    rx.wait_for("all delivered", Duration::from_secs(60), |r| {
        r.delivered_count() >= total
    })
    .await;
    relay.shutdown().await;
    sampler.abort();
    drain.abort();
    let samples = samples.lock().clone();
    let low = samples
        .iter()
        .filter(|s| s.0 == 1)
        .map(|s| s.1)
        .min()
        .unwrap();
    let high = samples
        .iter()
        .filter(|s| s.0 == 2)
        .map(|s| s.1)
        .max()
        .unwrap_or(low);
    let end = outbox
        .limits()
        .into_iter()
        .find(|l| l.1 == "Worker")
        .unwrap()
        .2;
    assert!(
        low <= 4,
        "limit should drop under capacity pressure (min seen {low})"
    );
    assert!(
        high.max(end) > low + 8,
        "limit should grow back after capacity recovers ({low} -> {high}/{end})"
    );
    assert_eq!(
        rx.delivered_count(),
        total,
        "nothing lost, nothing delivered twice"
    );
    assert!(
        outbox.dlq_list(None, 10).await.unwrap().is_empty(),
        "DLQ must stay empty"
    );
    assert_eq!(
        rx.concurrent_same_id
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

pub async fn retry_budget_defers_retries_beyond_the_budget(store: Store) {
    let config = fast_config()
        .partitions(1)
        .retry_policy(RetryPolicy {
            max_attempts: 100,
            base_ms: 1,
            cap_ms: 200,
        })
        .retry_budget(RetryBudgetConfig {
            enabled: true,
            ratio_percent: 0,
            min_retries_per_sec: 0,
            burst: 3,
        })
        .build()
        .unwrap();
    let outbox = store.open(config).await;
    let rx = TestReceiver::new();
    rx.always("W/1", Answer::Transient("down"));
    let EnqueueOutcome::Inserted { id, .. } = outbox.store(msg("W/1", "x")).await.unwrap() else {
        panic!("not stored")
    };
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    // 1 first attempt + 3 budgeted retries; then retries are deferred, not attempted.
    rx.wait_for("4 attempts", T, |r| r.seen().len() >= 4).await;
    let row = || async { outbox.channel().get(id).await.unwrap().unwrap() };
    eventually("the 4th failure settled", T, || async {
        row().await.delivery_count == 4
    })
    .await;
    // Each deferral moves the row's send_at without an attempt: see the relay come back to
    // it twice, and attempt nothing.
    for deferral in 1..=2 {
        let before = row().await.send_at;
        eventually(&format!("deferral {deferral}"), T, || async {
            row().await.send_at > before
        })
        .await;
    }
    relay.shutdown().await;
    assert_eq!(rx.seen().len(), 4, "no attempt beyond the budget");
    assert_eq!(row().await.delivery_count, 4);
    assert!(outbox.dlq_list(None, 10).await.unwrap().is_empty());
}

pub async fn stats_report_depth_and_oldest_age_per_partition(store: Store) {
    let outbox = store
        .open(fast_config().partitions(2).build().unwrap())
        .await;
    let msgs: Vec<NewMessage> = (0..10).map(|i| msg(&format!("W/{i}"), "x")).collect();
    outbox.enqueue(msgs).await.unwrap();
    let p0 = (0..10)
        .filter(|i| outbox.partition_of(&format!("W/{i}")) == 0)
        .count() as u64;
    // Paused time: move the clock instead of sleeping.
    tokio::time::advance(Duration::from_millis(30)).await;
    let stats = outbox.stats().await.unwrap();
    assert_eq!(stats[0].depth, p0);
    assert_eq!(stats[1].depth, 10 - p0);
    assert!(
        stats
            .iter()
            .filter(|s| s.depth > 0)
            .all(|s| s.oldest_pending_age_ms >= 30),
        "{stats:?}"
    );
}

pub async fn compaction_deletes_only_acked_rows_past_retention(store: Store) {
    let outbox = store
        .open(fast_config().partitions(1).build().unwrap())
        .await;
    let rx = TestReceiver::new();
    rx.always("Bad/1", Answer::Permanent("nope"));
    outbox
        .enqueue(vec![msg("W/1", "a"), msg("W/2", "b"), msg("Bad/1", "c")])
        .await
        .unwrap();
    outbox
        .store(msg("Later/1", "d").with_delay_ms(60_000))
        .await
        .unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("two delivered", T, |r| r.delivered_count() == 2)
        .await;
    eventually("one dead", T, || async {
        outbox.dlq_list(None, 10).await.unwrap().len() == 1
    })
    .await;
    relay.shutdown().await;
    let ch = outbox.channel();
    // Nothing is older than an hour ago.
    assert_eq!(
        ch.compact(0, outbox.now_ms() - 3_600_000, 100)
            .await
            .unwrap(),
        0
    );
    // Everything acked before "now + 1 s" goes; dead letters and pending rows stay.
    assert_eq!(
        ch.compact(0, outbox.now_ms() + 1_000, 100).await.unwrap(),
        2
    );
    assert_eq!(outbox.dlq_list(None, 10).await.unwrap().len(), 1);
    assert_eq!(outbox.stats().await.unwrap()[0].depth, 1);
}

pub async fn a_delayed_low_id_message_is_not_starved_by_full_batches(store: Store) {
    // Batches stay full while the delayed row, whose id is lower than everything after it,
    // becomes due: it must still be delivered, not starved by the backlog behind it.
    let outbox = store
        .open(
            fast_config()
                .partitions(1)
                .relay_batch_size(5)
                .build()
                .unwrap(),
        )
        .await;
    let rx = TestReceiver::new();
    outbox
        .store(msg("Late/1", "late").with_delay_ms(150))
        .await
        .unwrap();
    let msgs: Vec<NewMessage> = (0..3000)
        .map(|i| msg(&format!("W/{}", i % 300), "x"))
        .collect();
    outbox.enqueue(msgs).await.unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("the delayed message", T, |r| {
        !payloads_of(r, "Late/1").is_empty()
    })
    .await;
    rx.wait_for("everything", T, |r| r.delivered_count() >= 3001)
        .await;
    relay.shutdown().await;
    assert_eq!(rx.delivered_count(), 3001);
}

pub async fn fifo_holds_under_backoff_while_batches_stay_full(store: Store) {
    // Batches stay full while A's head backs off; A's retried head must still go first.
    let config = fast_config()
        .partitions(1)
        .relay_batch_size(5)
        .retry_policy(RetryPolicy {
            max_attempts: 10,
            base_ms: 5,
            cap_ms: 20,
        })
        .build()
        .unwrap();
    let outbox = store.open(config).await;
    let rx = TestReceiver::new();
    rx.script(
        "A/1",
        [
            Answer::Transient("busy"),
            Answer::Capacity(5),
            Answer::Transient("busy"),
        ],
    );
    let mut msgs = Vec::new();
    for i in 0..2000 {
        if i % 100 == 0 {
            msgs.push(msg("A/1", &format!("a{:02}", i / 100)));
        }
        msgs.push(msg(&format!("W/{}", i % 200), "x"));
    }
    outbox.enqueue(msgs).await.unwrap();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("everything", T, |r| r.delivered_count() >= 2020)
        .await;
    relay.shutdown().await;
    let want: Vec<String> = (0..20).map(|i| format!("a{i:02}")).collect();
    assert_eq!(payloads_of(&rx, "A/1"), want);
    assert_eq!(rx.delivered_count(), 2020);
}

pub async fn overwrite_supersedes_a_claimed_row_that_goes_back_to_pending(store: Store) {
    use sluice_outbox::message::{Release, Retry, Settlement};
    let outbox = store.open(fast_config().build().unwrap()).await;
    let hb = |p: &str| msg("Leader/9", p).with_key("hb", Conflict::Overwrite);
    let EnqueueOutcome::Inserted { id: a, .. } = outbox.store(hb("beat1")).await.unwrap() else {
        panic!("first heartbeat not inserted")
    };
    // The relay claims beat1; beat2 cannot replace a claimed row, so it is stored behind it.
    let part = outbox.partition_of("Leader/9");
    let now = outbox.now_ms();
    let claimed = outbox.channel().claim(part, 10, now, 30_000).await.unwrap();
    assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), vec![a]);
    let EnqueueOutcome::Inserted { id: b, .. } = outbox.store(hb("beat2")).await.unwrap() else {
        panic!("second heartbeat not inserted behind the claimed one")
    };
    // beat1's delivery fails: it must not come back, beat2 supersedes it.
    let retry = Settlement {
        retries: vec![Retry {
            id: a,
            send_at: now,
            last_error: "full".into(),
            refused: false,
        }],
        ..Default::default()
    };
    outbox.channel().settle(&retry, now).await.unwrap();
    let stale = outbox.channel().get(a).await.unwrap().unwrap();
    assert!(
        stale.acked,
        "the stale heartbeat is still pending: {stale:?}"
    );
    assert!(!outbox.channel().get(b).await.unwrap().unwrap().acked);
    // The same for a claimed row released without an attempt; the newest stays pending.
    let now = outbox.now_ms();
    let claimed = outbox.channel().claim(part, 10, now, 30_000).await.unwrap();
    assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), vec![b]);
    let EnqueueOutcome::Inserted { id: c, .. } = outbox.store(hb("beat3")).await.unwrap() else {
        panic!("third heartbeat not inserted")
    };
    let release = Settlement {
        releases: vec![Release {
            id: b,
            send_at: now,
        }],
        ..Default::default()
    };
    outbox.channel().settle(&release, now).await.unwrap();
    assert!(outbox.channel().get(b).await.unwrap().unwrap().acked);
    let newest = outbox.channel().get(c).await.unwrap().unwrap();
    assert!(!newest.acked && newest.delivery_count == 0, "{newest:?}");
    // Only the newest is delivered.
    let rx = TestReceiver::new();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("the newest heartbeat", T, |r| r.delivered_count() >= 1)
        .await;
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "Leader/9"), vec!["beat3"]);
}

/// `dispatch`'s immediate attempts give up at the caller's deadline even when the receiver
/// ignores it (the permit is not held longer), and the message stays for the relay; with the
/// deadline already past nothing is attempted.
pub async fn dispatch_gives_up_at_the_callers_deadline(store: Store) {
    let outbox = store
        .open(fast_config().partitions(1).build().unwrap())
        .await;
    let rx = TestReceiver::new();
    rx.script("W/1", [Answer::Stall(10_000)]);
    let t0 = tokio::time::Instant::now();
    let deadline = (t0 + Duration::from_millis(200)).into_std();
    let res = outbox
        .dispatch(vec![msg("W/1", "slow")], &rx, Some(deadline))
        .await
        .unwrap();
    assert_eq!(res.outcomes, [DispatchOutcome::QueuedOutOfTime]);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_millis(1000),
        "the attempt gave up after {waited:?}"
    );
    assert_eq!(
        outbox.limits(),
        vec![(0, "other".to_string(), 10)],
        "the permit is back"
    );
    // Past the deadline already: stored, not attempted.
    let gone = (tokio::time::Instant::now() - Duration::from_millis(1)).into_std();
    let res = outbox
        .dispatch(vec![msg("W/2", "late")], &rx, Some(gone))
        .await
        .unwrap();
    assert_eq!(res.outcomes, [DispatchOutcome::QueuedOutOfTime]);
    assert!(payloads_of(&rx, "W/2").is_empty() && rx.seen().iter().all(|s| s.receiver != "W/2"));
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("both delivered by the relay", T, |r| {
        r.delivered_count() == 2
    })
    .await;
    relay.shutdown().await;
    // The stalled attempt was dropped at the deadline (it never answered) and counted as a
    // failed attempt: the relay's delivery is attempt 2.
    let w1: Vec<(String, u32)> = rx
        .delivered()
        .into_iter()
        .filter(|s| s.receiver == "W/1")
        .map(|s| (String::from_utf8(s.payload).unwrap(), s.attempt))
        .collect();
    assert_eq!(w1, [("slow".to_string(), 2)]);
    assert_eq!(payloads_of(&rx, "W/2"), ["late"]);
}

/// The delivery times (tokio clock) of `receiver`'s deliveries, after `t0`, in ms.
fn delivered_after(rx: &TestReceiver, receiver: &str, t0: tokio::time::Instant) -> Vec<u64> {
    rx.delivered()
        .into_iter()
        .filter(|s| s.receiver == receiver)
        .map(|s| (s.at - t0).as_millis() as u64)
        .collect()
}

/// Durable reminders: each arrives once when due (not before, and within a few ms on an idle
/// relay), a name armed again replaces its pending reminder, a cancelled one never arrives,
/// and pending reminders never hold back the receiver's ordinary messages.
pub async fn reminders_arrive_when_due_named_ones_replace_and_cancelled_ones_never(store: Store) {
    let outbox = store
        .open(fast_config().partitions(2).build().unwrap())
        .await;
    let rx = TestReceiver::new();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    let t0 = tokio::time::Instant::now();
    let remind = |name: &'static str, delay: u64, payload: &'static str| {
        outbox.remind(msg("Clock/1", payload).with_delay_ms(delay), name, 10)
    };
    assert!(remind("", 1_000, "anon").await.unwrap());
    assert!(remind("tick", 500, "first").await.unwrap());
    assert!(remind("tick", 2_000, "second").await.unwrap(), "re-armed");
    assert!(remind("gone", 700, "cancelled").await.unwrap());
    assert!(outbox.cancel_reminder("Clock/1", "gone").await.unwrap());
    assert!(!outbox.cancel_reminder("Clock/1", "gone").await.unwrap());
    assert!(
        !outbox.cancel_reminder("Clock/2", "tick").await.unwrap(),
        "names are per actor"
    );
    assert!(!outbox.cancel_reminder("Clock/1", "").await.unwrap());
    outbox.store(msg("Clock/1", "now")).await.unwrap();
    rx.wait_for("the message and two reminders", T, |r| {
        r.delivered_count() >= 3
    })
    .await;
    // Past the cancelled one's due time and the replaced one's: nothing else arrives.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "Clock/1"), ["now", "anon", "second"]);
    let at = delivered_after(&rx, "Clock/1", t0);
    assert!(
        at[0] < 100,
        "the ordinary message waited for nothing: {at:?}"
    );
    assert!((1_000..1_100).contains(&at[1]), "due at 1000 ms: {at:?}");
    assert!(
        (2_000..2_100).contains(&at[2]),
        "re-armed for 2000 ms: {at:?}"
    );
}

/// Pending reminders are listed soonest due first (all, or one receiver's, up to a limit) with
/// their name, type, size and time to go; a cancelled one, and each one moved into the outbox
/// once due, is listed no more.
pub async fn pending_reminders_are_listed_soonest_first_until_they_are_moved(store: Store) {
    let outbox = store.open(fast_config().build().unwrap()).await;
    for (receiver, name, delay, payload) in [
        ("Clock/1", "tick", 2_000, "tick!"),
        ("Clock/1", "", 1_000, "anonymous"),
        ("Clock/2", "x", 500, ""),
        ("Clock/1", "gone", 60_000, "never"),
    ] {
        let m = NewMessage::new(
            receiver,
            format!("{receiver}:{name}"),
            payload.as_bytes().to_vec(),
        )
        .with_delay_ms(delay);
        assert!(outbox.remind(m, name, 10).await.unwrap());
    }
    assert!(outbox.cancel_reminder("Clock/1", "gone").await.unwrap());
    let listed = |receiver: Option<&'static str>, limit: u32| {
        let outbox = &outbox;
        async move {
            outbox
                .reminders(receiver, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|r| {
                    assert_eq!(r.msg_type, format!("{}:{}", r.receiver, r.name));
                    (r.receiver, r.name, r.due_in_ms, r.payload_bytes)
                })
                .collect::<Vec<_>>()
        }
    };
    let s = |v: &str| v.to_string();
    assert_eq!(
        listed(None, 100).await,
        [
            (s("Clock/2"), s("x"), 500, 0),
            (s("Clock/1"), s(""), 1_000, 9),
            (s("Clock/1"), s("tick"), 2_000, 5),
        ]
    );
    assert_eq!(
        listed(Some("Clock/1"), 100).await,
        [
            (s("Clock/1"), s(""), 1_000, 9),
            (s("Clock/1"), s("tick"), 2_000, 5)
        ]
    );
    assert_eq!(listed(Some("Clock/1"), 1).await.len(), 1);
    assert_eq!(listed(None, 2).await.len(), 2);
    assert!(listed(Some("Clock/3"), 100).await.is_empty());
    let rx = TestReceiver::new();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("the two reminders due first", T, |r| {
        r.delivered_count() >= 2
    })
    .await;
    assert_eq!(
        listed(None, 100)
            .await
            .into_iter()
            .map(|(r, n, ..)| (r, n))
            .collect::<Vec<_>>(),
        [(s("Clock/1"), s("tick"))]
    );
    rx.wait_for("the last reminder", T, |r| r.delivered_count() >= 3)
        .await;
    relay.shutdown().await;
    assert!(listed(None, 100).await.is_empty());
}

/// `max_pending` counts a receiver's pending reminders: one more is refused (nothing stored),
/// re-arming a pending name is not one more, and a cancelled or delivered one frees its place.
pub async fn reminders_past_the_cap_are_refused_but_a_pending_name_can_be_rearmed(store: Store) {
    let outbox = store.open(fast_config().build().unwrap()).await;
    let remind = |name: &'static str, delay: u64| {
        outbox.remind(msg("Capped/1", name).with_delay_ms(delay), name, 2)
    };
    assert!(remind("", 100).await.unwrap());
    assert!(remind("a", 60_000).await.unwrap());
    assert!(!remind("", 60_000).await.unwrap(), "a third is refused");
    assert!(!remind("b", 60_000).await.unwrap(), "a third name too");
    assert!(
        remind("a", 30_000).await.unwrap(),
        "re-arming a pending name"
    );
    // Another receiver has a cap of its own.
    assert!(
        outbox
            .remind(msg("Capped/2", "x").with_delay_ms(1), "", 2)
            .await
            .unwrap()
    );
    assert!(outbox.cancel_reminder("Capped/1", "a").await.unwrap());
    assert!(
        remind("b", 60_000).await.unwrap(),
        "the cancelled one's place"
    );
    // Once the 100 ms one is due and delivered, its place is free too.
    let rx = TestReceiver::new();
    let relay = outbox.start_relay(Arc::new(rx.clone()));
    rx.wait_for("the due reminders", T, |r| r.delivered_count() >= 2)
        .await;
    assert!(remind("c", 60_000).await.unwrap());
    assert!(!remind("d", 60_000).await.unwrap());
    relay.shutdown().await;
    let long = "n".repeat(sluice_outbox::MAX_REMINDER_NAME + 1);
    let err = outbox
        .remind(msg("Capped/3", "x"), &long, 2)
        .await
        .unwrap_err();
    assert!(
        matches!(err, sluice_outbox::Error::InvalidArgument(_)),
        "{err}"
    );
}

/// Reminders are in the store, not in the process: armed before a restart (no relay ran), each
/// arrives after it at its due time, and one already due arrives at once.
pub async fn reminders_armed_before_a_restart_arrive_after_it(store: Store) {
    let config = fast_config().build().unwrap();
    let outbox = store.open(config.clone()).await;
    let t0 = tokio::time::Instant::now();
    for (name, delay) in [("soon", 50), ("later", 3_000)] {
        let m = msg("Sleeper/1", name).with_delay_ms(delay);
        assert!(outbox.remind(m, name, 10).await.unwrap());
    }
    drop(outbox);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let reopened = store.open(config).await;
    let rx = TestReceiver::new();
    let relay = reopened.start_relay(Arc::new(rx.clone()));
    rx.wait_for("both reminders", T, |r| r.delivered_count() >= 2)
        .await;
    relay.shutdown().await;
    assert_eq!(payloads_of(&rx, "Sleeper/1"), ["soon", "later"]);
    let at = delivered_after(&rx, "Sleeper/1", t0);
    assert!(
        (1_000..1_100).contains(&at[0]),
        "overdue: at once after the restart {at:?}"
    );
    assert!((3_000..3_100).contains(&at[1]), "on time {at:?}");
}

/// Hosts sharing a store promote due reminders at once (each host's pump): every reminder is
/// moved into the outbox exactly once.
pub async fn hosts_promoting_at_once_move_each_reminder_once(store: Store) {
    let config = fast_config().partitions(4).build().unwrap();
    let (a, b) = (store.open(config.clone()).await, store.open(config).await);
    for i in 0..600 {
        let m = msg(&format!("Many/{}", i % 50), &i.to_string());
        assert!(a.remind(m, "", 1_000).await.unwrap());
    }
    let now = a.now_ms();
    let drain = |ob: sluice_outbox::Outbox| async move {
        let mut moved = 0;
        loop {
            let p = ob.channel().promote_reminders(now, 16).await.unwrap();
            if p.partitions.is_empty() {
                return moved;
            }
            moved += p.partitions.len();
        }
    };
    let (x, y) = tokio::join!(drain(a.clone()), drain(b.clone()));
    assert_eq!(x + y, 600, "moved by a: {x}, by b: {y}");
    let depth: u64 = a.stats().await.unwrap().iter().map(|s| s.depth).sum();
    assert_eq!(depth, 600, "each reminder is one pending message");
    let next = a.channel().promote_reminders(now, 16).await.unwrap();
    assert_eq!(next, sluice_outbox::Promoted::default(), "none left");
}
