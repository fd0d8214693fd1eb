//! Bounded mailboxes seen from real guests: the exact RESOURCE_EXHAUSTED string, drop
//! strategies and their counters, and strictly sequential turns.

use std::time::Duration;

use serde_json::json;
use sluice_runtime::{ChildSpec, ErrorCode, MailboxStrategy, TellReceipt};
use sluice_tests::{
    Lang, host_with, install_metrics, json, metric, per_language, poly_host, test_config,
    wait_until,
};

const T: Duration = Duration::from_secs(20);
/// The bound in the per-language test: a language's first test builds its guests.
const T_LANG: Duration = Duration::from_secs(60);

// One body per behaviour, run against every guest language (Rust first): a guest's tell into
// a full `error` mailbox gets the typed RESOURCE_EXHAUSTED with its retry hint.
per_language!(full_mailbox_reaches_guest_as_resource_exhausted);

async fn full_mailbox_reaches_guest_as_resource_exhausted(lang: Lang) {
    let Some(host) = poly_host(
        test_config(),
        lang,
        vec![
            (
                ChildSpec::new("Slow", "slow.wasm").mailbox(2, MailboxStrategy::Error),
                "slow",
            ),
            (ChildSpec::new("Flood", "flood.wasm"), "flood"),
        ],
    )
    .await
    else {
        return;
    };
    // Activate the flooder first so its instantiation does not eat into the long turn.
    host.ask("Flood/1", "ok", "", T_LANG).await.ok();
    // Occupy the slow actor with a long turn, then flood its two-slot mailbox from a guest.
    host.tell("Slow/1", "sleep", "3000").await.unwrap();
    wait_until(T_LANG, "the long turn to start", || {
        host.inflight_turns() == 1
    })
    .await;
    let r = host
        .ask(
            "Flood/1",
            "flood",
            json!({"to": "Slow/1", "msg_type": "sleep", "count": 10}).to_string(),
            T_LANG,
        )
        .await
        .unwrap();
    let r = json(&r);
    assert!(r["queued"].as_u64().unwrap() <= 3, "{r}");
    assert!(r["refused"].as_u64().unwrap() >= 7, "{r}");
    assert_eq!(r["first_error_type"], "ResourceExhausted", "{r}");
    let msg = r["first_error"].as_str().unwrap();
    let hint: u64 = msg
        .strip_prefix("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not the canonical message: {msg:?}"))
        .parse()
        .expect("numeric hint");
    assert!(hint >= 1, "{msg}");
}

/// A host whose `Slow` actors have a one-slot `error` mailbox, with `id` already inside a turn
/// of `ms` milliseconds.
async fn one_slot_actor_in_a_long_turn(id: &str, ms: &str) -> sluice_runtime::Host {
    let host = host_with(
        test_config(),
        vec![(
            ChildSpec::new("Slow", "slow.wasm").mailbox(1, MailboxStrategy::Error),
            "slow",
        )],
    )
    .await;
    host.tell(id, "sleep", ms.to_owned()).await.unwrap();
    wait_until(T, "the long turn to start", || host.inflight_turns() == 1).await;
    host
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_tell_into_full_error_mailbox_is_typed_with_a_hint() {
    let host = one_slot_actor_in_a_long_turn("Slow/a", "800").await;
    // One of the next two fits (the first may already be running); the bound holds after that.
    let mut refused = None;
    for _ in 0..3 {
        if let Err(e) = host.tell("Slow/a", "sleep", "1").await {
            refused = Some(e);
            break;
        }
    }
    let e = refused.expect("a one-slot mailbox refuses");
    assert_eq!(e.code, ErrorCode::ResourceExhausted);
    assert!(e.is_capacity());
    assert_eq!(
        e.to_string(),
        format!(
            "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms={})",
            e.retry_after_ms.unwrap()
        )
    );
}

/// A fresh actor has no finished turn to estimate from; while its first turn runs long, the
/// refusal's hint still grows with it (before, it said 1 ms for the whole turn, and an outbox
/// relay honouring it could spend every attempt inside one busy turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hint_covers_a_long_first_turn() {
    let host = one_slot_actor_in_a_long_turn("Slow/h", "3000").await;
    let _ = host.tell("Slow/h", "sleep", "1").await; // fills the one slot (or is refused already)
    // Within the 3 s turn (so no turn has finished and the mean is still unknown), the hint
    // reaches 100 ms.
    wait_until(
        Duration::from_millis(2000),
        "a hint of at least 100 ms during the first turn",
        || match sluice_tests::ready(host.tell("Slow/h", "sleep", "1")) {
            Err(e) => e.retry_after_ms.is_some_and(|ms| ms >= 100),
            Ok(_) => false,
        },
    )
    .await;
    assert_eq!(host.inflight_turns(), 1, "still inside the first turn");
}

