//! Durable reminders (`outbox.remind` / `outbox.cancel-reminder`) through the public surface:
//! each language's echo actor arms, re-arms and cancels them on a real host with a real SQLite
//! outbox, and sees the limits as its SDK's typed errors; and the real `sluice run` binary,
//! killed with SIGKILL after a reminder was armed, delivers it after a restart, on the embedded
//! SQLite store and on Postgres. `sluice reminders list|cancel` (the admin API) shows and
//! cancels what is pending, and a Rust embedder arms reminders with `Host::remind`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_runtime::{ChildSpec, HostConfig};
use sluice_tests::{
    Lang, SluiceRun, attach_sqlite_outbox, ingress_ask, json, per_language, poly_host, rust_app,
    sluice_binary, test_config, wait_for,
};

const T: Duration = Duration::from_secs(30);

per_language!(reminders_arrive_once_when_due_and_names_replace_or_cancel);

async fn echo_call(host: &sluice_runtime::Host, id: &str, op: &str, req: Value) -> Value {
    let reply = host
        .ask(id, op, req.to_string(), T)
        .await
        .unwrap_or_else(|e| panic!("{op} {req}: {e}"));
    json(&reply)
}

/// What `id` recorded once it holds at least `n` items (bounded wait).
async fn recorded(host: &sluice_runtime::Host, id: &str, n: usize) -> Value {
    let what = format!("{id} to record {n} reminders");
    wait_for(T, &what, || async move {
        let r = json(&host.ask(id, "recorded", "", T).await.unwrap());
        let have = r["items"].as_array().map_or(0, Vec::len);
        if have >= n { Ok(r) } else { Err(r) }
    })
    .await
}

