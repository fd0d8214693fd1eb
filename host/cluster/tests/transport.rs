//! Remote tell/ask over a real nats-server: every field travels, receipts per tell in a batch,
//! errors arrive identical to the local ones, deadlines (skipped or not), no responders,
//! foreign and oversize frames, per-sender order, and the server's in-flight bound.
//!
//! The handler here stands in for the runtime (its adapter is the wiring phase's): it plays
//! mailboxes by actor type, so each outcome the transport must carry can be produced.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{host, nats};
use parking_lot::Mutex;
use sluice_cluster::Connection;
use sluice_cluster::transport::{
    CallKind, Client, ClientConfig, ErrorCode, ErrorRecord, Handler, Inbound, Limits, Outcome,
    Overload, OverloadScope, ReplyFuture, Server, ServerConfig, TellReceipt, decode_reply,
};

#[derive(Default)]
struct Mailboxes {
    seen: Mutex<Vec<(Inbound, Instant)>>,
}

impl Handler for Mailboxes {
    fn tell(&self, call: Inbound) -> Result<TellReceipt, ErrorRecord> {
        let ty = call.target.split('/').next().unwrap_or("").to_string();
        self.seen.lock().push((call, Instant::now()));
        match ty.as_str() {
            "Full" => Err(ErrorRecord::mailbox_full(17)),
            "Busy" => Err(ErrorRecord::overloaded(OverloadScope::Actor, 9, 8)),
            "DropNewest" => Ok(TellReceipt::DroppedNewest),
            "DropOldest" => Ok(TellReceipt::DisplacedOldest),
            _ => Ok(TellReceipt::Queued),
        }
    }

    fn ask(&self, call: Inbound) -> Result<ReplyFuture, ErrorRecord> {
        let ty = call.target.split('/').next().unwrap_or("").to_string();
        let deadline = call.deadline;
        let reply = Bytes::from([call.msg_type.as_bytes(), b":", &call.payload].concat());
        self.seen.lock().push((call, Instant::now()));
        match ty.as_str() {
            "Full" => Err(ErrorRecord::mailbox_full(17)),
            // A queued turn that never ran: the owner's deadline verdict, skipped.
            "Queued" => Ok(Box::pin(async move {
                if let Some(d) = deadline {
                    tokio::time::sleep_until(d.into()).await;
                }
                Err(ErrorRecord::deadline_exceeded(true))
            })),
            "Hang" => Ok(Box::pin(std::future::pending())),
            "Big" => Ok(Box::pin(async {
                Ok(Bytes::from(vec![7u8; 9 * 1024 * 1024]))
            })),
            _ => Ok(Box::pin(async move { Ok(reply) })),
        }
    }
}

struct Pair {
    _server_nats: sluice_cluster::testing::NatsServer,
    caller: Connection,
    handler: Arc<Mailboxes>,
    server: Option<Server>,
}

async fn pair(config: ServerConfig) -> Pair {
    let nats = nats().await;
    let callee = host(&nats.url(), "t", "callee", 1_000).await;
    let caller = host(&nats.url(), "t", "caller", 1_000).await;
    let handler = Arc::new(Mailboxes::default());
    let server = Server::start(&callee, handler.clone(), config)
        .await
        .unwrap();
    assert_eq!(server.subject(), "sluice.t.host.callee");
    Pair {
        _server_nats: nats,
        caller,
        handler,
        server: Some(server),
    }
}

fn ask(target: &str, payload: &'static [u8]) -> sluice_cluster::transport::Outgoing {
    sluice_cluster::transport::Outgoing::new(
        CallKind::Ask,
        target,
        "get",
        Bytes::from_static(payload),
    )
}

fn tell(target: &str, payload: impl Into<Bytes>) -> sluice_cluster::transport::Outgoing {
    sluice_cluster::transport::Outgoing::new(CallKind::Tell, target, "put", payload)
}

#[tokio::test]
async fn an_ask_carries_sender_principal_chain_and_what_is_left_of_the_deadline() {
    let p = pair(ServerConfig::default()).await;
    let client = Client::new(&p.caller, ClientConfig::default());
    let mut call = ask("Echo/1", b"hi");
    call.sender = Some("Caller/7".into());
    call.principal = Some("alice".into());
    call.internal = true;
    call.deadline = Some(Instant::now() + Duration::from_millis(500));
    let sent = Instant::now();
    let reply = client.ask("callee", call).await.unwrap();
    assert_eq!(&reply[..], b"get:hi");
    let seen = p.handler.seen.lock();
    let (inbound, at) = &seen[0];
    assert_eq!(&*inbound.origin, "caller");
    assert_eq!(inbound.target, "Echo/1");
    assert_eq!(inbound.sender.as_deref(), Some("Caller/7"));
    assert_eq!(inbound.principal.as_deref(), Some("alice"));
    assert!(inbound.internal);
    // The receiver counts what was left from arrival: never more than the caller had.
    let left = inbound.deadline.unwrap() - *at;
    assert!(left <= Duration::from_millis(500), "{left:?}");
    assert!(left > Duration::from_millis(400), "{left:?}");
    assert!(inbound.deadline.unwrap() <= sent + Duration::from_millis(500) + (*at - sent));
}

