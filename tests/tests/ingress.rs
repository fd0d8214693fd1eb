//! The HTTP ingress and admin API, driven by a real HTTP client against a real host.

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use serde_json::json;
use sluice_runtime::{ChildSpec, Host, MailboxStrategy};
use sluice_tests::{host_with, rust_guest, test_config, wait_until};

async fn serve(router: axum::Router) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, router).await.unwrap() });
    addr
}

async fn ingress(host: &Host) -> String {
    sluice_cli::metrics_export::handle();
    format!(
        "http://{}",
        serve(sluice_cli::ingress::router(host.clone())).await
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_answers_with_typed_status_codes() {
    // Metric handles bind to the recorder present when a type is deployed: install it first.
    sluice_cli::metrics_export::handle();
    let cfg = sluice_runtime::HostConfig {
        max_payload_bytes: 4096,
        ..test_config()
    };
    let host = host_with(
        cfg,
        vec![
            (ChildSpec::new("Echo", "echo.wasm"), "echo"),
            (
                ChildSpec::new("Slow", "slow.wasm").mailbox(1, MailboxStrategy::Error),
                "slow",
            ),
            (
                ChildSpec::new("Crash", "crash.wasm").restarts(0, Duration::from_secs(60)),
                "crash",
            ),
            (
                ChildSpec::new("Newest", "slow.wasm").mailbox(1, MailboxStrategy::DropNewest),
                "slow",
            ),
            (
                ChildSpec::new("Oldest", "slow.wasm").mailbox(1, MailboxStrategy::DropOldest),
                "slow",
            ),
        ],
    )
    .await;
    let base = ingress(&host).await;
    let http = reqwest::Client::new();
    let post = |path: &str| http.post(format!("{base}{path}"));

    let r = post("/actors/Echo/1/ask/echo")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "hello");

    let r = post("/actors/Echo/1/tell/record")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["receipt"],
        "queued"
    );

    let r = post("/actors/Nope/1/ask/echo").send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["code"],
        "not-found"
    );

    // Oversize: typed by the host up to twice the limit, by the transport beyond it (the
    // body is not buffered), the same code either way.
    for (path, size, message) in [
        ("/actors/Echo/1/ask/echo", 5000, "payload of 5000 bytes"),
        (
            "/actors/Echo/1/tell/echo",
            100_000,
            "payload of more than 8192 bytes",
        ),
    ] {
        let r = post(path).body(vec![b'a'; size]).send().await.unwrap();
        assert_eq!(r.status(), 400, "{path}");
        let b: serde_json::Value = r.json().await.unwrap();
        assert_eq!(b["code"], "invalid-argument");
        assert_eq!(
            b["message"],
            format!("INVALID_ARGUMENT: {message} exceeds max_payload_bytes=4096")
        );
    }

    let r = post("/actors/Echo/1/ask/fail").send().await.unwrap();
    assert_eq!(
        r.status(),
        400,
        "a guest's invalid-argument error keeps its code"
    );

    // 504 with kind and skipped on a deadline from the header.
    let r = post("/actors/Slow/1/ask/sleep")
        .header("x-sluice-deadline-ms", "100")
        .body("1000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    let b: serde_json::Value = r.json().await.unwrap();
    assert_eq!(b["kind"], "call-timeout");
    assert_eq!(b["skipped"], false);

    // 429 with the retry hint while the one-slot mailbox is full.
    wait_until(Duration::from_secs(10), "slow turn running", || {
        host.inflight_turns() == 1
    })
    .await;
    let mut saw_429 = None;
    for _ in 0..3 {
        let r = post("/actors/Slow/1/tell/sleep")
            .body("1")
            .send()
            .await
            .unwrap();
        if r.status() == 429 {
            let after = r.headers()["retry-after"].to_str().unwrap().to_string();
            saw_429 = Some((after, r.json::<serde_json::Value>().await.unwrap()));
            break;
        }
    }
    let (after, b) = saw_429.expect("a full mailbox answers 429");
    assert_eq!(b["code"], "resource-exhausted");
    let ms = b["retry_after_ms"].as_u64().expect("a retry hint");
    assert_eq!(
        b["message"],
        format!("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms={ms})")
    );
    // Retry-After is whole seconds, rounded up, at least 1.
    assert_eq!(after, ms.div_ceil(1000).max(1).to_string());

    // 500 for a trap; 503 once the supervisor has stopped the actor.
    let r = post("/actors/Crash/1/ask/boom").send().await.unwrap();
    assert_eq!(r.status(), 500);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["code"],
        "internal"
    );
    let r = post("/actors/Crash/1/ask/ok").send().await.unwrap();
    assert_eq!(r.status(), 503);
    let b: serde_json::Value = r.json().await.unwrap();
    assert_eq!(b["code"], "unavailable");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains("restart intensity exceeded"),
        "{b}"
    );

    // A tell into a full drop_newest / drop_oldest mailbox is accepted, and its receipt says
    // what happened.
    wait_until(Duration::from_secs(10), "the slow turns to end", || {
        host.inflight_turns() == 0
    })
    .await;
    for ty in ["Newest", "Oldest"] {
        host.tell(&format!("{ty}/1"), "sleep", "1000").unwrap();
    }
    wait_until(Duration::from_secs(10), "both held in a turn", || {
        host.inflight_turns() == 2
    })
    .await;
    for (ty, second) in [("Newest", "dropped-newest"), ("Oldest", "displaced-oldest")] {
        for expected in ["queued", second] {
            let r = post(&format!("/actors/{ty}/1/tell/sleep"))
                .body("1")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 202);
            assert_eq!(
                r.json::<serde_json::Value>().await.unwrap()["receipt"],
                expected,
                "{ty}"
            );
        }
    }

    // Each mailbox's depth and the age of its oldest message: in the status and in /metrics.
    let newest = || sluice_tests::type_status(&host, "Newest");
    wait_until(Duration::from_secs(10), "the queued message to age", || {
        newest().oldest_queued_ms >= 50
    })
    .await;
    assert_eq!(newest().queued, 1);
    let m = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sample = |name: &str| -> f64 {
        let prefix = format!("{name}{{actor_type=\"Newest\"}} ");
        m.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {prefix} in {m}"))
            .parse()
            .unwrap()
    };
    assert_eq!(sample("sluice_mailbox_depth"), 1.0);
    assert!(sample("sluice_mailbox_oldest_age_seconds") >= 0.05);

    // An invalid deadline header is ignored: the default applies and the call succeeds.
    for bad in ["-5", "NaN", "inf", "soon", "0"] {
        let r = post("/actors/Echo/1/ask/echo")
            .header("x-sluice-deadline-ms", bad)
            .body("ok")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "header {bad:?}");
    }

    let m = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(m.contains("sluice_turns_total"), "{m}");
    assert!(m.contains("sluice_mailbox_refused_total"), "{m}");
    assert_eq!(
        http.get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_refuses_a_wrong_token() {
    let host = host_with(test_config(), vec![]).await;
    let admin = format!(
        "http://{}",
        serve(sluice_cli::admin::router(
            host.clone(),
            Some("s3cret".into())
        ))
        .await
    );
    let http = reqwest::Client::new();
    let body = json!({"child": {"name": "echo", "actor_type": "Echo", "module": "echo.wasm"},
        "module_base64": base64::engine::general_purpose::STANDARD.encode(std::fs::read(rust_guest("echo")).unwrap())});
    for auth in [None, Some("Bearer wrong"), Some("s3cret")] {
        let mut req = http.post(format!("{admin}/admin/deploy")).json(&body);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        assert_eq!(req.send().await.unwrap().status(), 401, "{auth:?}");
    }
    assert!(host.status().is_empty(), "nothing was deployed");
    let r = http
        .post(format!("{admin}/admin/deploy"))
        .bearer_auth("s3cret")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(host.status()[0].actor_type, "Echo");
    // A malformed module through the admin API: 422 with the load error, the running
    // version untouched and still serving.
    let bad = json!({"child": {"name": "echo", "actor_type": "Echo", "module": "echo.wasm"},
        "module_base64": base64::engine::general_purpose::STANDARD.encode(b"\0asm not really")});
    let r = http
        .post(format!("{admin}/admin/deploy"))
        .bearer_auth("s3cret")
        .json(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let b: serde_json::Value = r.json().await.unwrap();
    assert_eq!(b["code"], "invalid-module", "{b}");
    assert!(b["message"].as_str().unwrap().contains("Echo"), "{b}");
    assert_eq!(host.status()[0].version, 1);
    let echoed = host
        .ask("Echo/1", "echo", "still v1", Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(echoed, b"still v1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_replaces_a_module_while_messages_are_in_flight_and_loses_none() {
    // `Relay` is redeployed; each of its turns forwards one item to `Tally`, which is not,
    // so Tally's record is the count of every message Relay handled on either version.
    let big = |ty: &str| ChildSpec::new(ty, "echo.wasm").mailbox(100_000, MailboxStrategy::Error);
    let host = host_with(
        test_config(),
        vec![
            (big("Relay"), "echo"),
            (big("Tally"), "echo"),
            (ChildSpec::new("Gate", "slow.wasm"), "slow"),
        ],
    )
    .await;
    let admin = format!(
        "http://{}",
        serve(sluice_cli::admin::router(host.clone(), None)).await
    );
    // The new version: the same component with a new init config, observable through
    // `init_config`.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(rust_guest("echo"), dir.path().join("echo.wasm")).unwrap();
    std::fs::write(
        dir.path().join("app-config.toml"),
        "[[supervisor.children]]\nname='relay'\nactor_type='Relay'\nmodule='echo.wasm'\nmailbox_capacity=100000\ninit={version='2'}\n",
    )
    .unwrap();
    let t = Duration::from_secs(30);
    assert_eq!(
        host.ask("Relay/k", "init_config", "", t).await.unwrap(),
        b"{}"
    );

    // Built (or found) before the clock starts: a cargo build must not eat into the turn.
    let sluice = sluice_tests::sluice_binary("sluice-deploy");

    // A turn in progress across the deploy: Relay/k asks Gate/1, which sleeps 3 s.
    let h = host.clone();
    let held = tokio::spawn(async move {
        let req =
            json!({"to": "Gate/1", "msg_type": "sleep", "payload": "3000", "timeout_ms": 20_000});
        h.ask("Relay/k", "ask", req.to_string(), t).await
    });
    wait_until(t, "Relay's turn and Gate's turn to start", || {
        host.inflight_turns() == 2
    })
    .await;
    // Messages queued behind it while the deploy happens.
    let h = host.clone();
    let sender = tokio::spawn(async move {
        for i in 0..3000 {
            let req = json!({"to": "Tally/t", "msg_type": "record", "payload": i.to_string()});
            h.tell("Relay/k", "tell", req.to_string()).unwrap();
            if i % 100 == 0 {
                tokio::task::yield_now().await;
            }
        }
    });
    // Through the real `sluice deploy` against the admin API.
    // On a blocking thread, so the sender keeps telling while the deploy runs.
    let app = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(sluice)
            .arg("deploy")
            .arg(app)
            .args(["--host", &admin])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("deployed"));
    sender.await.unwrap();
    assert!(
        !held.is_finished(),
        "the deploy and all 3000 tells must land during the 3 s turn"
    );
    assert_eq!(sluice_tests::type_status(&host, "Relay").version, 2);
    // The turn in progress finished on the old code, undisturbed.
    let r = sluice_tests::json(&held.await.unwrap().unwrap());
    assert_eq!(r, json!({"ok": true, "reply": "3000"}));
    // Everything queued behind it ran on the new code (the switch happens between turns) …
    assert_eq!(
        host.ask("Relay/k", "init_config", "", t).await.unwrap(),
        br#"{"version":"2"}"#
    );
    // … and every message arrived exactly once, in order: Tally's record asks queue behind
    // the 3000 forwarded items, which were all told before `init_config` was answered.
    let items = sluice_tests::recorded_by(&host, "Tally/t").await;
    assert_eq!(items, (0..3000).map(|i| i.to_string()).collect::<Vec<_>>());
}

/// `[ingress.tokens]`: a token runs its calls as its own principal and cannot claim another;
/// a gateway token (`"*"`) names the principal per request; no token or an unknown one is
/// 401. Without tokens, `x-sluice-principal` is believed only on a loopback ingress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_principal_comes_from_a_token_not_from_an_unauthenticated_header() {
    use sluice_cli::ingress::IngressAuth;
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    let settings: sluice_runtime::IngressSettings =
        toml::from_str(r#"tokens = { "tok-alice" = "user:alice", "tok-gateway" = "*" }"#).unwrap();
    let serve_with = |auth| {
        let host = host.clone();
        async move {
            format!(
                "http://{}",
                serve(sluice_cli::ingress::router_with(host, auth)).await
            )
        }
    };
    let secured = serve_with(IngressAuth::new(&settings, false)).await;
    let open_public = serve_with(IngressAuth::new(&Default::default(), false)).await;
    let open_loopback = serve_with(IngressAuth::loopback()).await;
    let http = reqwest::Client::new();
    let whoami = |base: &str, token: Option<&str>, principal: Option<&str>| {
        let mut req = http.post(format!("{base}/actors/Echo/1/ask/whoami"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(p) = principal {
            req = req.header("x-sluice-principal", p);
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let body: serde_json::Value = resp.json().await.unwrap();
            (status, body)
        }
    };
    let principal_of = |(status, body): (u16, serde_json::Value)| {
        assert_eq!(status, 200, "{body}");
        body["principal"].as_str().unwrap().to_string()
    };
    // Secured: the token decides.
    assert_eq!(
        principal_of(whoami(&secured, Some("tok-alice"), None).await),
        "user:alice"
    );
    assert_eq!(
        principal_of(whoami(&secured, Some("tok-alice"), Some("user:alice")).await),
        "user:alice"
    );
    let (status, body) = whoami(&secured, Some("tok-alice"), Some("user:bob")).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("permission-denied"))
    );
    assert_eq!(
        principal_of(whoami(&secured, Some("tok-gateway"), Some("user:bob")).await),
        "user:bob"
    );
    assert_eq!(
        principal_of(whoami(&secured, Some("tok-gateway"), None).await),
        "system"
    );
    // The scheme is case-insensitive (RFC 9110).
    let resp = http
        .post(format!("{secured}/actors/Echo/1/ask/whoami"))
        .header("authorization", "bearer tok-alice")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    for token in [None, Some("tok-mallory")] {
        let (status, body) = whoami(&secured, token, Some("user:alice")).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (401, Some("unauthenticated")),
            "{body}"
        );
    }
    // No tokens, not loopback: a claimed principal is refused, an unclaimed call is `system`.
    let (status, body) = whoami(&open_public, None, Some("user:bob")).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("[ingress.tokens]"),
        "{body}"
    );
    assert_eq!(
        principal_of(whoami(&open_public, None, None).await),
        "system"
    );
    // No tokens, loopback: the header is believed (development).
    assert_eq!(
        principal_of(whoami(&open_loopback, None, Some("user:bob")).await),
        "user:bob"
    );
    // A malformed principal header is a typed 400 everywhere.
    let long = "p".repeat(257);
    let (status, body) = whoami(&open_loopback, None, Some(&long)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid-argument")),
        "{body}"
    );
}

/// One rule for msg_type wherever it enters: the Rust `Host` API, and a guest's tell, ask,
/// schedule, tell-reliable and dispatch (checked before anything is queued or stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msg_type_is_checked_wherever_it_enters() {
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    let t = Duration::from_secs(30);
    let message = |got: &str| {
        format!(
            "INVALID_ARGUMENT: msg_type must be 1..=256 bytes without control characters, got {got}"
        )
    };
    let long = "m".repeat(300);
    let bad = [
        ("", "an empty one".to_string()),
        ("a\nb", r#""a\nb""#.to_string()),
        ("cr\r", r#""cr\r""#.to_string()),
        (long.as_str(), "300 bytes".to_string()),
    ];

    // The Rust API.
    let id = sluice_runtime::ActorId::parse("Echo/a").unwrap();
    for (msg_type, got) in &bad {
        let want = message(got);
        let e = host.tell("Echo/a", msg_type, "x").unwrap_err();
        assert_eq!(e.to_string(), want);
        let e = host.tell_to(&id, msg_type, b"x".to_vec()).unwrap_err();
        assert_eq!(e.to_string(), want);
        let e = host.ask("Echo/a", msg_type, "x", t).await.unwrap_err();
        assert_eq!(e.to_string(), want);
        let e = host.call("Echo/a").ask(msg_type, "x").await.unwrap_err();
        assert_eq!(e.to_string(), want);
        // Refused as bad input, not as "no outbox on this host".
        let e = host
            .tell_reliable("Echo/a", msg_type, "x")
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), want);
    }

    // A guest's calls (the echo actor reports the error it got).
    for (msg_type, got) in &bad {
        let want = message(got);
        for (op, req) in [
            (
                "tell",
                json!({"to": "Echo/b", "msg_type": msg_type, "payload": "x"}),
            ),
            (
                "ask",
                json!({"to": "Echo/b", "msg_type": msg_type, "payload": "x"}),
            ),
            (
                "schedule",
                json!({"delay_ms": 1, "msg_type": msg_type, "payload": "x"}),
            ),
            (
                "tell_reliable",
                json!({"to": "Echo/b", "msg_type": msg_type, "payload": "x"}),
            ),
            (
                "dispatch",
                json!({"targets": ["Echo/b"], "msg_type": msg_type, "payload": "x"}),
            ),
        ] {
            // An empty dispatch msg_type means the default ("dispatch"): not an error.
            if op == "dispatch" && msg_type.is_empty() {
                continue;
            }
            let reply =
                sluice_tests::json(&host.ask("Echo/a", op, req.to_string(), t).await.unwrap());
            assert_eq!(reply["ok"], false, "{op} {got}: {reply}");
            assert_eq!(reply["error"]["code"], "invalid-argument", "{op}: {reply}");
            assert_eq!(reply["error"]["message"], want, "{op}: {reply}");
        }
    }
    // Nothing reached Echo/b, and a good msg_type still goes through.
    assert!(sluice_tests::recorded_by(&host, "Echo/b").await.is_empty());
    let reply = sluice_tests::json(
        &host
            .ask(
                "Echo/a",
                "tell",
                json!({"to": "Echo/b", "msg_type": "record", "payload": "fine"}).to_string(),
                t,
            )
            .await
            .unwrap(),
    );
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(sluice_tests::recorded_by(&host, "Echo/b").await, ["fine"]);
}
