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
use sluice_tests::otlp::{Received, otlp_receiver};
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

/// Asks `path` (`Type/key/ask/op`) through the ingress, as `principal` when given; returns
/// the trace id and ingress span id it answered with, and its JSON reply.
async fn ask_traced(
    run: &SluiceRun,
    path: &str,
    principal: Option<&str>,
    body: String,
) -> ((String, String), serde_json::Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{}/actors/{path}", run.ingress))
        .body(body);
    if let Some(p) = principal {
        req = req.header("x-sluice-principal", p);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    let ids = response_trace(&resp);
    (ids, resp.json().await.unwrap())
}

/// [`ask_traced`], expecting the echo actor's `{"ok": true}`.
async fn ask_ok_traced(
    run: &SluiceRun,
    path: &str,
    principal: Option<&str>,
    body: String,
) -> (String, String) {
    let (ids, reply) = ask_traced(run, path, principal, body).await;
    assert_eq!(reply, serde_json::json!({"ok": true}), "{path}");
    ids
}

/// Waits (bounded) until the spans received for `trace_id` hold the ingress span and satisfy
/// `done`, and returns them. (Spans are exported as they end, so a turn a message started
/// can arrive before the ingress span that answered the call.)
async fn trace_spans(
    received: &Received,
    trace_id: &str,
    what: &str,
    done: impl Fn(&[Span]) -> bool,
) -> Vec<Span> {
    let of_trace = || -> Vec<Span> {
        received
            .spans()
            .into_iter()
            .filter(|s| hex(&s.trace_id) == trace_id)
            .collect()
    };
    let complete = |spans: &[Span]| spans.iter().any(|s| s.name == "ingress") && done(spans);
    wait_until(Duration::from_secs(30), what, || complete(&of_trace())).await;
    of_trace()
}

/// The turn span of `actor` on `msg_type` among `spans` (exactly one).
fn turn_of<'a>(spans: &'a [Span], actor: &str, msg_type: &str) -> &'a Span {
    one(spans, &format!("{actor}'s {msg_type} turn"), |s| {
        s.name == "turn" && attr_str(s, "actor") == actor && attr_str(s, "msg_type") == msg_type
    })
}

/// Whether `spans` hold a turn of `actor` on `msg_type`.
fn has_turn(spans: &[Span], actor: &str, msg_type: &str) -> bool {
    spans.iter().any(|s| {
        s.name == "turn" && attr_str(s, "actor") == actor && attr_str(s, "msg_type") == msg_type
    })
}

/// The relay attempts among `spans` for `receiver`, by attempt number; checks they count
/// 1, 2, … and are all children of `parent`.
fn attempts_for<'a>(spans: &'a [Span], receiver: &str, parent: &Span) -> Vec<&'a Span> {
    let mut attempts: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "outbox.attempt" && attr_str(s, "receiver") == receiver)
        .collect();
    attempts.sort_by_key(|s| attr_int(s, "attempt"));
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(
            attr_int(a, "attempt"),
            Some(i as i64 + 1),
            "{receiver}'s attempts count 1, 2, …: {attempts:#?}"
        );
        assert_eq!(
            a.parent_span_id,
            parent.span_id,
            "{receiver}'s attempt {} is a child of {}",
            i + 1,
            parent.name
        );
    }
    attempts
}

