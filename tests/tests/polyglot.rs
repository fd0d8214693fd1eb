//! The TESTKIT contract on the real host, once per language: every behaviour below runs
//! against the Rust, Go, Python and TypeScript builds of the same test actors
//! (`guests/TESTKIT.md`), so each SDK's error mapping and each toolchain's trap behaviour is
//! proven on wasmtime, not only under node. Test names read `behaviour::language`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_outbox::{Outbox, OutboxConfig};
use sluice_runtime::{ChildSpec, ErrorCode, HostConfig, MailboxStrategy};
use sluice_tests::{
    Lang, guest, json, per_language, poly_host, recorded_by, test_config, wait_until,
    wait_until_async,
};

const T: Duration = Duration::from_secs(60);

per_language!(
    echo_contract_holds_on_the_real_host,
    plain_error_is_internal_with_its_message_and_the_state_survives,
    outbox_is_unavailable_and_bus_publishes_to_nobody_on_a_bare_host,
    dispatch_reports_each_targets_outcome_in_request_order,
    trap_restarts_the_instance_and_the_next_message_succeeds,
    ask_timeout_reaches_guest_as_deadline_exceeded_and_missing_type_as_not_found,
    overloaded_callee_reaches_guest_as_overloaded_with_its_details,
    infinite_loop_is_interrupted_and_restarted,
    memory_hog_gets_resource_exhausted_at_its_limit,
    max_activations_actors_can_all_be_live,
    every_code_raised_here_reaches_a_caller_in_another_language_unchanged,
);

fn echo_spec() -> ChildSpec {
    let mut init = toml::Table::new();
    init.insert("greeting".into(), "hi".into());
    ChildSpec::new("Echo", "echo.wasm").init(init)
}

/// Asks `Echo/1` to run an SDK call (`tell`, `ask`, …) and returns its JSON report.
async fn via_guest(host: &sluice_runtime::Host, ty: &str, req: Value) -> Value {
    json(
        &host
            .ask("Echo/1", ty, req.to_string(), T)
            .await
            .unwrap_or_else(|e| panic!("{ty} {req}: {e}")),
    )
}

