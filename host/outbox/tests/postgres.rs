//! Every outbox semantic against a real Postgres (a fresh database per test, created on the
//! server named by `SLUICE_TEST_POSTGRES_URL`; start one with `eval "$(scripts/postgres.sh)"`;
//! without it these tests fail). The bodies run on paused tokio time, as on SQLite.
mod common;
use common::{Store, bodies};

macro_rules! on_postgres { ($($name:ident),* $(,)?) => { $(
    #[tokio::test(start_paused = true)]
    async fn $name() {
        bodies::$name(Store::postgres().await).await
    }
)* } }

on_postgres!(
    relay_delivers_every_stored_message_once_in_order_per_receiver,
    later_message_never_overtakes_an_earlier_one_backing_off,
    capacity_halves_the_limit_and_backs_off_at_least_retry_after,
    the_trace_context_is_stored_and_handed_to_every_attempt,
    transient_failure_backs_off_without_moving_the_limit,
    permanent_failure_is_dead_lettered_at_once,
    max_attempts_dead_letters_and_unblocks_the_receiver,
    capacity_refusals_never_dead_letter,
    a_cut_off_hosts_failed_attempts_never_dead_letter,
    append_stores_a_repeated_key_once,
    overwrite_replaces_pending_and_never_with_an_older_sequence,
    overwrite_supersedes_a_claimed_row_that_goes_back_to_pending,
    expired_messages_are_dead_lettered_never_delivered,
    dlq_lists_replays_and_purges,
    dispatch_delivers_within_the_limit_and_leaves_the_rest_to_the_relay,
    dispatch_sees_pending_rows_after_restart_and_replay,
    dead_relays_claims_reappear_after_the_lease,
    restart_keeps_delivery_count_and_send_at,
    aimd_limit_follows_a_receiver_whose_capacity_steps_down_then_up,
    retry_budget_defers_retries_beyond_the_budget,
    stats_report_depth_and_oldest_age_per_partition,
    compaction_deletes_only_acked_rows_past_retention,
    a_delayed_low_id_message_is_not_starved_by_full_batches,
    fifo_holds_under_backoff_while_batches_stay_full,
    dispatch_gives_up_at_the_callers_deadline,
    reminders_arrive_when_due_named_ones_replace_and_cancelled_ones_never,
    pending_reminders_are_listed_soonest_first_until_they_are_moved,
    reminders_past_the_cap_are_refused_but_a_pending_name_can_be_rearmed,
    reminders_armed_before_a_restart_arrive_after_it,
    hosts_promoting_at_once_move_each_reminder_once,
);

/// Two hosts (two `Outbox`es, two pools) relay the same partitions of one Postgres: no message
/// is ever delivered by both at the same time, none is lost, and FIFO per receiver holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_on_one_postgres_never_double_deliver_concurrently() {
    use std::sync::Arc;
    use std::time::Duration;
    let store = Store::postgres().await;
    let config = common::fast_config()
        .partitions(2)
        .relay_batch_size(50)
        .build()
        .unwrap();
    let host_a = store.open(config.clone()).await;
    let host_b = store.open(config).await;
    let rx = common::TestReceiver::new();
    let total = 3000;
    let msgs: Vec<sluice_outbox::NewMessage> = (0..total)
        .map(|i| {
            sluice_outbox::NewMessage::new(
                format!("W/{}", i % 100),
                "job",
                format!("{:05}", i / 100).into_bytes(),
            )
        })
        .collect();
    let relay_a = host_a.start_relay(Arc::new(rx.clone()));
    let relay_b = host_b.start_relay(Arc::new(rx.clone()));
    for chunk in msgs.chunks(500) {
        host_a.enqueue(chunk.to_vec()).await.unwrap();
    }
    rx.wait_for("all delivered", Duration::from_secs(60), |r| {
        r.delivered_count() >= total
    })
    .await;
    relay_a.shutdown().await;
    relay_b.shutdown().await;
    assert_eq!(
        rx.concurrent_same_id
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(rx.delivered_count(), total, "no message delivered twice");
    for w in 0..100 {
        let got: Vec<Vec<u8>> = rx
            .delivered()
            .into_iter()
            .filter(|s| s.receiver == format!("W/{w}"))
            .map(|s| s.payload)
            .collect();
        let want: Vec<Vec<u8>> = (0..30).map(|i| format!("{i:05}").into_bytes()).collect();
        assert_eq!(got, want, "FIFO for W/{w} across two relays");
    }
}