#[tokio::test]
async fn a_batch_of_tells_gets_one_receipt_per_tell_in_order() {
    let p = pair(ServerConfig::default()).await;
    let client = Client::new(&p.caller, ClientConfig::default());
    let got = client
        .tell_batch(
            "callee",
            vec![
                tell("Echo/1", "a"),
                tell("DropNewest/1", "b"),
                tell("DropOldest/1", "c"),
                tell("Full/1", "d"),
                tell("Echo/2", "e"),
            ],
        )
        .await;
    assert_eq!(
        got,
        vec![
            Ok(TellReceipt::Queued),
            Ok(TellReceipt::DroppedNewest),
            Ok(TellReceipt::DisplacedOldest),
            Err(ErrorRecord::mailbox_full(17)),
            Ok(TellReceipt::Queued),
        ]
    );
}

#[tokio::test]
async fn errors_arrive_exactly_as_the_owner_raised_them() {
    let p = pair(ServerConfig::default()).await;
    let client = Client::new(&p.caller, ClientConfig::default());
    let full = client
        .tell("callee", tell("Full/1", "x"))
        .await
        .unwrap_err();
    assert_eq!(
        full.to_string(),
        "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=17)"
    );
    assert_eq!(full.code, ErrorCode::ResourceExhausted);
    assert_eq!(full.retry_after_ms, Some(17));
    let busy = client
        .tell("callee", tell("Busy/1", "x"))
        .await
        .unwrap_err();
    assert_eq!(
        busy.to_string(),
        "OVERLOADED: queue at capacity (scope=actor, depth=9, limit=8)"
    );
    assert_eq!(
        busy.overload,
        Some(Overload {
            scope: OverloadScope::Actor,
            depth: 9,
            limit: 8
        })
    );
    let ask_full = client.ask("callee", ask("Full/1", b"")).await.unwrap_err();
    assert_eq!(ask_full, ErrorRecord::mailbox_full(17));
}

#[tokio::test]
async fn deadlines_expire_across_hosts_with_skipped_right() {
    let p = pair(ServerConfig::default()).await;
    let client = Client::new(&p.caller, ClientConfig::default());
    let with_deadline = |target: &str, ms: u64| {
        let mut c = ask(target, b"");
        c.deadline = Some(Instant::now() + Duration::from_millis(ms));
        c
    };
    // The owner's own verdict (queued, never ran) wins over the caller's timer. What travels
    // is whole milliseconds left, rounded down: the owner never works past the caller.
    let start = Instant::now();
    let e = client
        .ask("callee", with_deadline("Queued/1", 100))
        .await
        .unwrap_err();
    assert_eq!(e, ErrorRecord::deadline_exceeded(true));
    assert!(
        start.elapsed() >= Duration::from_millis(98),
        "{:?}",
        start.elapsed()
    );
    // The owner never answers: the caller gives up at its deadline (plus grace); the turn
    // may still be running, so not skipped.
    let start = Instant::now();
    let e = client
        .ask("callee", with_deadline("Hang/1", 100))
        .await
        .unwrap_err();
    assert_eq!(e, ErrorRecord::deadline_exceeded(false));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_millis(1_000),
        "{took:?}"
    );
    // Already past: never sent.
    let before = p.handler.seen.lock().len();
    let mut late = ask("Echo/1", b"");
    late.deadline = Some(Instant::now());
    assert_eq!(
        client.ask("callee", late).await.unwrap_err(),
        ErrorRecord::deadline_exceeded(true)
    );
    assert_eq!(p.handler.seen.lock().len(), before);
}

#[tokio::test]
async fn a_host_that_does_not_serve_is_unavailable() {
    let mut p = pair(ServerConfig::default()).await;
    let client = Client::new(&p.caller, ClientConfig::default());
    let e = client.ask("nobody", ask("Echo/1", b"")).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert_eq!(
        e.message,
        "UNAVAILABLE: host nobody is not serving remote calls (no responders)"
    );
    p.server.take().unwrap().stop().await;
    let e = client
        .tell("callee", tell("Echo/1", "x"))
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "UNAVAILABLE: host callee is not serving remote calls (no responders)"
    );
}

