//! The job_queue_outbox component (../PROTOCOL.md) in Rust: one component, every role.
//! The role comes from `init` (`{"role": "leader" | "worker" | "config_server" | "collector" |
//! "device", "work_ms": n, "online": bool}`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use sluice_guest::outbox::Dispatch;
use sluice_guest::{Actor, Conflict, DispatchMode, Envelope, Error, ErrorCode, host};

const DISPATCHER_ID: &str = "job-queue-leader";
const CTX: &str = r#"{"tenant":"default","namespace":"default"}"#;

enum Role {
    Leader(Leader),
    Worker(Worker),
    ConfigServer(ConfigServer),
    Collector(Collector),
    Device(Device),
}

struct JobQueue {
    work_ms: u64,
    role: Role,
}

#[derive(Default)]
struct Leader {
    /// The heartbeat counter of `send_heartbeat` (the first call sends 1).
    hb_seq: u64,
    /// Heartbeats received (`heartbeat_burst`), once per seq, in arrival order.
    heartbeats: Vec<u64>,
}

#[derive(Default)]
struct Worker {
    tasks: BTreeMap<String, u64>,
    config_version: Option<String>,
    heartbeats: Vec<u64>,
    fixed: bool,
}

#[derive(Default)]
struct ConfigServer {
    served: Vec<String>,
    seen: BTreeSet<String>,
}

#[derive(Default)]
struct Collector {
    telemetry: Vec<u64>,
    seen: BTreeSet<u64>,
    bursts: u64,
}

struct Device {
    online: bool,
    firmware: Vec<u64>,
}

fn out(v: Value) -> Result<Vec<u8>, Error> {
    Ok(v.to_string().into_bytes())
}

fn u(v: &Value, k: &str, default: u64) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(default)
}

fn s<'a>(v: &'a Value, k: &str, default: &'a str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or(default)
}

/// Burns `ms` milliseconds of wall time (guests have no sleep).
fn busy(ms: u64) {
    if ms == 0 {
        return;
    }
    let end = host::now_ms() + ms;
    while host::now_ms() < end {
        std::hint::spin_loop();
    }
}

/// What one or more dispatches did with their targets, added up: delivered now, absorbed by
/// the idempotency key, queued for the relay, or dead-lettered at once.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    delivered: u64,
    deduplicated: u64,
    queued: u64,
    dead_lettered: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.delivered += o.delivered;
        self.deduplicated += o.deduplicated;
        self.queued += o.queued;
        self.dead_lettered += o.dead_lettered;
    }
}

impl Counts {
    fn json(self) -> Value {
        json!({"delivered": self.delivered, "deduplicated": self.deduplicated,
            "queued": self.queued, "dead_lettered": self.dead_lettered})
    }

    /// `reply` (an object) with the four counts added to its fields.
    fn added_to(self, mut reply: Value) -> Value {
        if let (Some(r), Value::Object(c)) = (reply.as_object_mut(), self.json()) {
            r.extend(c);
        }
        reply
    }
}

/// One dispatch with the protocol's context and dispatcher id.
fn dispatch(
    targets: &[String],
    payload: &Value,
    mode: DispatchMode,
    key: &str,
    conflict: Conflict,
) -> Result<Counts, Error> {
    let r = Dispatch::new(targets, "", payload.to_string())
        .context(CTX, DISPATCHER_ID)
        .mode(mode)
        .idempotency_key(key, conflict)
        .send()?;
    Ok(Counts {
        delivered: r.delivered.into(),
        deduplicated: r.deduplicated.into(),
        queued: r.queued.into(),
        dead_lettered: r.dead_lettered.into(),
    })
}

fn workers(n: u64) -> Vec<String> {
    (0..n).map(|i| format!("Worker/worker-{i}")).collect()
}