async fn echo_contract_holds_on_the_real_host(lang: Lang) {
    let Some(host) = poly_host(test_config(), lang, vec![(echo_spec(), "echo")]).await else {
        return;
    };
    // Byte for byte, including every byte value and the empty payload.
    let bytes: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
    assert_eq!(
        host.ask("Echo/1", "echo", bytes.clone(), T).await.unwrap(),
        bytes
    );
    assert_eq!(host.ask("Echo/1", "echo", "", T).await.unwrap(), b"");
    assert_eq!(host.ask("Echo/1", "anything", "x", T).await.unwrap(), b"x");
    // init received the spec's config.
    let cfg = json(&host.ask("Echo/1", "init_config", "", T).await.unwrap());
    assert_eq!(cfg, json!({"greeting": "hi"}));
    let who = json(&host.ask("Echo/1", "whoami", "", T).await.unwrap());
    assert_eq!(who["self_id"], "Echo/1", "{who}");
    assert_eq!(who["principal"], "system", "{who}");
    assert_eq!(who["sender"], Value::Null, "{who}");
    let now = json(&host.ask("Echo/1", "now", "", T).await.unwrap());
    assert!(now["now_ms"].as_u64().unwrap() > 1_600_000_000_000, "{now}");
    // A guest error is a value, not a trap: same instance, state kept.
    host.ask("Echo/1", "record", "a", T).await.unwrap();
    let e = host.ask("Echo/1", "fail", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{e}");
    assert_eq!(e.to_string(), "bad input");
    let r = json(&host.ask("Echo/1", "record", "b", T).await.unwrap());
    assert_eq!(r["count"], 2, "{r}");
    let r = json(&host.ask("Echo/1", "recorded", "", T).await.unwrap());
    assert_eq!(r["items"], json!(["a", "b"]), "{r}");
    assert_eq!(r["envelopes"][0]["msg_type"], "record", "{r}");
    assert_eq!(r["envelopes"][0]["principal"], "system", "{r}");
    // Guest-side tell and ask reach another actor, with the sender set.
    let r = via_guest(
        &host,
        "tell",
        json!({"to": "Echo/2", "msg_type": "record", "payload": "from-1"}),
    )
    .await;
    assert_eq!(r, json!({"ok": true, "receipt": "queued"}));
    let r = via_guest(
        &host,
        "ask",
        json!({"to": "Echo/2", "msg_type": "echo", "payload": "hello", "timeout_ms": 10_000}),
    )
    .await;
    assert_eq!(r, json!({"ok": true, "reply": "hello"}));
    let r = json(&host.ask("Echo/2", "recorded", "", T).await.unwrap());
    assert_eq!(r["items"], json!(["from-1"]), "{r}");
    assert_eq!(r["envelopes"][0]["sender"], "Echo/1", "{r}");
    let r = json(
        &host
            .ask("Echo/1", "log", "hello from the guest", T)
            .await
            .unwrap(),
    );
    assert_eq!(r, json!({"ok": true}));
}

/// `wit/errors.json` "uncoded": an error raised without a code of its own (a Go `error`, a Python
/// exception, a thrown JS `Error`, a Rust error through `Error::uncoded`) is a value, not a trap:
/// `INTERNAL: <its message>`, the same instance answers next with its state, and another
/// language's guest calling it sees the same code and message.
async fn plain_error_is_internal_with_its_message_and_the_state_survives(lang: Lang) {
    let Some(host) = poly_host(test_config(), lang, vec![(echo_spec(), "echo")]).await else {
        return;
    };
    host.ask("Echo/2", "record", "before", T).await.unwrap();
    let e = host.ask("Echo/2", "throw", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "{e}");
    assert_eq!(e.to_string(), "INTERNAL: plain failure");
    assert_eq!(e.retry_after_ms, None, "{e}");
    host.ask("Echo/2", "record", "after", T).await.unwrap();
    let r = json(&host.ask("Echo/2", "recorded", "", T).await.unwrap());
    assert_eq!(r["items"], json!(["before", "after"]), "state kept: {r}");
    // Through a guest (Echo/1 asks Echo/2): the caller's SDK raises `Internal` with the same
    // message.
    let r = via_guest(
        &host,
        "ask",
        json!({"to": "Echo/2", "msg_type": "throw", "payload": "", "timeout_ms": 5000}),
    )
    .await;
    assert_eq!(
        r["error"],
        json!({"type": "Internal", "code": "internal", "message": "INTERNAL: plain failure",
               "retry_after_ms": null, "skipped": false, "scope": null, "depth": null, "limit": null}),
        "{r}"
    );
    // A trap would have restarted the instance with an empty list.
    let r = json(&host.ask("Echo/2", "recorded", "", T).await.unwrap());
    assert_eq!(
        r["items"],
        json!(["before", "after"]),
        "still the same instance: {r}"
    );
}

async fn ask_timeout_reaches_guest_as_deadline_exceeded_and_missing_type_as_not_found(lang: Lang) {
    let Some(host) = poly_host(
        test_config(),
        lang,
        vec![
            (echo_spec(), "echo"),
            (ChildSpec::new("Slow", "slow.wasm"), "slow"),
        ],
    )
    .await
    else {
        return;
    };
    host.ask("Slow/1", "ok", "", T).await.unwrap();
    let r = via_guest(
        &host,
        "ask",
        json!({"to": "Slow/1", "msg_type": "sleep", "payload": "1500", "timeout_ms": 100}),
    )
    .await;
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["error"]["type"], "DeadlineExceeded", "{r}");
    assert_eq!(r["error"]["code"], "deadline-exceeded", "{r}");
    assert_eq!(r["error"]["skipped"], false, "the turn was running: {r}");
    let mut errors = Vec::new();
    for ty in ["ask", "tell"] {
        let r = via_guest(
            &host,
            ty,
            json!({"to": "Nope/1", "msg_type": "x", "payload": "", "timeout_ms": 1000}),
        )
        .await;
        assert_eq!(r["ok"], false, "{ty}: {r}");
        assert_eq!(r["error"]["type"], "NotFound", "{ty}: {r}");
        assert_eq!(r["error"]["code"], "not-found", "{ty}: {r}");
        errors.push(r["error"].clone());
    }
    // The same refusal, field for field, whichever import carried it (the Go SDK lifts both
    // itself, out of the results of two different imports).
    assert_eq!(errors[0], errors[1]);
}