/// A caller cut off from NATS ends the calls it has in flight (their replies cannot reach it
/// now) and fails new ones at once, and none of them is sent late: the client would otherwise
/// queue the frame until it reconnects, so the call would wait out its whole timeout and then
/// run after its caller gave up (and after whatever it retried).
#[tokio::test]
async fn a_caller_without_nats_fails_at_once_and_sends_nothing_after_it_reconnects() {
    use async_nats::connection::State;
    let nats = nats().await;
    let proxy = sluice_cluster::testing::Proxy::start(format!("127.0.0.1:{}", nats.port())).await;
    let callee = host(&nats.url(), "t", "callee", 1_000).await;
    let caller = host(&proxy.url(), "t", "caller", 1_000).await;
    let handler = Arc::new(Mailboxes::default());
    let _server = Server::start(&callee, handler.clone(), ServerConfig::default())
        .await
        .unwrap();
    let client = Client::new(&caller, ClientConfig::default());
    client
        .tell("callee", tell("Echo/before", "x"))
        .await
        .unwrap();
    // An ask in flight (its handler never answers, its timeout is 30 s) when the connection
    // drops: no reply can come now, so it ends then.
    let hanging = tokio::spawn({
        let client = client.clone();
        async move { client.ask("callee", ask("Hang/1", b"")).await }
    });
    sluice_test_wait::wait_until(Duration::from_secs(10), "the hanging ask to arrive", || {
        handler.seen.lock().len() == 2
    })
    .await;

    let cut = Instant::now();
    proxy.cut();
    let e = tokio::time::timeout(Duration::from_secs(5), hanging)
        .await
        .expect("the ask in flight ended when the connection dropped")
        .unwrap()
        .unwrap_err();
    assert!(
        cut.elapsed() < Duration::from_secs(2),
        "{:?}",
        cut.elapsed()
    );
    assert_eq!(
        e.message,
        "UNAVAILABLE: this host lost its NATS connection with the call to host callee in flight (it may have run)"
    );
    let state = |want: State| {
        let caller = caller.clone();
        move || caller.client().connection_state() == want
    };
    sluice_test_wait::wait_until(
        Duration::from_secs(10),
        "the caller to see NATS gone",
        state(State::Disconnected),
    )
    .await;
    let t = Instant::now();
    let e = client
        .tell("callee", tell("Echo/late", "x"))
        .await
        .unwrap_err();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "waited {:?}",
        t.elapsed()
    );
    assert_eq!(e.code, ErrorCode::Unavailable);
    assert_eq!(
        e.message,
        "UNAVAILABLE: this host is not connected to NATS now: the call to host callee was not sent"
    );
    let e = client
        .ask("callee", ask("Echo/late", b""))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "{e:?}");

    proxy.heal();
    sluice_test_wait::wait_until(
        Duration::from_secs(20),
        "the caller to reconnect",
        state(State::Connected),
    )
    .await;
    // Frames on one connection arrive in order: had the late ones been queued, they would
    // have reached the callee before this one.
    client
        .tell("callee", tell("Echo/after", "x"))
        .await
        .unwrap();
    let seen: Vec<String> = handler
        .seen
        .lock()
        .iter()
        .map(|(c, _)| c.target.clone())
        .collect();
    assert_eq!(seen, ["Echo/before", "Hang/1", "Echo/after"]);
}

#[tokio::test]
async fn foreign_messages_get_invalid_argument_and_the_host_keeps_serving() {
    let p = pair(ServerConfig::default()).await;
    let nats = p.caller.client();
    for (garbage, says) in [
        (&b"hello"[..], "not a Sluice cluster frame"),
        (
            &b"SL\x09\x01"[..],
            "unsupported wire version 9 (this host speaks 1)",
        ),
        (&b"SL\x01\x01\x01h\x01\x00\xff"[..], "frame truncated"),
    ] {
        let reply = nats
            .request("sluice.t.host.callee", Bytes::from_static(garbage))
            .await
            .unwrap();
        let outcomes = decode_reply(&reply.payload, &Limits::default()).unwrap();
        match &outcomes[..] {
            [Outcome::Failed(e)] => {
                assert_eq!(e.code, ErrorCode::InvalidArgument);
                assert_eq!(
                    e.message,
                    format!("INVALID_ARGUMENT: malformed cluster request: {says}")
                );
            }
            other => panic!("{other:?}"),
        }
    }
    // Published without a reply subject: dropped, nothing to answer.
    nats.publish("sluice.t.host.callee", "junk".into())
        .await
        .unwrap();
    let client = Client::new(&p.caller, ClientConfig::default());
    assert_eq!(
        &client.ask("callee", ask("Echo/1", b"still")).await.unwrap()[..],
        b"get:still"
    );
    assert_eq!(p.handler.seen.lock().len(), 1);
}

