//! The `echo` test actor (guests/TESTKIT.md): echoes, and exercises every host import,
//! reporting the SDK's typed errors as JSON so one test body checks every language.
use serde_json::{Value, json};
use sluice_guest::{
    Actor, Conflict, DeliveryPath, DispatchMode, Envelope, Error, ErrorCode, LogLevel,
    OverloadInfo, OverloadScope, TellReceipt, bus, host, outbox,
};

struct Echo {
    config: String,
    items: Vec<String>,
    envelopes: Vec<Value>,
}

fn report(e: &Error) -> Value {
    let (scope, depth, limit) = match &e.overload {
        Some(o) => (
            Some(match o.scope {
                sluice_guest::OverloadScope::Actor => "actor",
                sluice_guest::OverloadScope::Host => "host",
            }),
            Some(o.depth),
            Some(o.limit),
        ),
        None => (None, None, None),
    };
    json!({"ok": false, "error": {
        "type": e.kind(), "code": e.code_str(), "message": e.message,
        "retry_after_ms": e.retry_after_ms, "skipped": e.skipped,
        "scope": scope, "depth": depth, "limit": limit,
    }})
}

fn receipt(r: TellReceipt) -> &'static str {
    match r {
        TellReceipt::Queued => "queued",
        TellReceipt::DisplacedOldest => "displaced-oldest",
        TellReceipt::DroppedNewest => "dropped-newest",
    }
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn out(v: Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

impl Actor for Echo {
    fn init(config: &str) -> Result<Self, Error> {
        Ok(Echo {
            config: config.to_string(),
            items: Vec::new(),
            envelopes: Vec::new(),
        })
    }

    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        let req: Value = serde_json::from_slice(&env.payload).unwrap_or(Value::Null);
        let reply = match env.msg_type.as_str() {
            "init_config" => return Ok(self.config.clone().into_bytes()),
            "whoami" => json!({"self_id": host::self_id(), "principal": env.principal,
                "sender": env.sender, "deadline_ms": env.deadline_ms}),
            "now" => json!({"now_ms": host::now_ms()}),
            "fail" => return Err(Error::invalid_argument("bad input")),
            // A plain error (no code of its own) made the uncoded failure: INTERNAL.
            "throw" => return Err(Error::uncoded(std::io::Error::other("plain failure"))),
            // Any code, raised the SDK's way: {code, detail, retry_after_ms?, skipped?}.
            "raise" => {
                let name = s(&req, "code");
                let code = sluice_guest::CODES
                    .into_iter()
                    .find(|c| Error::new(*c, "").code_str() == name)
                    .ok_or_else(|| Error::invalid_argument(format!("no code {name:?}")))?;
                let mut e = Error::canonical(code, s(&req, "detail"));
                e.retry_after_ms = req.get("retry_after_ms").and_then(Value::as_u64);
                e.skipped = req.get("skipped").and_then(Value::as_bool).unwrap_or(false);
                return Err(e);
            }
            "shed" => {
                return Err(Error {
                    overload: Some(OverloadInfo {
                        scope: OverloadScope::Actor,
                        depth: 7,
                        limit: 5,
                    }),
                    ..Error::new(ErrorCode::Overloaded, "OVERLOADED: shedding load")
                });
            }
            "tell" => match host::tell(s(&req, "to"), s(&req, "msg_type"), s(&req, "payload")) {
                Ok(r) => json!({"ok": true, "receipt": receipt(r)}),
                Err(e) => report(&e),
            },
            "ask" => {
                let timeout = req
                    .get("timeout_ms")
                    .and_then(Value::as_u64)
                    .unwrap_or(2000);
                match host::ask(
                    s(&req, "to"),
                    s(&req, "msg_type"),
                    s(&req, "payload"),
                    timeout,
                ) {
                    Ok(r) => json!({"ok": true, "reply": String::from_utf8_lossy(&r)}),
                    Err(e) => report(&e),
                }
            }
            "schedule" => {
                let delay = req.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
                match host::schedule(delay, s(&req, "msg_type"), s(&req, "payload")) {
                    Ok(()) => json!({"ok": true}),
                    Err(e) => report(&e),
                }
            }
            "tell_reliable" => {
                match outbox::tell_reliable(s(&req, "to"), s(&req, "msg_type"), s(&req, "payload"))
                {
                    Ok(DeliveryPath::Direct) => json!({"ok": true, "path": "direct"}),
                    Ok(DeliveryPath::Outbox) => json!({"ok": true, "path": "outbox"}),
                    Err(e) => report(&e),
                }
            }
            "remind" => {
                let delay = req.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
                let (name, msg_type) = (s(&req, "name"), s(&req, "msg_type"));
                match outbox::remind(name, delay, msg_type, s(&req, "payload")) {
                    Ok(()) => json!({"ok": true}),
                    Err(e) => report(&e),
                }
            }
            "cancel_reminder" => match outbox::cancel_reminder(s(&req, "name")) {
                Ok(cancelled) => json!({"ok": true, "cancelled": cancelled}),
                Err(e) => report(&e),
            },
            "dispatch" => {
                let targets: Vec<String> = req
                    .get("targets")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|t| t.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let mode = if s(&req, "mode") == "call" {
                    DispatchMode::Call
                } else {
                    DispatchMode::Cast
                };
                let conflict = if s(&req, "conflict") == "overwrite" {
                    Conflict::Overwrite
                } else {
                    Conflict::Append
                };
                let d = outbox::Dispatch::new(
                    &targets,
                    s(&req, "msg_type"),
                    s(&req, "payload").as_bytes().to_vec(),
                )
                .mode(mode)
                .idempotency_key(s(&req, "idempotency_key"), conflict);
                match d.send() {
                    Ok(r) => json!({"ok": true, "delivered": r.delivered,
                        "deduplicated": r.deduplicated, "queued": r.queued,
                        "dead_lettered": r.dead_lettered,
                        "outcomes": r.outcomes.iter().map(|o| o.name()).collect::<Vec<_>>()}),
                    Err(e) => report(&e),
                }
            }
            "publish" => match bus::publish(s(&req, "topic"), s(&req, "payload")) {
                Ok(()) => json!({"ok": true}),
                Err(e) => report(&e),
            },
            "log" => {
                host::log(LogLevel::Info, &String::from_utf8_lossy(&env.payload));
                json!({"ok": true})
            }
            // Bus events arrive with msg-type = topic; `evt.*` topics are recorded.
            t if t == "record" || t.starts_with("evt.") => {
                self.items
                    .push(String::from_utf8_lossy(&env.payload).into_owned());
                self.envelopes.push(json!({"msg_type": env.msg_type, "principal": env.principal, "sender": env.sender}));
                json!({"count": self.items.len()})
            }
            "recorded" => json!({"items": self.items, "envelopes": self.envelopes}),
            _ => return Ok(env.payload),
        };
        Ok(out(reply))
    }
}

sluice_guest::actor!(Echo);