async fn outbox_is_unavailable_and_bus_publishes_to_nobody_on_a_bare_host(lang: Lang) {
    let Some(host) = poly_host(test_config(), lang, vec![(echo_spec(), "echo")]).await else {
        return;
    };
    for (ty, req) in [
        (
            "tell_reliable",
            json!({"to": "Echo/2", "msg_type": "echo", "payload": "x"}),
        ),
        (
            "dispatch",
            json!({"targets": ["Echo/2"], "msg_type": "echo", "payload": "x", "mode": "cast",
                   "idempotency_key": "k", "conflict": "overwrite"}),
        ),
    ] {
        let r = via_guest(&host, ty, req).await;
        assert_eq!(r["ok"], false, "{ty}: {r}");
        assert_eq!(r["error"]["type"], "Unavailable", "{ty}: {r}");
        assert_eq!(r["error"]["code"], "unavailable", "{ty}: {r}");
    }
    // Every host has a bus: with no subscriber a publish succeeds and reaches nobody.
    let r = via_guest(&host, "publish", json!({"topic": "a.b", "payload": "x"})).await;
    assert_eq!(r, json!({"ok": true}));
}

/// `outbox.dispatch` gives each target's own outcome, in the order of the targets, through every
/// SDK: one delivered now, one with no actor type (`not-found`, dead-lettered at once), one
/// whose full mailbox refuses (`queued-refused`), one behind the same receiver's earlier message
/// in this dispatch (`queued-behind-pending`), and a repeated key (`deduplicated`). The counts
/// add up to the same. The queued ones are then delivered by the relay.
async fn dispatch_reports_each_targets_outcome_in_request_order(lang: Lang) {
    let Some(host) = poly_host(
        test_config(),
        lang,
        vec![
            (echo_spec(), "echo"),
            (
                ChildSpec::new("Slow", "slow.wasm").mailbox(1, MailboxStrategy::Error),
                "slow",
            ),
        ],
    )
    .await
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::open_sqlite(dir.path().join("outbox.db"), OutboxConfig::default())
        .await
        .expect("outbox opens");
    host.attach_outbox(outbox);
    // Slow/1 busy in a long turn with one more message in its mailbox of one: it refuses.
    host.tell("Slow/1", "sleep", "3000").await.unwrap();
    wait_until(T, "Slow/1 busy", || host.inflight_turns() == 1).await;
    host.tell("Slow/1", "sleep", "1").await.unwrap();

    let r = via_guest(
        &host,
        "dispatch",
        json!({"targets": ["Echo/2", "Nope/1", "Slow/1", "Echo/2"], "msg_type": "record",
               "payload": "1"}),
    )
    .await;
    assert_eq!(
        r,
        json!({"ok": true, "delivered": 1, "deduplicated": 0, "queued": 2, "dead_lettered": 1,
               "outcomes": ["delivered", "not-found", "queued-refused", "queued-behind-pending"]}),
    );
    let keyed = json!({"targets": ["Echo/3"], "msg_type": "record", "payload": "k",
                       "idempotency_key": "once"});
    let r = via_guest(&host, "dispatch", keyed.clone()).await;
    assert_eq!(r["outcomes"], json!(["delivered"]), "{r}");
    let r = via_guest(&host, "dispatch", keyed).await;
    assert_eq!(
        r,
        json!({"ok": true, "delivered": 0, "deduplicated": 1, "queued": 0, "dead_lettered": 0,
               "outcomes": ["deduplicated"]}),
    );

    // Queued means the relay delivers it: Echo/2 gets its second message; dead-lettered means
    // it is in the DLQ.
    wait_until_async(
        T,
        "the relay to deliver Echo/2's second message",
        || async { recorded_by(&host, "Echo/2").await.len() == 2 },
    )
    .await;
    let dead = host.outbox().unwrap().dlq_list(None, 10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].receiver, "Nope/1", "{dead:?}");
}

