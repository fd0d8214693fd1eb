//! Batched turns (`batched-actor-world`): a guest that exports `batch` runs the messages queued
//! behind a turn in one call, and each keeps every per-message guarantee of a single turn: its
//! order, its own reply as its turn ends, a skip when it expired, its own `max_turn_ms`, and a
//! trap that costs only its own turn (the later messages run once, on the restarted instance).
//!
//! Every SDK (Rust, Go, Python, TypeScript) exports `batch` for every actor; each test runs once
//! per language on its `batch` testkit guest. Each holds the actor in a long turn, queues messages
//! behind it, and reads the batch counters to prove the queue ran batched.

use std::time::{Duration, Instant};

use sluice_runtime::{ChildSpec, ErrorCode, Host, HostConfig};
use sluice_tests::{
    Lang, install_metrics, metric, poly_host, test_config, type_status, wait_until,
};

const T: Duration = Duration::from_secs(30);

sluice_tests::per_language!(
    a_queue_runs_in_batches_of_at_most_max_batch_turns_in_order_with_each_reply_its_own,
    max_batch_turns_1_runs_a_batching_guest_one_call_per_message,
    a_trap_in_the_middle_of_a_batch_of_32_costs_only_its_own_turn,
    an_expired_message_inside_a_batch_is_skipped_when_its_turn_would_start,
    a_runaway_message_in_a_batch_is_interrupted_at_its_own_max_turn_ms,
    guest_errors_inside_a_batch_are_their_own_turns_replies,
);

/// A host running `lang`'s `batch` guest as actor type `<name><lang>` (each test and language
/// its own, for its metrics); returns the host, the type and the actor id `<type>/1` (leaked:
/// the tests move the id into spawned tasks).
async fn batch_host(lang: Lang, name: &str, cfg: HostConfig) -> (Host, &'static str, &'static str) {
    install_metrics();
    let ty = format!("{name}{lang:?}");
    let host = poly_host(
        cfg,
        lang,
        vec![(ChildSpec::new(&ty, "batch.wasm"), "batch")],
    )
    .await
    .expect("the gate makes a missing toolchain a failure");
    let id = format!("{ty}/1");
    (host, ty.leak(), id.leak())
}

/// Holds `id` in a turn of `ms` milliseconds and returns once that turn has started.
async fn hold(host: &Host, ty: &str, id: &str, ms: u64) {
    host.tell(id, "hold", ms.to_string()).await.unwrap();
    wait_until(T, "the hold turn to start", || {
        type_status(host, ty).active == 1 && type_status(host, ty).queued == 0
    })
    .await;
}

/// Waits until `n` messages are queued behind the running turn of `ty`.
async fn queued(host: &Host, ty: &str, n: usize) {
    wait_until(T, "the messages to queue", || {
        type_status(host, ty).queued == n
    })
    .await;
}

fn batches(ty: &str) -> (f64, f64) {
    (
        metric("sluice_turn_batches_total", &[("actor_type", ty)]),
        metric("sluice_batched_turns_total", &[("actor_type", ty)]),
    )
}

fn text(r: Vec<u8>) -> String {
    String::from_utf8(r).unwrap()
}

async fn a_queue_runs_in_batches_of_at_most_max_batch_turns_in_order_with_each_reply_its_own(
    lang: Lang,
) {
    let (host, ty, id) = batch_host(lang, "BatchOrder", test_config()).await;
    // A message alone is one call to `handle`, not a batch.
    assert_eq!(
        text(host.ask(id, "seq", "alone", T).await.unwrap()),
        "1:alone"
    );
    assert_eq!(batches(ty), (0.0, 0.0));

    hold(&host, ty, id, 1500).await;
    for i in 0..40 {
        host.tell(id, "seq", i.to_string()).await.unwrap();
    }
    let asks: Vec<_> = (40..50)
        .map(|i| {
            let host = host.clone();
            tokio::spawn(async move { (i, host.ask(id, "seq", i.to_string(), T).await) })
        })
        .collect();
    queued(&host, ty, 50).await;
    let mut replies = Vec::new();
    for a in asks {
        let (i, r) = a.await.unwrap();
        replies.push((i, text(r.unwrap())));
    }
    let seen = text(host.ask(id, "seen", "", T).await.unwrap());
    let seen: Vec<&str> = seen.split(',').collect();
    // The tells ran in the order they were sent, after the lone message.
    let told: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    assert_eq!(seen[0], "alone");
    assert_eq!(seen[1..41], told[..]);
    // Each ask got the reply of its own turn: its position in the order it ran.
    for (i, reply) in replies {
        let pos = seen.iter().position(|s| *s == i.to_string()).unwrap();
        assert_eq!(reply, format!("{}:{i}", pos + 1));
    }
    assert_eq!(seen.len(), 51, "every message ran once: {seen:?}");
    // 50 turns behind the hold: two batches at least (32 at most each), all 50 batched. The
    // `seen` ask is sent as the last reply arrives, while that batch can still take one more
    // message: it ran alone or as a 51st batched turn.
    let (calls, turns) = batches(ty);
    assert!(turns == 50.0 || turns == 51.0, "{turns} batched turns");
    assert!((2.0..=3.0).contains(&calls), "{calls} batches for 50 turns");
    assert_eq!(
        metric(
            "sluice_turns_total",
            &[("actor_type", ty), ("outcome", "ok")]
        ),
        53.0,
        "turns are counted one by one: alone, hold, 50 queued, seen"
    );
}

