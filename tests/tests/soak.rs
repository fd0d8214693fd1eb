//! A soak of mixed tell/ask traffic per language with no trap. It exists for the Go GC-in-realloc
//! crash (stock `go.bytecodealliance.org/pkg` v0.4.0 traps with "cannot leave component
//! instance" after ~50k calls when a `cabi_realloc` triggers the GC), and catches the same class
//! of bug in any SDK: argument and reply lowering under allocation pressure, guest-side asks.
//! It also catches per-call leaks: componentize-py 0.25.1 leaks every `bytes` it lowers (each
//! reply, each import payload), which took the Python echo to its 128 MiB limit after ~57k
//! calls; `sluice_build` patches that (host/build/src/lang/python_leak.rs, guests/python/README.md).
//!
//! `SLUICE_SOAK_CALLS` overrides the number of host calls per language (default 200,000).

use std::time::{Duration, Instant};

use serde_json::json;
use sluice_runtime::{ChildSpec, Host, MailboxStrategy};
use sluice_tests::{Lang, per_language, poly_host, test_config};

const T: Duration = Duration::from_secs(60);

// 200,000 calls per language: 12–30 s each on a debug host.
per_language!(mixed_tell_ask_soak_runs_without_a_trap);

fn calls() -> u64 {
    std::env::var("SLUICE_SOAK_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

/// One driver: `n` calls to `me`, three tells then one ask (which, FIFO, also waits for the
/// tells); every 16th ask is a guest-side ask of `peer`, whose reply the host lowers into `me`.
/// The peer never asks back: two actors asking each other at once would deadlock until
/// their deadlines, as in any actor system.
async fn drive(host: Host, me: &'static str, peer: &'static str, n: u64) -> u64 {
    let mut asks = 0;
    for i in 0..n {
        // 16 B .. 4 KiB payloads: lowering them allocates in the guest, which is what triggers GCs.
        // Each call's payload is its own number repeated, so a reply built from memory the guest
        // freed and reused (the host's lowered arguments collected too early) cannot pass.
        let size = 16 + (i as usize * 97) % 4080;
        let payload: String = i
            .to_string()
            .chars()
            .chain(['.'])
            .cycle()
            .take(size)
            .collect();
        if i % 4 != 3 {
            host.tell(me, "echo", payload.clone())
                .await
                .unwrap_or_else(|e| panic!("tell #{i} to {me}: {e}"));
            continue;
        }
        asks += 1;
        if asks % 16 == 0 {
            let req =
                json!({"to": peer, "msg_type": "echo", "payload": payload, "timeout_ms": 30_000});
            let r = host
                .ask(me, "ask", req.to_string(), T)
                .await
                .unwrap_or_else(|e| panic!("guest ask #{i} via {me}: {e}"));
            let r: serde_json::Value = serde_json::from_slice(&r).unwrap();
            assert_eq!(r["ok"], true, "{r}");
            assert_eq!(r["reply"].as_str(), Some(payload.as_str()), "#{i}");
        } else {
            let r = host
                .ask(me, "echo", payload.clone(), T)
                .await
                .unwrap_or_else(|e| panic!("ask #{i} to {me}: {e}"));
            assert!(
                r == payload.as_bytes(),
                "#{i}: the reply is not the payload"
            );
        }
    }
    asks
}

async fn mixed_tell_ask_soak_runs_without_a_trap(lang: Lang) {
    let spec = ChildSpec::new("Echo", "echo.wasm").mailbox(64, MailboxStrategy::Error);
    let Some(host) = poly_host(test_config(), lang, vec![(spec, "echo")]).await else {
        return;
    };
    // A marker in each instance's memory: a trap would restart it and lose the marker.
    for id in ["Echo/a", "Echo/b", "Echo/peer"] {
        host.ask(id, "record", "marker", T).await.unwrap();
    }
    let n = calls();
    let t0 = Instant::now();
    let a = tokio::spawn(drive(host.clone(), "Echo/a", "Echo/peer", n / 2));
    let b = tokio::spawn(drive(host.clone(), "Echo/b", "Echo/peer", n - n / 2));
    let asks = a.await.unwrap() + b.await.unwrap();
    let took = t0.elapsed();
    // The instances were never restarted: a trap fails an ask above, or (in a tell) loses
    // the marker here.
    for id in ["Echo/a", "Echo/b", "Echo/peer"] {
        let r = sluice_tests::json(&host.ask(id, "recorded", "", T).await.unwrap());
        assert_eq!(r["items"], json!(["marker"]), "{lang:?} {id} was restarted");
    }
    eprintln!(
        "{lang:?} soak: {n} calls ({asks} asks) in {:.1} s = {:.0} calls/s",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64()
    );
}
