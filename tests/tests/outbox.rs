//! The outbox through the public surface: a Rust guest's `outbox.dispatch` and
//! `outbox.tell-reliable`, the relay delivering into real actors, the DLQ, and restarts.

use std::time::Duration;

use serde_json::json;
use sluice_outbox::{DlqSelector, NewMessage, Outbox, OutboxConfig, RetryPolicy};
use sluice_runtime::{ChildSpec, DeliveryPath, Host, MailboxStrategy};
use sluice_tests::{
    host_with, install_metrics, json, metric, recorded_by as recorded, rust_guest, test_config,
    wait_until,
};

const T: Duration = Duration::from_secs(30);

/// Default backoff, but enough attempts that a receiver kept busy on purpose (a 400 ms turn)
/// can never exhaust them: with the default 5, full jitter may draw four short delays that
/// all land inside the busy turn, and the test would see a dead letter by chance.
fn patient() -> OutboxConfig {
    OutboxConfig {
        retry_policy: RetryPolicy {
            max_attempts: 30,
            ..OutboxConfig::default().retry_policy
        },
        ..OutboxConfig::default()
    }
}

fn fast_retries() -> OutboxConfig {
    OutboxConfig {
        retry_policy: RetryPolicy {
            max_attempts: 3,
            base_ms: 5,
            cap_ms: 50,
        },
        ..OutboxConfig::default()
    }
}

async fn outbox_at(dir: &std::path::Path, cfg: OutboxConfig) -> Outbox {
    Outbox::open_sqlite(dir.join("outbox.db"), cfg)
        .await
        .expect("outbox opens")
}

async fn pending(host: &Host) -> u64 {
    host.outbox()
        .unwrap()
        .stats()
        .await
        .unwrap()
        .iter()
        .map(|p| p.depth)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_dispatch_reaches_every_target_once_and_keys_dedupe() {
    let dir = tempfile::tempdir().unwrap();
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    host.attach_outbox(outbox_at(dir.path(), patient()).await);
    let targets: Vec<String> = (0..10).map(|i| format!("Echo/w{i}")).collect();
    let req = json!({"targets": targets, "msg_type": "record", "payload": "task-1", "idempotency_key": "task-1"});
    for round in 0..2 {
        let r = json(
            &host
                .ask("Echo/leader", "dispatch", req.to_string(), T)
                .await
                .unwrap(),
        );
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(counted(&r), 10, "round {round}: {r}");
        if round == 1 {
            // The same key again: every target absorbed, none stored twice.
            assert_eq!(r["deduplicated"], 10, "round {round}: {r}");
        }
    }
    let h = host.clone();
    wait_until(T, "the outbox to drain", || futures_block(pending(&h)) == 0).await;
    for t in &targets {
        assert_eq!(
            recorded(&host, t).await,
            vec!["task-1"],
            "{t} processed the task exactly once"
        );
    }
    let principal =
        json(&host.ask("Echo/w0", "recorded", "", T).await.unwrap())["envelopes"][0]["sender"]
            .clone();
    assert_eq!(principal, "Echo/leader");
}

/// The four counts of a testkit `dispatch` report, added up after checking that they are the
/// per-target outcomes counted (so the sum is the number of targets).
fn counted(r: &serde_json::Value) -> u64 {
    let outcomes: Vec<&str> = r["outcomes"]
        .as_array()
        .unwrap_or_else(|| panic!("no outcomes: {r}"))
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    let n = |f: fn(&str) -> bool| outcomes.iter().filter(|o| f(o)).count() as u64;
    let count = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("no {k}: {r}"));
    assert_eq!(count("delivered"), n(|o| o == "delivered"), "{r}");
    assert_eq!(count("deduplicated"), n(|o| o == "deduplicated"), "{r}");
    assert_eq!(count("queued"), n(|o| o.starts_with("queued-")), "{r}");
    assert_eq!(
        count("dead_lettered"),
        n(|o| matches!(o, "not-found" | "expired" | "dead-lettered")),
        "{r}"
    );
    outcomes.len() as u64
}

