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

/// Serves an ingress router as `sluice run` does ([`sluice_cli::ingress::serve`]).
async fn serve_ingress(router: axum::Router) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { sluice_cli::ingress::serve(l, router).await.unwrap() });
    addr
}

async fn ingress(host: &Host) -> String {
    sluice_cli::metrics_export::handle();
    format!(
        "http://{}",
        serve_ingress(sluice_cli::ingress::router(host.clone())).await
    )
}

/// The exact body of a refusal that carries no details: every error body has these fields.
fn typed(code: &str, message: &str) -> serde_json::Value {
    json!({"code": code, "message": message, "retry_after_ms": null, "skipped": false,
        "kind": null, "scope": null, "depth": null, "limit": null})
}

/// Status and JSON body of a response that must be typed JSON.
async fn refusal(r: reqwest::Response) -> (u16, serde_json::Value) {
    let status = r.status().as_u16();
    let ct = r.headers().get("content-type").cloned();
    let text = r.text().await.unwrap();
    assert_eq!(
        ct.as_ref().map(|v| v.to_str().unwrap()),
        Some("application/json"),
        "{status}: {text:?}"
    );
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status} {text:?}: {e}"));
    (status, body)
}

/// One request written by hand on `stream` (for what reqwest will not send: a URI over the
/// `http` crate's 65534 bytes, or not HTTP at all), and the response: status, headers (names
/// lower case) and body, read by its content-length.
async fn exchange(
    stream: &mut tokio::net::TcpStream,
    request: &[u8],
) -> (u16, Vec<(String, String)>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(request).await.unwrap();
    let read = async {
        let mut buf = Vec::new();
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "connection closed before a response head: {buf:?}");
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap()[9..12].parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (k, v) = l.split_once(": ").unwrap();
                (k.to_ascii_lowercase(), v.to_string())
            })
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .map_or(0, |(_, v)| v.parse().unwrap());
        let mut body = buf[head_end + 4..].to_vec();
        while body.len() < len {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "connection closed inside a body");
            body.extend_from_slice(&chunk[..n]);
        }
        (status, headers, String::from_utf8(body).unwrap())
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("a response within 30 s")
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
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
        if size > 8192 {
            // The unread rest leaves the connection unusable: the answer says it closes, so
            // the client's pool does not send the next request on it (CI once saw exactly
            // that race as a broken connection on the request below).
            assert_eq!(r.headers()["connection"], "close", "{path}");
        }
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
        host.tell(&format!("{ty}/1"), "sleep", "1000")
            .await
            .unwrap();
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
    // A refused request still gets its typed 401, also while it is sending a body far larger
    // than the socket buffers (answering and closing with the body unread resets the
    // connection under the client's feet).
    let big = json!({"child": body["child"].clone(),
        "module_base64": base64::engine::general_purpose::STANDARD.encode(vec![7u8; 24 << 20])});
    for body in [&body, &big] {
        for auth in [None, Some("Bearer wrong"), Some("s3cret")] {
            let mut req = http.post(format!("{admin}/admin/deploy")).json(body);
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 401, "{auth:?}");
            let b: serde_json::Value = r.json().await.unwrap();
            assert_eq!(b["code"], "unauthenticated", "{b}");
        }
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
            h.tell("Relay/k", "tell", req.to_string()).await.unwrap();
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
    let settings: sluice_app::IngressSettings =
        toml::from_str(r#"tokens = { "tok-alice" = "user:alice", "tok-gateway" = "*" }"#).unwrap();
    let serve_with = |auth| {
        let host = host.clone();
        async move {
            format!(
                "http://{}",
                serve_ingress(sluice_cli::ingress::router_with(host, auth)).await
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
    for (token, why) in [
        (None, "this ingress requires Authorization: Bearer <token>"),
        (Some("tok-mallory"), "unknown bearer token"),
    ] {
        let (status, body) = whoami(&secured, token, Some("user:alice")).await;
        assert_eq!(status, 401);
        // The same fields as every other error body.
        assert_eq!(
            body,
            typed("unauthenticated", &format!("UNAUTHENTICATED: {why}"))
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

/// Every refusal at the ingress is the typed JSON body, whoever makes it: the router (a path
/// that is not UTF-8, an unknown route, a wrong method), the host (a bad msg_type), or hyper
/// before the router sees the request (a URI over 65534 bytes, too many headers, not HTTP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_at_the_ingress_is_typed_json() {
    let host = host_with(
        test_config(),
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await;
    let base = ingress(&host).await;
    let addr = base.trim_start_matches("http://").to_string();
    let http = reqwest::Client::new();
    let post = |path: &str| http.post(format!("{base}{path}")).body("hi");
    let invalid = |m: &str| typed("invalid-argument", &format!("INVALID_ARGUMENT: {m}"));

    // Percent-escapes that decode to bytes that are not UTF-8, in each segment.
    for (path, name) in [
        ("/actors/%FF/1/ask/echo", "actor type"),
        ("/actors/Echo/%FF/ask/echo", "key"),
        ("/actors/Echo/1/ask/%FF", "msg_type"),
        ("/actors/Echo/%C3%28/tell/echo", "key"),
    ] {
        let (status, body) = refusal(post(path).send().await.unwrap()).await;
        assert_eq!(status, 400, "{path}");
        assert_eq!(
            body,
            invalid(&format!(
                "the {name} in the path is not UTF-8 once percent-decoded"
            )),
            "{path}"
        );
    }

    // msg_type: 1..=256 bytes without control characters, through ask and tell alike.
    let rule = "msg_type must be 1..=256 bytes without control characters";
    for verb in ["ask", "tell"] {
        for (msg_type, got) in [
            ("m".repeat(10 * 1024), "10240 bytes".to_string()),
            ("m".repeat(257), "257 bytes".to_string()),
            ("a%0Ab".to_string(), r#""a\nb""#.to_string()),
            ("tab%09".to_string(), r#""tab\t""#.to_string()),
            ("nul%00".to_string(), r#""nul\0""#.to_string()),
        ] {
            let path = format!("/actors/Echo/1/{verb}/{msg_type}");
            let (status, body) = refusal(post(&path).send().await.unwrap()).await;
            assert_eq!(status, 400, "{verb} {got}");
            assert_eq!(body, invalid(&format!("{rule}, got {got}")), "{verb}");
        }
    }
    // The longest allowed, and any other text, still pass.
    for msg_type in ["m".repeat(256), "with%20space%2Fand%20slash".into()] {
        let r = post(&format!("/actors/Echo/1/ask/{msg_type}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{msg_type}");
        assert_eq!(r.text().await.unwrap(), "hi");
    }

    // Unknown routes: 404.
    let no_route = typed(
        "not-found",
        "NOT_FOUND: no such route: the ingress serves POST /actors/{type}/{key}/ask/{msg_type}, \
         POST /actors/{type}/{key}/tell/{msg_type}, GET /metrics and GET /healthz",
    );
    for path in [
        "/",
        "/nope",
        "/actors/Echo/1/shout/echo",
        "/actors/Echo/ask/echo",
    ] {
        let (status, body) = refusal(post(path).send().await.unwrap()).await;
        assert_eq!((status, &body), (404, &no_route), "{path}");
    }
    // Wrong methods: 405 with the methods the route takes.
    for (method, path, allow) in [
        (reqwest::Method::GET, "/actors/Echo/1/ask/echo", "POST"),
        (reqwest::Method::PUT, "/actors/Echo/1/tell/echo", "POST"),
        (reqwest::Method::POST, "/metrics", "GET,HEAD"),
        (reqwest::Method::DELETE, "/healthz", "GET,HEAD"),
    ] {
        let r = http
            .request(method.clone(), format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["allow"], allow, "{method} {path}");
        let (status, body) = refusal(r).await;
        assert_eq!(status, 405, "{method} {path}");
        assert_eq!(
            body,
            invalid(&format!(
                "method {method} is not allowed on this route (see the Allow header)"
            ))
        );
    }

    // More headers than hyper parses: 431, answered by hyper, typed by the ingress's stream.
    let mut many = reqwest::header::HeaderMap::new();
    for i in 0..150 {
        many.insert(
            reqwest::header::HeaderName::from_bytes(format!("x-h{i}").as_bytes()).unwrap(),
            "v".parse().unwrap(),
        );
    }
    let (status, body) = refusal(
        post("/actors/Echo/1/ask/echo")
            .headers(many)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 431);
    assert_eq!(
        body,
        invalid("request header section too large: too many headers, or too many bytes")
    );

    // A 100 KB msg_type: a URI over hyper's 65534 bytes is 414, typed. reqwest cannot send
    // it (the `http` crate caps a URI at that size), so it goes by hand, on a connection that
    // has served a request already.
    let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (status, _, body) = exchange(
        &mut tcp,
        b"POST /actors/Echo/1/ask/echo HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nok",
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let long = format!(
        "POST /actors/Echo/1/ask/{} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n",
        "m".repeat(100_000)
    );
    let (status, headers, body) = exchange(&mut tcp, long.as_bytes()).await;
    assert_eq!(status, 414);
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    assert_eq!(header(&headers, "connection"), Some("close"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        invalid(
            "request URI too long for this server: an actor type is at most 64 bytes, a key and a msg_type at most 256"
        )
    );
    // Not HTTP, and a header line without a colon: 400, typed.
    for request in [
        &b"GARBAGE\r\n\r\n"[..],
        b"POST /actors/Echo/1/ask/echo HTTP/1.1\r\nhost: x\r\nno colon here\r\n\r\n",
    ] {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let (status, headers, body) = exchange(&mut tcp, request).await;
        assert_eq!(status, 400, "{request:?}");
        assert_eq!(header(&headers, "content-type"), Some("application/json"));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&body).unwrap(),
            invalid(
                "not a well-formed HTTP/1.1 request: its request line or a header could not be parsed"
            )
        );
    }

    // A reply that happens to hold the bytes of hyper's refusal arrives as sent.
    let lookalike = "HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
    let r = http
        .post(format!("{base}/actors/Echo/1/ask/echo"))
        .body(lookalike)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), lookalike);
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
        let e = host.tell("Echo/a", msg_type, "x").await.unwrap_err();
        assert_eq!(e.to_string(), want);
        let e = host
            .tell_to(&id, msg_type, b"x".to_vec())
            .await
            .unwrap_err();
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

/// `sluice call` against a real `sluice run`: each part of the address goes as one
/// percent-encoded segment, and a refusal prints the host's typed JSON, exit code 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_call_sends_any_key_and_prints_typed_refusals() {
    let dir = sluice_tests::rust_app(
        &["echo"],
        "[[supervisor.children]]\nname = \"echo\"\nactor_type = \"Echo\"\nmodule = \"echo.wasm\"\n",
    );
    let bin = sluice_tests::sluice_binary("sluice-ingress-call");
    let run = sluice_tests::SluiceRun::start(&bin, dir.path(), &[], &[]).await;
    let call = |actor: &str, msg_type: &str| {
        std::process::Command::new(&bin)
            .args(["call", actor, msg_type, "--host", &run.ingress])
            .output()
            .unwrap()
    };
    // A key with `/`, `?`, `#`, `%` and a space arrives whole.
    let out = call("Echo/a/b?c#d%20 e", "whoami");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sluice_tests::json(&out.stdout)["self_id"],
        "Echo/a/b?c#d%20 e"
    );
    // A newline in msg_type reaches the host, which refuses it.
    let out = call("Echo/1", "a\nb");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut lines = stderr.lines();
    let body: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        body,
        typed(
            "invalid-argument",
            r#"INVALID_ARGUMENT: msg_type must be 1..=256 bytes without control characters, got "a\nb""#
        )
    );
    assert_eq!(lines.next(), Some("error: ask failed with HTTP 400"));
    assert_eq!(lines.next(), None);
    // A msg_type too long for any HTTP request line: refused before sending, briefly.
    let out = call("Echo/1", &"m".repeat(100_000));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        "error: the request could not be sent as HTTP: builder error: Parsed Url is not a valid Uri"
    );
}

/// The admin API's extractors answer in its JSON too: a query string that does not parse,
/// and a body that cannot be read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_extractor_rejections_are_typed_json() {
    let host = host_with(test_config(), vec![]).await;
    let admin = serve(sluice_cli::admin::router(host.clone(), None)).await;
    let http = reqwest::Client::new();
    let r = http
        .get(format!("http://{admin}/admin/dlq?limit=many"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["content-type"], "application/json");
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap(),
        json!({"code": "invalid-argument",
            "message": "INVALID_ARGUMENT: Failed to deserialize query string: limit: invalid digit found in string"})
    );
    // A chunked body whose chunk size is not hex: hyper fails the body, the handler's
    // extractor is refused.
    for path in ["/admin/deploy", "/admin/dlq/replay", "/admin/dlq/purge"] {
        let mut tcp = tokio::net::TcpStream::connect(admin).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"
        );
        let (status, headers, body) = exchange(&mut tcp, request.as_bytes()).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(header(&headers, "content-type"), Some("application/json"));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&body).unwrap(),
            json!({"code": "invalid-argument", "message": "INVALID_ARGUMENT: Failed to buffer the request body: error reading a body from connection"}),
            "{path}"
        );
    }
    // An unknown path and a wrong method answer in the same typed JSON (they were empty).
    let r = http
        .get(format!("http://{admin}/admin/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let b: serde_json::Value = r.json().await.unwrap();
    assert_eq!(b["code"], "not-found", "{b}");
    assert!(
        b["message"].as_str().unwrap().starts_with("NOT_FOUND: "),
        "{b}"
    );
    let r = http
        .get(format!("http://{admin}/admin/deploy"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert!(r.headers().contains_key("allow"));
    let b: serde_json::Value = r.json().await.unwrap();
    assert_eq!(b["code"], "invalid-argument", "{b}");
}
