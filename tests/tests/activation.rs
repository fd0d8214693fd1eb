//! The memory guardrail: `max_activations` (host-wide and per actor type) bounds live
//! instances; the least recently used idle actor is deactivated to make room, never one
//! mid-turn and never a supervised eager one.

use std::time::Duration;

use sluice_runtime::{ChildSpec, ErrorCode, HostConfig};
use sluice_tests::{active, host_with, recorded_by as items, test_config};

const T: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_cap_deactivates_the_least_recently_used_idle_actor() {
    let host = host_with(
        HostConfig {
            max_activations: 4,
            idle_deactivate_ms: 0,
            ..test_config()
        },
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    for i in 0..4 {
        host.ask(&format!("Echo/{i}"), "record", format!("k{i}"), T)
            .await
            .unwrap();
    }
    // Echo/0 is the least recently used: touch the others again in a known order.
    for i in [2, 3, 1] {
        assert_eq!(items(&host, &format!("Echo/{i}")).await, [format!("k{i}")]);
    }
    // A fifth key needs a slot: Echo/0 (idle, least recently used) makes room.
    host.ask("Echo/4", "record", "k4", T).await.unwrap();
    assert_eq!(active(&host, "Echo"), 4);
    // Echo/0 comes back as a fresh activation (its state went with the old instance);
    // that in turn evicts Echo/2, now the least recently used.
    assert!(items(&host, "Echo/0").await.is_empty());
    assert_eq!(items(&host, "Echo/3").await, ["k3"]);
    assert_eq!(items(&host, "Echo/1").await, ["k1"]);
    assert_eq!(items(&host, "Echo/4").await, ["k4"]);
    assert_eq!(active(&host, "Echo"), 4);
    assert!(
        items(&host, "Echo/2").await.is_empty(),
        "Echo/2 was evicted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actor_mid_turn_is_never_evicted_and_the_refusal_is_typed() {
    let host = host_with(
        test_config(),
        vec![(
            ChildSpec::new("Slow", "slow.wasm").max_activations(2),
            "slow",
        )],
    )
    .await;
    // Two long turns hold the type's two slots.
    let h1 = host.clone();
    let h2 = host.clone();
    let a = tokio::spawn(async move { h1.ask("Slow/a", "wait", "1500", T).await });
    let b = tokio::spawn(async move { h2.ask("Slow/b", "wait", "1500", T).await });
    sluice_tests::wait_until(T, "both slow turns running", || host.inflight_turns() == 2).await;
    let e = host.ask("Slow/c", "ok", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ResourceExhausted, "{e}");
    assert!(
        e.to_string().contains("max_activations=2"),
        "the refusal names the cap: {e}"
    );
    // Neither running turn was disturbed.
    assert_eq!(a.await.unwrap().unwrap(), b"1500");
    assert_eq!(b.await.unwrap().unwrap(), b"1500");
    // Once idle, one of them makes room.
    assert_eq!(host.ask("Slow/c", "ok", "", T).await.unwrap(), b"alive");
    assert_eq!(active(&host, "Slow"), 2);
}

/// A key refused at the activation cap is never stopped. Both of the type's two slots hold
/// long turns; 50 asks to a third key are each refused `RESOURCE_EXHAUSTED` with a retry hint
/// of about when the soonest of those turns ends (never `UNAVAILABLE`: a refusal is not a
/// crash and does not count toward restart intensity), and once a slot frees that same key
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_activations_carry_a_hint_and_never_stop_the_key() {
    let host = host_with(
        test_config(),
        vec![(
            ChildSpec::new("Slow2", "slow.wasm").max_activations(2),
            "slow",
        )],
    )
    .await;
    let long = |key: &'static str| {
        let h = host.clone();
        tokio::spawn(async move { h.ask(&format!("Slow2/{key}"), "wait", "1500", T).await })
    };
    // A first round teaches each actor its turn time (1.5 s) ...
    let (a, b) = (long("a"), long("b"));
    assert_eq!(a.await.unwrap().unwrap(), b"1500");
    assert_eq!(b.await.unwrap().unwrap(), b"1500");
    // ... so while the second round runs, the hint says when the first of them ends.
    let (a, b) = (long("a"), long("b"));
    sluice_tests::wait_until(T, "both slow turns running", || host.inflight_turns() == 2).await;
    let started = std::time::Instant::now();
    for i in 0..50 {
        let e = host.ask("Slow2/c", "ok", "", T).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::ResourceExhausted, "ask {i}: {e}");
        let hint = e
            .retry_after_ms
            .unwrap_or_else(|| panic!("no retry hint: {e}"));
        // The learnt turn time is ~1.5 s (a little more under load); the hint is what is left.
        let left = 1500u64.saturating_sub(started.elapsed().as_millis() as u64);
        assert!(
            hint <= 1700 && hint + 300 >= left,
            "ask {i}: hint {hint} ms, the running turns end in ~{left} ms"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "RESOURCE_EXHAUSTED: actor type Slow2 at max_activations=2 with no idle actor to deactivate; cannot activate Slow2/c (retry_after_ms={hint})"
            )
        );
    }
    assert_eq!(a.await.unwrap().unwrap(), b"1500");
    assert_eq!(b.await.unwrap().unwrap(), b"1500");
    assert_eq!(host.ask("Slow2/c", "ok", "", T).await.unwrap(), b"alive");
    assert_eq!(sluice_tests::type_status(&host, "Slow2").stopped, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervised_eager_instances_are_never_evicted() {
    let host = host_with(
        HostConfig {
            max_activations: 3,
            idle_deactivate_ms: 0,
            ..test_config()
        },
        vec![
            (ChildSpec::new("Pinned", "echo.wasm").count(2), "echo"),
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
        ],
    )
    .await;
    host.ask("Pinned/0", "record", "p0", T).await.unwrap();
    host.ask("Pinned/1", "record", "p1", T).await.unwrap();
    // One slot left for keyed actors: they take turns in it.
    for i in 0..5 {
        host.ask(&format!("Echo/{i}"), "record", "x", T)
            .await
            .unwrap();
    }
    assert_eq!(active(&host, "Echo"), 1);
    assert_eq!(items(&host, "Pinned/0").await, ["p0"]);
    assert_eq!(items(&host, "Pinned/1").await, ["p1"]);
}

/// Past 64 activations of a type, making room looks at a rotating sample of 64 (so it costs
/// O(64), not O(live actors)); when the sample holds no idle actor, every activation is
/// looked at, so an idle one is always found. Here 99 supervised (never evicted) instances
/// and one idle keyed actor fill the host: each new key must evict exactly the keyed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn making_room_finds_the_one_idle_actor_among_many() {
    let host = host_with(
        HostConfig {
            max_activations: 100,
            idle_deactivate_ms: 0,
            ..test_config()
        },
        vec![(ChildSpec::new("Echo", "echo.wasm").count(99), "echo")],
    )
    .await;
    // Eager instances activate in the background; wait until all 99 hold their slots.
    sluice_tests::wait_until(T, "99 supervised instances", || active(&host, "Echo") == 99).await;
    for i in 0..20 {
        host.ask(&format!("Echo/k{i}"), "record", format!("k{i}"), T)
            .await
            .unwrap_or_else(|e| panic!("activation {i}: {e}"));
        assert_eq!(active(&host, "Echo"), 100);
    }
    // The last keyed actor is the live one; the earlier ones were evicted (fresh state).
    assert_eq!(items(&host, "Echo/k19").await, ["k19"]);
    assert!(items(&host, "Echo/k0").await.is_empty());
}