/// Polls a future to completion on the current runtime from a sync closure.
fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_into_full_mailboxes_is_queued_refused_then_relayed_with_nothing_lost() {
    install_metrics();
    let dir = tempfile::tempdir().unwrap();
    let host = host_with(
        test_config(),
        vec![
            (
                ChildSpec::new("Slow", "slow.wasm").mailbox(1, MailboxStrategy::Error),
                "slow",
            ),
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
        ],
    )
    .await;
    host.attach_outbox(outbox_at(dir.path(), patient()).await);
    // Hold four workers in long turns with full mailboxes.
    for i in 0..4 {
        host.tell(&format!("Slow/{i}"), "sleep", "400")
            .await
            .unwrap();
    }
    wait_until(T, "all four busy", || host.inflight_turns() == 4).await;
    for i in 0..4 {
        host.tell(&format!("Slow/{i}"), "sleep", "1").await.unwrap();
    }
    let targets: Vec<String> = (0..4).map(|i| format!("Slow/{i}")).collect();
    let r = json(
        &host
            .ask(
                "Echo/leader",
                "dispatch",
                json!({"targets": targets, "msg_type": "sleep", "payload": "1"}).to_string(),
                T,
            )
            .await
            .unwrap(),
    );
    assert_eq!(counted(&r), 4, "{r}");
    let outcomes = r["outcomes"].as_array().unwrap();
    let refused = outcomes.iter().filter(|o| *o == "queued-refused").count();
    assert!(refused >= 1, "full mailboxes refuse: {r}");
    assert!(
        outcomes
            .iter()
            .all(|o| *o == "delivered" || *o == "queued-refused" || *o == "queued-at-limit"),
        "a busy receiver is refused or waits for a permit, never dead-lettered: {r}"
    );
    let h = host.clone();
    wait_until(T, "the relay to deliver every queued target", || {
        futures_block(pending(&h)) == 0
    })
    .await;
    let dead = host.outbox().unwrap().dlq_list(None, 100).await.unwrap();
    assert!(dead.is_empty(), "nothing dead-lettered: {dead:?}");
    // The AIMD limiter's signals are counted (other tests of this binary only add to them).
    assert!(metric("sluice_outbox_limiter_rejection_total", &[]) >= refused as f64);
    assert!(metric("sluice_outbox_limiter_success_total", &[]) >= 4.0);
}

