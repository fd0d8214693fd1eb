//! Dispatcher queues: idle eviction, FIFO per principal, concurrency across principals, bounds.

use parking_lot::Mutex;
use sluice_bus::{DispatchKey, DispatcherConfig, Event};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn event(principal: &str, n: u32) -> Arc<Event> {
    Arc::new(Event::new("t", n.to_le_bytes().to_vec()).with_principal(principal))
}

fn n_of(e: &Event) -> u32 {
    u32::from_le_bytes(e.payload[..4].try_into().unwrap())
}

type Log = Arc<Mutex<Vec<(String, u32)>>>;

fn recording(
    log: &Log,
) -> impl Fn(DispatchKey, Arc<Event>) -> std::future::Ready<()> + Send + Sync + 'static {
    let log = Arc::clone(log);
    move |key: DispatchKey, e: Arc<Event>| {
        log.lock().push((key.principal.to_string(), n_of(&e)));
        std::future::ready(())
    }
}

/// Lets spawned consumer tasks run to quiescence without advancing time much.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn idle_eviction_never_drops_an_event() {
    let log: Log = Arc::default();
    let d = DispatcherConfig::default().build(recording(&log));
    let svc: Arc<str> = Arc::from("svc");
    let grace = DispatcherConfig::default().idle_grace;
    let mut sent = 0;
    let mut evictions = 0;

    // Sends landing just before, exactly at and just after the end of the
    // grace period. `yield_first == false`: the send comes right after the
    // clock moves, before the consumer has seen its timer fire. `true`: the
    // consumer runs first (and evicts itself if the grace period is over),
    // so the send must spawn a fresh consumer.
    for (offset_ms, yield_first) in [
        (-1i64, false),
        (0, false),
        (1, false),
        (-1, true),
        (0, true),
        (1, true),
        (0, false),
        (5, true),
    ] {
        d.dispatch(&svc, event("alice", sent)).unwrap();
        sent += 1;
        settle().await;
        let wait = grace.as_millis() as i64 + offset_ms;
        tokio::time::advance(Duration::from_millis(wait as u64)).await;
        if yield_first {
            settle().await;
            if offset_ms >= 0 {
                evictions += 1;
                assert_eq!(d.queue_count(), 0, "idle consumer removed its queue");
            }
        }
        d.dispatch(&svc, event("alice", sent)).unwrap();
        sent += 1;
        settle().await;
        assert_eq!(log.lock().len() as u32, sent, "handled at once");
    }
    assert_eq!(d.stats().idle_evictions, evictions);

    let got: Vec<u32> = log.lock().iter().map(|(_, n)| *n).collect();
    assert_eq!(
        got,
        (0..sent).collect::<Vec<_>>(),
        "every event handled once, in order"
    );
}

/// The one window paused time cannot reach: on a multi-threaded runtime the
/// consumer's idle timer fires with the queue empty and a send arrives on
/// another thread before the consumer takes the lock. A 1 ms grace period and
/// sends paced around it hit that window; no event may be lost or reordered.
/// (Waits on a completion signal, never on a sleep.) A loaded machine can keep the
/// consumer behind the sender for a whole round, so that no timer fires: such a
/// round proves nothing, and another is run, up to five.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_eviction_racing_sends_across_threads_loses_nothing() {
    for _ in 0..5 {
        let stats = paced_round().await;
        eprintln!("{stats:?}");
        if stats.idle_evictions > 0 {
            return;
        }
    }
    panic!("the grace period never elapsed between sends in five rounds");
}

/// 600 events of one principal, paced around a 1 ms grace period from another thread:
/// every one is handled, in order. The dispatcher's stats afterwards.
async fn paced_round() -> sluice_bus::DispatcherStats {
    const N: u32 = 600;
    let log: Log = Arc::default();
    let done = Arc::new(tokio::sync::Notify::new());
    let handler = {
        let (log, done) = (log.clone(), done.clone());
        move |key: DispatchKey, e: Arc<Event>| {
            let mut log_guard = log.lock();
            log_guard.push((key.principal.to_string(), n_of(&e)));
            if log_guard.len() as u32 == N {
                done.notify_one();
            }
            std::future::ready(())
        }
    };
    let d = DispatcherConfig {
        idle_grace: Duration::from_millis(1),
        ..DispatcherConfig::default()
    }
    .build(handler);
    let sender = {
        let d = d.clone();
        let rt = tokio::runtime::Handle::current();
        std::thread::spawn(move || {
            let _guard = rt.enter();
            let svc: Arc<str> = Arc::from("svc");
            for n in 0..N {
                d.dispatch(&svc, event("alice", n)).unwrap();
                // Pace sends around the 1 ms grace so timers fire near sends.
                let spin = std::time::Instant::now();
                let gap = Duration::from_micros(700 + u64::from(n * 37 % 900));
                while spin.elapsed() < gap {
                    std::hint::spin_loop();
                }
            }
        })
    };
    tokio::time::timeout(Duration::from_secs(30), done.notified())
        .await
        .expect("all events handled");
    sender.join().unwrap();
    let got: Vec<u32> = log.lock().iter().map(|(_, n)| *n).collect();
    assert_eq!(got, (0..N).collect::<Vec<_>>());
    d.stats()
}