/// Activation hooks that admit while `allow` holds and record each activation's end: the
/// runtime's side of a cluster member's claims, with the claims taken as given.
#[derive(Default)]
struct Gate {
    allow: std::sync::atomic::AtomicBool,
    ended: std::sync::Mutex<Vec<String>>,
}

impl sluice_runtime::ActivationHooks for Gate {
    fn admit(&self, id: &sluice_runtime::ActorId) -> Result<(), sluice_runtime::ActorError> {
        if self.allow.load(std::sync::atomic::Ordering::SeqCst) {
            Ok(())
        } else {
            Err(sluice_runtime::ActorError::unavailable(format!(
                "{id}: this host may not run actors now"
            )))
        }
    }

    fn ended(&self, id: &sluice_runtime::ActorId) {
        self.ended.lock().unwrap().push(id.to_string());
    }
}

type Asked = tokio::task::JoinHandle<Result<Vec<u8>, sluice_runtime::ActorError>>;

/// Closes `gate` and fences `host` while `spin` runs with `queued` behind it: the spinning
/// turn ends within 2 s, it and every queued ask with `UNAVAILABLE`.
async fn fence_ends(host: &sluice_runtime::Host, gate: &Gate, spin: Asked, queued: Vec<Asked>) {
    let fenced = std::time::Instant::now();
    gate.allow.store(false, std::sync::atomic::Ordering::SeqCst);
    host.fence(true);
    let e = spin.await.unwrap().unwrap_err();
    assert!(
        fenced.elapsed() < Duration::from_secs(2),
        "the turn ran on {:?} after the fence",
        fenced.elapsed()
    );
    assert_eq!(e.code, ErrorCode::Unavailable, "{e}");
    assert!(e.to_string().contains("cluster lease lapsed"), "{e}");
    for q in queued {
        let e = q.await.unwrap().unwrap_err();
        assert_eq!(e.code, ErrorCode::Unavailable, "{e}");
    }
}