/// Makes the worker `Slow/w` refuse: a `running_ms` turn running and its one slot taken.
async fn fill_worker(run: &SluiceRun, running_ms: u64) {
    let http = reqwest::Client::new();
    let tell = |payload: String| {
        http.post(format!("{}/actors/Slow/w/tell/sleep", run.ingress))
            .body(payload)
            .send()
    };
    assert_eq!(tell(running_ms.to_string()).await.unwrap().status(), 202);
    for _ in 0..50 {
        if tell("1".into()).await.unwrap().status() == 429 {
            return;
        }
    }
    panic!("the worker's mailbox never filled");
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

/// A job fanned out to two targets: the full worker refuses its copy once (the relay then
/// delivers it), the echo actor takes its copy at once. One trace holds both: ingress →
/// dispatcher's turn → `outbox.dispatch` → each target's attempts → each target's turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_refused_once_then_relayed_is_one_trace_from_ingress_to_the_receiving_turn() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let run = traced_run(&otlp, dir.path()).await;
    let http = reqwest::Client::new();

    // Exactly one refusal: a first 2 s turn makes the worker's mean turn 2 s, so a refusal
    // tells the relay to come back in no less than 2 s (one queued turn × the mean), while the
    // turn running at the refusal ends within 0.8 s and the one queued 1 ms turn after it.
    let primed = http
        .post(format!("{}/actors/Slow/w/ask/sleep", run.ingress))
        .body("2000")
        .send()
        .await
        .unwrap();
    assert_eq!(primed.status(), 200);
    fill_worker(&run, 800).await;

    // The job: the dispatcher fans out to the full worker and to an idle echo actor.
    let job =
        serde_json::json!({"targets": ["Slow/w", "Echo/r"], "msg_type": "job", "payload": "1"});
    let ((trace_id, ingress_id), reply) =
        ask_traced(&run, "Echo/d/ask/dispatch", None, job.to_string()).await;
    assert_eq!(
        reply,
        serde_json::json!({"ok": true, "delivered": 1, "deduplicated": 0, "queued": 1,
            "dead_lettered": 0, "outcomes": ["queued-refused", "delivered"]}),
        "the worker's immediate attempt is refused and left to the relay; the echo actor's is taken"
    );

    // Wait (bounded) for both targets' turns on the job to be exported.
    let spans = trace_spans(&received, &trace_id, "both receiving turns", |spans| {
        has_turn(spans, "Slow/w", "job") && has_turn(spans, "Echo/r", "job")
    })
    .await;

    let ingress = root_ingress(&spans, &ingress_id);
    assert_eq!(attr_str(ingress, "actor"), "Echo/d");
    let turn = turn_of(&spans, "Echo/d", "dispatch");
    assert_eq!(turn.parent_span_id, ingress.span_id);
    let dispatch = one(&spans, "dispatch span", |s| s.name == "outbox.dispatch");
    assert_eq!(dispatch.parent_span_id, turn.span_id);
    assert_eq!(attr_int(dispatch, "targets"), Some(2), "{dispatch:#?}");
    assert_eq!(
        spans.iter().filter(|s| s.name == "outbox.attempt").count(),
        3,
        "the worker's refused and delivered attempts, the echo actor's one: {spans:#?}"
    );

    // The worker: refused once with RESOURCE_EXHAUSTED, then delivered by the relay.
    let worker = attempts_for(&spans, "Slow/w", dispatch);
    assert_eq!(worker.len(), 2, "refused once, then delivered: {worker:#?}");
    assert_eq!(attr_str(worker[0], "outcome"), "refused");
    assert!(
        attr_str(worker[0], "error").starts_with("RESOURCE_EXHAUSTED: mailbox full"),
        "{:?}",
        attr_str(worker[0], "error")
    );
    assert_eq!(attr_str(worker[1], "outcome"), "delivered");
    // The echo actor: delivered by the immediate attempt.
    let echo = attempts_for(&spans, "Echo/r", dispatch);
    assert_eq!(echo.len(), 1, "{echo:#?}");
    assert_eq!(attr_str(echo[0], "outcome"), "delivered");

    // Each target's turn is its delivered attempt's child.
    for (target, delivered) in [("Slow/w", worker[1]), ("Echo/r", echo[0])] {
        let job_turn = turn_of(&spans, target, "job");
        assert_eq!(
            job_turn.parent_span_id, delivered.span_id,
            "{target}'s turn is its delivered attempt's child"
        );
        assert_eq!(attr_str(job_turn, "outcome"), "ok");
    }

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

/// With no flag and no `OTEL_*` endpoint variable nothing is exported at all. The receiver is
/// not the host's endpoint but its HTTP proxy: an exporter sending anywhere (its default is
/// `http://localhost:4318`) would reach it. Traffic that makes every kind of span (an ingress
/// call continuing a `traceparent`, a turn, a dispatch and a relay attempt) runs, then SIGTERM's
/// shutdown flush, which sends whatever a batch processor still holds; the receiver must have
/// seen no request, and the answer carries no trace context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_traced_or_answered() {
    for var in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ] {
        assert!(
            std::env::var_os(var).is_none(),
            "{var} is set in the test's environment: sluice run would inherit it"
        );
    }
    let (proxy, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let bin = sluice_binary("sluice-traces");
    let mut run = SluiceRun::start(
        &bin,
        dir.path(),
        &[],
        &[
            ("http_proxy", proxy.as_str()),
            ("HTTP_PROXY", proxy.as_str()),
            ("all_proxy", proxy.as_str()),
            ("ALL_PROXY", proxy.as_str()),
            ("no_proxy", ""),
            ("NO_PROXY", ""),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )
    .await;
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
    let job = serde_json::json!({"targets": ["Echo/r"], "msg_type": "record", "payload": "job"});
    let resp = reqwest::Client::new()
        .post(format!("{}/actors/Echo/d/ask/dispatch", run.ingress))
        .body(job.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("traceparent").is_none());
    let items = recorded(&run, "Echo/r").await;
    assert_eq!(items["items"], serde_json::json!(["job"]), "the job ran");

    run.terminate();
    let exit = run.wait_exit(Duration::from_secs(30)).await;
    assert!(exit.is_some_and(|s| s.success()), "exit: {exit:?}");
    assert_eq!(
        received.requests(),
        Vec::<String>::new(),
        "the host sent something out with no endpoint set"
    );
    assert!(received.spans().is_empty());
}

/// The standard variables turn export on without `--otlp-endpoint`:
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL; `/v1/traces` is appended) and
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL). Each run's call is one exported trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_otel_endpoint_variables_turn_export_on_without_the_flag() {
    let dir = rust_app(&["echo", "slow"], APP);
    let bin = sluice_binary("sluice-traces");
    for (var, path) in [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/v1/traces"),
    ] {
        let (otlp, received) = otlp_receiver().await;
        let endpoint = format!("{otlp}{path}");
        let run = SluiceRun::start(
            &bin,
            dir.path(),
            &[],
            &[(var, endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")],
        )
        .await;
        let ((trace_id, ingress_id), reply) =
            ask_traced(&run, "Echo/v/ask/echo", None, "\"via env\"".into()).await;
        assert_eq!(reply, serde_json::json!("via env"), "{var}");
        let spans = trace_spans(&received, &trace_id, var, |spans| {
            has_turn(spans, "Echo/v", "echo")
        })
        .await;
        let ingress = root_ingress(&spans, &ingress_id);
        let turn = turn_of(&spans, "Echo/v", "echo");
        assert_eq!(turn.parent_span_id, ingress.span_id, "{var}");
        assert!(
            received
                .requests()
                .iter()
                .all(|r| r.starts_with("POST /v1/traces")),
            "{var}: {:?}",
            received.requests()
        );
    }
}

/// A guest's `tell` carries its turn's trace: the told actor's turn is the telling turn's
/// child, in the ingress call's trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_tell_is_delivered_in_the_telling_turns_trace() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let run = traced_run(&otlp, dir.path()).await;
    let req = serde_json::json!({"to": "Echo/b", "msg_type": "record", "payload": "told"});
    let ((trace_id, ingress_id), reply) =
        ask_traced(&run, "Echo/a/ask/tell", None, req.to_string()).await;
    assert_eq!(reply, serde_json::json!({"ok": true, "receipt": "queued"}));

    let spans = trace_spans(&received, &trace_id, "the told actor's turn", |spans| {
        has_turn(spans, "Echo/b", "record")
    })
    .await;
    let ingress = root_ingress(&spans, &ingress_id);
    let telling = turn_of(&spans, "Echo/a", "tell");
    assert_eq!(telling.parent_span_id, ingress.span_id);
    let told = turn_of(&spans, "Echo/b", "record");
    assert_eq!(
        told.parent_span_id, telling.span_id,
        "the told turn is the telling turn's child: {spans:#?}"
    );
    assert_eq!(attr_str(told, "outcome"), "ok");
    assert_eq!(
        recorded(&run, "Echo/b").await["items"],
        serde_json::json!(["told"])
    );
}