/// `sluice_mailbox_dropped_total` for actor type `ty` and `strategy`.
fn dropped(ty: &str, strategy: &str) -> f64 {
    metric(
        "sluice_mailbox_dropped_total",
        &[("actor_type", ty), ("strategy", strategy)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_oldest_displaces_the_oldest_and_reports_it() {
    install_metrics();
    // Type names of this test only: the counters are per process.
    let host = host_with(
        test_config(),
        vec![(
            ChildSpec::new("SlowDO", "slow.wasm").mailbox(2, MailboxStrategy::DropOldest),
            "slow",
        )],
    )
    .await;
    // Hold SlowDO/1 in a long turn, then overfill its two-slot mailbox.
    host.tell("SlowDO/1", "sleep", "1500").await.unwrap();
    wait_until(T, "the long turn to start", || host.inflight_turns() == 1).await;
    let mut receipts: Vec<TellReceipt> = Vec::new();
    for i in 0..6 {
        receipts.push(host.tell("SlowDO/1", "sleep", i.to_string()).await.unwrap());
    }
    use TellReceipt::{DisplacedOldest as D, Queued as Q};
    assert_eq!(receipts, [Q, Q, D, D, D, D]);
    assert_eq!(dropped("SlowDO", "drop_oldest"), 4.0);
    // An ask that gets displaced learns it rather than hanging.
    let ask = host.ask("SlowDO/1", "sleep", "0", T);
    tokio::pin!(ask);
    // Poll the ask once so its message is queued (displacing one), then push it out.
    tokio::select! {
        biased;
        r = &mut ask => panic!("ask finished early: {r:?}"),
        _ = std::future::ready(()) => {}
    }
    for i in 0..3 {
        assert_eq!(
            host.tell("SlowDO/1", "sleep", i.to_string()).await.unwrap(),
            D
        );
    }
    let e = ask.await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ResourceExhausted, "{e}");
    assert!(e.to_string().contains("drop_oldest"), "{e}");
    // Every displaced message counted once: 4 tells, the ask's own arrival, 3 more tells.
    assert_eq!(dropped("SlowDO", "drop_oldest"), 8.0);
    assert_eq!(dropped("SlowDO", "drop_newest"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_newest_discards_the_incoming_message_and_says_so() {
    install_metrics();
    let host = host_with(
        test_config(),
        vec![(
            ChildSpec::new("SlowDN", "slow.wasm").mailbox(2, MailboxStrategy::DropNewest),
            "slow",
        )],
    )
    .await;
    host.tell("SlowDN/1", "sleep", "1500").await.unwrap();
    wait_until(T, "the long turn to start", || host.inflight_turns() == 1).await;
    let mut receipts: Vec<TellReceipt> = Vec::new();
    for _ in 0..6 {
        receipts.push(host.tell("SlowDN/1", "sleep", "1").await.unwrap());
    }
    use TellReceipt::{DroppedNewest as N, Queued as Q};
    assert_eq!(receipts, [Q, Q, N, N, N, N]);
    let e = host.ask("SlowDN/1", "sleep", "1", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ResourceExhausted, "{e}");
    assert!(e.to_string().contains("drop_newest"), "{e}");
    assert_eq!(dropped("SlowDN", "drop_newest"), 5.0);
    assert_eq!(dropped("SlowDN", "drop_oldest"), 0.0);
}

/// A guest telling into a full `drop_*` mailbox gets the receipt for every message, and the
/// mailbox keeps the messages the strategy says it keeps.
async fn guest_sees_drops(strategy: MailboxStrategy, ty: &str, label: &str) -> Vec<String> {
    install_metrics();
    let host = host_with(
        test_config(),
        vec![
            (ChildSpec::new(ty, "echo.wasm").mailbox(2, strategy), "echo"),
            (ChildSpec::new("Gate", "slow.wasm"), "slow"),
            (ChildSpec::new("Flood", "flood.wasm"), "flood"),
        ],
    )
    .await;
    // The echo actor's turn waits on an ask to a slow actor, so its mailbox fills.
    let target = format!("{ty}/1");
    let req = json!({"to": "Gate/1", "msg_type": "sleep", "payload": "800", "timeout_ms": 10_000});
    host.tell(&target, "ask", req.to_string()).await.unwrap();
    wait_until(T, "the echo turn and the gate's turn to start", || {
        host.inflight_turns() == 2
    })
    .await;
    let r = host
        .ask(
            "Flood/1",
            "flood",
            json!({"to": target, "msg_type": "record", "count": 10}).to_string(),
            T,
        )
        .await
        .unwrap();
    let r = json(&r);
    let (displaced, dropped_n) = match strategy {
        MailboxStrategy::DropOldest => (8, 0),
        _ => (0, 8),
    };
    assert_eq!(
        r,
        json!({"queued": 2, "displaced": displaced, "dropped": dropped_n, "refused": 0,
            "first_error": null, "first_error_type": null}),
    );
    assert_eq!(dropped(ty, label), 8.0);
    // Ask for the record only once the two kept messages are handled (an ask into the full
    // mailbox would itself displace or be dropped).
    wait_until(T, "the kept messages to be handled", || {
        host.inflight_turns() == 0 && host.status().iter().all(|s| s.queued == 0)
    })
    .await;
    sluice_tests::recorded_by(&host, &target).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_telling_into_drop_oldest_gets_displaced_receipts_and_the_newest_are_kept() {
    let kept = guest_sees_drops(MailboxStrategy::DropOldest, "EchoDO", "drop_oldest").await;
    assert_eq!(kept, ["8", "9"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_telling_into_drop_newest_gets_dropped_receipts_and_the_oldest_are_kept() {
    let kept = guest_sees_drops(MailboxStrategy::DropNewest, "EchoDN", "drop_newest").await;
    assert_eq!(kept, ["0", "1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_of_one_actor_never_overlap_under_concurrent_senders() {
    let host = host_with(
        test_config(),
        vec![(
            ChildSpec::new("Echo", "echo.wasm").mailbox(10_000, MailboxStrategy::Error),
            "echo",
        )],
    )
    .await;
    // 4 concurrent senders x 200 records; the actor's list must contain every item exactly
    // once, and each sender's items in its send order (one turn at a time, FIFO).
    let mut tasks = Vec::new();
    for s in 0..4 {
        let h = host.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..200 {
                h.tell("Echo/seq", "record", format!("{s}:{i}"))
                    .await
                    .unwrap();
                if i % 50 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let r = json(&host.ask("Echo/seq", "recorded", "", T).await.unwrap());
    let items: Vec<&str> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(items.len(), 800);
    for s in 0..4 {
        let mine: Vec<u32> = items
            .iter()
            .filter_map(|it| it.strip_prefix(&format!("{s}:")))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(
            mine,
            (0..200).collect::<Vec<_>>(),
            "sender {s} out of order"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redeploy_with_new_mailbox_bounds_applies_to_live_actors_and_drops_nothing() {
    let spec = |cap, strategy| ChildSpec::new("SlowRe", "slow.wasm").mailbox(cap, strategy);
    let host = host_with(
        test_config(),
        vec![(spec(2, MailboxStrategy::Error), "slow")],
    )
    .await;
    host.tell("SlowRe/1", "sleep", "5000").await.unwrap();
    wait_until(T, "the long turn to start", || host.inflight_turns() == 1).await;
    let tell = || sluice_tests::ready(host.tell("SlowRe/1", "sleep", "1"));
    assert_eq!(tell().unwrap(), TellReceipt::Queued);
    assert_eq!(tell().unwrap(), TellReceipt::Queued);
    assert_eq!(tell().unwrap_err().code, ErrorCode::ResourceExhausted);
    // Grow the live actor's mailbox while its turn runs.
    let slow = std::fs::read(sluice_tests::rust_guest("slow")).unwrap();
    let v = host
        .deploy(spec(5, MailboxStrategy::Error), slow.clone())
        .await
        .unwrap();
    assert_eq!(v, 2);
    for _ in 0..3 {
        assert_eq!(tell().unwrap(), TellReceipt::Queued);
    }
    assert_eq!(tell().unwrap_err().code, ErrorCode::ResourceExhausted);
    // Shrink it: the five queued stay, new ones meet the new strategy.
    host.deploy(spec(1, MailboxStrategy::DropNewest), slow)
        .await
        .unwrap();
    assert_eq!(tell().unwrap(), TellReceipt::DroppedNewest);
    assert_eq!(host.status()[0].queued, 5);
    assert_eq!(
        host.inflight_turns(),
        1,
        "all of this happened during the first turn"
    );
}