async fn max_batch_turns_1_runs_a_batching_guest_one_call_per_message(lang: Lang) {
    let cfg = HostConfig {
        max_batch_turns: 1,
        ..test_config()
    };
    let (host, ty, id) = batch_host(lang, "BatchOff", cfg).await;
    hold(&host, ty, id, 500).await;
    for i in 0..10 {
        host.tell(id, "seq", i.to_string()).await.unwrap();
    }
    let seen = text(host.ask(id, "seen", "", T).await.unwrap());
    assert_eq!(seen, "0,1,2,3,4,5,6,7,8,9");
    assert_eq!(batches(ty), (0.0, 0.0));
}

async fn a_trap_in_the_middle_of_a_batch_of_32_costs_only_its_own_turn(lang: Lang) {
    let (host, ty, id) = batch_host(lang, "BatchTrap", test_config()).await;
    hold(&host, ty, id, 1000).await;
    let asks: Vec<_> = (0..32)
        .map(|i| {
            let op = if i == 16 { "trap" } else { "seq" };
            (i, op)
        })
        .collect();
    // Queued one at a time, so the mailbox order is 0..32.
    let mut pending = Vec::new();
    for (i, op) in asks {
        let h = host.clone();
        pending.push((
            i,
            tokio::spawn(async move { h.ask(id, op, i.to_string(), T).await }),
        ));
        queued(&host, ty, i + 1).await;
    }
    let mut replies = Vec::new();
    for (i, p) in pending {
        replies.push((i, p.await.unwrap()));
    }
    for (i, r) in replies {
        match i {
            // Before the trap: the first instance's turns, their replies intact.
            0..16 => assert_eq!(text(r.unwrap()), format!("{}:{i}", i + 1)),
            16 => {
                let e = r.unwrap_err();
                assert_eq!(e.code, ErrorCode::Internal, "{e}");
                assert!(e.to_string().contains("trapped"), "{e}");
            }
            // After it: still queued when the instance trapped, run by the restarted one.
            _ => assert_eq!(text(r.unwrap()), format!("{}:{i}", i - 16)),
        }
    }
    // Each later message ran exactly once, in order, on the new instance.
    let seen = text(host.ask(id, "seen", "", T).await.unwrap());
    let after: Vec<String> = (17..32).map(|i| i.to_string()).collect();
    assert_eq!(seen, after.join(","));
    assert_eq!(
        metric(
            "sluice_turns_total",
            &[("actor_type", ty), ("outcome", "trapped")]
        ),
        1.0
    );
    assert_eq!(
        metric(
            "sluice_turns_total",
            &[("actor_type", ty), ("outcome", "ok")]
        ),
        // hold, 31 seq, seen
        33.0
    );
    // The trap's batch ran 17 turns, the next 15. The `seen` ask is sent as the last reply
    // arrives, which is while that batch can still take one more message: it may run as a
    // 33rd batched turn or alone.
    let turns = batches(ty).1;
    assert!(
        turns == 32.0 || turns == 33.0,
        "{turns} batched turns: 17 up to the trap, then 15 (and perhaps `seen`)"
    );
}

async fn an_expired_message_inside_a_batch_is_skipped_when_its_turn_would_start(lang: Lang) {
    let (host, ty, id) = batch_host(lang, "BatchExpire", test_config()).await;
    hold(&host, ty, id, 800).await;
    let h = host.clone();
    let a = tokio::spawn(async move { h.ask(id, "seq", "a", T).await });
    queued(&host, ty, 1).await;
    let h = host.clone();
    // Its caller gives up long before the hold ends.
    let b = tokio::spawn(async move { h.ask(id, "seq", "b", Duration::from_millis(100)).await });
    queued(&host, ty, 2).await;
    let h = host.clone();
    let c = tokio::spawn(async move { h.ask(id, "seq", "c", T).await });
    queued(&host, ty, 3).await;
    assert_eq!(text(a.await.unwrap().unwrap()), "1:a");
    let e = b.await.unwrap().unwrap_err();
    assert_eq!(e.code, ErrorCode::DeadlineExceeded, "{e}");
    assert_eq!(text(c.await.unwrap().unwrap()), "2:c");
    assert_eq!(text(host.ask(id, "seen", "", T).await.unwrap()), "a,c");
    assert_eq!(
        metric("sluice_turns_skipped_total", &[("actor_type", ty)]),
        1.0
    );
    assert!(batches(ty).0 >= 1.0, "a, b and c ran as a batch");
}

