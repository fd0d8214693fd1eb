//! Traces of a real `sluice run --otlp-endpoint`, received by a real OTLP/HTTP receiver in the
//! test and decoded with the `opentelemetry-proto` types: one ingress call whose job fans out
//! through `dispatch`, is refused by a full mailbox and then delivered by the relay is ONE
//! trace with the right parentage; a bus event published by a traced turn is delivered to
//! its subscriber in the same trace (ingress → publishing turn → `bus.deliver` → subscriber's
//! turn); a message an actor schedules for itself stays in the scheduling turn's trace; an
//! incoming `traceparent` is continued; a guest's `host.log` is an event of its turn's span.

use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use sluice_tests::otlp::otlp_receiver;
use sluice_tests::{SluiceRun, rust_app, sluice_binary, wait_until};

/// A dispatcher (`echo`), and a worker (`slow`) with a one-slot `error` mailbox.
const APP: &str = r#"
[[supervisor.children]]
name = "echo"
actor_type = "Echo"
module = "echo.wasm"

[[supervisor.children]]
name = "worker"
actor_type = "Slow"
module = "slow.wasm"
mailbox_capacity = 1
mailbox_strategy = "error"

[outbox]
partitions = 1
"#;

/// `sluice run APP --otlp-endpoint URL`, exporting every 100 ms.
async fn traced_run(otlp: &str, dir: &std::path::Path) -> SluiceRun {
    let bin = sluice_binary("sluice-traces");
    SluiceRun::start(
        &bin,
        dir,
        &["--otlp-endpoint", otlp],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100"), ("RUST_LOG", "info")],
    )
    .await
}