/// Flow control never turns a capacity limit into a stopped actor or a dead letter: 10,000
/// messages dispatched to 40 keys of a type capped at 4 live activations (20 ms turns,
/// mailboxes of 2), under the DEFAULT retry policy (5 attempts), are all delivered and run,
/// with an empty DLQ and no actor stopped. Refused activations reach the relay as capacity
/// signals (the limiter halves, the message backs off) and never count as attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_past_the_activation_cap_delivers_everything_and_dead_letters_nothing() {
    install_metrics();
    let dir = tempfile::tempdir().unwrap();
    let host = host_with(
        test_config(),
        vec![
            (
                ChildSpec::new("Capped", "slow.wasm")
                    .mailbox(2, MailboxStrategy::Error)
                    .max_activations(4),
                "slow",
            ),
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
        ],
    )
    .await;
    let cfg = OutboxConfig {
        actor_types: vec!["Capped".into(), "Echo".into()],
        ..OutboxConfig::default()
    };
    host.attach_outbox(outbox_at(dir.path(), cfg).await);
    let targets: Vec<String> = (0..40).map(|i| format!("Capped/k{i}")).collect();
    let req = json!({"targets": targets, "msg_type": "sleep", "payload": "20"}).to_string();
    for round in 0..250 {
        let r = json(
            &host
                .ask("Echo/leader", "dispatch", req.clone(), T)
                .await
                .unwrap(),
        );
        assert_eq!(r["ok"], true, "round {round}: {r}");
    }
    let h = host.clone();
    wait_until(
        Duration::from_secs(900),
        "the relay to deliver all 10,000",
        || futures_block(pending(&h)) == 0,
    )
    .await;
    let turns = || {
        metric(
            "sluice_turns_total",
            &[("actor_type", "Capped"), ("outcome", "ok")],
        )
    };
    wait_until(T, "every delivered message's turn to run", || {
        turns() >= 10_000.0
    })
    .await;
    assert_eq!(turns(), 10_000.0, "each message ran exactly once");
    let dead = host.outbox().unwrap().dlq_list(None, 10).await.unwrap();
    assert!(dead.is_empty(), "nothing dead-lettered: {dead:?}");
    assert_eq!(sluice_tests::type_status(&host, "Capped").stopped, 0);
    assert_eq!(
        metric("sluice_actor_stopped_total", &[("actor_type", "Capped")]),
        0.0
    );
    // The cap was really hit: the relay saw capacity refusals.
    assert!(
        metric(
            "sluice_outbox_limiter_rejection_total",
            &[("actor_type", "Capped")]
        ) > 0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tell_reliable_goes_direct_or_to_the_outbox_and_always_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let host = host_with(
        test_config(),
        vec![
            (
                ChildSpec::new("Slow", "slow.wasm").mailbox(1, MailboxStrategy::Error),
                "slow",
            ),
            (
                ChildSpec::new("Echo", "echo.wasm").mailbox(1, MailboxStrategy::Error),
                "echo",
            ),
        ],
    )
    .await;
    // Without an outbox the import is a typed UNAVAILABLE.
    let r = json(
        &host
            .ask(
                "Echo/a",
                "tell_reliable",
                r#"{"to":"Echo/b","msg_type":"record","payload":"x"}"#,
                T,
            )
            .await
            .unwrap(),
    );
    assert_eq!(r["error"]["type"], "Unavailable", "{r}");
    // Default retries: capacity refusals count as attempts, so give the busy receiver time.
    host.attach_outbox(outbox_at(dir.path(), patient()).await);
    assert_eq!(
        host.tell_reliable("Echo/b", "record", "direct")
            .await
            .unwrap(),
        DeliveryPath::Direct
    );
    // A busy receiver with a full mailbox: the guest's tell_reliable falls back to the outbox.
    host.tell("Slow/1", "sleep", "300").await.unwrap();
    wait_until(T, "slow busy", || host.inflight_turns() == 1).await;
    host.tell("Slow/1", "sleep", "1").await.unwrap();
    let r = json(
        &host
            .ask(
                "Echo/a",
                "tell_reliable",
                r#"{"to":"Slow/1","msg_type":"sleep","payload":"2"}"#,
                T,
            )
            .await
            .unwrap(),
    );
    assert_eq!(r["path"], "outbox", "{r}");
    let h = host.clone();
    wait_until(T, "the stored message to be relayed", || {
        futures_block(pending(&h)) == 0
    })
    .await;
    assert!(
        host.outbox()
            .unwrap()
            .dlq_list(None, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_message_is_dead_lettered_after_max_attempts_and_replay_after_a_fix_delivers_it() {
    let dir = tempfile::tempdir().unwrap();
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    let ob = host.attach_outbox(outbox_at(dir.path(), fast_retries()).await);
    // `call` mode: delivered only when the handler succeeds; echo's `fail` always fails.
    let r = json(
        &host
            .ask(
                "Echo/leader",
                "dispatch",
                json!({"targets": ["Echo/w"], "msg_type": "fail", "payload": "{}", "mode": "call"})
                    .to_string(),
                T,
            )
            .await
            .unwrap(),
    );
    // The handler's error may pass: left for the relay's retries, not dead-lettered yet.
    assert_eq!(r["outcomes"], json!(["queued-failed"]), "{r}");
    assert_eq!(counted(&r), 1, "{r}");
    let o = ob.clone();
    wait_until(T, "the poison message in the DLQ", || {
        !futures_block(o.dlq_list(None, 10)).unwrap().is_empty()
    })
    .await;
    let dl = ob.dlq_list(Some("Echo/w"), 10).await.unwrap();
    assert_eq!(dl.len(), 1);
    assert_eq!(dl[0].attempts, 3, "{dl:?}");
    assert_eq!(dl[0].reason, "max_attempts");
    assert!(
        dl[0]
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("bad input"),
        "{dl:?}"
    );

    // An unknown actor type is permanent: dead-lettered at once. Deploying it is the fix;
    // replay then delivers.
    ob.store(NewMessage::new("Ghost/1", "record", b"boo".to_vec()))
        .await
        .unwrap();
    let o = ob.clone();
    wait_until(T, "the unknown-type message in the DLQ", || {
        futures_block(o.dlq_list(Some("Ghost/1"), 10))
            .unwrap()
            .len()
            == 1
    })
    .await;
    assert_eq!(
        ob.dlq_list(Some("Ghost/1"), 10).await.unwrap()[0].reason,
        "permanent"
    );
    host.deploy(
        ChildSpec::new("Ghost", "echo.wasm"),
        std::fs::read(rust_guest("echo")).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(
        ob.dlq_replay(DlqSelector::Receiver("Ghost/1".into()))
            .await
            .unwrap(),
        1
    );
    let h = host.clone();
    wait_until(T, "the replayed message delivered", || {
        futures_block(recorded(&h, "Ghost/1")) == vec!["boo".to_string()]
    })
    .await;
    assert_eq!(
        ob.dlq_purge(DlqSelector::All).await.unwrap(),
        1,
        "only the poison message is left to purge"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_stored_before_a_restart_are_delivered_in_order_after_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        // A host that went down before its relay delivered anything: only the store is left.
        let ob = outbox_at(dir.path(), OutboxConfig::default()).await;
        for i in 0..50 {
            ob.store(NewMessage::new(
                "Echo/offline",
                "record",
                i.to_string().into_bytes(),
            ))
            .await
            .unwrap();
        }
    }
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    host.attach_outbox(outbox_at(dir.path(), OutboxConfig::default()).await);
    let h = host.clone();
    wait_until(T, "all 50 delivered after restart", || {
        futures_block(pending(&h)) == 0
    })
    .await;
    let items = recorded(&host, "Echo/offline").await;
    assert_eq!(
        items,
        (0..50).map(|i| i.to_string()).collect::<Vec<_>>(),
        "FIFO per receiver, none lost"
    );
}

/// `outbox.dispatch` in call mode from a turn with a short deadline, to a receiver busy in a
/// long turn: the immediate attempt gives up at the turn's deadline (it used to wait out the
/// host's 30 s call timeout, holding the dispatching turn and a limiter permit), the message
/// stays in the outbox, and the relay delivers it once the receiver is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_mode_dispatch_gives_up_at_the_turns_deadline_and_the_relay_delivers_later() {
    let dir = tempfile::tempdir().unwrap();
    let host = host_with(
        test_config(),
        vec![
            (
                ChildSpec::new("Slow", "slow.wasm").mailbox(4, MailboxStrategy::Error),
                "slow",
            ),
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
        ],
    )
    .await;
    let ob = host.attach_outbox(outbox_at(dir.path(), patient()).await);
    host.tell("Slow/1", "sleep", "3000").await.unwrap();
    wait_until(T, "Slow/1 busy", || host.inflight_turns() == 1).await;

    // The dispatching turn has 300 ms (the external ask's timeout is its deadline).
    let t0 = std::time::Instant::now();
    let req = json!({"targets": ["Slow/1"], "msg_type": "sleep", "payload": "5", "mode": "call"});
    let _ = host
        .ask(
            "Echo/leader",
            "dispatch",
            req.to_string(),
            Duration::from_millis(300),
        )
        .await;
    // Echo/leader answers again as soon as that turn is over: its dispatch returned at the
    // deadline instead of waiting for Slow/1's 3 s turn.
    host.ask("Echo/leader", "whoami", "", T).await.unwrap();
    let turn_over = t0.elapsed();
    assert!(
        turn_over < Duration::from_millis(1500),
        "the dispatching turn was held {turn_over:?} by its immediate attempt"
    );
    assert_eq!(
        pending(&host).await,
        1,
        "the undelivered message stays in the outbox"
    );
    let h = host.clone();
    wait_until(T, "the relay to deliver it once Slow/1 is free", || {
        futures_block(pending(&h)) == 0
    })
    .await;
    assert!(
        t0.elapsed() >= Duration::from_millis(2900),
        "delivered only after Slow/1's long turn"
    );
    assert!(ob.dlq_list(None, 10).await.unwrap().is_empty());
}