#[tokio::test]
async fn payloads_over_the_limit_are_refused_per_call_and_never_lose_the_others() {
    let p = pair(ServerConfig {
        limits: Limits {
            max_payload_bytes: 1_000,
            max_batch: 1024,
        },
        ..ServerConfig::default()
    })
    .await;
    // A caller with a larger limit than the owner (different configs, or a hostile host).
    let loose = Client::new(
        &p.caller,
        ClientConfig {
            limits: Limits {
                max_payload_bytes: 64 * 1024 * 1024,
                max_batch: 1024,
            },
            ..ClientConfig::default()
        },
    );
    let got = loose
        .tell_batch(
            "callee",
            vec![
                tell("Echo/1", vec![1u8; 10]),
                tell("Echo/2", vec![2u8; 1_001]),
                tell("Echo/3", vec![3u8; 1_000]),
            ],
        )
        .await;
    assert_eq!(got[0], Ok(TellReceipt::Queued));
    assert_eq!(got[1], Err(ErrorRecord::payload_too_large(1_001, 1_000)));
    assert_eq!(got[2], Ok(TellReceipt::Queued));
    let targets: Vec<String> = p
        .handler
        .seen
        .lock()
        .iter()
        .map(|(c, _)| c.target.clone())
        .collect();
    assert_eq!(targets, ["Echo/1", "Echo/3"]);

    // The caller's own limit refuses before sending.
    let strict = Client::new(&p.caller, ClientConfig::default());
    let e = strict
        .tell("callee", tell("Echo/4", vec![0u8; 5 * 1024 * 1024 + 1]))
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "INVALID_ARGUMENT: payload of {} bytes exceeds max_payload_bytes={}",
            5 * 1024 * 1024 + 1,
            5 * 1024 * 1024
        )
    );
    // Past NATS's own max_payload (8 MB here): a typed error, not a timeout.
    let e = loose
        .tell("callee", tell("Echo/5", vec![0u8; 9 * 1024 * 1024]))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert!(
        e.message
            .contains("exceeds the NATS server's max_payload (8388608)"),
        "{e}"
    );
    // A reply past it too.
    let e = strict.ask("callee", ask("Big/1", b"")).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal);
    assert!(
        e.message.contains("exceeds the NATS server's max_payload"),
        "{e}"
    );
}

#[tokio::test]
async fn tells_from_each_sender_arrive_in_the_order_sent() {
    let p = pair(ServerConfig::default()).await;
    let mut senders = Vec::new();
    for s in 0..4 {
        let conn = host(&p._server_nats.url(), "t", &format!("s{s}"), 1_000).await;
        senders.push(tokio::spawn(async move {
            let client = Client::new(&conn, ClientConfig::default());
            for i in 0..150u32 {
                // Alternate single tells and batches of three.
                if i % 2 == 0 {
                    let r = client
                        .tell("callee", tell("Order/1", i.to_be_bytes().to_vec()))
                        .await;
                    assert_eq!(r, Ok(TellReceipt::Queued));
                } else {
                    let batch = (0..3)
                        .map(|j| tell("Order/1", (i * 1000 + j).to_be_bytes().to_vec()))
                        .collect();
                    assert!(
                        client
                            .tell_batch("callee", batch)
                            .await
                            .iter()
                            .all(Result::is_ok)
                    );
                }
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    let seen = p.handler.seen.lock();
    for s in 0..4 {
        let mine: Vec<u32> = seen
            .iter()
            .filter(|(c, _)| *c.origin == format!("s{s}"))
            .map(|(c, _)| u32::from_be_bytes(c.payload[..4].try_into().unwrap()))
            .collect();
        let mut expected = Vec::new();
        for i in 0..150u32 {
            if i % 2 == 0 {
                expected.push(i);
            } else {
                expected.extend((0..3).map(|j| i * 1000 + j));
            }
        }
        assert_eq!(mine, expected, "sender s{s}");
    }
}

#[tokio::test]
async fn asks_past_the_in_flight_bound_are_refused_overloaded_at_once() {
    let p = pair(ServerConfig {
        max_inflight_asks: 2,
        ..ServerConfig::default()
    })
    .await;
    let client = Client::new(&p.caller, ClientConfig::default());
    let hang = |ms| {
        let mut c = ask("Hang/1", b"");
        c.deadline = Some(Instant::now() + Duration::from_millis(ms));
        c
    };
    let (c1, c2) = (client.clone(), client.clone());
    let h1 = tokio::spawn(async move { c1.ask("callee", hang(2_000)).await });
    let h2 = tokio::spawn(async move { c2.ask("callee", hang(2_000)).await });
    common::wait_until_async(Duration::from_secs(5), "two asks in flight", || {
        let n = p.handler.seen.lock().len();
        async move { n == 2 }
    })
    .await;
    let start = Instant::now();
    let e = client.ask("callee", hang(2_000)).await.unwrap_err();
    assert_eq!(e, ErrorRecord::overloaded(OverloadScope::Host, 2, 2));
    assert!(start.elapsed() < Duration::from_millis(500));
    h1.abort();
    h2.abort();
}