fn attr<'a>(s: &'a Span, key: &str) -> Option<&'a Any> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn attr_str<'a>(s: &'a Span, key: &str) -> &'a str {
    match attr(s, key) {
        Some(Any::StringValue(v)) => v,
        _ => "",
    }
}

fn attr_int(s: &Span, key: &str) -> Option<i64> {
    match attr(s, key) {
        Some(Any::IntValue(v)) => Some(*v),
        _ => None,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The `traceparent` a response names: (trace id, span id) in hex.
fn response_trace(resp: &reqwest::Response) -> (String, String) {
    let tp = resp
        .headers()
        .get("traceparent")
        .expect("a traced call answers with its traceparent")
        .to_str()
        .unwrap()
        .to_string();
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!(parts.len(), 4, "{tp}");
    (parts[1].to_string(), parts[2].to_string())
}

/// Asks `path` (`Type/key/ask/op`) through the ingress, as `principal` when given, expecting
/// the echo actor's `{"ok": true}`; returns the trace id and ingress span id it answered with.
async fn ask_ok_traced(
    run: &SluiceRun,
    path: &str,
    principal: Option<&str>,
    body: String,
) -> (String, String) {
    let mut req = reqwest::Client::new()
        .post(format!("{}/actors/{path}", run.ingress))
        .body(body);
    if let Some(p) = principal {
        req = req.header("x-sluice-principal", p);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let ids = response_trace(&resp);
    let reply: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(reply, serde_json::json!({"ok": true}), "{path}");
    ids
}

/// What the echo actor `id` recorded (`recorded`), read through the ingress.
async fn recorded(run: &SluiceRun, id: &str) -> serde_json::Value {
    reqwest::Client::new()
        .post(format!("{}/actors/{id}/ask/recorded", run.ingress))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The trace's one ingress span: the root, with the id the response's `traceparent` named.
fn root_ingress<'a>(spans: &'a [Span], ingress_id: &str) -> &'a Span {
    let ingress = one(spans, "ingress span", |s| s.name == "ingress");
    assert_eq!(hex(&ingress.span_id), ingress_id);
    assert!(
        ingress.parent_span_id.is_empty(),
        "the ingress span is the root"
    );
    ingress
}

fn one<'a>(spans: &'a [Span], what: &str, f: impl Fn(&Span) -> bool) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| f(s)).collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {what}, got {}: {spans:#?}",
        found.len()
    );
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_refused_once_then_relayed_is_one_trace_from_ingress_to_the_receiving_turn() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let run = traced_run(&otlp, dir.path()).await;
    let http = reqwest::Client::new();
    let tell = |msg_type: &'static str, payload: &'static str| {
        http.post(format!("{}/actors/Slow/w/tell/{msg_type}", run.ingress))
            .body(payload)
            .send()
    };

    // Fill the worker: a 1.5 s turn running, then short messages until its one slot is
    // taken and a tell is refused.
    assert_eq!(tell("sleep", "1500").await.unwrap().status(), 202);
    let mut refused = false;
    for _ in 0..50 {
        if tell("sleep", "1").await.unwrap().status() == 429 {
            refused = true;
            break;
        }
    }
    assert!(refused, "the worker's mailbox never filled");

    // The job: the dispatcher fans out to the full worker through the outbox.
    let job = serde_json::json!({"targets": ["Slow/w"], "msg_type": "job", "payload": "1"});
    let resp = http
        .post(format!("{}/actors/Echo/d/ask/dispatch", run.ingress))
        .body(job.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (trace_id, ingress_id) = response_trace(&resp);
    let reply: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        reply,
        serde_json::json!({"ok": true, "accepted": 0, "rejected": 1}),
        "the immediate attempt is refused and the job left to the relay"
    );

    // Wait (bounded) for the worker's turn on the job to be exported.
    let of_trace = |s: &Span| hex(&s.trace_id) == trace_id;
    wait_until(Duration::from_secs(30), "the receiving turn's span", || {
        received
            .spans()
            .iter()
            .any(|s| of_trace(s) && s.name == "turn" && attr_str(s, "msg_type") == "job")
    })
    .await;
    let spans: Vec<Span> = received.spans().into_iter().filter(of_trace).collect();
    let id = |s: &Span| hex(&s.span_id);
    let parent = |s: &Span| hex(&s.parent_span_id);

    let ingress = root_ingress(&spans, &ingress_id);
    assert_eq!(attr_str(ingress, "actor"), "Echo/d");
    let turn = one(&spans, "dispatcher turn", |s| {
        s.name == "turn" && attr_str(s, "actor") == "Echo/d"
    });
    assert_eq!(parent(turn), id(ingress));
    let dispatch = one(&spans, "dispatch span", |s| s.name == "outbox.dispatch");
    assert_eq!(parent(dispatch), id(turn));
    assert_eq!(attr_int(dispatch, "targets"), Some(1), "{dispatch:#?}");

    let mut attempts: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "outbox.attempt")
        .collect();
    attempts.sort_by_key(|s| attr_int(s, "attempt"));
    assert!(
        attempts.len() >= 2,
        "refused, then delivered: {attempts:#?}"
    );
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(
            parent(a),
            id(dispatch),
            "every attempt is a child of the dispatch"
        );
        assert_eq!(
            attr_int(a, "attempt"),
            Some(i as i64 + 1),
            "attempts count 1, 2, …"
        );
        assert_eq!(attr_str(a, "receiver"), "Slow/w");
    }
    let (last, before) = attempts.split_last().unwrap();
    assert_eq!(attr_str(before[0], "outcome"), "refused");
    assert!(
        attr_str(before[0], "error").starts_with("RESOURCE_EXHAUSTED: mailbox full"),
        "{:?}",
        attr_str(before[0], "error")
    );
    for a in before {
        assert_eq!(attr_str(a, "outcome"), "refused");
    }
    assert_eq!(attr_str(last, "outcome"), "delivered");

    let job_turn = one(&spans, "receiving turn", |s| {
        s.name == "turn" && attr_str(s, "msg_type") == "job"
    });
    assert_eq!(attr_str(job_turn, "actor"), "Slow/w");
    assert_eq!(
        parent(job_turn),
        id(last),
        "the worker's turn is the delivered attempt's child"
    );
    assert_eq!(attr_str(job_turn, "outcome"), "ok");

    // The fillers were traces of their own, not part of this one.
    assert!(
        !spans
            .iter()
            .any(|s| s.name == "turn" && attr_str(s, "msg_type") == "sleep"),
        "{spans:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incoming_traceparent_is_continued_and_a_guest_log_is_an_event_of_its_turn() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let run = traced_run(&otlp, dir.path()).await;
    let caller_trace = "0af7651916cd43dd8448eb211c80319c";
    let caller_span = "b7ad6b7169203331";
    let resp = reqwest::Client::new()
        .post(format!("{}/actors/Echo/l/ask/log", run.ingress))
        .header("traceparent", format!("00-{caller_trace}-{caller_span}-01"))
        .body("hello from the guest")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (trace_id, ingress_id) = response_trace(&resp);
    assert_eq!(trace_id, caller_trace, "the caller's trace is continued");
    assert_ne!(
        ingress_id, caller_span,
        "the ingress span is a new span in it"
    );

    let of_trace = |s: &Span| hex(&s.trace_id) == caller_trace;
    wait_until(Duration::from_secs(30), "the logging turn's span", || {
        received
            .spans()
            .iter()
            .any(|s| of_trace(s) && s.name == "turn")
    })
    .await;
    let spans: Vec<Span> = received.spans().into_iter().filter(of_trace).collect();
    let ingress = one(&spans, "ingress span", |s| s.name == "ingress");
    assert_eq!(hex(&ingress.parent_span_id), caller_span);
    let turn = one(&spans, "turn", |s| s.name == "turn");
    assert_eq!(hex(&turn.parent_span_id), hex(&ingress.span_id));
    assert!(
        turn.events.iter().any(|e| {
            e.name.contains("hello from the guest")
                || e.attributes.iter().any(|kv| {
                    matches!(kv.value.as_ref().and_then(|v| v.value.as_ref()),
                        Some(Any::StringValue(v)) if v.contains("hello from the guest"))
                })
        }),
        "the guest's log line is an event of its turn: {:#?}",
        turn.events
    );

    // A malformed traceparent starts a new trace instead of failing the call.
    let resp = reqwest::Client::new()
        .post(format!("{}/actors/Echo/l/ask/echo", run.ingress))
        .header("traceparent", "00-not-a-trace-01")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (fresh, _) = response_trace(&resp);
    assert_ne!(fresh, caller_trace);
    assert_eq!(fresh.len(), 32);
}