/// A fenced host (a cluster member whose lease lapsed) runs none of its hooked actors on: a
/// turn spinning in guest code is interrupted with `UNAVAILABLE`, messages queued behind it
/// get `UNAVAILABLE`, an idle activation ends, and the hooks hear each end (so the claims go
/// back). Lifted, the next message activates afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_host_interrupts_running_turns_fails_queued_ones_and_ends_every_activation() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::SeqCst;
    let host = host_with(
        HostConfig {
            // Only the fence can end the spinning turn.
            max_turn_ms: 120_000,
            idle_deactivate_ms: 0,
            ..test_config()
        },
        vec![
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
            (ChildSpec::new("Loop", "loop.wasm"), "loop"),
        ],
    )
    .await;
    let gate = Arc::new(Gate::default());
    gate.allow.store(true, SeqCst);
    host.set_activations(gate.clone()).unwrap();
    host.ask("Echo/1", "record", "before", T).await.unwrap();
    let spin = tokio::spawn({
        let host = host.clone();
        async move { host.ask("Loop/1", "spin", "", T).await }
    });
    sluice_tests::wait_until(
        Duration::from_secs(10),
        "the spinning turn to start",
        || host.inflight_turns() == 1,
    )
    .await;
    let queued: Vec<_> = (0..2)
        .map(|_| {
            let host = host.clone();
            tokio::spawn(async move { host.ask("Loop/1", "ok", "", T).await })
        })
        .collect();
    sluice_tests::wait_until(Duration::from_secs(10), "two asks queued", || {
        host.status()
            .iter()
            .any(|t| t.actor_type == "Loop" && t.queued == 2)
    })
    .await;

    fence_ends(&host, &gate, spin, queued).await;
    sluice_tests::wait_until(Duration::from_secs(10), "both activations to end", || {
        let mut ended = gate.ended.lock().unwrap().clone();
        ended.sort();
        ended == ["Echo/1", "Loop/1"]
    })
    .await;
    assert_eq!((active(&host, "Echo"), active(&host, "Loop")), (0, 0));
    // Fenced, nothing starts: the hooks refuse.
    let e = host.ask("Echo/1", "recorded", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "{e}");

    host.fence(false);
    gate.allow.store(true, SeqCst);
    assert!(
        items(&host, "Echo/1").await.is_empty(),
        "Echo/1 kept its state across the fence"
    );
    assert_eq!(host.ask("Loop/1", "ok", "", T).await.unwrap(), b"alive");
}

/// The fence with batched turns: a guest spinning inside `batch.run` with two messages
/// queued behind it is interrupted the same way; the queued ones get `UNAVAILABLE` and none
/// of them runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_host_interrupts_a_batch_mid_turn_and_runs_nothing_queued_behind_it() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::SeqCst;
    let host = host_with(
        HostConfig {
            max_turn_ms: 120_000,
            idle_deactivate_ms: 0,
            ..test_config()
        },
        vec![(ChildSpec::new("Batch", "batch.wasm"), "batch")],
    )
    .await;
    let gate = Arc::new(Gate::default());
    gate.allow.store(true, SeqCst);
    host.set_activations(gate.clone()).unwrap();
    // A held turn first, so that the spin and the two after it are queued together and
    // the spin starts a batch.
    let ask = |msg: &'static str, payload: &'static str| {
        let host = host.clone();
        tokio::spawn(async move { host.ask("Batch/1", msg, payload, T).await })
    };
    let hold = ask("hold", "300");
    sluice_tests::wait_until(Duration::from_secs(10), "the held turn to start", || {
        host.inflight_turns() == 1
    })
    .await;
    let queued_now = |n: usize| {
        host.status()
            .iter()
            .any(|t| t.actor_type == "Batch" && t.queued == n)
    };
    let spin = ask("forever", "");
    sluice_tests::wait_until(Duration::from_secs(10), "the spin queued", || queued_now(1)).await;
    let queued = [ask("seq", "a"), ask("seq", "b")];
    sluice_tests::wait_until(Duration::from_secs(10), "three queued", || queued_now(3)).await;
    hold.await.unwrap().unwrap();
    // The batch took the spin; the two behind it wait for `turns.next`.
    sluice_tests::wait_until(Duration::from_secs(10), "the batch to spin", || {
        host.inflight_turns() == 1 && queued_now(2)
    })
    .await;

    fence_ends(&host, &gate, spin, queued.into()).await;
    sluice_tests::wait_until(Duration::from_secs(10), "the activation to end", || {
        gate.ended.lock().unwrap().len() == 1
    })
    .await;
    host.fence(false);
    gate.allow.store(true, SeqCst);
    assert_eq!(
        host.ask("Batch/1", "seen", "", T).await.unwrap(),
        b"",
        "a message queued behind the fenced batch ran"
    );
}