async fn trap_restarts_the_instance_and_the_next_message_succeeds(lang: Lang) {
    let Some(host) = poly_host(
        test_config(),
        lang,
        vec![(ChildSpec::new("Crash", "crash.wasm"), "crash")],
    )
    .await
    else {
        return;
    };
    assert_eq!(host.ask("Crash/1", "ok", "", T).await.unwrap(), b"alive");
    let e = host.ask("Crash/1", "boom", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "{e}");
    assert!(e.to_string().contains("trapped"), "{e}");
    assert_eq!(host.ask("Crash/1", "ok", "", T).await.unwrap(), b"alive");
    assert_eq!(host.ask("Crash/2", "ok", "", T).await.unwrap(), b"alive");
}

async fn infinite_loop_is_interrupted_and_restarted(lang: Lang) {
    let cfg = HostConfig {
        max_turn_ms: 200,
        ..test_config()
    };
    let Some(host) = poly_host(
        cfg,
        lang,
        vec![(ChildSpec::new("Loop", "loop.wasm"), "loop")],
    )
    .await
    else {
        return;
    };
    assert_eq!(host.ask("Loop/1", "ok", "", T).await.unwrap(), b"alive");
    let t0 = Instant::now();
    let e = host.ask("Loop/1", "spin", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "{e}");
    assert!(e.to_string().contains("max_turn_ms=200"), "{e}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "interrupt took {:?}",
        t0.elapsed()
    );
    assert_eq!(host.ask("Loop/1", "ok", "", T).await.unwrap(), b"alive");
}

async fn memory_hog_gets_resource_exhausted_at_its_limit(lang: Lang) {
    // Python and JS runtimes start with tens of MiB of heap; 96 MiB leaves each room to run.
    let limit = 96;
    let spec = ChildSpec::new("Hog", "hog.wasm").memory_limit_mb(limit);
    let Some(host) = poly_host(test_config(), lang, vec![(spec, "hog")]).await else {
        return;
    };
    assert_eq!(host.ask("Hog/1", "ok", "", T).await.unwrap(), b"alive");
    for _ in 0..2 {
        let e = host.ask("Hog/1", "eat", "", T).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::ResourceExhausted, "{e}");
        assert!(
            e.to_string()
                .contains(&format!("memory limit of {limit} MiB")),
            "{e}"
        );
    }
    assert_eq!(host.ask("Hog/1", "ok", "", T).await.unwrap(), b"alive");
}

/// Admission caps never refuse calls made inside a turn, so the only way `OVERLOADED` reaches
/// guest code is from a callee that sheds load itself: its SDK raises `Overloaded` with scope,
/// depth and limit, the error crosses the host verbatim, and the caller's SDK maps it back.
async fn overloaded_callee_reaches_guest_as_overloaded_with_its_details(lang: Lang) {
    let Some(host) = poly_host(test_config(), lang, vec![(echo_spec(), "echo")]).await else {
        return;
    };
    let r = via_guest(
        &host,
        "ask",
        json!({"to": "Echo/shedder", "msg_type": "shed", "payload": "", "timeout_ms": 5000}),
    )
    .await;
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(
        r["error"],
        json!({"type": "Overloaded", "code": "overloaded", "message": "OVERLOADED: shedding load",
               "retry_after_ms": null, "skipped": false, "scope": "actor", "depth": 7, "limit": 5}),
        "{r}"
    );
    // And from outside, the host API sees the same typed error.
    let e = host.ask("Echo/shedder", "shed", "", T).await.unwrap_err();
    assert_eq!(e.code, sluice_runtime::ErrorCode::Overloaded, "{e}");
}

/// `max_activations` is the number of live actors a host holds, whatever the language: the
/// pool behind it must fit that many instances of a component with many core instances,
/// memories and tables (Python's holds about fourteen core instances).
async fn max_activations_actors_can_all_be_live(lang: Lang) {
    let cap = 24;
    let cfg = HostConfig {
        max_activations: cap,
        idle_deactivate_ms: 0,
        ..test_config()
    };
    let Some(host) = poly_host(cfg, lang, vec![(echo_spec(), "echo")]).await else {
        return;
    };
    for i in 0..cap {
        host.ask(&format!("Echo/k{i}"), "echo", "x", T)
            .await
            .unwrap_or_else(|e| panic!("activation {i} of {cap}: {e}"));
    }
    let active = |h: &sluice_runtime::Host| h.status().iter().map(|s| s.active).sum::<usize>();
    assert_eq!(active(&host), cap as usize);
    // One more key: an idle actor makes room, as at any cap.
    assert_eq!(host.ask("Echo/more", "echo", "y", T).await.unwrap(), b"y");
    assert_eq!(active(&host), cap as usize);
}

