//! Deadlines and admission control (seed 001), driven through the Rust host API, the WIT
//! imports of real Rust guests and the HTTP ingress.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_runtime::{
    CallOptions, ChildSpec, ErrorCode, Host, HostConfig, MailboxStrategy, OverloadScope,
};
use sluice_tests::{host_with, json, test_config, wait_for, wait_until};

const BOUND: Duration = Duration::from_secs(10);

fn metrics_text() -> String {
    sluice_cli::metrics_export::handle().render()
}

/// The value of the sample `name{labels}` in the Prometheus text (0 when absent).
fn sample(name_and_labels: &str) -> f64 {
    metrics_text()
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn ask_json(host: &Host, to: &str, msg_type: &str, req: Value) -> Value {
    json(
        &host
            .ask(to, msg_type, req.to_string(), BOUND)
            .await
            .unwrap_or_else(|e| panic!("{to} {msg_type}: {e}")),
    )
}

async fn recorded(host: &Host, to: &str) -> Vec<String> {
    sluice_tests::recorded_items(&ask_json(host, to, "recorded", Value::Null).await)
}

async fn serve(host: &Host) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = l.local_addr().unwrap();
    let router = sluice_cli::ingress::router(host.clone());
    tokio::spawn(async move { axum::serve(l, router).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hop_chain_shares_one_budget_the_middle_hop_tightens_and_extensions_are_clamped() {
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    // Entry (2 s) → A asks B with 60 s (tries to extend: clamped to the inherited budget)
    // → B asks C with 300 ms (tightens) → C reports the budget it was given.
    let to_c = json!({"to": "Echo/c", "msg_type": "whoami", "payload": "", "timeout_ms": 300});
    let to_b = json!({"to": "Echo/b", "msg_type": "ask", "payload": to_c.to_string(), "timeout_ms": 60_000});
    let r = host
        .call("Echo/a")
        .with_deadline(2000.0)
        .ask("ask", to_b.to_string())
        .await
        .unwrap();
    let at_a = json(&r);
    assert_eq!(at_a["ok"], true, "{at_a}");
    let at_b: Value = serde_json::from_str(at_a["reply"].as_str().unwrap()).unwrap();
    assert_eq!(at_b["ok"], true, "{at_b}");
    let at_c: Value = serde_json::from_str(at_b["reply"].as_str().unwrap()).unwrap();
    assert_eq!(at_c["self_id"], "Echo/c");
    let ms = at_c["deadline_ms"].as_u64().expect("C has a deadline");
    assert!(ms > 0 && ms <= 300, "C sees the tightened budget, got {ms}");

    // The clamp on its own: B is asked with 60 s under a 1 s entry budget.
    let to_b = json!({"to": "Echo/b", "msg_type": "whoami", "payload": "", "timeout_ms": 60_000});
    let r = host
        .call("Echo/a")
        .with_deadline(1000.0)
        .ask("ask", to_b.to_string())
        .await
        .unwrap();
    let at_b: Value = serde_json::from_str(json(&r)["reply"].as_str().unwrap()).unwrap();
    let ms = at_b["deadline_ms"].as_u64().unwrap();
    assert!(
        ms <= 1000,
        "an extension is clamped to the inherited 1 s, got {ms}"
    );

    // An external call with no deadline of its own gets call_timeout_ms (30 s).
    let me = json(&host.call("Echo/a").ask("whoami", "").await.unwrap());
    let ms = me["deadline_ms"].as_u64().unwrap();
    assert!(ms > 25_000 && ms <= 30_000, "default deadline, got {ms}");
    // An external caller may pick a longer budget than the default.
    let me = json(
        &host
            .call("Echo/a")
            .with_deadline(300_000.0)
            .ask("whoami", "")
            .await
            .unwrap(),
    );
    assert!(me["deadline_ms"].as_u64().unwrap() > 30_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_timeout_zero_disables_the_default_deadline() {
    let cfg = HostConfig {
        call_timeout_ms: 0,
        ..test_config()
    };
    let host = host_with(cfg, vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")]).await;
    let me = json(&host.call("Echo/a").ask("whoami", "").await.unwrap());
    assert_eq!(me["deadline_ms"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_deadlines_are_refused_before_sending() {
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    // WIT: ask with timeout-ms 0.
    let r = ask_json(
        &host,
        "Echo/a",
        "ask",
        json!({"to": "Echo/target", "msg_type": "record", "payload": "wit", "timeout_ms": 0}),
    )
    .await;
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"]["type"], "InvalidArgument", "{r}");
    // Rust API: the builder, CallOptions and a zero timeout.
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = host
            .call("Echo/target")
            .with_deadline(bad)
            .tell("record", "builder")
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{bad}");
        let e = host
            .call("Echo/target")
            .with_deadline(bad)
            .ask("record", "builder")
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{bad}");
        assert!(CallOptions::default().with_deadline_ms(bad).is_err());
    }
    let e = host
        .ask("Echo/target", "record", "zero", Duration::ZERO)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    // Nothing reached the target.
    assert!(recorded(&host, "Echo/target").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_turn_past_its_deadline_is_skipped_and_a_running_one_is_not() {
    sluice_cli::metrics_export::handle();
    let host = host_with(
        test_config(),
        vec![
            (ChildSpec::new("SkipSlow", "slow.wasm"), "slow"),
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
        ],
    )
    .await;
    // Running: the turn started, the caller gave up → skipped: false.
    let e = host
        .call("SkipSlow/run")
        .with_deadline(50.0)
        .ask("sleep", "400")
        .await
        .unwrap_err();
    assert_eq!((e.code, e.skipped), (ErrorCode::DeadlineExceeded, false));
    // Queued behind that turn: never started → skipped: true.
    let e = host
        .call("SkipSlow/run")
        .with_deadline(50.0)
        .ask("sleep", "1")
        .await
        .unwrap_err();
    assert_eq!((e.code, e.skipped), (ErrorCode::DeadlineExceeded, true));
    wait_until(BOUND, "the expired turn skipped", || {
        sample("sluice_turns_skipped_total{actor_type=\"SkipSlow\"}") >= 1.0
    })
    .await;

    // A tell made inside a turn carries the chain's deadline: queued behind a long turn, it
    // is skipped once that deadline passed instead of running 5 s.
    host.tell("SkipSlow/t", "sleep", "600").await.unwrap();
    wait_until(BOUND, "the long turn running", || {
        host.inflight_turns() >= 1
    })
    .await;
    let r = json(
        &host
            .ask(
                "Echo/a",
                "tell",
                json!({"to": "SkipSlow/t", "msg_type": "sleep", "payload": "5000"}).to_string(),
                Duration::from_millis(100),
            )
            .await
            .unwrap(),
    );
    assert_eq!(r["receipt"], "queued", "{r}");
    wait_until(BOUND, "the relayed tell skipped", || {
        sample("sluice_turns_skipped_total{actor_type=\"SkipSlow\"}") >= 2.0
            && host.inflight_turns() == 0
    })
    .await;
    assert!(
        sample("sluice_deadline_exceeded_total{actor_type=\"SkipSlow\",skipped=\"true\"}") >= 1.0
    );
    assert!(
        sample("sluice_deadline_exceeded_total{actor_type=\"SkipSlow\",skipped=\"false\"}") >= 1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_skipped_flag_crosses_the_wit_boundary() {
    let host = host_with(
        test_config(),
        vec![
            (ChildSpec::new("Slow", "slow.wasm"), "slow"),
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
        ],
    )
    .await;
    let ask = |to: &str, payload: &str| {
        json!({"to": to, "msg_type": "sleep", "payload": payload, "timeout_ms": 50}).to_string()
    };
    let r = json(
        &host
            .ask("Echo/a", "ask", ask("Slow/1", "400"), BOUND)
            .await
            .unwrap(),
    );
    assert_eq!(r["error"]["type"], "DeadlineExceeded", "{r}");
    assert_eq!(r["error"]["skipped"], false);
    let r = json(
        &host
            .ask("Echo/a", "ask", ask("Slow/1", "1"), BOUND)
            .await
            .unwrap(),
    );
    assert_eq!(r["error"]["type"], "DeadlineExceeded", "{r}");
    assert_eq!(r["error"]["skipped"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_actor_refuses_arrivals_with_429_while_calls_from_turns_succeed() {
    sluice_cli::metrics_export::handle();
    let capped = ChildSpec::new("CapSlow", "slow.wasm")
        .mailbox(100, MailboxStrategy::Error)
        .max_queued(2);
    let host = host_with(
        test_config(),
        vec![
            (capped, "slow"),
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
        ],
    )
    .await;
    let base = serve(&host).await;
    let http = reqwest::Client::new();
    let post = |path: &str| http.post(format!("{base}{path}"));

    // Depth 1 (running) then 2 (one queued); the third arrival is refused.
    assert_eq!(
        post("/actors/CapSlow/1/tell/sleep")
            .body("800")
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    wait_until(BOUND, "the long turn running", || {
        host.inflight_turns() == 1
    })
    .await;
    assert_eq!(
        post("/actors/CapSlow/1/tell/sleep")
            .body("1")
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    let r = post("/actors/CapSlow/1/ask/sleep")
        .body("1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["code"], "overloaded");
    assert_eq!(b["kind"], "overloaded");
    assert_eq!(
        (
            b["scope"].as_str(),
            b["depth"].as_u64(),
            b["limit"].as_u64()
        ),
        (Some("actor"), Some(2), Some(2)),
        "{b}"
    );
    // The Rust API sees the same typed refusal.
    let e = host.tell("CapSlow/1", "sleep", "1").await.unwrap_err();
    let o = e.overload.unwrap();
    assert_eq!(
        (e.code, o.scope, o.depth, o.limit),
        (ErrorCode::Overloaded, OverloadScope::Actor, 2, 2)
    );
    assert!(sample("sluice_admission_refusals_total{scope=\"actor\"}") >= 2.0);

    // Calls made from inside a turn are never refused: a tell and an ask from Echo's turn.
    let r = ask_json(
        &host,
        "Echo/a",
        "tell",
        json!({"to": "CapSlow/1", "msg_type": "sleep", "payload": "1"}),
    )
    .await;
    assert_eq!(r["receipt"], "queued", "{r}");
    let r = ask_json(
        &host,
        "Echo/a",
        "ask",
        json!({"to": "CapSlow/1", "msg_type": "sleep", "payload": "7", "timeout_ms": 5000}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["reply"], "7");
    // Once drained, arrivals are admitted again.
    let r = post("/actors/CapSlow/1/ask/sleep")
        .body("2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_deadlines_answer_504_with_skipped_and_invalid_headers_are_ignored() {
    let host = host_with(
        test_config(),
        vec![
            (ChildSpec::new("Slow", "slow.wasm"), "slow"),
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
        ],
    )
    .await;
    let base = serve(&host).await;
    let http = reqwest::Client::new();
    let ask = |path: &str, deadline: &str, body: &str| {
        http.post(format!("{base}{path}"))
            .header("x-sluice-deadline-ms", deadline)
            .body(body.to_string())
            .send()
    };
    let r = ask("/actors/Slow/1/ask/sleep", "50", "400").await.unwrap();
    assert_eq!(r.status(), 504);
    let b: Value = r.json().await.unwrap();
    assert_eq!(
        (b["kind"].as_str(), b["skipped"].as_bool()),
        (Some("call-timeout"), Some(false)),
        "{b}"
    );
    let r = ask("/actors/Slow/1/ask/sleep", "50", "1").await.unwrap();
    assert_eq!(r.status(), 504);
    let b: Value = r.json().await.unwrap();
    assert_eq!(
        (b["code"].as_str(), b["skipped"].as_bool()),
        (Some("deadline-exceeded"), Some(true)),
        "{b}"
    );
    // Not a positive finite number: dropped whole, the 30 s default applies.
    for bad in ["0", "-5", "NaN", "inf", "soon", ""] {
        let r = ask("/actors/Echo/1/ask/whoami", bad, "").await.unwrap();
        assert_eq!(r.status(), 200, "header {bad:?}");
        let ms = r.json::<Value>().await.unwrap()["deadline_ms"]
            .as_u64()
            .unwrap();
        assert!(ms > 25_000 && ms <= 30_000, "header {bad:?}: {ms}");
    }
    // A valid one is re-anchored on the host's clock.
    let r = ask("/actors/Echo/1/ask/whoami", "1500", "").await.unwrap();
    let ms = r.json::<Value>().await.unwrap()["deadline_ms"]
        .as_u64()
        .unwrap();
    assert!(ms <= 1500 && ms > 1000, "{ms}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_wide_cap_refuses_arrivals_but_never_timers_or_calls_from_turns() {
    sluice_cli::metrics_export::handle();
    let cfg = HostConfig {
        max_inflight_turns: 3,
        ..test_config()
    };
    let host = host_with(
        cfg,
        vec![
            (ChildSpec::new("Slow", "slow.wasm"), "slow"),
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
        ],
    )
    .await;
    // A timer that will fire while the host is saturated; its turn tells another actor.
    let tell = json!({"to": "Echo/r", "msg_type": "record", "payload": "late"}).to_string();
    let r = ask_json(
        &host,
        "Echo/a",
        "schedule",
        json!({"delay_ms": 300, "msg_type": "tell", "payload": tell}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    // Saturate: two running turns and one queued = depth 3.
    host.tell("Slow/1", "sleep", "1200").await.unwrap();
    host.tell("Slow/2", "sleep", "1200").await.unwrap();
    host.tell("Slow/1", "sleep", "1").await.unwrap();
    assert_eq!(host.admission_depth(), 3);
    let e = host.tell("Echo/x", "record", "refused").await.unwrap_err();
    let o = e.overload.expect("an overload refusal");
    assert_eq!(
        (e.code, o.scope, o.depth, o.limit),
        (ErrorCode::Overloaded, OverloadScope::Host, 3, 3)
    );
    let e = host.ask("Echo/x", "echo", "", BOUND).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Overloaded);
    assert!(sample("sluice_admission_refusals_total{scope=\"host\"}") >= 2.0);
    // The timer turn and its tell ran despite the cap; once drained, arrivals are admitted.
    wait_until(BOUND, "the host drained", || {
        host.inflight_turns() == 0 && host.status().iter().all(|s| s.queued == 0)
    })
    .await;
    // 100 polls 20 ms apart: 2 s.
    let what = "Echo/r to record the timer turn's tell";
    let items = wait_for(Duration::from_secs(2), what, || async {
        match host.ask("Echo/r", "recorded", "", BOUND).await {
            Ok(r) => {
                let items = json(&r)["items"].as_array().unwrap().clone();
                if items.is_empty() {
                    Err("nothing recorded".to_string())
                } else {
                    Ok(items)
                }
            }
            Err(e) => {
                assert_eq!(e.code, ErrorCode::Overloaded, "{e}");
                Err(e.to_string())
            }
        }
    })
    .await;
    assert_eq!(items, vec![json!("late")]);
    assert!(host.tell("Echo/x", "record", "admitted").await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_refused_by_a_full_mailbox_is_rearmed_and_delivered() {
    let host = host_with(
        test_config(),
        vec![
            (
                ChildSpec::new("Echo", "echo.wasm").mailbox(1, MailboxStrategy::Error),
                "echo",
            ),
            (ChildSpec::new("Slow", "slow.wasm"), "slow"),
        ],
    )
    .await;
    let r = ask_json(
        &host,
        "Echo/a",
        "schedule",
        json!({"delay_ms": 400, "msg_type": "record", "payload": "tick"}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    // Echo/a's turn awaits a 1.5 s ask; a queued message fills its one-slot mailbox, so the
    // timer's delivery at 400 ms is refused and must be re-armed.
    let h = host.clone();
    let busy = tokio::spawn(async move {
        h.ask(
            "Echo/a",
            "ask",
            json!({"to": "Slow/1", "msg_type": "sleep", "payload": "1500", "timeout_ms": 5000})
                .to_string(),
            BOUND,
        )
        .await
    });
    wait_until(BOUND, "Echo/a awaiting Slow/1", || {
        host.inflight_turns() == 2
    })
    .await;
    host.tell("Echo/a", "record", "filler").await.unwrap();
    busy.await.unwrap().unwrap();
    wait_until(BOUND, "the re-armed tick delivered", || {
        host.status().iter().all(|s| s.queued == 0) && host.inflight_turns() == 0
    })
    .await;
    // The one-slot mailbox may hold the re-armed tick when we ask: that refusal is the
    // mailbox doing its job, so ask again until both items are recorded.
    let items = wait_for(BOUND, "filler and tick recorded", || async {
        match host
            .ask("Echo/a", "recorded", Value::Null.to_string(), BOUND)
            .await
        {
            Ok(reply) => match sluice_tests::recorded_items(&json(&reply)) {
                items if items.len() == 2 => Ok(items),
                items => Err(format!("recorded so far: {items:?}")),
            },
            Err(e) if e.code == ErrorCode::ResourceExhausted => Err(e.to_string()),
            Err(e) => panic!("asking Echo/a what it recorded: {e}"),
        }
    })
    .await;
    assert_eq!(items, vec!["filler", "tick"]);
}
