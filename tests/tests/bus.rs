//! The event bus on the real host with real guests: `bus.publish` from a guest, delivery to
//! subscribers declared in the bus config with the publisher's principal intact, topic
//! grammar and IPC rate-limit refusals as every SDK sees them; then (Rust guest only) routed
//! fairness end to end, broadcast lag, the ingress principal header and the metrics.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_runtime::{
    BusSettings, CallOptions, ChildSpec, ErrorCode, Host, HostConfig, HostError, LoadError,
    RateLimitSettings, Subscription, SubscriptionStats,
};
use sluice_tests::{
    Lang, json, per_language, poly_host, recorded_items as items_of, rust_app, rust_guest,
    test_config, wait_for, wait_until,
};

const T: Duration = Duration::from_secs(60);

per_language!(
    published_event_reaches_subscribers_with_the_principal_intact,
    bad_topic_reaches_guest_as_invalid_argument,
    rate_limit_refusal_reaches_guest_as_resource_exhausted,
);

fn bus_config(bus: BusSettings) -> HostConfig {
    HostConfig {
        bus,
        ..test_config()
    }
}

fn as_principal(p: &str) -> CallOptions {
    CallOptions {
        deadline: Some(Instant::now() + T),
        principal: Some(Arc::from(p)),
        ..Default::default()
    }
}

/// Has `Echo/pub` run an SDK call on behalf of `principal`; returns its JSON report.
async fn guest_call(host: &Host, principal: &str, op: &str, req: Value) -> Value {
    let reply = host
        .ask_with("Echo/pub", op, req.to_string(), as_principal(principal))
        .await
        .unwrap_or_else(|e| panic!("{op} {req}: {e}"));
    json(&reply)
}

/// What `id` recorded, once it holds at least `n` items (bounded wait).
async fn recorded(host: &Host, id: &str, n: usize) -> Value {
    let what = format!("{id} to record {n} events");
    wait_for(Duration::from_secs(30), &what, || async move {
        let r = json(&host.ask(id, "recorded", "", T).await.unwrap());
        let have = r["items"].as_array().map_or(0, Vec::len);
        if have >= n { Ok(r) } else { Err(r) }
    })
    .await
}

fn stats_of(host: &Host, actor: &str) -> SubscriptionStats {
    host.bus_stats()
        .into_iter()
        .find(|s| s.actor == actor)
        .unwrap_or_else(|| panic!("no subscription for {actor}"))
}