/// The error contract across languages (`wit/errors.json`): every code, raised by this
/// language's echo (`Peer`, the `raise` op) and by a plain exception (`throw`), reaches a
/// caller written in the next language (`Echo`: Rust → Go → Python → TypeScript → Rust) with
/// the same code, class, message, `retry_after_ms` and `skipped` — and the host's own
/// `ActorError` agrees. After each error the raiser still has its state.
async fn every_code_raised_here_reaches_a_caller_in_another_language_unchanged(lang: Lang) {
    let caller = Lang::ALL[(Lang::ALL.iter().position(|l| *l == lang).unwrap() + 1) % 4];
    let host = sluice_runtime::Host::new(test_config()).expect("host starts");
    for (ty, l) in [("Echo", caller), ("Peer", lang)] {
        let Some(path) = guest(l, "echo") else { return };
        let bytes = std::fs::read(&path).expect("guest readable");
        host.deploy(ChildSpec::new(ty, "echo.wasm"), bytes)
            .await
            .unwrap_or_else(|e| panic!("{l:?} echo does not deploy as {ty}: {e}"));
    }
    host.ask("Peer/1", "record", "kept", T).await.unwrap();
    let kinds = [
        (
            "resource-exhausted",
            "ResourceExhausted",
            "RESOURCE_EXHAUSTED",
            Some(25),
            false,
        ),
        (
            "deadline-exceeded",
            "DeadlineExceeded",
            "DEADLINE_EXCEEDED",
            None,
            true,
        ),
        ("overloaded", "Overloaded", "OVERLOADED", None, false),
        ("not-found", "NotFound", "NOT_FOUND", None, false),
        (
            "invalid-argument",
            "InvalidArgument",
            "INVALID_ARGUMENT",
            None,
            false,
        ),
        (
            "unavailable",
            "Unavailable",
            "UNAVAILABLE",
            Some(1500),
            false,
        ),
        ("internal", "Internal", "INTERNAL", None, false),
    ];
    assert_eq!(
        kinds.len(),
        ErrorCode::ALL.len(),
        "every code of the contract"
    );
    for (code, class, prefix, retry, skipped) in kinds {
        let detail = format!("{code} from {lang:?} for {caller:?} (é ✓)");
        let req =
            json!({"code": code, "detail": detail, "retry_after_ms": retry, "skipped": skipped});
        let message = format!("{prefix}: {detail}");
        // The host's view of the error.
        let e = host
            .ask("Peer/1", "raise", req.to_string(), T)
            .await
            .unwrap_err();
        assert_eq!(e.code.as_str(), code, "{e}");
        assert_eq!(e.to_string(), message);
        assert_eq!((e.retry_after_ms, e.skipped), (retry, skipped), "{e}");
        // The other language's view, through its SDK.
        let r = via_guest(
            &host,
            "ask",
            json!({"to": "Peer/1", "msg_type": "raise", "payload": req.to_string(), "timeout_ms": 30_000}),
        )
        .await;
        assert_eq!(
            r["error"],
            json!({"type": class, "code": code, "message": message, "retry_after_ms": retry,
                   "skipped": skipped, "scope": null, "depth": null, "limit": null}),
            "{lang:?} raised {code}, {caller:?} caught: {r}"
        );
    }
    // A plain exception is INTERNAL in the other language too.
    let r = via_guest(
        &host,
        "ask",
        json!({"to": "Peer/1", "msg_type": "throw", "payload": "", "timeout_ms": 30_000}),
    )
    .await;
    assert_eq!(r["error"]["code"], "internal", "{r}");
    assert_eq!(r["error"]["message"], "INTERNAL: plain failure", "{r}");
    // Errors are values: the raiser is the same instance, state intact.
    let r = json(&host.ask("Peer/1", "recorded", "", T).await.unwrap());
    assert_eq!(r["items"], json!(["kept"]), "{lang:?} kept its state: {r}");
}