#[tokio::test(start_paused = true)]
async fn a_queue_survives_while_busy_and_is_evicted_after_the_grace_period() {
    let log: Log = Arc::default();
    let d = DispatcherConfig::default().build(recording(&log));
    let svc: Arc<str> = Arc::from("svc");
    d.dispatch(&svc, event("bob", 1)).unwrap();
    settle().await;
    assert!(d.has_queue("svc", "bob"));
    tokio::time::advance(Duration::from_secs(59)).await;
    settle().await;
    assert!(d.has_queue("svc", "bob"), "not idle long enough");
    d.dispatch(&svc, event("bob", 2)).unwrap();
    settle().await;
    tokio::time::advance(Duration::from_secs(59)).await;
    settle().await;
    assert!(
        d.has_queue("svc", "bob"),
        "the grace period restarts after each event"
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    settle().await;
    assert!(!d.has_queue("svc", "bob"));
    assert_eq!(d.queue_count_for("svc"), 0);
    assert_eq!(log.lock().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn per_principal_fifo_while_distinct_principals_run_concurrently() {
    let log: Log = Arc::default();
    let running = Arc::new(AtomicUsize::new(0));
    let max_running = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (log, running, max_running) = (log.clone(), running.clone(), max_running.clone());
        move |key: DispatchKey, e: Arc<Event>| {
            let (log, running, max_running) = (log.clone(), running.clone(), max_running.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                max_running.fetch_max(now, Ordering::SeqCst);
                // A chained handler that takes a while, differently per event.
                let n = n_of(&e);
                tokio::time::sleep(Duration::from_millis(u64::from(10 + (n * 7) % 13))).await;
                log.lock().push((key.principal.to_string(), n));
                running.fetch_sub(1, Ordering::SeqCst);
            }
        }
    };
    let d = DispatcherConfig::default().build(handler);
    let svc: Arc<str> = Arc::from("svc");
    let principals = ["alice", "bob", "carol", "dave"];
    for n in 0..40 {
        for p in principals {
            d.dispatch(&svc, event(p, n)).unwrap();
        }
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let log = log.lock();
    assert_eq!(log.len(), 160);
    for p in principals {
        let seq: Vec<u32> = log
            .iter()
            .filter(|(q, _)| q == p)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(seq, (0..40).collect::<Vec<_>>(), "FIFO for {p}");
    }
    assert_eq!(
        max_running.load(Ordering::SeqCst),
        4,
        "principals ran concurrently"
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_refuses_and_gives_the_event_back() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let handler = {
        let gate = gate.clone();
        move |_k: DispatchKey, _e: Arc<Event>| {
            let gate = gate.clone();
            async move {
                gate.acquire().await.unwrap().forget();
            }
        }
    };
    let d = DispatcherConfig {
        queue_capacity: 4,
        ..DispatcherConfig::default()
    }
    .build(handler);
    let svc: Arc<str> = Arc::from("svc");
    d.dispatch(&svc, event("p", 0)).unwrap();
    settle().await; // the consumer takes event 0 and blocks in the handler
    for n in 1..5 {
        d.dispatch(&svc, event("p", n)).unwrap();
    }
    assert_eq!(d.queue_depth("svc", "p"), Some(4));
    assert_eq!(d.queue_depth("svc", "nobody"), None);
    let err = d.dispatch(&svc, event("p", 5)).unwrap_err();
    assert_eq!(err.code(), "RESOURCE_EXHAUSTED");
    assert_eq!(n_of(&err.into_event()), 5);
    // Another principal is unaffected.
    d.dispatch(&svc, event("q", 0)).unwrap();
    gate.add_permits(100);
}

#[tokio::test(start_paused = true)]
async fn principals_beyond_the_cap_share_the_system_queue() {
    let log: Log = Arc::default();
    let d = DispatcherConfig {
        max_queues_per_actor_type: 3,
        ..DispatcherConfig::default()
    }
    .build(recording(&log));
    let svc: Arc<str> = Arc::from("svc");
    let other: Arc<str> = Arc::from("other");
    for p in ["a", "b", "c", "d", "e"] {
        d.dispatch(&svc, event(p, 1)).unwrap();
    }
    d.dispatch(&other, event("d", 1)).unwrap();
    settle().await;
    assert_eq!(
        d.queue_count_for("svc"),
        4,
        "3 own queues + the shared system queue"
    );
    assert!(d.has_queue("svc", "system"));
    assert!(!d.has_queue("svc", "e"));
    assert!(d.has_queue("other", "d"), "the cap is per actor type");
    let log = log.lock();
    assert_eq!(log.iter().filter(|(p, _)| p == "system").count(), 2);
    assert_eq!(log.len(), 6);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_loses_its_queue_but_the_next_event_gets_a_new_one() {
    let log: Log = Arc::default();
    let handler = {
        let log = log.clone();
        move |key: DispatchKey, e: Arc<Event>| {
            let n = n_of(&e);
            assert!(n != 0, "handler bug on event 0");
            log.lock().push((key.principal.to_string(), n));
            std::future::ready(())
        }
    };
    let d = DispatcherConfig::default().build(handler);
    let svc: Arc<str> = Arc::from("svc");
    d.dispatch(&svc, event("p", 0)).unwrap();
    settle().await; // the consumer panics (tokio reports it) and its receiver drops
    d.dispatch(&svc, event("p", 1)).unwrap();
    settle().await;
    assert_eq!(*log.lock(), vec![("p".to_string(), 1)]);
    assert_eq!(
        d.queue_count_for("svc"),
        1,
        "the dead queue was replaced, not leaked"
    );
}

#[tokio::test(start_paused = true)]
async fn published_events_reach_the_handler_with_their_principal_through_a_routed_pump() {
    let log: Log = Arc::default();
    let d = DispatcherConfig::default().build(recording(&log));
    let bus = sluice_bus::EventBus::new();
    let sub = bus.subscribe_routed("jobs.*", "test_pump").unwrap();
    let pump = d.spawn_pump(Arc::from("worker"), sub);
    for (p, n) in [("user:alice", 1u32), ("agent:7", 2), ("user:alice", 3)] {
        bus.publish(Event::new("jobs.new", n.to_le_bytes().to_vec()).with_principal(p))
            .unwrap();
    }
    bus.publish(Event::new("other.topic", 9u32.to_le_bytes().to_vec()))
        .unwrap();
    settle().await;
    let mut got = log.lock().clone();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("agent:7".to_string(), 2),
            ("user:alice".to_string(), 1),
            ("user:alice".to_string(), 3)
        ]
    );
    assert!(d.has_queue("worker", "user:alice") && d.has_queue("worker", "agent:7"));
    pump.abort();
}

/// Polls `d.stats()` until `f` holds, for at most 5 s (failing with the last stats seen).
async fn until<H: sluice_bus::Handler>(
    d: &sluice_bus::Dispatcher<H>,
    what: &str,
    f: impl Fn(&sluice_bus::DispatcherStats) -> bool,
) {
    sluice_test_wait::wait_for(Duration::from_secs(5), what, || {
        let stats = d.stats();
        std::future::ready(if f(&stats) { Ok(()) } else { Err(stats) })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_report_the_waiting_events_and_when_the_oldest_was_published() {
    // Each handler waits for a permit, so the event a consumer took is in progress and the
    // ones behind it wait in its queue.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = Arc::clone(&gate);
    let d = DispatcherConfig::default().build(move |_k: DispatchKey, _e: Arc<Event>| {
        let g = Arc::clone(&g);
        async move { g.acquire().await.unwrap().forget() }
    });
    let svc: Arc<str> = Arc::from("svc");
    let t0 = std::time::Instant::now();
    let ev = |p: &str, ms: u64| {
        let mut e = Event::new("t", vec![]).with_principal(p);
        e.published_at = Some(t0 + Duration::from_millis(ms));
        Arc::new(e)
    };
    for (p, ms) in [
        ("alice", 0),
        ("alice", 10),
        ("alice", 20),
        ("bob", 5),
        ("bob", 7),
    ] {
        d.dispatch(&svc, ev(p, ms)).unwrap();
    }
    // Each consumer takes its first event: alice's 10 and 20 and bob's 7 wait.
    until(&d, "three events waiting in the queues", |s| s.queued == 3).await;
    assert_eq!(
        d.stats().oldest_published,
        Some(t0 + Duration::from_millis(7))
    );
    gate.add_permits(2);
    until(&d, "only alice's event 20 waiting", |s| s.queued == 1).await;
    assert_eq!(
        d.stats().oldest_published,
        Some(t0 + Duration::from_millis(20))
    );
    gate.add_permits(3);
    until(&d, "no event waiting and no oldest publish time", |s| {
        s.queued == 0 && s.oldest_published.is_none()
    })
    .await;
}