impl Leader {
    fn handle(&mut self, msg_type: &str, req: &Value) -> Result<Vec<u8>, Error> {
        if req.get("type").and_then(Value::as_str) == Some("heartbeat") {
            let seq = u(req, "seq", 0);
            if !self.heartbeats.contains(&seq) {
                self.heartbeats.push(seq);
            }
            return out(json!({"ok": true}));
        }
        match msg_type {
            "thundering_herd" => {
                let n = u(req, "workers", 100);
                let t = s(req, "task_id", "herd-1").to_string();
                let payload = json!({"task": "thundering_herd", "priority": "high", "task_id": t});
                let targets = workers(n);
                let t0 = host::now_ms();
                let first = dispatch(&targets, &payload, DispatchMode::Cast, &t, Conflict::Append)?;
                let wall_ms = host::now_ms() - t0;
                let again = dispatch(&targets, &payload, DispatchMode::Cast, &t, Conflict::Append)?;
                out(first.added_to(
                    json!({"targets": n, "wall_ms": wall_ms, "redelivery": again.json()}),
                ))
            }
            "config_wave_deploy" => {
                let n = u(req, "workers", 100);
                let wave_size = u(req, "wave_size", 20).max(1);
                let v = s(req, "version", "2.1.0").to_string();
                let all = workers(n);
                let (mut waves, mut total, mut cs_queued) = (Vec::new(), Counts::default(), 0);
                for (i, wave) in all.chunks(wave_size as usize).enumerate() {
                    let t0 = host::now_ms();
                    let cfg = json!({"task": "config", "version": v});
                    let c = dispatch(
                        wave,
                        &cfg,
                        DispatchMode::Cast,
                        &format!("config-{v}"),
                        Conflict::Append,
                    )?;
                    let wall_ms = host::now_ms() - t0;
                    for w in wave {
                        // The whole wave downloads from one server, cs-(wave mod 2).
                        let server = format!("ConfigServer/cs-{}", i % 2);
                        let dl = json!({"download": v, "worker": w});
                        let dl = dispatch(
                            &[server],
                            &dl,
                            DispatchMode::Cast,
                            &format!("dl-{v}-{w}"),
                            Conflict::Append,
                        )?;
                        cs_queued += dl.queued;
                    }
                    total += c;
                    waves.push(
                        c.added_to(json!({"wave": i, "targets": wave.len(), "wall_ms": wall_ms})),
                    );
                }
                out(json!({"waves": waves, "total": total.json(),
                    "config_server_queued": cs_queued}))
            }
            "send_heartbeat" => {
                let n = u(req, "workers", 100);
                self.hb_seq += 1;
                let hb = json!({"type": "heartbeat", "seq": self.hb_seq, "cpu": 0.42});
                let c = dispatch(
                    &workers(n),
                    &hb,
                    DispatchMode::Cast,
                    "hb-leader-worker-101",
                    Conflict::Overwrite,
                )?;
                out(c.added_to(json!({"seq": self.hb_seq})))
            }
            "heartbeat_burst" => {
                let count = u(req, "count", 50);
                let body = json!({"count": count, "to": host::self_id()});
                let reply = host::ask(
                    "Worker/worker-101",
                    "send_heartbeats",
                    body.to_string(),
                    30_000,
                )?;
                Ok(reply)
            }
            "heartbeats" => out(json!({"seqs": self.heartbeats})),
            "telemetry_test" => {
                let count = u(req, "count", 200);
                let collector = "TelemetryCollector/main".to_string();
                let (mut fast, mut fallback, mut refused) = (0u64, 0u64, 0u64);
                for i in 0..count {
                    if i % 10 == 0 {
                        for j in 0..6 {
                            let burst = json!({"type": "burst", "seq": i, "n": j});
                            match host::tell(&collector, "process", burst.to_string()) {
                                Ok(_) => {}
                                Err(e) if e.code == ErrorCode::ResourceExhausted => refused += 1,
                                Err(e) => return Err(e),
                            }
                        }
                    }
                    let sample = json!({"type": "telemetry", "seq": i});
                    match host::ask(&collector, "process", sample.to_string(), 2000) {
                        Ok(_) => fast += 1,
                        Err(_) => {
                            let full =
                                json!({"type": "telemetry", "seq": i, "cpu": 0.5, "mem": 0.8});
                            dispatch(
                                std::slice::from_ref(&collector),
                                &full,
                                DispatchMode::Cast,
                                &format!("tel-{i}"),
                                Conflict::Append,
                            )?;
                            fallback += 1;
                        }
                    }
                }
                out(
                    json!({"count": count, "fast_path_success": fast, "outbox_fallback": fallback,
                    "burst_refused": refused}),
                )
            }
            "firmware_rollout" => {
                let devices = u(req, "devices", 10);
                let count = u(req, "count", 20);
                let targets: Vec<String> =
                    (0..devices).map(|d| format!("Device/dev-{d}")).collect();
                let mut total = Counts::default();
                for k in 0..count {
                    total += dispatch(
                        &targets,
                        &json!({"firmware": k}),
                        DispatchMode::Call,
                        &format!("fw-{k}"),
                        Conflict::Append,
                    )?;
                }
                out(total.added_to(json!({"targets": devices, "messages": devices * count})))
            }
            "poison" => {
                let payload = json!({"task": "poison", "body": "{malformed"});
                let c = dispatch(
                    &["Worker/poison".to_string()],
                    &payload,
                    DispatchMode::Call,
                    "poison-1",
                    Conflict::Append,
                )?;
                out(c.json())
            }
            other => Err(Error::invalid_argument(format!(
                "INVALID_ARGUMENT: unknown leader message {other}"
            ))),
        }
    }
}