/// A guest's `ask` carries its turn's trace: the asked actor's turn is the asking turn's
/// child and runs inside it (the asking turn waits for the reply).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_ask_is_answered_in_the_asking_turns_trace() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let run = traced_run(&otlp, dir.path()).await;
    let req = serde_json::json!({"to": "Echo/b", "msg_type": "echo", "payload": "asked", "timeout_ms": 10_000});
    let ((trace_id, ingress_id), reply) =
        ask_traced(&run, "Echo/a/ask/ask", None, req.to_string()).await;
    assert_eq!(reply, serde_json::json!({"ok": true, "reply": "asked"}));

    let spans = trace_spans(&received, &trace_id, "both turns", |spans| {
        has_turn(spans, "Echo/a", "ask") && has_turn(spans, "Echo/b", "echo")
    })
    .await;
    let ingress = root_ingress(&spans, &ingress_id);
    let asking = turn_of(&spans, "Echo/a", "ask");
    assert_eq!(asking.parent_span_id, ingress.span_id);
    let asked = turn_of(&spans, "Echo/b", "echo");
    assert_eq!(
        asked.parent_span_id, asking.span_id,
        "the asked turn is the asking turn's child: {spans:#?}"
    );
    assert_eq!(attr_str(asked, "outcome"), "ok");
    assert!(
        asking.start_time_unix_nano <= asked.start_time_unix_nano
            && asked.end_time_unix_nano <= asking.end_time_unix_nano,
        "the asked turn runs within the asking turn: {asking:#?} {asked:#?}"
    );
}