async fn reminders_arrive_once_when_due_and_names_replace_or_cancel(lang: Lang) {
    let cfg = HostConfig {
        max_reminders_per_actor: 3,
        ..test_config()
    };
    let Some(host) = poly_host(
        cfg,
        lang,
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await
    else {
        return;
    };
    let me = "Echo/clock";
    let arm = |name: &str, delay_ms: u64, payload: &str| json!({"name": name, "delay_ms": delay_ms, "msg_type": "record", "payload": payload});
    // Without an outbox there is nowhere to keep a reminder: a typed UNAVAILABLE.
    let r = echo_call(&host, me, "remind", arm("", 10, "x")).await;
    assert_eq!(r["error"]["type"], "Unavailable", "{lang:?}: {r}");
    assert_eq!(r["error"]["code"], "unavailable", "{lang:?}: {r}");

    let _outbox = attach_sqlite_outbox(&host).await;
    let armed = Instant::now();
    for (name, delay, payload) in [
        ("", 400, "anonymous"),
        ("tick", 200, "first"),
        // Arming `tick` again replaces the pending one: `first` never arrives.
        ("tick", 700, "second"),
        ("gone", 300, "cancelled"),
    ] {
        let r = echo_call(&host, me, "remind", arm(name, delay, payload)).await;
        assert_eq!(r, json!({"ok": true}), "{lang:?} {name}");
    }
    // At the cap (3 pending): one more is refused, exactly as the SDK types it.
    let r = echo_call(&host, me, "remind", arm("", 100, "over")).await;
    assert_eq!(r["error"]["type"], "ResourceExhausted", "{lang:?}: {r}");
    assert_eq!(
        r["error"]["message"],
        "RESOURCE_EXHAUSTED: 3 reminders already pending for Echo/clock (max_reminders_per_actor)",
        "{lang:?}"
    );
    let cancel = |name: &str| json!({"name": name});
    let r = echo_call(&host, me, "cancel_reminder", cancel("gone")).await;
    assert_eq!(r, json!({"ok": true, "cancelled": true}), "{lang:?}");
    let r = echo_call(&host, me, "cancel_reminder", cancel("gone")).await;
    assert_eq!(r, json!({"ok": true, "cancelled": false}), "{lang:?}");
    // Another actor's names are its own.
    let r = echo_call(&host, "Echo/other", "cancel_reminder", cancel("tick")).await;
    assert_eq!(r, json!({"ok": true, "cancelled": false}), "{lang:?}");
    // Bad input is refused before anything is stored.
    let long = "n".repeat(257);
    let r = echo_call(&host, me, "remind", arm(&long, 10, "x")).await;
    assert_eq!(r["error"]["type"], "InvalidArgument", "{lang:?}: {r}");
    // Past ten years (the host's bound on a delay).
    let r = echo_call(&host, me, "remind", arm("far", 315_360_000_001, "x")).await;
    assert_eq!(r["error"]["type"], "InvalidArgument", "{lang:?}: {r}");
    let bad_type = json!({"name": "", "delay_ms": 10, "msg_type": "", "payload": "x"});
    let r = echo_call(&host, me, "remind", bad_type).await;
    assert_eq!(r["error"]["type"], "InvalidArgument", "{lang:?}: {r}");

    let r = recorded(&host, me, 2).await;
    let elapsed = armed.elapsed();
    assert_eq!(r["items"], json!(["anonymous", "second"]), "{lang:?}");
    assert!(
        elapsed >= Duration::from_millis(700),
        "{lang:?}: {elapsed:?}"
    );
    // Each is a message from the actor to itself.
    for env in r["envelopes"].as_array().unwrap() {
        assert_eq!(env["sender"], me, "{lang:?}: {r}");
        assert_eq!(env["msg_type"], "record", "{lang:?}: {r}");
    }
    // Delivered once: past every due time (the cancelled and the replaced ones' too), the
    // actor still holds those two, and nothing is left to deliver.
    let ob = host.outbox().unwrap();
    let what = "the outbox to have nothing pending";
    wait_for(T, what, || async {
        let depth: u64 = ob.stats().await.unwrap().iter().map(|p| p.depth).sum();
        if depth == 0 { Ok(()) } else { Err(depth) }
    })
    .await;
    let again = json(&host.ask(me, "recorded", "", T).await.unwrap());
    assert_eq!(again["items"], json!(["anonymous", "second"]), "{lang:?}");
    // Both delivered: the cap has room for three again.
    for name in ["a", "b", "c"] {
        let r = echo_call(&host, me, "remind", arm(name, 60_000, name)).await;
        assert_eq!(r, json!({"ok": true}), "{lang:?} {name}");
    }
}

const APP: &str = r#"
[[supervisor.children]]
name = "echo"
actor_type = "Echo"
module = "echo.wasm"

[outbox]
lease_ms = 2000   # Postgres: the killed host's partition leases lapse after 2 s
"#;

/// Arms a reminder on a `sluice run` host, kills the host with SIGKILL before it is due, starts
/// the host again on the same store, and waits for the reminder there: it arrives once, not
/// before its due time.
async fn a_reminder_outlives_a_sigkilled_host(args: &[&str]) {
    let app = rust_app(&["echo"], APP);
    let bin = sluice_binary("sluice-reminders");
    let h1 = SluiceRun::start(&bin, app.path(), args, &[]).await;
    let armed = Instant::now();
    let r = ingress_ask(
        &h1.ingress,
        "Echo/wake/ask/remind",
        json!({"name": "wake", "delay_ms": 1500, "msg_type": "record", "payload": "durable"}),
    )
    .await;
    assert_eq!(r, json!({"ok": true}));
    let listed = sluice_reminders(&bin, &h1, &["list"]);
    let pending = listed["reminders"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{listed}");
    assert_eq!(pending[0]["receiver"], "Echo/wake");
    assert_eq!(pending[0]["name"], "wake");
    assert_eq!(pending[0]["msg_type"], "record");
    assert_eq!(pending[0]["payload_bytes"], 7, "{listed}"); // b"durable"
    let due_in = pending[0]["due_in_ms"].as_i64().unwrap();
    assert!((0..=1500).contains(&due_in), "{listed}");
    drop(h1); // SIGKILL, long before the reminder is due
    assert!(
        armed.elapsed() < Duration::from_millis(1500),
        "killed too late to prove anything"
    );

    let h2 = SluiceRun::start(&bin, app.path(), args, &[]).await;
    let got = wait_for(T, "the reminder on the restarted host", || async {
        let r = ingress_ask(&h2.ingress, "Echo/wake/ask/recorded", json!("")).await;
        if r["items"].as_array().is_some_and(|a| !a.is_empty()) {
            Ok(r)
        } else {
            Err(r)
        }
    })
    .await;
    assert!(armed.elapsed() >= Duration::from_millis(1500));
    assert_eq!(got["items"], json!(["durable"]));
    assert_eq!(got["envelopes"][0]["sender"], "Echo/wake", "{got}");
    // Nothing is left pending, so it cannot arrive again.
    let r = ingress_ask(
        &h2.ingress,
        "Echo/wake/ask/cancel_reminder",
        json!({"name": "wake"}),
    )
    .await;
    assert_eq!(r, json!({"ok": true, "cancelled": false}));
    let listed = sluice_reminders(&bin, &h2, &["list"]);
    assert_eq!(listed, json!({"reminders": []}));
}

/// `sluice reminders ARGS --host <h's admin API>`, which must succeed; its JSON output.
fn sluice_reminders(bin: &std::path::Path, h: &SluiceRun, args: &[&str]) -> Value {
    let out = std::process::Command::new(bin)
        .arg("reminders")
        .args(args)
        .args(["--host", &h.admin])
        .env_remove("SLUICE_ADMIN_TOKEN")
        .output()
        .expect("running sluice reminders");
    assert!(out.status.success(), "sluice reminders {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

/// What an operator sees and does through the CLI and the admin API: reminders armed by two
/// actors are listed soonest due first (all, one actor's, up to a limit); one is cancelled by
/// name and never arrives, while the other actor's arrives; bad requests get typed refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_list_and_cancel_pending_reminders_with_the_cli() {
    let app = rust_app(&["echo"], APP);
    let bin = sluice_binary("sluice-reminders");
    let h = SluiceRun::start(&bin, app.path(), &[], &[]).await;
    for (actor, name, delay) in [
        ("Echo/a", "later", 60_000),
        ("Echo/a", "", 30_000),
        ("Echo/b", "soon", 700),
    ] {
        let r = ingress_ask(
            &h.ingress,
            &format!("{actor}/ask/remind"),
            json!({"name": name, "delay_ms": delay, "msg_type": "record", "payload": name}),
        )
        .await;
        assert_eq!(r, json!({"ok": true}), "{actor} {name}");
    }
    let names = |v: &Value| -> Vec<(String, String)> {
        v["reminders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["receiver"].as_str().unwrap().to_string(),
                    r["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let s = |a: &str, n: &str| (a.to_string(), n.to_string());
    let all = sluice_reminders(&bin, &h, &["list"]);
    assert_eq!(
        names(&all),
        [s("Echo/b", "soon"), s("Echo/a", ""), s("Echo/a", "later")]
    );
    let a = sluice_reminders(&bin, &h, &["list", "--receiver", "Echo/a"]);
    assert_eq!(names(&a), [s("Echo/a", ""), s("Echo/a", "later")]);
    let first = sluice_reminders(&bin, &h, &["list", "--limit", "1"]);
    assert_eq!(names(&first), [s("Echo/b", "soon")]);

    let cancel = ["cancel", "--receiver", "Echo/a", "--name", "later"];
    assert_eq!(
        sluice_reminders(&bin, &h, &cancel),
        json!({"cancelled": true})
    );
    assert_eq!(
        sluice_reminders(&bin, &h, &cancel),
        json!({"cancelled": false})
    );
    // `soon` arrives; `later` is gone and the anonymous one still waits.
    let got = wait_for(T, "Echo/b's reminder", || async {
        let r = ingress_ask(&h.ingress, "Echo/b/ask/recorded", json!("")).await;
        if r["items"] == json!(["soon"]) {
            Ok(r)
        } else {
            Err(r)
        }
    })
    .await;
    assert_eq!(got["envelopes"][0]["sender"], "Echo/b");
    let left = sluice_reminders(&bin, &h, &["list"]);
    assert_eq!(names(&left), [s("Echo/a", "")]);

    // Typed refusals: the CLI before it sends anything, the admin API for a bad body or id.
    let out = std::process::Command::new(&bin)
        .args([
            "reminders",
            "cancel",
            "--receiver",
            "Echo/a",
            "--host",
            &h.admin,
        ])
        .env_remove("SLUICE_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs --receiver and --name"),
        "{out:?}"
    );
    let http = reqwest::Client::new();
    for (body, says) in [
        (json!({"receiver": "Echo/a"}), "a named reminder"),
        (
            json!({"receiver": "Echo/a", "name": ""}),
            "a named reminder",
        ),
        (
            json!({"receiver": "no-slash", "name": "x"}),
            "INVALID_ARGUMENT",
        ),
    ] {
        let resp = http
            .post(format!("{}/admin/reminders/cancel", h.admin))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{body}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["code"], "invalid-argument", "{body}: {v}");
        assert!(v["message"].as_str().unwrap().contains(says), "{body}: {v}");
    }
    let resp = http
        .get(format!("{}/admin/reminders?limit=many", h.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    // Nothing was lost to the refusals.
    let still = sluice_reminders(&bin, &h, &["list", "--receiver", "Echo/a"]);
    assert_eq!(names(&still), [s("Echo/a", "")]);
}

/// A Rust embedder arms a reminder for an actor with `Host::remind` (and cancels one with
/// `Host::cancel_reminder`): it arrives from the actor itself when due; the guests' limits and
/// typed errors hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedder_arms_reminders_with_host_remind() {
    let cfg = HostConfig {
        max_reminders_per_actor: 2,
        ..test_config()
    };
    let Some(host) = poly_host(
        cfg,
        Lang::Rust,
        vec![(ChildSpec::new("Echo", "echo.wasm"), "echo")],
    )
    .await
    else {
        return;
    };
    let r = host
        .remind("Echo/e", "", Duration::from_millis(10), "record", "x")
        .await
        .unwrap_err();
    assert_eq!(r.code, sluice_runtime::ErrorCode::Unavailable, "{r}");
    let _outbox = attach_sqlite_outbox(&host).await;
    let armed = Instant::now();
    let remind = |name: &'static str, delay_ms: u64, payload: &'static str| {
        let host = &host;
        async move {
            host.remind(
                "Echo/e",
                name,
                Duration::from_millis(delay_ms),
                "record",
                payload,
            )
            .await
        }
    };
    remind("job", 300, "from the embedder").await.unwrap();
    remind("gone", 100, "cancelled").await.unwrap();
    let full = remind("", 100, "over").await.unwrap_err();
    assert_eq!(
        full.to_string(),
        "RESOURCE_EXHAUSTED: 2 reminders already pending for Echo/e (max_reminders_per_actor)"
    );
    assert!(host.cancel_reminder("Echo/e", "gone").await.unwrap());
    assert!(!host.cancel_reminder("Echo/e", "gone").await.unwrap());
    // Past ten years, and not an actor id.
    for (to, delay) in [
        ("Echo/e", Duration::from_secs(11 * 365 * 24 * 3600)),
        ("not-an-id", Duration::ZERO),
    ] {
        let bad = host.remind(to, "", delay, "record", "x").await.unwrap_err();
        assert_eq!(
            bad.code,
            sluice_runtime::ErrorCode::InvalidArgument,
            "{bad}"
        );
    }
    let r = recorded(&host, "Echo/e", 1).await;
    assert!(armed.elapsed() >= Duration::from_millis(300));
    assert_eq!(r["items"], json!(["from the embedder"]));
    assert_eq!(r["envelopes"][0]["sender"], "Echo/e", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_outlives_a_sigkill_on_the_embedded_sqlite_store() {
    a_reminder_outlives_a_sigkilled_host(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_outlives_a_sigkill_on_postgres() {
    let Some(db) = sluice_tests::fresh_postgres_database("reminders").await else {
        return;
    };
    a_reminder_outlives_a_sigkilled_host(&["--database-url", &db]).await;
}