impl Worker {
    fn handle(&mut self, msg_type: &str, req: &Value) -> Result<Vec<u8>, Error> {
        match msg_type {
            "state" => out(
                json!({"tasks": self.tasks, "config_version": self.config_version,
                "heartbeats": self.heartbeats}),
            ),
            "fix" => {
                self.fixed = true;
                out(json!({"fixed": true}))
            }
            "send_heartbeats" => {
                let count = u(req, "count", 50);
                let to = s(req, "to", "JobQueueLeader/main").to_string();
                let mut total = Counts::default();
                for seq in 1..=count {
                    let hb = json!({"type": "heartbeat", "seq": seq, "cpu": 0.42});
                    total += dispatch(
                        std::slice::from_ref(&to),
                        &hb,
                        DispatchMode::Cast,
                        "hb-leader-worker-101",
                        Conflict::Overwrite,
                    )?;
                }
                out(total.added_to(json!({"sent": count})))
            }
            _ if req.get("type").and_then(Value::as_str) == Some("heartbeat") => {
                let seq = u(req, "seq", 0);
                if !self.heartbeats.contains(&seq) {
                    self.heartbeats.push(seq);
                }
                out(json!({"ok": true}))
            }
            _ if s(req, "task", "") == "config" => {
                self.config_version = Some(s(req, "version", "").to_string());
                out(json!({"ok": true}))
            }
            _ if req.get("task").is_some() => {
                if let Some(body) = req.get("body").and_then(Value::as_str)
                    && serde_json::from_str::<Value>(body).is_err()
                    && !self.fixed
                {
                    return Err(Error::invalid_argument("INVALID_ARGUMENT: malformed task"));
                }
                let id = req
                    .get("task_id")
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| s(req, "task", ""))
                    .to_string();
                self.tasks.entry(id).or_insert(1);
                out(json!({"ok": true}))
            }
            other => Err(Error::invalid_argument(format!(
                "INVALID_ARGUMENT: unknown worker message {other}"
            ))),
        }
    }
}

impl JobQueue {
    fn handle_json(&mut self, msg_type: &str, req: &Value) -> Result<Vec<u8>, Error> {
        let work_ms = self.work_ms;
        match &mut self.role {
            Role::Leader(l) => l.handle(msg_type, req),
            Role::Worker(w) => w.handle(msg_type, req),
            Role::ConfigServer(c) => {
                if msg_type == "state" {
                    return out(json!({"served": c.served}));
                }
                busy(work_ms);
                let w = s(req, "worker", "").to_string();
                if c.seen.insert(w.clone()) {
                    c.served.push(w);
                }
                out(json!({"ok": true}))
            }
            Role::Collector(c) => {
                if msg_type == "state" {
                    return out(json!({"telemetry": c.telemetry, "bursts": c.bursts}));
                }
                busy(work_ms);
                match s(req, "type", "") {
                    "telemetry" => {
                        let seq = u(req, "seq", 0);
                        if c.seen.insert(seq) {
                            c.telemetry.push(seq);
                        }
                    }
                    "burst" => c.bursts += 1,
                    other => {
                        return Err(Error::invalid_argument(format!(
                            "INVALID_ARGUMENT: unknown sample {other}"
                        )));
                    }
                }
                out(json!({"ok": true}))
            }
            Role::Device(d) => {
                if msg_type == "state" {
                    return out(json!({"firmware": d.firmware}));
                }
                if !d.online {
                    // "Come back in a second": the relay backs off at least that long.
                    return Err(Error {
                        retry_after_ms: Some(1000),
                        ..Error::new(
                            ErrorCode::ResourceExhausted,
                            "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)",
                        )
                    });
                }
                let k = u(req, "firmware", 0);
                if !d.firmware.contains(&k) {
                    d.firmware.push(k);
                }
                out(json!({"ok": true}))
            }
        }
    }
}

impl Actor for JobQueue {
    fn init(config: &str) -> Result<Self, Error> {
        let cfg: Value = serde_json::from_str(config).unwrap_or(Value::Null);
        let role = match s(&cfg, "role", "") {
            "leader" => Role::Leader(Leader::default()),
            "worker" => Role::Worker(Worker::default()),
            "config_server" => Role::ConfigServer(ConfigServer::default()),
            "collector" => Role::Collector(Collector::default()),
            "device" => Role::Device(Device {
                online: cfg.get("online").and_then(Value::as_bool).unwrap_or(true),
                firmware: Vec::new(),
            }),
            other => {
                return Err(Error::invalid_argument(format!(
                    "INVALID_ARGUMENT: unknown role {other:?}"
                )));
            }
        };
        Ok(JobQueue {
            work_ms: u(&cfg, "work_ms", 0),
            role,
        })
    }

    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        let req: Value = if env.payload.is_empty() {
            json!({})
        } else {
            serde_json::from_slice(&env.payload).map_err(|e| {
                Error::invalid_argument(format!("INVALID_ARGUMENT: payload is not JSON: {e}"))
            })?
        };
        self.handle_json(&env.msg_type, &req)
    }
}

sluice_guest::actor!(JobQueue);