/// `tell-reliable` that the receiver takes at once (the direct path) is a plain tell in the
/// trace: the receiving turn is the sending turn's child, with no outbox attempt between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reliable_tell_taken_directly_is_the_sending_turns_child() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let run = traced_run(&otlp, dir.path()).await;
    let req = serde_json::json!({"to": "Echo/b", "msg_type": "record", "payload": "direct"});
    let ((trace_id, ingress_id), reply) =
        ask_traced(&run, "Echo/a/ask/tell_reliable", None, req.to_string()).await;
    assert_eq!(reply, serde_json::json!({"ok": true, "path": "direct"}));

    let spans = trace_spans(&received, &trace_id, "the receiving turn", |spans| {
        has_turn(spans, "Echo/b", "record")
    })
    .await;
    let ingress = root_ingress(&spans, &ingress_id);
    let sending = turn_of(&spans, "Echo/a", "tell_reliable");
    assert_eq!(sending.parent_span_id, ingress.span_id);
    let receiving = turn_of(&spans, "Echo/b", "record");
    assert_eq!(receiving.parent_span_id, sending.span_id, "{spans:#?}");
    assert!(
        !spans.iter().any(|s| s.name.starts_with("outbox.")),
        "the direct path never touches the outbox: {spans:#?}"
    );
    assert_eq!(
        recorded(&run, "Echo/b").await["items"],
        serde_json::json!(["direct"])
    );
}

/// `tell-reliable` to a full mailbox goes through the outbox: the stored row carries the
/// sending turn's trace, so every relay attempt is that turn's child, the attempts before the
/// last are refusals, and the receiving turn is the delivered attempt's child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reliable_tell_stored_in_the_outbox_is_relayed_in_the_sending_turns_trace() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let run = traced_run(&otlp, dir.path()).await;
    fill_worker(&run, 500).await;
    let req = serde_json::json!({"to": "Slow/w", "msg_type": "stored", "payload": "1"});
    let ((trace_id, ingress_id), reply) =
        ask_traced(&run, "Echo/a/ask/tell_reliable", None, req.to_string()).await;
    assert_eq!(reply, serde_json::json!({"ok": true, "path": "outbox"}));

    let spans = trace_spans(&received, &trace_id, "the receiving turn", |spans| {
        has_turn(spans, "Slow/w", "stored")
    })
    .await;
    let ingress = root_ingress(&spans, &ingress_id);
    let sending = turn_of(&spans, "Echo/a", "tell_reliable");
    assert_eq!(sending.parent_span_id, ingress.span_id);
    let attempts = attempts_for(&spans, "Slow/w", sending);
    let (last, before) = attempts.split_last().expect("at least one relay attempt");
    for a in before {
        assert_eq!(attr_str(a, "outcome"), "refused", "{attempts:#?}");
    }
    assert_eq!(attr_str(last, "outcome"), "delivered");
    let receiving = turn_of(&spans, "Slow/w", "stored");
    assert_eq!(
        receiving.parent_span_id, last.span_id,
        "the receiving turn is the delivered attempt's child"
    );
    assert_eq!(attr_str(receiving, "outcome"), "ok");
}

/// [`APP`] with a short retry policy: three attempts, backing off 10–20 ms.
const DEAD_LETTER_APP: &str = r#"
[[supervisor.children]]
name = "echo"
actor_type = "Echo"
module = "echo.wasm"

[outbox]
partitions = 1

[outbox.retry_policy]
max_attempts = 3
base_ms = 10
cap_ms = 20
"#;