async fn published_event_reaches_subscribers_with_the_principal_intact(lang: Lang) {
    let bus = BusSettings::default()
        .subscribe(Subscription::routed("Echo", "sub", "evt.orders.*"))
        .subscribe(Subscription::broadcast("Echo", "all", "evt.*"));
    let Some(host) = poly_host(
        bus_config(bus),
        lang,
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await
    else {
        return;
    };
    let r = guest_call(
        &host,
        "alice",
        "publish",
        json!({"topic": "evt.orders.created", "payload": "o-1"}),
    )
    .await;
    assert_eq!(r, json!({"ok": true}));
    // Not matched by the routed pattern (`evt.orders.*` needs a further segment).
    let r = guest_call(
        &host,
        "bob",
        "publish",
        json!({"topic": "evt.orders", "payload": "o-2"}),
    )
    .await;
    assert_eq!(r, json!({"ok": true}));

    let sub = recorded(&host, "Echo/sub", 1).await;
    assert_eq!(sub["items"], json!(["o-1"]), "{sub}");
    assert_eq!(
        sub["envelopes"][0],
        json!({"msg_type": "evt.orders.created", "principal": "alice", "sender": "Echo/pub"})
    );
    let all = recorded(&host, "Echo/all", 2).await;
    assert_eq!(all["items"], json!(["o-1", "o-2"]), "{all}");
    assert_eq!(all["envelopes"][1]["principal"], "bob", "{all}");
    assert_eq!(all["envelopes"][1]["msg_type"], "evt.orders", "{all}");

    // The Rust API publishes as the host: no sender, `system` unless a principal is given.
    host.publish("evt.orders.paid", "o-3", None).unwrap();
    host.publish("evt.orders.shipped", "o-4", Some("carol"))
        .unwrap();
    let sub = recorded(&host, "Echo/sub", 3).await;
    assert_eq!(sub["items"], json!(["o-1", "o-3", "o-4"]), "{sub}");
    assert_eq!(
        sub["envelopes"][1],
        json!({"msg_type": "evt.orders.paid", "principal": "system", "sender": null})
    );
    assert_eq!(sub["envelopes"][2]["principal"], "carol");

    // A tell made inside alice's turn carries alice too.
    let r = guest_call(
        &host,
        "alice",
        "tell",
        json!({"to": "Echo/told", "msg_type": "record", "payload": "t-1"}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    let told = recorded(&host, "Echo/told", 1).await;
    assert_eq!(told["envelopes"][0]["principal"], "alice", "{told}");

    let s = stats_of(&host, "Echo/sub");
    assert_eq!((s.delivered, s.retried, s.queued), (3, 0, 0), "{s:?}");
}

async fn bad_topic_reaches_guest_as_invalid_argument(lang: Lang) {
    let Some(host) = poly_host(
        test_config(),
        lang,
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await
    else {
        return;
    };
    let deep = vec!["s"; 21].join(".");
    for topic in ["evt..x", "", "evt.*", deep.as_str()] {
        let r = guest_call(
            &host,
            "alice",
            "publish",
            json!({"topic": topic, "payload": "x"}),
        )
        .await;
        assert_eq!(r["ok"], false, "{topic}: {r}");
        assert_eq!(r["error"]["type"], "InvalidArgument", "{topic}: {r}");
        assert_eq!(r["error"]["code"], "invalid-argument", "{topic}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with("INVALID_ARGUMENT: "), "{msg}");
    }
    // Twenty segments is the limit, not past it.
    let ok = vec!["s"; 20].join(".");
    let r = guest_call(
        &host,
        "alice",
        "publish",
        json!({"topic": ok, "payload": "x"}),
    )
    .await;
    assert_eq!(r, json!({"ok": true}));
}

async fn rate_limit_refusal_reaches_guest_as_resource_exhausted(lang: Lang) {
    let mut rl = RateLimitSettings::default();
    rl.quotas.insert("limited".into(), 100);
    let bus = BusSettings::default().rate_limit(rl);
    let Some(host) = poly_host(
        bus_config(bus),
        lang,
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await
    else {
        return;
    };
    let payload = "x".repeat(60);
    let publish = json!({"topic": "evt.a", "payload": payload});
    let tell = json!({"to": "Echo/2", "msg_type": "echo", "payload": payload});
    let remind = json!({"name": "", "delay_ms": 60_000, "msg_type": "echo", "payload": payload});
    // `remind` needs somewhere to keep its reminders.
    let _outbox = sluice_tests::attach_sqlite_outbox(&host).await;
    // 60 + 60 bytes exceed the 100-byte window: the second (or, across a window boundary,
    // the third) call is refused. `tell` and `remind` draw on the same (Echo, limited) budget.
    for (op, req) in [("publish", &publish), ("tell", &tell), ("remind", &remind)] {
        let mut refusal = None;
        for _ in 0..4 {
            let r = guest_call(&host, "limited", op, req.clone()).await;
            if r["ok"] == false {
                refusal = Some(r);
                break;
            }
        }
        let r = refusal.unwrap_or_else(|| panic!("{op}: never refused"));
        assert_eq!(r["error"]["type"], "ResourceExhausted", "{op}: {r}");
        assert_eq!(r["error"]["code"], "resource-exhausted", "{op}: {r}");
        let retry = r["error"]["retry_after_ms"].as_u64().expect("a retry hint");
        assert!((1..=1000).contains(&retry), "{op}: {r}");
        assert_eq!(
            r["error"]["message"],
            format!("RESOURCE_EXHAUSTED: ipc rate limit exceeded (retry_after_ms={retry})"),
        );
    }
    // Alice's budget is her own (the default 10 MiB/s).
    let r = guest_call(&host, "alice", "publish", publish.clone()).await;
    assert_eq!(r, json!({"ok": true}));
    // A payload larger than the whole quota can never pass: INVALID_ARGUMENT, no retry hint.
    let big = json!({"topic": "evt.a", "payload": "y".repeat(101)});
    let r = guest_call(&host, "limited", "publish", big).await;
    assert_eq!(r["error"]["type"], "InvalidArgument", "{r}");
    assert_eq!(r["error"]["retry_after_ms"], Value::Null, "{r}");
}

/// Starts a host with `bus` and no actor types yet: subscriptions exist (routed ones queue)
/// but deliveries wait until `Echo` is deployed.
async fn undeployed_host(bus: BusSettings) -> Host {
    Host::new(bus_config(bus)).expect("host starts")
}

async fn deploy_echo(host: &Host) {
    let bytes = std::fs::read(rust_guest("echo")).unwrap();
    host.deploy(ChildSpec::new("Echo", "echo.wasm"), bytes)
        .await
        .unwrap();
}

async fn wait_stats(
    host: &Host,
    actor: &str,
    what: &str,
    mut f: impl FnMut(&SubscriptionStats) -> bool,
) -> SubscriptionStats {
    let mut last = None;
    wait_until(Duration::from_secs(30), what, || {
        let s = stats_of(host, actor);
        let ok = f(&s);
        last = Some(s);
        ok
    })
    .await;
    last.expect("polled at least once")
}

/// One principal floods 300 events, two others publish 10 each, all before the subscriber
/// exists. The routed subscription's DRR drain interleaves them: the small principals are
/// through after one flood quantum instead of after the whole flood (FIFO), and the flood's
/// excess over the byte budget is evicted oldest-first and counted, never lost silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_delivery_is_fair_across_principals_end_to_end() {
    let bus = BusSettings {
        route_budget_bytes: 16 * 1024,
        min_quantum_bytes: 256,
        delivery_window: 1,
        ..BusSettings::default()
    }
    .subscribe(Subscription::routed("Echo", "sub", "evt.f"));
    let host = undeployed_host(bus).await;
    let pad = "p".repeat(90);
    for i in 0..300 {
        host.publish("evt.f", format!("flood:{i}:{pad}"), Some("flood"))
            .unwrap();
    }
    for i in 0..10 {
        for p in ["bob", "carol"] {
            host.publish("evt.f", format!("{p}:{i}:{pad}"), Some(p))
                .unwrap();
        }
    }
    let before = stats_of(&host, "Echo/sub");
    assert!(
        before.evicted > 100,
        "the flood overran the budget: {before:?}"
    );
    assert_eq!(before.active_principals, 3, "{before:?}");
    // The pump has taken one event and holds it while Echo is missing; which one depends on
    // when it ran, and the DRR turn it started alone must shrink once the others arrived.
    wait_stats(
        &host,
        "Echo/sub",
        "an event held while Echo is missing",
        |s| s.retried > 0,
    )
    .await;
    deploy_echo(&host).await;
    let s = wait_stats(&host, "Echo/sub", "drained", |s| {
        s.queued == 0 && s.delivered > 0
    })
    .await;
    let total = s.delivered as usize;
    let r = recorded(&host, "Echo/sub", total).await;
    let principals: Vec<&str> = r["envelopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["principal"].as_str().unwrap())
        .collect();
    let count = |p: &str| principals.iter().filter(|x| **x == p).count();
    assert_eq!(count("bob"), 10, "{principals:?}");
    assert_eq!(count("carol"), 10, "{principals:?}");
    // Every flood event was either delivered or evicted (and counted).
    assert_eq!(count("flood") as u64 + s.evicted, 300, "{s:?}");
    // Quantum = max(256, 16 KiB / 3 principals) ≈ 52 events of ~100 bytes: bob and carol are
    // done within the first flood quantum plus their own 20 (plus the one event held while
    // the type was missing), long before the flood's ~150 surviving events.
    let last_small = principals.iter().rposition(|p| *p != "flood").unwrap();
    assert!(
        last_small < 80,
        "bob/carol finished at position {last_small} of {total}: {principals:?}"
    );
    assert!(count("flood") > last_small, "{principals:?}");
    // FIFO order within each principal.
    let items: Vec<&str> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for p in ["flood", "bob", "carol"] {
        let seq: Vec<u32> = items
            .iter()
            .filter(|i| i.starts_with(&format!("{p}:")))
            .map(|i| i.split(':').nth(1).unwrap().parse().unwrap())
            .collect();
        assert!(seq.windows(2).all(|w| w[0] < w[1]), "{p}: {seq:?}");
    }
}

/// A broadcast subscriber reads the shared ring; when it falls behind (here: its actor type
/// is not deployed yet) it skips ahead to the oldest retained event and counts the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_subscriber_that_falls_behind_skips_ahead_and_counts_lag() {
    let bus = BusSettings {
        broadcast_capacity: 16,
        ..BusSettings::default()
    }
    .subscribe(Subscription::broadcast("Echo", "b", "evt.lag.*"));
    let host = undeployed_host(bus).await;
    for i in 0..200 {
        host.publish("evt.lag.x", i.to_string(), Some("alice"))
            .unwrap();
    }
    wait_stats(
        &host,
        "Echo/b",
        "an event held while Echo is missing",
        |s| s.retried > 0,
    )
    .await;
    deploy_echo(&host).await;
    let s = wait_stats(&host, "Echo/b", "delivered + lagged = published", |s| {
        s.delivered + s.lagged == 200
    })
    .await;
    assert!(s.lagged >= 200 - 16 - 1, "{s:?}");
    let r = recorded(&host, "Echo/b", s.delivered as usize).await;
    let items = r["items"].as_array().unwrap();
    assert_eq!(items.len() as u64, s.delivered, "{r}");
    // What survived is the newest: the ring's last 16 events.
    assert_eq!(items.last().unwrap(), "199", "{r}");
    assert_eq!(items[items.len() - 16], "184", "{r}");
}

async fn serve(router: axum::Router) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, router).await.unwrap() });
    addr
}

/// The principal set at ingress (`x-sluice-principal`) reaches the subscriber of an event the
/// called actor published; the bus metrics are exported with class labels only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_principal_reaches_subscriber_and_metrics_are_exported() {
    // Metric handles bind to the recorder present when they are made: install it first.
    let metrics = sluice_cli::metrics_export::handle();
    let mut rl = RateLimitSettings::default();
    rl.quotas.insert("agent:tiny".into(), 1);
    let bus = BusSettings::default()
        .rate_limit(rl)
        .subscribe(Subscription::routed("Echo", "sub", "evt.*"));
    let host = undeployed_host(bus).await;
    deploy_echo(&host).await;
    let base = format!(
        "http://{}",
        serve(sluice_cli::ingress::router(host.clone())).await
    );
    let http = reqwest::Client::new();
    let resp = http
        .post(format!("{base}/actors/Echo/pub/ask/publish"))
        .header("x-sluice-principal", "user-7")
        .body(json!({"topic": "evt.ingress", "payload": "hello"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap(), json!({"ok": true}));
    let r = recorded(&host, "Echo/sub", 1).await;
    assert_eq!(
        r["envelopes"][0],
        json!({"msg_type": "evt.ingress", "principal": "user-7", "sender": "Echo/pub"})
    );
    let r = guest_call(
        &host,
        "agent:tiny",
        "publish",
        json!({"topic": "evt.x", "payload": "zz"}),
    )
    .await;
    assert_eq!(r["ok"], false, "{r}");

    let text = metrics.render();
    for needle in [
        "sluice_bus_events_published_total{kind=\"ipc\"}",
        "sluice_bus_deliveries_total{actor_type=\"Echo\",outcome=\"delivered\"}",
        "sluice_ipc_rate_limited_total{class=\"agent\",reason=\"exceeds_quota\"}",
        "sluice_bus_publish_refused_total{reason=\"rate_limited\"}",
        "sluice_bus_active_principals{subscriber=\"Echo\"}",
        "sluice_bus_budget_in_use_bytes{subscriber=\"Echo\"}",
    ] {
        assert!(text.contains(needle), "missing {needle} in:\n{text}");
    }
    // Principal ids never become label values.
    assert!(
        !text.contains("user-7") && !text.contains("agent:tiny"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_subscription_patterns_are_typed_config_errors() {
    let bad = BusSettings::default().subscribe(Subscription::routed("Echo", "1", "evt.*x"));
    let e = Host::new(bus_config(bad)).err().expect("refused");
    assert!(
        matches!(e, HostError::Invalid(LoadError::Subscription { .. })),
        "{e}"
    );
    let host = Host::new(test_config()).unwrap();
    let deep = vec!["a"; 21].join(".");
    let e = host
        .subscribe(Subscription::broadcast("Echo", "1", &deep))
        .unwrap_err();
    assert!(e.to_string().contains("more than 20 segments"), "{e}");
    let mut keyed = Subscription::dispatch("Echo", "evt.*");
    keyed.key = "1".into();
    let e = host.subscribe(keyed).unwrap_err();
    assert!(e.to_string().contains("has no key"), "{e}");
    assert_eq!(
        host.publish("a..b", "", None).unwrap_err().code,
        ErrorCode::InvalidArgument
    );
}

/// Deliveries into a full `error` mailbox are held and retried, never lost; a `drop_newest`
/// mailbox applies its strategy and the drops are counted. The subscribers are `slow`
/// actors (each event's payload is the milliseconds its turn takes) with one-slot mailboxes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_mailbox_delays_deliveries_and_drops_are_counted() {
    use sluice_runtime::MailboxStrategy;
    let bus = BusSettings {
        // More in flight than the mailboxes hold: the mailbox, not the window, refuses.
        delivery_window: 8,
        ..BusSettings::default()
    }
    .subscribe(Subscription::routed("Tight", "1", "evt.m"))
    .subscribe(Subscription::routed("Lossy", "1", "evt.m"));
    let host = undeployed_host(bus).await;
    let bytes = std::fs::read(rust_guest("slow")).unwrap();
    for (ty, strategy) in [
        ("Tight", MailboxStrategy::Error),
        ("Lossy", MailboxStrategy::DropNewest),
    ] {
        let spec = ChildSpec::new(ty, "slow.wasm").mailbox(1, strategy);
        host.deploy(spec, bytes.clone()).await.unwrap();
    }
    for _ in 0..20 {
        host.publish("evt.m", "15", Some("alice")).unwrap();
    }
    let tight = wait_stats(&host, "Tight/1", "all delivered", |s| s.delivered == 20).await;
    assert_eq!(tight.dropped, 0, "{tight:?}");
    assert!(tight.retried > 0, "the full mailbox refused: {tight:?}");
    let lossy = wait_stats(&host, "Lossy/1", "all accounted for", |s| {
        s.delivered + s.dropped == 20
    })
    .await;
    assert!(lossy.dropped > 0, "{lossy:?}");
    assert_eq!(lossy.retried, 0, "drop_newest never refuses: {lossy:?}");
}

/// `[bus]` in `app-config.toml` configures the host `sluice run` starts (via `from_app_dir`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_config_bus_table_declares_subscriptions_and_limits() {
    let dir = rust_app(
        &["echo"],
        r#"
        [[supervisor.children]]
        name = "echo"
        actor_type = "Echo"
        module = "echo.wasm"

        [bus]
        delivery_window = 2
        [bus.rate_limit]
        quotas = { "agent:tiny" = 1 }
        [[bus.subscriptions]]
        actor_type = "Echo"
        key = "audit"
        topic = "evt.*.created"
        "#,
    );
    let (host, app) = sluice_app::start(dir.path(), |c| {
        c.cache_dir = test_config().cache_dir;
    })
    .await
    .unwrap();
    assert_eq!(app.bus.subscriptions.len(), 1);
    assert_eq!(host.config().bus.delivery_window, 2);
    let r = guest_call(
        &host,
        "dana",
        "publish",
        json!({"topic": "evt.order.created", "payload": "c-1"}),
    )
    .await;
    assert_eq!(r, json!({"ok": true}));
    let rec = recorded(&host, "Echo/audit", 1).await;
    assert_eq!(rec["envelopes"][0]["principal"], "dana", "{rec}");
    let r = guest_call(
        &host,
        "agent:tiny",
        "publish",
        json!({"topic": "evt.order.created", "payload": "too big"}),
    )
    .await;
    assert_eq!(r["error"]["type"], "InvalidArgument", "{r}");
    host.stop().await;
}

async fn deploy_slow(host: &Host) {
    let bytes = std::fs::read(rust_guest("slow")).unwrap();
    host.deploy(ChildSpec::new("Slow", "slow.wasm"), bytes)
        .await
        .unwrap();
}

/// A dispatch subscription hands principal p's events to the actor `Echo/p`, in publish
/// order; a consumer idle past `dispatch_idle_ms` frees its queue, and an event published
/// after that starts a fresh one and is delivered (idle eviction never loses an event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_subscription_gives_each_principal_its_own_actor_in_order() {
    let bus = BusSettings {
        dispatch_idle_ms: 200,
        ..BusSettings::default()
    }
    .subscribe(Subscription::dispatch("Echo", "evt.d.*"));
    let host = undeployed_host(bus).await;
    deploy_echo(&host).await;
    for i in 0..30 {
        for p in ["alice", "bob"] {
            host.publish("evt.d.x", format!("{p}:{i}"), Some(p))
                .unwrap();
        }
    }
    for p in ["alice", "bob"] {
        let r = recorded(&host, &format!("Echo/{p}"), 30).await;
        let want: Vec<String> = (0..30).map(|i| format!("{p}:{i}")).collect();
        assert_eq!(items_of(&r), want, "{p}");
        for e in r["envelopes"].as_array().unwrap() {
            assert_eq!(e["principal"], p, "{r}");
        }
    }
    let s = stats_of(&host, "Echo/{principal}");
    assert_eq!(
        (s.mode, s.delivered, s.dropped),
        ("dispatch", 60, 0),
        "{s:?}"
    );
    // Both consumers go idle and free their queues.
    let s = wait_stats(&host, "Echo/{principal}", "idle queues freed", |s| {
        s.dispatch
            .is_some_and(|d| d.queues == 0 && d.idle_evictions >= 2)
    })
    .await;
    assert_eq!(s.dispatch.unwrap().overflowed, 0, "{s:?}");
    host.publish("evt.d.x", "alice:30", Some("alice")).unwrap();
    let r = recorded(&host, "Echo/alice", 31).await;
    assert_eq!(items_of(&r).last().unwrap(), "alice:30");
}

/// One principal's actor is stuck (its turn waits 8 s on `Slow`): its dispatcher queue
/// (capacity 1) fills and the next event is dropped and counted, while another principal —
/// folded into the `system` queue by a cap of one queue per actor type — is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_isolates_a_stuck_principal_and_counts_what_its_full_queue_drops() {
    let bus = BusSettings {
        dispatch_queue_capacity: 1,
        dispatch_max_queues_per_actor_type: 1,
        ..BusSettings::default()
    }
    .subscribe(Subscription::dispatch("Echo", "evt.d.*"));
    let host = undeployed_host(bus).await;
    deploy_echo(&host).await;
    deploy_slow(&host).await;
    // Queued at once (a tell is synchronous): alice's actor is busy for 8 s from now.
    let stuck_at = Instant::now();
    host.tell(
        "Echo/alice",
        "ask",
        json!({"to": "Slow/x", "msg_type": "sleep", "payload": "8000", "timeout_ms": 15000})
            .to_string(),
    )
    .await
    .unwrap();
    host.publish("evt.d.x", "alice:1", Some("alice")).unwrap();
    // alice:1 is in Echo/alice's mailbox; her consumer waits for that turn.
    wait_stats(&host, "Echo/{principal}", "alice:1 handed over", |s| {
        s.delivered == 1
    })
    .await;
    host.publish("evt.d.x", "alice:2", Some("alice")).unwrap();
    wait_stats(&host, "Echo/{principal}", "alice:2 queued", |s| {
        s.queued == 0
    })
    .await;
    host.publish("evt.d.x", "alice:3", Some("alice")).unwrap();
    let s = wait_stats(&host, "Echo/{principal}", "alice:3 dropped", |s| {
        s.dropped == 1
    })
    .await;
    assert_eq!(s.delivered, 1, "{s:?}");
    // Bob exceeds the one-queue cap: he shares the system queue and is served meanwhile.
    host.publish("evt.d.x", "bob:1", Some("bob")).unwrap();
    let r = recorded(&host, "Echo/bob", 1).await;
    assert!(
        stuck_at.elapsed() < Duration::from_millis(8000),
        "bob waited for alice's stuck turn"
    );
    assert_eq!(items_of(&r), ["bob:1"]);
    assert_eq!(r["envelopes"][0]["principal"], "bob");
    let s = stats_of(&host, "Echo/{principal}");
    assert_eq!(s.dispatch.unwrap().overflowed, 1, "{s:?}");
    // Alice gets what her queue held, in order; alice:3 was dropped (and counted).
    let r = recorded(&host, "Echo/alice", 2).await;
    assert_eq!(items_of(&r), ["alice:1", "alice:2"]);
}