/// A chain of slow deliveries to one receiver outlasts its claim's lease. The relay starts no
/// delivery in the last quarter of a lease and gives the rest back, so a second host claiming
/// after the lease never delivers a row the first is still working through: each message
/// once, in order, never two at a time. (Paused time: each delivery takes 150 ms of it.)
#[tokio::test(start_paused = true)]
async fn a_chain_longer_than_its_lease_is_never_delivered_twice_by_two_relays() {
    use common::Answer;
    use std::sync::Arc;
    use std::time::Duration;
    let store = Store::postgres().await;
    let config = common::fast_config()
        .partitions(1)
        .lease_ms(400)
        .build()
        .unwrap();
    let host_a = store.open(config.clone()).await;
    let host_b = store.open(config).await;
    let rx = common::TestReceiver::new();
    rx.script("R/1", (0..6).map(|_| Answer::Stall(150)));
    let msgs = (0..6)
        .map(|i| sluice_outbox::NewMessage::new("R/1", "job", format!("m{i}").into_bytes()))
        .collect();
    host_a.enqueue(msgs).await.unwrap();
    let relay_a = host_a.start_relay(Arc::new(rx.clone()));
    let relay_b = host_b.start_relay(Arc::new(rx.clone()));
    rx.wait_for("all six", Duration::from_secs(60), |r| {
        r.delivered_count() >= 6
    })
    .await;
    // Once every row is acked no relay can claim one again, and shutting the relays down
    // waits for any delivery still in flight.
    common::eventually("all acked", Duration::from_secs(60), || async {
        host_a.stats().await.unwrap()[0].depth == 0
    })
    .await;
    relay_a.shutdown().await;
    relay_b.shutdown().await;
    let got: Vec<String> = rx
        .seen()
        .into_iter()
        .map(|s| String::from_utf8(s.payload).unwrap())
        .collect();
    assert_eq!(
        got,
        ["m0", "m1", "m2", "m3", "m4", "m5"],
        "once each, in order"
    );
    assert_eq!(
        rx.concurrent_same_id
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

/// One host relays a partition at a time: rows claimed by a host that died are delivered by
/// another once the dead host's partition lease ends (not before), and a host that stops its
/// relay gives the partition up at once.
#[tokio::test(start_paused = true)]
async fn another_host_takes_a_partition_over_after_the_lease_or_at_once_when_released() {
    use std::sync::Arc;
    use std::time::Duration;
    let store = Store::postgres().await;
    let config = common::fast_config()
        .partitions(1)
        .lease_ms(800)
        .build()
        .unwrap();
    let host_a = store.open(config.clone()).await;
    let host_b = store.open(config).await;
    let msg = |p: &str| sluice_outbox::NewMessage::new("W/1", "job", p.as_bytes().to_vec());
    host_a.store(msg("m0")).await.unwrap();
    // Host A claims it and dies without settling.
    let t0 = tokio::time::Instant::now();
    let claimed = host_a
        .channel()
        .claim(0, 10, host_a.now_ms(), 800)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let rx = common::TestReceiver::new();
    let relay_b = host_b.start_relay(Arc::new(rx.clone()));
    rx.wait_for("m0 via host B", Duration::from_secs(30), |r| {
        r.delivered_count() == 1
    })
    .await;
    assert!(
        rx.seen()[0].at - t0 >= Duration::from_millis(800),
        "host B delivered before host A's lease ended"
    );
    // B stops relaying and gives the partition up: A takes it over at once.
    relay_b.shutdown().await;
    let relay_a = host_a.start_relay(Arc::new(rx.clone()));
    let t1 = tokio::time::Instant::now();
    host_b.store(msg("m1")).await.unwrap();
    rx.wait_for("m1 via host A", Duration::from_secs(30), |r| {
        r.delivered_count() == 2
    })
    .await;
    assert!(
        rx.seen()[1].at - t1 < Duration::from_millis(400),
        "host A waited for a lease host B had given up"
    );
    relay_a.shutdown().await;
    let got: Vec<Vec<u8>> = rx.delivered().into_iter().map(|s| s.payload).collect();
    assert_eq!(got, [b"m0".to_vec(), b"m1".to_vec()]);
}

/// A cluster member that dies is seen gone by the others long before its partition lease
/// (30 s by default) would lapse. Ending the leases held under its name lets the next owner
/// take the partition at once; the leases of another name, and this channel's own, are left
/// alone; and a channel renames itself only while it leases nothing.
#[tokio::test(start_paused = true)]
async fn a_dead_lessees_partitions_are_taken_at_once_when_its_leases_are_ended() {
    use std::sync::Arc;
    use std::time::Duration;
    let store = Store::postgres().await;
    let config = common::fast_config()
        .partitions(2)
        .lease_ms(30_000)
        .build()
        .unwrap();
    let host_a = store.open(config.clone()).await;
    let host_b = store.open(config.clone()).await;
    let host_c = store.open(config).await;
    host_a.channel().set_lessee("a/1").unwrap();
    host_c.channel().set_lessee("c/1").unwrap();
    let in_partition = |p: u32| {
        (0..)
            .map(|i| format!("W/{i}"))
            .find(|r| host_a.partition_of(r) == p)
            .unwrap()
    };
    let (w0, w1) = (in_partition(0), in_partition(1));
    let msg = |w: &str, p: &str| sluice_outbox::NewMessage::new(w, "job", p.as_bytes().to_vec());
    host_a.store(msg(&w0, "m0")).await.unwrap();
    host_a.store(msg(&w1, "n0")).await.unwrap();
    // A leases partition 0 and claims its row, C partition 1; then both "die".
    let now = host_a.now_ms();
    assert_eq!(
        host_a
            .channel()
            .claim(0, 10, now, 30_000)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        host_c
            .channel()
            .claim(1, 10, now, 30_000)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        host_a.channel().set_lessee("a/2").is_err(),
        "renamed while leasing a partition"
    );
    let rx = common::TestReceiver::new();
    let relay_b = host_b.start_relay(Arc::new(rx.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        rx.delivered_count(),
        0,
        "B relayed partitions A and C lease"
    );
    // The cluster saw A gone: its lease ends, C's does not.
    assert!(host_b.channel().end_leases_of("b/1").await.unwrap() == 0);
    assert_eq!(host_b.channel().end_leases_of("a/1").await.unwrap(), 1);
    assert!(
        host_a.channel().end_leases_of("a/1").await.is_err(),
        "a channel ended its own leases"
    );
    let t = tokio::time::Instant::now();
    rx.wait_for("m0 via B", Duration::from_secs(30), |r| {
        r.delivered_count() == 1
    })
    .await;
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "B waited {:?} for a partition whose lease was ended",
        t.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let got: Vec<Vec<u8>> = rx.delivered().into_iter().map(|s| s.payload).collect();
    assert_eq!(
        got,
        [b"m0".to_vec()],
        "C's partition was taken while C's lease held"
    );
    relay_b.shutdown().await;
}

/// A cluster member's share changes: a partition one running relay is told to give up moves
/// to the running relay told to take it after the current batch, long before the lease the
/// first held would lapse, and that receiver's messages stay in order across the two hosts.
#[tokio::test(start_paused = true)]
async fn a_reassigned_partition_moves_between_running_relays_without_waiting_for_its_lease() {
    use std::sync::Arc;
    use std::time::Duration;
    let store = Store::postgres().await;
    let config = common::fast_config()
        .partitions(2)
        .lease_ms(30_000)
        .build()
        .unwrap();
    let host_a = store.open(config.clone()).await;
    let host_b = store.open(config).await;
    let in_partition = |p: u32| {
        (0..)
            .map(|i| format!("W/{i}"))
            .find(|r| host_a.partition_of(r) == p)
            .unwrap()
    };
    let (w0, w1) = (in_partition(0), in_partition(1));
    let batch = |range: std::ops::Range<u32>| {
        range
            .flat_map(|i| {
                [&w0, &w1].map(|w| {
                    sluice_outbox::NewMessage::new(
                        w.as_str(),
                        "job",
                        format!("{i:03}").into_bytes(),
                    )
                })
            })
            .collect::<Vec<_>>()
    };
    let (rx_a, rx_b) = (common::TestReceiver::new(), common::TestReceiver::new());
    let mut relay_a = host_a.start_relay(Arc::new(rx_a.clone()));
    host_a.enqueue(batch(0..50)).await.unwrap();
    rx_a.wait_for("the first 100 via A", Duration::from_secs(30), |r| {
        r.delivered_count() == 100
    })
    .await;
    // B wants partition 1 while A still holds it: B relays nothing.
    let relay_b = host_b.start_relay_for(Arc::new(rx_b.clone()), [1]);
    host_a.enqueue(batch(50..60)).await.unwrap();
    rx_a.wait_for("the next 20 via A", Duration::from_secs(30), |r| {
        r.delivered_count() == 120
    })
    .await;
    assert_eq!(rx_b.delivered_count(), 0, "B relayed a partition A holds");
    let t = tokio::time::Instant::now();
    relay_a.assign([0]).await;
    host_a.enqueue(batch(60..100)).await.unwrap();
    rx_b.wait_for("partition 1 via B", Duration::from_secs(30), |r| {
        r.delivered_count() == 40
    })
    .await;
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "B waited {:?} for a partition A had given up (lease 30 s)",
        t.elapsed()
    );
    rx_a.wait_for("partition 0 via A", Duration::from_secs(30), |r| {
        r.delivered_count() == 160
    })
    .await;
    assert_eq!(
        (relay_a.partitions(), relay_b.partitions()),
        (vec![0], vec![1])
    );
    let payloads = |rx: &common::TestReceiver, w: &str| -> Vec<Vec<u8>> {
        rx.delivered()
            .into_iter()
            .filter(|s| s.receiver == w)
            .map(|s| s.payload)
            .collect()
    };
    let want =
        |n: u32| -> Vec<Vec<u8>> { (0..n).map(|i| format!("{i:03}").into_bytes()).collect() };
    assert_eq!(
        payloads(&rx_a, &w0),
        want(100),
        "partition 0 stayed on A, in order"
    );
    let mut w1_all = payloads(&rx_a, &w1);
    w1_all.extend(payloads(&rx_b, &w1));
    assert_eq!(
        w1_all,
        want(100),
        "partition 1: A's then B's, once each, in order"
    );
    relay_a.shutdown().await;
    relay_b.shutdown().await;
}

/// A relay's claims live in its host, so another host's OVERWRITE can replace a row the relay
/// is delivering. The relay's settlement then leaves the row alone (it is not the version it
/// claimed): the new content stays pending and is delivered, so the last write still wins.
#[tokio::test(start_paused = true)]
async fn an_overwrite_from_another_host_behind_a_claim_is_still_delivered() {
    use sluice_outbox::message::Settlement;
    use sluice_outbox::{Conflict, EnqueueOutcome, NewMessage};
    use std::sync::Arc;
    use std::time::Duration;
    let store = Store::postgres().await;
    let config = common::fast_config().partitions(1).build().unwrap();
    let host_a = store.open(config.clone()).await;
    let host_b = store.open(config).await;
    let hb = |p: &str| {
        NewMessage::new("Leader/1", "hb", p.as_bytes().to_vec()).with_key("hb", Conflict::Overwrite)
    };
    let EnqueueOutcome::Inserted { id, .. } = host_a.store(hb("beat1")).await.unwrap() else {
        panic!("beat1 not stored")
    };
    let now = host_a.now_ms();
    let claimed = host_a.channel().claim(0, 10, now, 30_000).await.unwrap();
    assert_eq!(claimed.iter().map(|m| m.id).collect::<Vec<_>>(), [id]);
    // Host B cannot see A's claim: it replaces the row in place.
    assert_eq!(
        host_b.store(hb("beat2")).await.unwrap(),
        EnqueueOutcome::Replaced { id }
    );
    // A delivered beat1 and acks the row it claimed: that version is gone, nothing is acked.
    let ack = Settlement {
        acks: vec![id],
        ..Default::default()
    };
    host_a.channel().settle(&ack, now).await.unwrap();
    let row = host_a.channel().get(id).await.unwrap().unwrap();
    assert!(
        !row.acked,
        "the overwritten row was acked: beat2 would be lost"
    );
    assert_eq!(&row.payload[..], b"beat2");
    let rx = common::TestReceiver::new();
    let relay = host_a.start_relay(Arc::new(rx.clone()));
    rx.wait_for("beat2", Duration::from_secs(30), |r| {
        r.delivered_count() == 1
    })
    .await;
    relay.shutdown().await;
    assert_eq!(rx.delivered()[0].payload, b"beat2");
    assert!(host_a.channel().get(id).await.unwrap().unwrap().acked);
}