/// A job whose receiver fails every attempt: the attempts are the dispatch's children in the
/// ingress call's trace, each receiving turn is its attempt's child, the attempts before the
/// last are `failed`, and the last is `dead_lettered` — and the job is in the DLQ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_dead_lettered_on_its_last_attempt_ends_the_ingress_calls_trace() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo"], DEAD_LETTER_APP);
    let run = traced_run(&otlp, dir.path()).await;
    let job = serde_json::json!({"targets": ["Echo/poison"], "msg_type": "fail", "payload": "x", "mode": "call"});
    let ((trace_id, ingress_id), reply) =
        ask_traced(&run, "Echo/d/ask/dispatch", None, job.to_string()).await;
    assert_eq!(reply["ok"], true, "{reply}");

    let spans = trace_spans(
        &received,
        &trace_id,
        "the dead-lettering attempt",
        |spans| {
            spans
                .iter()
                .any(|s| s.name == "outbox.attempt" && attr_str(s, "outcome") == "dead_lettered")
                && spans
                    .iter()
                    .filter(|s| s.name == "turn" && attr_str(s, "msg_type") == "fail")
                    .count()
                    == 3
        },
    )
    .await;
    let ingress = root_ingress(&spans, &ingress_id);
    let turn = turn_of(&spans, "Echo/d", "dispatch");
    assert_eq!(turn.parent_span_id, ingress.span_id);
    let dispatch = one(&spans, "dispatch span", |s| s.name == "outbox.dispatch");
    assert_eq!(dispatch.parent_span_id, turn.span_id);
    let attempts = attempts_for(&spans, "Echo/poison", dispatch);
    assert_eq!(attempts.len(), 3, "max_attempts = 3: {attempts:#?}");
    let outcomes: Vec<&str> = attempts.iter().map(|a| attr_str(a, "outcome")).collect();
    assert_eq!(outcomes, ["failed", "failed", "dead_lettered"]);
    for a in &attempts {
        assert!(
            attr_str(a, "error").contains("bad input"),
            "{:?}",
            attr_str(a, "error")
        );
        let failing = one(&spans, "the attempt's turn", |s| {
            s.name == "turn" && s.parent_span_id == a.span_id
        });
        assert_eq!(attr_str(failing, "actor"), "Echo/poison");
        assert_eq!(attr_str(failing, "outcome"), "error");
    }

    let dlq: serde_json::Value = reqwest::get(format!("{}/admin/dlq", run.admin))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let dead = dlq["dead_letters"].as_array().unwrap();
    assert_eq!(dead.len(), 1, "{dlq}");
    assert_eq!(dead[0]["receiver"], "Echo/poison");
    assert_eq!(dead[0]["attempts"], 3);
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

/// With an endpoint the stderr log and the exporter each have a filter of their own (per-layer
/// filters, whose shared per-thread state has dropped events upstream, tracing#2704): the log
/// must still print every debug event `RUST_LOG` asks for while spans are exported and the
/// relay works. Every activation logs one `activated` line (`sluice::activations`, the line the
/// cluster tests prove single activation with); 48 asks and 16 dispatched jobs to distinct keys
/// must show 64 of them, and the asks' traces must arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_endpoint_the_log_still_prints_every_debug_event_rust_log_asks_for() {
    let (otlp, received) = otlp_receiver().await;
    let dir = rust_app(&["echo", "slow"], APP);
    let run = SluiceRun::start(
        &sluice_binary("sluice-traces"),
        dir.path(),
        &["--otlp-endpoint", &otlp],
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            (
                "RUST_LOG",
                "info,sluice::activations=debug,sluice::outbox=debug",
            ),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let mut keys = Vec::new();
    let mut traces = Vec::new();
    for i in 0..48 {
        let resp = http
            .post(format!("{}/actors/Echo/a{i}/ask/echo", run.ingress))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        traces.push(response_trace(&resp).0);
        keys.push(format!("Echo/a{i}"));
    }
    for i in 0..16 {
        let job = serde_json::json!({"targets": [format!("Echo/b{i}")], "msg_type": "record", "payload": "job"});
        let (_, reply) = ask_traced(&run, "Echo/d/ask/dispatch", None, job.to_string()).await;
        assert_eq!(reply["ok"], true, "{reply}");
        keys.push(format!("Echo/b{i}"));
    }
    let activated = |run: &SluiceRun| -> Vec<String> {
        run.stderr_lines()
            .into_iter()
            .filter(|l| l.contains("sluice::activations") && l.contains("activated"))
            .collect()
    };
    let logged = |lines: &[String], key: &str| {
        let field = format!("actor={key} ");
        lines.iter().any(|l| l.contains(&field))
    };
    wait_until(
        Duration::from_secs(20),
        "an `activated` line for each of the 64 keys",
        || {
            let lines = activated(&run);
            keys.iter().all(|k| logged(&lines, k))
        },
    )
    .await;
    wait_until(
        Duration::from_secs(20),
        "the 48 asks' traces to be exported",
        || {
            let spans = received.spans();
            traces.iter().all(|t| {
                spans
                    .iter()
                    .any(|s| s.name == "ingress" && hex(&s.trace_id) == *t)
            })
        },
    )
    .await;
}