/// A message an actor schedules for itself is delivered in the trace of the turn that
/// scheduled it: ingress → scheduling turn → the scheduled message's turn, even after a delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_message_is_delivered_in_the_trace_of_the_turn_that_scheduled_it() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let run = traced_run(&otlp, dir.path()).await;
    let req = serde_json::json!({"delay_ms": 200, "msg_type": "record", "payload": "tick 1"});
    let (trace_id, ingress_id) =
        ask_ok_traced(&run, "Echo/timer/ask/schedule", None, req.to_string()).await;

    let of_trace = |s: &Span| hex(&s.trace_id) == trace_id;
    let fired = |s: &Span| of_trace(s) && s.name == "turn" && attr_str(s, "msg_type") == "record";
    wait_until(
        Duration::from_secs(30),
        "the scheduled message's turn",
        || received.spans().iter().any(fired),
    )
    .await;
    let spans: Vec<Span> = received.spans().into_iter().filter(of_trace).collect();
    let ingress = root_ingress(&spans, &ingress_id);
    let scheduling = one(&spans, "scheduling turn", |s| {
        s.name == "turn" && attr_str(s, "msg_type") == "schedule"
    });
    assert_eq!(hex(&scheduling.parent_span_id), hex(&ingress.span_id));
    let scheduled = one(&spans, "scheduled turn", |s| fired(s));
    assert_eq!(
        hex(&scheduled.parent_span_id),
        hex(&scheduling.span_id),
        "the scheduled turn is the scheduling turn's child: {spans:#?}"
    );
    assert_eq!(attr_str(scheduled, "actor"), "Echo/timer");
    assert_eq!(attr_str(scheduled, "outcome"), "ok");
    assert!(
        scheduled.start_time_unix_nano >= scheduling.end_time_unix_nano + 150_000_000,
        "the scheduled turn ran after its delay"
    );

    // And the message really arrived.
    let recorded = recorded(&run, "Echo/timer").await;
    assert_eq!(recorded["items"], serde_json::json!(["tick 1"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_traced_or_answered() {
    let dir = rust_app(&["echo", "slow"], APP);
    let bin = sluice_binary("sluice-traces");
    // No flag and no OTEL_* variable: no exporter, no trace context on the answer.
    let run = SluiceRun::start(&bin, dir.path(), &[], &[]).await;
    let resp = reqwest::Client::new()
        .post(format!("{}/actors/Echo/n/ask/echo", run.ingress))
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("traceparent").is_none());
}

/// A publisher (`Echo/pub`), a routed subscriber (`Echo/audit`) and a dispatch subscriber
/// (`Session/{principal}`) of `evt.*.created`.
const BUS_APP: &str = r#"
[[supervisor.children]]
name = "echo"
actor_type = "Echo"
module = "echo.wasm"

[[supervisor.children]]
name = "session"
actor_type = "Session"
module = "echo.wasm"

[[bus.subscriptions]]
actor_type = "Echo"
key = "audit"
topic = "evt.*.created"

[[bus.subscriptions]]
actor_type = "Session"
topic = "evt.*.created"
mode = "dispatch"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bus_event_is_one_trace_from_ingress_through_the_delivery_to_the_subscribers_turn() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo"], BUS_APP);
    let run = traced_run(&otlp, dir.path()).await;
    let event = serde_json::json!({"topic": "evt.order.created", "payload": "order 7"});
    let (trace_id, ingress_id) = ask_ok_traced(
        &run,
        "Echo/pub/ask/publish",
        Some("dana"),
        event.to_string(),
    )
    .await;

    // Wait (bounded) for both subscribers' turns on the event to be exported.
    let of_trace = |s: &Span| hex(&s.trace_id) == trace_id;
    let delivered = |s: &Span| {
        of_trace(s) && s.name == "turn" && attr_str(s, "msg_type") == "evt.order.created"
    };
    wait_until(
        Duration::from_secs(30),
        "both subscribers' turn spans",
        || received.spans().iter().filter(|s| delivered(s)).count() == 2,
    )
    .await;
    let spans: Vec<Span> = received.spans().into_iter().filter(of_trace).collect();
    let id = |s: &Span| hex(&s.span_id);
    let parent = |s: &Span| hex(&s.parent_span_id);

    let ingress = root_ingress(&spans, &ingress_id);
    let publishing = one(&spans, "publishing turn", |s| {
        s.name == "turn" && attr_str(s, "actor") == "Echo/pub"
    });
    assert_eq!(parent(publishing), id(ingress));
    assert_eq!(attr_str(publishing, "msg_type"), "publish");

    assert_eq!(
        spans.iter().filter(|s| s.name == "bus.deliver").count(),
        2,
        "one delivery per subscriber: {spans:#?}"
    );
    // The routed subscriber, then the dispatch subscriber (keyed by the publisher's principal).
    for subscriber in ["Echo/audit", "Session/dana"] {
        let delivery = one(&spans, "bus delivery", |s| {
            s.name == "bus.deliver" && attr_str(s, "subscriber") == subscriber
        });
        assert_eq!(
            parent(delivery),
            id(publishing),
            "the delivery to {subscriber} is a child of the publishing turn"
        );
        assert_eq!(attr_str(delivery, "topic"), "evt.order.created");
        assert_eq!(attr_str(delivery, "outcome"), "delivered");

        let sub_turn = one(&spans, "subscriber's turn", |s| {
            s.name == "turn" && attr_str(s, "actor") == subscriber
        });
        assert_eq!(attr_str(sub_turn, "msg_type"), "evt.order.created");
        assert_eq!(
            parent(sub_turn),
            id(delivery),
            "{subscriber}'s turn is its delivery's child"
        );
        assert_eq!(attr_str(sub_turn, "outcome"), "ok");
    }

    // And the event really reached both subscribers.
    for subscriber in ["Echo/audit", "Session/dana"] {
        let recorded = recorded(&run, subscriber).await;
        assert_eq!(
            recorded["items"],
            serde_json::json!(["order 7"]),
            "{subscriber}"
        );
    }
}

/// Spans still batched when `sluice run` is stopped are exported, not dropped: with a batch
/// delay far longer than the test, the call's spans reach the receiver only through the
/// shutdown flush that SIGTERM leads to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_still_batched_at_sigterm_are_exported_before_exit() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let mut run = SluiceRun::start(
        &sluice_binary("sluice-traces"),
        dir.path(),
        &["--otlp-endpoint", &otlp],
        &[("OTEL_BSP_SCHEDULE_DELAY", "600000"), ("RUST_LOG", "info")],
    )
    .await;
    let resp = reqwest::Client::new()
        .post(format!("{}/actors/Echo/f/ask/echo", run.ingress))
        .body("flushed at exit")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (trace_id, ingress_id) = response_trace(&resp);
    assert!(
        received.spans().is_empty(),
        "exported before the 10 min batch delay: the test would prove nothing"
    );
    run.terminate();
    let exit = run.wait_exit(Duration::from_secs(30)).await;
    assert!(exit.is_some_and(|s| s.success()), "exit: {exit:?}");
    let spans: Vec<Span> = received
        .spans()
        .into_iter()
        .filter(|s| hex(&s.trace_id) == trace_id)
        .collect();
    root_ingress(&spans, &ingress_id);
    one(&spans, "turn", |s| s.name == "turn");
}