async fn a_runaway_message_in_a_batch_is_interrupted_at_its_own_max_turn_ms(lang: Lang) {
    let cfg = HostConfig {
        max_turn_ms: 400,
        ..test_config()
    };
    let (host, ty, id) = batch_host(lang, "BatchRunaway", cfg).await;
    hold(&host, ty, id, 300).await;
    // Two turns of 250 ms each: over 400 ms together, so a budget per batch (not per turn)
    // would interrupt the second.
    let mut pending = Vec::new();
    for (i, (op, arg)) in [
        ("spin", "250"),
        ("spin", "250"),
        ("forever", ""),
        ("seq", "x"),
    ]
    .into_iter()
    .enumerate()
    {
        let h = host.clone();
        pending.push(tokio::spawn(async move {
            let r = h.ask(id, op, arg, T).await;
            (r, Instant::now())
        }));
        queued(&host, ty, i + 1).await;
    }
    let mut out = Vec::new();
    for p in pending {
        out.push(p.await.unwrap());
    }
    assert_eq!(text(out[0].0.clone().unwrap()), "250");
    assert_eq!(text(out[1].0.clone().unwrap()), "250");
    let e = out[2].0.clone().unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "{e}");
    assert!(e.to_string().contains("max_turn_ms=400"), "{e}");
    // The runaway started when the second spin ended (its reply reached the caller a little
    // later); it was stopped at its own 400 ms, not at a budget the batch had left.
    let ran = out[2].1.duration_since(out[1].1);
    assert!(
        ran >= Duration::from_millis(300) && ran < Duration::from_millis(2000),
        "the runaway ran {ran:?} before its interrupt"
    );
    assert_eq!(text(out[3].0.clone().unwrap()), "1:x");
    assert!(batches(ty).0 >= 1.0);
    assert_eq!(
        metric(
            "sluice_turns_total",
            &[("actor_type", ty), ("outcome", "interrupted")]
        ),
        1.0
    );
}

// A guest that breaks the batch contract: the Rust `misbatch` guest (guests/TESTKIT.md) calls
// `turns.next` the way no SDK does. The host keeps the running message itself and never trusts
// the guest's bookkeeping: each misuse costs the turn it hit, with an error that names it, and
// every message queued behind it runs once, in order.

/// A host running the Rust `misbatch` guest as actor type `ty`; returns it and the id `<ty>/1`.
async fn misbatch_host(ty: &'static str) -> (Host, &'static str) {
    install_metrics();
    let host = poly_host(
        test_config(),
        Lang::Rust,
        vec![(ChildSpec::new(ty, "misbatch.wasm"), "misbatch")],
    )
    .await
    .expect("the Rust guests always build");
    (host, format!("{ty}/1").leak())
}

/// Arms `id`'s next batch with `misuse`, holds it in a turn, and queues `ops` behind that turn
/// one at a time (so the mailbox holds them in this order), each an `echo` of its payload:
/// asks as tasks, tells sent. Returns the asks' replies, in order, once all are in.
async fn misuse_batch(
    host: &Host,
    ty: &str,
    id: &'static str,
    misuse: &str,
    ops: &[(&'static str, bool)],
) -> Vec<Result<String, sluice_runtime::ActorError>> {
    assert_eq!(
        text(host.ask(id, "arm", misuse.to_string(), T).await.unwrap()),
        format!("1:{misuse}")
    );
    hold(host, ty, id, 800).await;
    let mut asks = Vec::new();
    for (i, &(payload, ask)) in ops.iter().enumerate() {
        if ask {
            let h = host.clone();
            asks.push(tokio::spawn(async move {
                h.ask(id, "echo", payload, T).await.map(text)
            }));
        } else {
            host.tell(id, "echo", payload).await.unwrap();
        }
        queued(host, ty, i + 1).await;
    }
    let mut replies = Vec::new();
    for a in asks {
        replies.push(a.await.unwrap());
    }
    replies
}

fn turns(ty: &str, outcome: &str) -> f64 {
    metric(
        "sluice_turns_total",
        &[("actor_type", ty), ("outcome", outcome)],
    )
}

/// Runs `misuse` on a new `ty` actor with `ops` queued behind it (see [`misuse_batch`]), and
/// checks the batch's first message failed `INTERNAL` with an error containing `says`, the last
/// ask was answered `last`, and `trapped` turns were counted as trapped.
async fn misuse_costs_its_turn(
    ty: &'static str,
    misuse: &str,
    ops: &[(&'static str, bool)],
    says: &str,
    last: &str,
    trapped: f64,
) {
    let (host, id) = misbatch_host(ty).await;
    let r = misuse_batch(&host, ty, id, misuse, ops).await;
    let e = r[0].as_ref().unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "{e}");
    assert!(e.to_string().contains(says), "{e}");
    assert_eq!(r.last().unwrap().as_deref(), Ok(last));
    assert_eq!(turns(ty, "trapped"), trapped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_withholds_a_turns_result_traps_and_costs_only_that_turn() {
    // b and c were never taken: the restarted instance ran them, once each, in order.
    misuse_costs_its_turn(
        "MisSkipResult",
        "skip-result",
        &[("a", true), ("b", false), ("c", true)],
        "turns.next: the running turn was not given its result",
        "2:c",
        1.0,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_gives_a_result_before_taking_a_turn_traps_and_costs_only_the_first() {
    // The message the batch started with counts as its running turn.
    misuse_costs_its_turn(
        "MisResultFirst",
        "result-first",
        &[("a", true), ("b", true)],
        "turns.next: a result with no turn running",
        "1:b",
        1.0,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_returns_with_a_turn_running_fails_that_turn_and_keeps_the_instance() {
    // No trap: the same instance ran b and c after arm and hold (turns 3 and 4).
    misuse_costs_its_turn(
        "MisReturnEarly",
        "return-early",
        &[("a", true), ("b", false), ("c", true)],
        "batch.run returned before ending its turn",
        "4:c",
        0.0,
    )
    .await;
    assert_eq!(turns("MisReturnEarly", "error"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_next_called_from_handle_traps_that_turn() {
    let ty = "MisNextInHandle";
    let (host, id) = misbatch_host(ty).await;
    let e = host
        .ask(id, "next-in-handle", "", T)
        .await
        .expect_err("the import traps outside batch.run");
    assert_eq!(e.code, ErrorCode::Internal, "{e}");
    assert!(
        e.to_string()
            .contains("turns.next called outside batch.run"),
        "{e}"
    );
    assert_eq!(text(host.ask(id, "echo", "x", T).await.unwrap()), "1:x");
    assert_eq!(turns(ty, "trapped"), 1.0);
}

/// A typed error returned by a turn inside a batch (an unknown op: `INVALID_ARGUMENT`) is that
/// turn's reply only: the batch goes on, the turns around it keep their own replies, and each
/// error counts as one turn with the `error` outcome. With `max_batch_turns = 6` the 12 queued
/// messages run as two batches, 0..6 and 6..12, so errors sit first, inside and last in a
/// batch. (The Go SDK lowers a batch's replies itself and leaves errors to the generated
/// binding: both paths alternate here.)
async fn guest_errors_inside_a_batch_are_their_own_turns_replies(lang: Lang) {
    let cfg = HostConfig {
        max_batch_turns: 6,
        ..test_config()
    };
    let (host, ty, id) = batch_host(lang, "BatchErr", cfg).await;
    let fails = |i: usize| matches!(i, 1 | 3 | 5 | 6 | 11);
    hold(&host, ty, id, 1000).await;
    let mut pending = Vec::new();
    for i in 0..12usize {
        let op = if fails(i) { "nope" } else { "seq" };
        let h = host.clone();
        pending.push((
            i,
            tokio::spawn(async move { h.ask(id, op, i.to_string(), T).await }),
        ));
        // Queued one at a time, so the mailbox order is 0..12.
        queued(&host, ty, i + 1).await;
    }
    let mut n = 0;
    for (i, p) in pending {
        let r = p.await.unwrap();
        if fails(i) {
            let e = r.unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArgument, "#{i}: {e}");
            assert!(e.to_string().contains("unknown op nope"), "#{i}: {e}");
        } else {
            n += 1;
            assert_eq!(text(r.unwrap()), format!("{n}:{i}"), "#{i}");
        }
    }
    // Both batches ended on an error and the instance is the same one: nothing trapped.
    let seen = text(host.ask(id, "seen", "", T).await.unwrap());
    assert_eq!(seen, "0,2,4,7,8,9,10");
    assert_eq!(batches(ty), (2.0, 12.0));
    assert_eq!(turns(ty, "error"), 5.0);
    assert_eq!(turns(ty, "trapped"), 0.0);
}
