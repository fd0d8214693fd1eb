//! The job_queue_outbox driver (`../PROTOCOL.md`): builds a language's `job_queue.wasm`,
//! starts a host on a fresh app folder (SQLite outbox in `APP/.sluice/`), asks the leader to
//! run each scenario and then checks every invariant independently — by asking the workers,
//! config servers, collector and devices for their `state` and by reading the outbox (stats,
//! DLQ, and for `offline_delivery` the SQLite file itself).
//!
//! Every wait is bounded; a scenario returns a JSON report or an error saying which invariant
//! broke and how.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail, ensure};
use serde_json::{Value, json};
use sluice_runtime::{ErrorCode, Host};

pub mod report;

pub use report::SCENARIOS;

/// The leader's address.
pub const LEADER: &str = "JobQueueLeader/main";
/// Workers of the herd, the config wave and the heartbeats.
pub const WORKERS: u64 = 100;
/// Bound of every wait for a condition (outbox drained, state reached).
pub const BOUND: Duration = Duration::from_secs(90);
/// Timeout of one ask (a scenario's turn in the leader included).
const ASK_TIMEOUT: Duration = Duration::from_secs(120);

/// A leader language: `examples/job_queue_outbox/<name>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    /// `rust/` (cargo, wasm32-wasip2).
    Rust,
    /// `go/` (mainline Go, wasip1 + adapter).
    Go,
    /// `python/` (componentize-py).
    Python,
    /// `typescript/` (jco componentize).
    TypeScript,
}

impl Lang {
    /// Every language, Rust first.
    pub const ALL: [Lang; 4] = [Lang::Rust, Lang::Go, Lang::Python, Lang::TypeScript];

    /// The folder name (`rust`, `go`, `python`, `typescript`).
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Go => "go",
            Lang::Python => "python",
            Lang::TypeScript => "typescript",
        }
    }

    /// Parses a folder name (also `ts`, `py`).
    pub fn parse(s: &str) -> Option<Lang> {
        match s.to_ascii_lowercase().as_str() {
            "rust" | "rs" => Some(Lang::Rust),
            "go" => Some(Lang::Go),
            "python" | "py" => Some(Lang::Python),
            "typescript" | "ts" => Some(Lang::TypeScript),
            _ => None,
        }
    }
}

impl std::fmt::Display for Lang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.."))
}

/// `examples/job_queue_outbox/<lang>`.
pub fn lang_dir(lang: Lang) -> PathBuf {
    root().join("examples/job_queue_outbox").join(lang.name())
}

/// Where compiled components are cached, shared by every host the driver starts.
pub fn compile_cache() -> PathBuf {
    root().join("target/job-queue-outbox/compile-cache")
}

/// True when `e` says a guest toolchain is missing (tests skip on it outside CI).
pub fn is_missing_toolchain(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<sluice_build::BuildError>(),
        Some(sluice_build::BuildError::MissingToolchain { .. })
    )
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.')
            || matches!(
                name.as_ref(),
                "node_modules" | "target" | "__pycache__" | "dist" | "build"
            )
        {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// A content hash of everything the `lang` build reads: its example folder, the language's
/// SDK folder under `guests/` and `wit/`.
fn source_hash(lang: Lang) -> String {
    use sha2::{Digest, Sha256};
    let r = root();
    let mut files = Vec::new();
    walk(&lang_dir(lang), &mut files);
    match lang {
        Lang::Rust => walk(&r.join("guests/rust/sdk"), &mut files),
        other => walk(&r.join("guests").join(other.name()), &mut files),
    }
    walk(&r.join("wit"), &mut files);
    files.sort();
    let mut h = Sha256::new();
    for f in files {
        h.update(
            f.strip_prefix(&r)
                .unwrap_or(&f)
                .to_string_lossy()
                .as_bytes(),
        );
        h.update([0]);
        h.update(std::fs::read(&f).unwrap_or_default());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..12])
}

/// Builds `examples/job_queue_outbox/<lang>` with `sluice_build` into
/// `target/guest-cache/job_queue-<lang>-<hash>/job_queue.wasm` (once per source hash; for
/// TypeScript `job_queue-typescript-<engine>-<hash>`) and
/// returns the component's path. A missing folder is an error saying so.
pub fn build(lang: Lang) -> anyhow::Result<PathBuf> {
    // One build at a time per process: two cores, and the toolchains share caches.
    static BUILD: Mutex<()> = Mutex::new(());
    let src = lang_dir(lang);
    ensure!(
        src.join("app-config.toml").is_file(),
        "missing: {} has no app-config.toml (the {lang} leader is not written yet)",
        src.display()
    );
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    // TypeScript's cache names its JavaScript engine (`SLUICE_JS_ENGINE`, default QuickJS):
    // a run with the other engine builds its own component.
    let engine = match lang {
        Lang::TypeScript => format!("-{}", sluice_build::JsBackend::resolve(None)?),
        _ => String::new(),
    };
    let dir = root().join("target/guest-cache").join(format!(
        "job_queue-{}{engine}-{}",
        lang.name(),
        source_hash(lang)
    ));
    let out = dir.join("job_queue.wasm");
    if out.exists() {
        return Ok(out);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Build to a private name, then rename: concurrent processes never see half a file.
    let tmp = dir.join(format!("job_queue.{}.wasm", std::process::id()));
    let opts = sluice_build::BuildOptions {
        output: Some(tmp.clone()),
        repo_root: Some(root()),
        ..Default::default()
    };
    let t0 = Instant::now();
    let b = sluice_build::build(&src, &opts)
        .with_context(|| format!("building the {lang} job_queue component"))?;
    eprintln!(
        "built {lang} job_queue.wasm: {:.1} MB in {:.1} s",
        b.size as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    std::fs::rename(&tmp, &out).context("moving the component into the cache")?;
    Ok(out)
}

/// Makes a fresh app folder `workdir/app` holding the language's `app-config.toml` (with
/// `[host] cache_dir` pointed at the shared compile cache) and the built `job_queue.wasm`.
pub fn prepare_app(lang: Lang, workdir: &Path) -> anyhow::Result<PathBuf> {
    let wasm = build(lang)?;
    let app = workdir.join("app");
    if app.exists() {
        std::fs::remove_dir_all(&app).with_context(|| format!("clearing {}", app.display()))?;
    }
    std::fs::create_dir_all(&app)?;
    let text = std::fs::read_to_string(lang_dir(lang).join("app-config.toml"))?;
    let mut cfg: toml::Table = toml::from_str(&text).context("parsing app-config.toml")?;
    let host = cfg
        .entry("host")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(h) = host {
        h.entry("cache_dir")
            .or_insert_with(|| toml::Value::String(compile_cache().to_string_lossy().into_owned()));
    }
    std::fs::write(app.join("app-config.toml"), toml::to_string(&cfg)?)?;
    let modules: BTreeSet<String> = children(&cfg)
        .iter()
        .filter_map(|c| c.get("module").and_then(|m| m.as_str()).map(String::from))
        .collect();
    ensure!(
        modules.iter().all(|m| m == "job_queue.wasm"),
        "app-config.toml must load every role from job_queue.wasm, it names {modules:?}"
    );
    std::fs::copy(&wasm, app.join("job_queue.wasm"))?;
    Ok(app)
}

fn children(cfg: &toml::Table) -> Vec<toml::Table> {
    cfg.get("supervisor")
        .and_then(|s| s.get("children"))
        .and_then(|c| c.as_array())
        .map(|a| a.iter().filter_map(|c| c.as_table().cloned()).collect())
        .unwrap_or_default()
}

/// Sets `online` in the `Device` child's `init` of `app/app-config.toml`.
pub fn set_devices_online(app: &Path, online: bool) -> anyhow::Result<()> {
    let path = app.join("app-config.toml");
    let mut cfg: toml::Table = toml::from_str(&std::fs::read_to_string(&path)?)?;
    let mut found = false;
    if let Some(cs) = cfg
        .get_mut("supervisor")
        .and_then(|s| s.get_mut("children"))
        .and_then(|c| c.as_array_mut())
    {
        for c in cs {
            if c.get("actor_type").and_then(|t| t.as_str()) == Some("Device") {
                let t = c.as_table_mut().expect("a child is a table");
                let init = t
                    .entry("init")
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if let toml::Value::Table(i) = init {
                    i.insert("online".into(), toml::Value::Boolean(online));
                    found = true;
                }
            }
        }
    }
    ensure!(found, "app-config.toml has no Device child");
    std::fs::write(&path, toml::to_string(&cfg)?)?;
    Ok(())
}

/// Starts an in-process host on `app` (outbox in `app/.sluice/outbox.db`).
pub async fn start_host(app: &Path) -> anyhow::Result<Host> {
    let (host, _) = sluice_app::start(app, |_| {})
        .await
        .with_context(|| format!("starting a host on {}", app.display()))?;
    show_in_console(&host, app);
    Ok(host)
}

// ---------------------------------------------------------------------------------------------
// The live console of the run (`job-queue-outbox --console ADDR`; scripts/demo.sh turns it on).

/// The console listener's current target: the scenario host that started last, with the
/// console sampling it, and the name the console gives it.
struct DemoConsole {
    current: Mutex<Option<(Host, sluice_cli::console::Console, String)>>,
    /// DLQ reads (`GET /admin/dlq`, what the console's DLQ panel polls): how many started, and
    /// the number of the latest one that was answered. `poison_message` waits for a read that
    /// started after the dead letter existed before it replays it.
    dlq_reads_started: std::sync::atomic::AtomicU64,
    dlq_read_answered: tokio::sync::watch::Sender<u64>,
}

static DEMO_CONSOLE: OnceLock<DemoConsole> = OnceLock::new();

/// How long `poison_message` keeps its dead letter for the console when no page reads the
/// DLQ: the page polls every 2 s (`DLQ_POLL_MS` in `host/cli/console/src/app.js`), plus its
/// request's time on a loaded machine.
pub const CONSOLE_DLQ_WAIT: Duration = Duration::from_secs(3);

/// Serves the web console of `sluice run` at `addr` for the whole run: each scenario starts a
/// fresh host, and from then on `http://ADDR/ui` shows that host (the page follows it when
/// its stream ends). Only a process that calls this gets a console; the tests do not.
///
/// Like `sluice run`'s admin listener, it answers without a token on loopback only: a
/// non-loopback `addr` without `token` is refused, and with one every request must carry it.
pub async fn serve_console(
    addr: &str,
    token: Option<String>,
) -> anyhow::Result<std::net::SocketAddr> {
    use axum::response::IntoResponse;
    use tower::ServiceExt;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the console listener on {addr}"))?;
    let local = listener.local_addr()?;
    // Refused before it serves a single request.
    ensure!(
        local.ip().is_loopback() || token.is_some(),
        "the console on {local} is not loopback: give it a token (--console-token or \
         SLUICE_ADMIN_TOKEN)"
    );
    let console = DEMO_CONSOLE.get_or_init(|| DemoConsole {
        current: Mutex::new(None),
        dlq_reads_started: 0.into(),
        dlq_read_answered: tokio::sync::watch::channel(0).0,
    });
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let token = token.clone();
        async move {
            let current = console.current.lock().unwrap().clone();
            let Some((host, sampler, name)) = current else {
                return (
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "no scenario host has started yet; reload in a moment",
                )
                    .into_response();
            };
            let dlq_read = (req.method() == axum::http::Method::GET
                && req.uri().path() == "/admin/dlq")
                .then(|| {
                    1 + console
                        .dlq_reads_started
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                });
            // The admin router of `sluice run`, behind its check (token or loopback names).
            let router = sluice_cli::admin::app_router(host, token, &sampler, name);
            let resp = router.oneshot(req).await.into_response();
            if let Some(n) = dlq_read.filter(|_| resp.status().is_success()) {
                console.dlq_read_answered.send_modify(|m| *m = (*m).max(n));
            }
            resp
        }
    });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("console listener stopped: {e}");
        }
    });
    Ok(local)
}

/// When a console is served, waits (at most [`CONSOLE_DLQ_WAIT`]) until a DLQ read that
/// started now has been answered: the page's DLQ panel has shown what the DLQ holds now.
/// Returns whether it was.
async fn console_read_the_dlq() -> bool {
    let Some(console) = DEMO_CONSOLE.get() else {
        return false;
    };
    if console.current.lock().unwrap().is_none() {
        return false;
    }
    let after = console
        .dlq_reads_started
        .load(std::sync::atomic::Ordering::SeqCst);
    let mut answered = console.dlq_read_answered.subscribe();
    tokio::time::timeout(CONSOLE_DLQ_WAIT, answered.wait_for(|n| *n > after))
        .await
        .is_ok_and(|r| r.is_ok())
}

/// Points the console (when one is served) at `host`. The previous host's sampler stops.
fn show_in_console(host: &Host, app: &Path) {
    let Some(console) = DEMO_CONSOLE.get() else {
        return;
    };
    let sampler = sluice_cli::console::Console::start(
        host.clone(),
        sluice_cli::console::ConsoleConfig::default(),
    );
    // The app folder is WORK/LANG/SCENARIO/app: the console names the host "LANG/SCENARIO".
    let part = |p: Option<&Path>| {
        p.and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let scenario = app.parent();
    let name = format!(
        "{}/{}",
        part(scenario.and_then(|s| s.parent())),
        part(scenario)
    );
    *console.current.lock().unwrap() = Some((host.clone(), sampler, name));
}

/// Runs one scenario of `lang` in `workdir`: fresh app folder, fresh host, the scenario, its
/// checks, host stopped. `offline_delivery` runs its first host as a `sluice run` child.
pub async fn run_scenario(lang: Lang, scenario: &str, workdir: &Path) -> anyhow::Result<Value> {
    let work = workdir.join(lang.name()).join(scenario);
    let app = tokio::task::block_in_place(|| prepare_app(lang, &work))?;
    if scenario == "offline_delivery" {
        let sluice = tokio::task::block_in_place(sluice_binary)?;
        return offline_delivery(&app, &sluice).await;
    }
    let host = start_host(&app).await?;
    let r = match scenario {
        "thundering_herd" => thundering_herd(&host).await,
        "config_wave_deploy" => config_wave_deploy(&host).await,
        "send_heartbeat" => send_heartbeat(&host).await,
        "heartbeat_burst" => heartbeat_burst(&host).await,
        "telemetry_test" => telemetry_test(&host).await,
        "poison_message" => poison_message(&host).await,
        other => Err(anyhow!("unknown scenario {other}")),
    };
    host.stop().await;
    r
}

// ---------------------------------------------------------------------------------------------
// Waiting and asking.

/// Polls `check` until it returns `Ok(Ok(v))`; `Ok(Err(why))` means "not yet". Fails after
/// `bound` with `what` and the last reason.
pub async fn wait_for<T, F, Fut>(what: &str, bound: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<T, String>>>,
{
    let t0 = Instant::now();
    loop {
        match check().await? {
            Ok(v) => return Ok(v),
            Err(why) => {
                if t0.elapsed() > bound {
                    bail!("timed out after {bound:?} waiting for {what}: {why}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the outbox holds no pending message.
pub async fn drained(host: &Host) -> anyhow::Result<()> {
    let ob = host.outbox().context("the host has no outbox")?.clone();
    wait_for("the outbox to drain", BOUND, || {
        let ob = ob.clone();
        async move {
            let depth: u64 = ob.stats().await?.iter().map(|p| p.depth).sum();
            Ok(if depth == 0 {
                Ok(())
            } else {
                Err(format!("{depth} message(s) pending"))
            })
        }
    })
    .await
}

/// Asks `to` and parses the JSON reply. A full mailbox (`RESOURCE_EXHAUSTED`) is retried after
/// its `retry_after_ms` hint, within [`BOUND`].
pub async fn ask(host: &Host, to: &str, msg_type: &str, payload: Value) -> anyhow::Result<Value> {
    let t0 = Instant::now();
    let body = payload.to_string();
    loop {
        match host.ask(to, msg_type, body.clone(), ASK_TIMEOUT).await {
            Ok(r) => {
                return serde_json::from_slice(&r).with_context(|| {
                    format!(
                        "{to} {msg_type}: reply is not JSON: {}",
                        String::from_utf8_lossy(&r)
                    )
                });
            }
            Err(e) if e.code == ErrorCode::ResourceExhausted && t0.elapsed() < BOUND => {
                let ms = e.retry_after_ms.unwrap_or(10).max(1);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Err(e) => bail!("{to} {msg_type}: {e}"),
        }
    }
}

fn num(v: &Value, k: &str) -> anyhow::Result<u64> {
    v.get(k)
        .and_then(Value::as_u64)
        .with_context(|| format!("reply lacks a number {k:?}: {v}"))
}

fn u64s(v: &Value, k: &str) -> anyhow::Result<Vec<u64>> {
    v.get(k)
        .and_then(Value::as_array)
        .with_context(|| format!("reply lacks a list {k:?}: {v}"))?
        .iter()
        .map(|x| {
            x.as_u64()
                .with_context(|| format!("{k}: {x} is not a number"))
        })
        .collect()
}

fn strictly_increasing(xs: &[u64]) -> bool {
    xs.windows(2).all(|w| w[0] < w[1])
}

fn worker_ids(n: u64) -> Vec<String> {
    (0..n).map(|i| format!("Worker/worker-{i}")).collect()
}

/// The four counts of a dispatch reply (delivered now, deduplicated by the key, queued for the
/// relay, dead-lettered at once), checked to add up to `targets`; as a JSON object for reports.
fn check_counts(what: &str, r: &Value, targets: u64) -> anyhow::Result<Value> {
    let [d, x, q, z] = ["delivered", "deduplicated", "queued", "dead_lettered"].map(|k| num(r, k));
    let (d, x, q, z) = (d?, x?, q?, z?);
    ensure!(
        d + x + q + z == targets,
        "{what}: delivered {d} + deduplicated {x} + queued {q} + dead-lettered {z} != targets {targets}"
    );
    Ok(json!({"delivered": d, "deduplicated": x, "queued": q, "dead_lettered": z}))
}

/// `report` (an object) with the dispatch counts `c` added to its fields.
fn with_counts(c: &Value, mut report: Value) -> Value {
    if let (Some(r), Some(c)) = (report.as_object_mut(), c.as_object()) {
        r.extend(c.clone());
    }
    report
}

async fn dlq_empty(host: &Host) -> anyhow::Result<()> {
    let dl = host
        .outbox()
        .context("no outbox")?
        .dlq_list(None, 10)
        .await?;
    ensure!(
        dl.is_empty(),
        "the DLQ holds {} message(s), first: {} {:?} after {} attempts ({:?})",
        dl.len(),
        dl[0].receiver,
        dl[0].reason,
        dl[0].attempts,
        dl[0].last_error
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

/// One herd dispatch to 100 workers, then the very same dispatch again; every worker must
/// process the task exactly once.
pub async fn thundering_herd(host: &Host) -> anyhow::Result<Value> {
    let t = "herd-1";
    let r = ask(
        host,
        LEADER,
        "thundering_herd",
        json!({"workers": WORKERS, "task_id": t}),
    )
    .await?;
    ensure!(num(&r, "targets")? == WORKERS, "targets: {r}");
    let c = check_counts("herd", &r, WORKERS)?;
    ensure!(
        c["dead_lettered"] == 0,
        "herd: every worker type exists, nothing dead-lettered: {r}"
    );
    check_counts("redelivery", &r["redelivery"], WORKERS)?;
    ensure!(
        num(&r["redelivery"], "deduplicated")? == WORKERS,
        "the idempotency key did not absorb the whole redelivery: {r}"
    );
    drained(host).await?;
    for w in worker_ids(WORKERS) {
        let s = ask(host, &w, "state", json!({})).await?;
        let tasks = s["tasks"]
            .as_object()
            .with_context(|| format!("{w} state lacks tasks: {s}"))?;
        ensure!(
            tasks.get(t).and_then(Value::as_u64) == Some(1),
            "{w} did not process {t} exactly once: {s}"
        );
        ensure!(tasks.len() == 1, "{w} processed other tasks: {s}");
    }
    dlq_empty(host).await?;
    Ok(with_counts(
        &c,
        json!({"targets": WORKERS, "wall_ms": r["wall_ms"], "redelivery": r["redelivery"],
        "processed_once": WORKERS}),
    ))
}

/// Five waves of 20 workers, each with one download per worker from the two-slot config
/// servers: every worker ends on the new version, every download served exactly once, the
/// servers pushed back at least once, nothing dead-lettered.
pub async fn config_wave_deploy(host: &Host) -> anyhow::Result<Value> {
    let v = "2.1.0";
    let wave_size = 20;
    let t0 = Instant::now();
    let r = ask(
        host,
        LEADER,
        "config_wave_deploy",
        json!({"workers": WORKERS, "wave_size": wave_size, "version": v}),
    )
    .await?;
    let waves = r["waves"]
        .as_array()
        .with_context(|| format!("no waves: {r}"))?;
    ensure!(
        waves.len() as u64 == WORKERS.div_ceil(wave_size),
        "{} waves: {r}",
        waves.len()
    );
    for (i, w) in waves.iter().enumerate() {
        ensure!(
            num(w, "wave")? == i as u64,
            "wave {i} is numbered {}",
            w["wave"]
        );
        check_counts(&format!("wave {i}"), w, num(w, "targets")?)?;
    }
    let total = check_counts("all waves", &r["total"], WORKERS)?;
    let c = num(&r, "config_server_queued")?;
    ensure!(
        c > 0,
        "config_server_queued is 0: the two-slot config servers never pushed back"
    );
    drained(host).await?;
    let deploy_ms = t0.elapsed().as_millis() as u64;
    for w in worker_ids(WORKERS) {
        let s = ask(host, &w, "state", json!({})).await?;
        ensure!(
            s["config_version"] == v,
            "{w} has config_version {} instead of {v}",
            s["config_version"]
        );
    }
    let mut served: BTreeMap<String, u32> = BTreeMap::new();
    let mut per_server = Vec::new();
    for cs in ["ConfigServer/cs-0", "ConfigServer/cs-1"] {
        let s = ask(host, cs, "state", json!({})).await?;
        let list = s["served"]
            .as_array()
            .with_context(|| format!("{cs} state lacks served: {s}"))?;
        per_server.push(list.len());
        for w in list {
            *served
                .entry(w.as_str().unwrap_or_default().to_string())
                .or_default() += 1;
        }
    }
    for w in worker_ids(WORKERS) {
        let n = served.get(&w).copied().unwrap_or(0);
        ensure!(
            n == 1,
            "the config servers served {w} {n} times (exactly once expected)"
        );
    }
    ensure!(
        served.len() as u64 == WORKERS,
        "the config servers served {} distinct workers, {WORKERS} expected",
        served.len()
    );
    dlq_empty(host).await?;
    Ok(
        json!({"waves": waves, "total": total, "config_server_queued": c,
        "served": per_server, "deploy_ms": deploy_ms}),
    )
}

/// Three single heartbeats (overwrite, one key) to 100 workers: each worker's heartbeats end
/// with the last seq and never go backwards.
pub async fn send_heartbeat(host: &Host) -> anyhow::Result<Value> {
    let mut seqs = Vec::new();
    let mut last = Value::Null;
    for _ in 0..3 {
        let r = ask(host, LEADER, "send_heartbeat", json!({"workers": WORKERS})).await?;
        check_counts("heartbeat", &r, WORKERS)?;
        seqs.push(num(&r, "seq")?);
        last = r;
    }
    ensure!(
        seqs[0] >= 1 && strictly_increasing(&seqs),
        "the leader's heartbeat seqs are not increasing from 1: {seqs:?}"
    );
    let s_last = *seqs.last().expect("three sends");
    drained(host).await?;
    let mut delivered = 0;
    for w in worker_ids(WORKERS) {
        let s = ask(host, &w, "state", json!({})).await?;
        let hb = u64s(&s, "heartbeats")?;
        ensure!(
            hb.last() == Some(&s_last),
            "{w} heartbeats {hb:?} do not end with {s_last}"
        );
        ensure!(
            strictly_increasing(&hb),
            "{w} heartbeats went backwards: {hb:?}"
        );
        delivered += hb.len();
    }
    Ok(with_counts(
        &check_counts("heartbeat", &last, WORKERS)?,
        json!({"seq": s_last, "sends": seqs.len(), "heartbeats_delivered": delivered}),
    ))
}

/// 50 overwriting heartbeats to the busy leader: it processes between 1 and 10 of them,
/// strictly increasing, the last being 50.
pub async fn heartbeat_burst(host: &Host) -> anyhow::Result<Value> {
    let count = 50;
    let r = ask(host, LEADER, "heartbeat_burst", json!({"count": count})).await?;
    ensure!(num(&r, "sent")? == count, "sent: {r}");
    let c = check_counts("burst", &r, count)?;
    drained(host).await?;
    let s = ask(host, LEADER, "heartbeats", json!({})).await?;
    let seqs = u64s(&s, "seqs")?;
    ensure!(
        (1..=10).contains(&seqs.len()),
        "the leader processed {} heartbeats (1..=10 expected): {seqs:?}",
        seqs.len()
    );
    ensure!(
        strictly_increasing(&seqs),
        "heartbeats not strictly increasing: {seqs:?}"
    );
    ensure!(
        seqs.last() == Some(&count),
        "the last heartbeat processed is {:?}, not {count}: {seqs:?}",
        seqs.last()
    );
    dlq_empty(host).await?;
    Ok(with_counts(
        &c,
        json!({"sent": count, "processed": seqs.len(), "seqs": seqs}),
    ))
}

/// 200 samples, fast path first, outbox on any error, with bursts filling the collector's
/// four-slot mailbox: both paths used, every sample collected exactly once.
pub async fn telemetry_test(host: &Host) -> anyhow::Result<Value> {
    let count = 200u64;
    let t0 = Instant::now();
    let r = ask(host, LEADER, "telemetry_test", json!({"count": count})).await?;
    let wall_ms = t0.elapsed().as_millis() as u64;
    ensure!(num(&r, "count")? == count, "count: {r}");
    let (f, o) = (num(&r, "fast_path_success")?, num(&r, "outbox_fallback")?);
    ensure!(
        f + o == count,
        "fast_path_success {f} + outbox_fallback {o} != {count}"
    );
    ensure!(
        o > 0,
        "outbox_fallback is 0: the collector never refused a fast-path sample"
    );
    let b = num(&r, "burst_refused")?;
    drained(host).await?;
    let s = ask(host, "TelemetryCollector/main", "state", json!({})).await?;
    let got = u64s(&s, "telemetry")?;
    let set: BTreeSet<u64> = got.iter().copied().collect();
    ensure!(
        set.len() == got.len(),
        "the collector recorded a sample twice ({} records, {} distinct)",
        got.len(),
        set.len()
    );
    let missing: Vec<u64> = (0..count).filter(|i| !set.contains(i)).collect();
    ensure!(
        missing.is_empty() && got.len() as u64 == count,
        "the collector misses samples {missing:?} (holds {})",
        got.len()
    );
    dlq_empty(host).await?;
    Ok(
        json!({"count": count, "fast_path_success": f, "outbox_fallback": o,
        "burst_refused": b, "bursts_recorded": s["bursts"], "collected": got.len(), "wall_ms": wall_ms}),
    )
}

/// A `call` dispatch whose handler always fails: dead-lettered after exactly `max_attempts`
/// with the worker's error; once the worker is fixed, a replay delivers it once.
pub async fn poison_message(host: &Host) -> anyhow::Result<Value> {
    let max_attempts = 5;
    let ob = host.outbox().context("no outbox")?.clone();
    let r = ask(host, LEADER, "poison", json!({})).await?;
    let c = check_counts("poison", &r, 1)?;
    ensure!(
        c["delivered"] == 0 && c["dead_lettered"] == 0,
        "poison: a failing handler is neither delivered nor dead-lettered on the first attempt: {r}"
    );
    let t0 = Instant::now();
    let dl = wait_for("the poison message in the DLQ", BOUND, || {
        let ob = ob.clone();
        async move {
            let dl = ob.dlq_list(Some("Worker/poison"), 10).await?;
            Ok(if dl.is_empty() {
                Err("not dead-lettered yet".to_string())
            } else {
                Ok(dl)
            })
        }
    })
    .await?;
    let dead_ms = t0.elapsed().as_millis() as u64;
    // The console's DLQ panel polls every 2 s: keep the dead letter until it has been read
    // (bounded), or a newcomer watching the demo never sees it before the replay below.
    let shown = console_read_the_dlq().await;
    ensure!(dl.len() == 1, "{} dead letters for Worker/poison", dl.len());
    let d = &dl[0];
    ensure!(
        d.attempts == max_attempts,
        "dead-lettered after {} attempts, not {max_attempts}",
        d.attempts
    );
    ensure!(
        d.reason == "max_attempts",
        "dead-lettered for {:?}, not max_attempts",
        d.reason
    );
    let last_error = d.last_error.clone().unwrap_or_default();
    ensure!(
        last_error.contains("INVALID_ARGUMENT") && last_error.contains("malformed task"),
        "the last error is {last_error:?}, not the worker's INVALID_ARGUMENT: malformed task"
    );
    let s = ask(host, "Worker/poison", "state", json!({})).await?;
    ensure!(
        s["tasks"].get("poison").is_none(),
        "the worker recorded the poison task before the fix: {s}"
    );
    ask(host, "Worker/poison", "fix", json!({})).await?;
    let replayed = ob
        .dlq_replay(sluice_outbox::DlqSelector::Receiver("Worker/poison".into()))
        .await?;
    ensure!(
        replayed == 1,
        "replayed {replayed} dead letters, 1 expected"
    );
    drained(host).await?;
    let s = wait_for("the fixed worker to record poison", BOUND, || async {
        let s = ask(host, "Worker/poison", "state", json!({})).await?;
        Ok(if s["tasks"].get("poison").is_some() {
            Ok(s)
        } else {
            Err(format!("state {s}"))
        })
    })
    .await?;
    ensure!(
        s["tasks"]["poison"] == 1,
        "the worker recorded poison {} times",
        s["tasks"]["poison"]
    );
    dlq_empty(host).await?;
    Ok(with_counts(
        &c,
        json!({"attempts": d.attempts,
        "reason": d.reason, "last_error": last_error, "dead_ms": dead_ms, "replayed": replayed,
        "recorded": 1, "console_read_dlq": shown}),
    ))
}

// ---------------------------------------------------------------------------------------------
// offline_delivery: a real `sluice run`, SIGKILLed, then a second host on the same file.

/// Builds the `sluice` binary once per process and hard-links it (a copy where links fail) to
/// a private path, so other builds sharing the target directory cannot swap it underneath.
/// `SLUICE_BIN` overrides.
pub fn sluice_binary() -> anyhow::Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("SLUICE_BIN") {
            return Ok(PathBuf::from(p));
        }
        let dir = root().join("target/job-queue-outbox/bin");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let private = dir.join("sluice");
        // Another checkout sharing the cargo target dir may swap `debug/sluice` between our
        // build and our link: keep only a binary that says it was built from this checkout.
        for _ in 0..20 {
            let exe = cargo_build_sluice(Profile::Debug)?;
            let _ = std::fs::remove_file(&private);
            if std::fs::hard_link(&exe, &private).is_err() {
                std::fs::copy(&exe, &private)
                    .map_err(|e| format!("copying {}: {e}", exe.display()))?;
            }
            if built_from_this_checkout(&private)? {
                return Ok(private);
            }
        }
        Err("target/debug/sluice keeps coming from another checkout".into())
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// Which build of the `sluice` executable [`cargo_build_sluice`] brings up to date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// `target/debug`: what the tests run.
    Debug,
    /// `target/release` (`--release`): what the benchmarks run.
    Release,
}

/// Has cargo bring the `sluice` executable of `profile` up to date, and returns where cargo
/// put it.
///
/// It asks for the binary through `sluice-cli`'s integration test (`host/cli/tests/
/// sluice_bin.rs`) with `--workspace`: features are then resolved exactly as for `cargo test
/// --workspace`, so right after the test build this is a no-op. `cargo build -p sluice-cli`
/// resolves `sluice-cli`'s features alone (tokio, futures and metrics-util lose the features
/// other members' dev-dependencies add), and recompiled half the dependency graph, ~7 minutes
/// of a cold CI run.
pub fn cargo_build_sluice(profile: Profile) -> Result<PathBuf, String> {
    let mut cmd = cargo();
    cmd.args([
        "test",
        "--workspace",
        "--no-run",
        "--quiet",
        "--test",
        "sluice_bin",
        "--message-format=json",
    ]);
    if profile == Profile::Release {
        cmd.arg("--release");
    }
    let out = cmd
        .current_dir(root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("running cargo for the sluice binary: {e}"))?;
    if !out.status.success() {
        return Err("cargo could not build the sluice binary".into());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| {
            m["reason"] == "compiler-artifact"
                && m["target"]["name"] == "sluice"
                && m["target"]["kind"] == serde_json::json!(["bin"])
        })
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| "cargo reported no sluice executable".into())
}

/// A `cargo` command (the one running us, where there is one) without the variables cargo sets
/// for the process it runs. A test or `cargo run` inherits `CARGO_MANIFEST_DIR`, `CARGO_PKG_*`
/// and the like; passed on to a nested cargo, they reach build scripts that watch them (ring's
/// `rerun-if-env-changed=CARGO_MANIFEST_DIR`) and rebuild half the graph a second time.
pub fn cargo() -> std::process::Command {
    let mut cmd =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_for_the_crate = name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_EXE_")
            || matches!(
                &*name,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_MANIFEST_LINKS"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_TARGET_TMPDIR"
                    | "CARGO_RUSTC_CURRENT_DIR"
                    | "OUT_DIR"
            );
        if set_for_the_crate {
            cmd.env_remove(&*name);
        }
    }
    cmd
}

/// Whether the `sluice` binary at `exe` was built from this checkout (checkouts of one
/// workspace that share a target dir overwrite one another's `target/debug/sluice`).
pub fn built_from_this_checkout(exe: &Path) -> Result<bool, String> {
    let out = std::process::Command::new(exe)
        .env("SLUICE_PRINT_BUILD_ROOT", "1")
        .output()
        .map_err(|e| format!("running {}: {e}", exe.display()))?;
    Ok(Path::new(String::from_utf8_lossy(&out.stdout).trim()) == root().join("host/cli"))
}

/// One row of `outbox_messages` for a device.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    id: i64,
    receiver: String,
    key: String,
    delivery_count: i64,
    acked: bool,
    dead: bool,
}

async fn device_rows(app: &Path) -> anyhow::Result<Vec<Row>> {
    use sqlx::Row as _;
    let db = app.join(".sluice/outbox.db");
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&db)
        .create_if_missing(false)
        .busy_timeout(Duration::from_secs(5));
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await
        .with_context(|| format!("opening {}", db.display()))?;
    let rows = sqlx::query(
        "SELECT id, receiver, idempotency_key, delivery_count, acked, dead_lettered \
         FROM outbox_messages WHERE receiver LIKE 'Device/%' ORDER BY id",
    )
    .fetch_all(&pool)
    .await?;
    pool.close().await;
    rows.iter()
        .map(|r| {
            Ok(Row {
                id: r.try_get(0)?,
                receiver: r.try_get(1)?,
                key: r.try_get(2)?,
                delivery_count: r.try_get(3)?,
                acked: r.try_get::<i64, _>(4)? != 0,
                dead: r.try_get::<i64, _>(5)? != 0,
            })
        })
        .collect()
}

/// Asks over a `sluice run` ingress, retrying 429 `RESOURCE_EXHAUSTED` after its hint.
pub async fn http_ask(
    http: &reqwest::Client,
    ingress: &str,
    to: &str,
    msg_type: &str,
    payload: Value,
) -> anyhow::Result<Value> {
    let url = format!("{ingress}/actors/{to}/ask/{msg_type}");
    let t0 = Instant::now();
    loop {
        let resp = http
            .post(&url)
            .header("x-sluice-deadline-ms", ASK_TIMEOUT.as_millis().to_string())
            .body(payload.to_string())
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        let status = resp.status();
        let body = resp.bytes().await?;
        let v: Value = serde_json::from_slice(&body).with_context(|| {
            format!(
                "{url}: HTTP {status}, not JSON: {}",
                String::from_utf8_lossy(&body)
            )
        })?;
        if status.is_success() {
            return Ok(v);
        }
        if status.as_u16() == 429 && v["code"] == "resource-exhausted" && t0.elapsed() < BOUND {
            let ms = v["retry_after_ms"].as_u64().unwrap_or(10).max(1);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            continue;
        }
        bail!("{url}: HTTP {status}: {v}");
    }
}

/// Run 1: devices offline, `firmware_rollout` over the HTTP ingress of a `sluice run` child,
/// SIGKILL as soon as it replies. Run 2: devices online, a host on the same app folder and
/// SQLite file: every device gets firmware 0..19 in order, nothing dead-lettered, and the
/// delivery counts stored by run 1 carried over.
pub async fn offline_delivery(app: &Path, sluice: &Path) -> anyhow::Result<Value> {
    use tokio::io::AsyncBufReadExt;
    let (devices, count) = (10u64, 20u64);
    set_devices_online(app, false)?;
    let log = std::fs::File::create(app.join("host1.log"))?;
    let mut child = tokio::process::Command::new(sluice)
        .arg("run")
        .arg(app)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {} run", sluice.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let ingress = tokio::time::timeout(BOUND, async {
        while let Some(l) = lines.next_line().await? {
            if let Some(a) = l.strip_prefix("sluice: ingress on ") {
                return Ok(a.trim().to_string());
            }
        }
        bail!(
            "sluice run exited before serving (see {})",
            app.join("host1.log").display()
        )
    })
    .await
    .context("sluice run did not print its ingress address in time")??;
    let http = reqwest::Client::new();
    let t0 = Instant::now();
    let r = http_ask(
        &http,
        &ingress,
        LEADER,
        "firmware_rollout",
        json!({"devices": devices, "count": count}),
    )
    .await;
    let rollout_ms = t0.elapsed().as_millis() as u64;
    // SIGKILL: no shutdown, no settle, whatever the relay was doing stays as it was.
    child.start_kill().context("killing sluice run")?;
    let status = child.wait().await?;
    let r = r?;
    ensure!(
        num(&r, "targets")? == devices && num(&r, "messages")? == devices * count,
        "rollout reply: {r}"
    );
    let c = check_counts("rollout", &r, devices * count)?;

    let before = device_rows(app).await?;
    ensure!(
        before.len() as u64 == devices * count,
        "{} device messages stored, {} expected",
        before.len(),
        devices * count
    );
    if let Some(x) = before.iter().find(|x| x.acked || x.dead) {
        bail!(
            "run 1 (devices offline) already settled {x:?}: acked or dead-lettered before the kill"
        );
    }
    for d in 0..devices {
        let recv = format!("Device/dev-{d}");
        let mine: Vec<&Row> = before.iter().filter(|x| x.receiver == recv).collect();
        let head = mine.first().context("a device without messages")?;
        ensure!(
            head.key == "fw-0" && head.delivery_count >= 1,
            "{recv}'s first message {head:?} has not had its immediate attempt"
        );
        if let Some(x) = mine[1..].iter().find(|x| x.delivery_count != 0) {
            bail!("{recv}: {x:?} was attempted before its head (FIFO per receiver broken)");
        }
    }
    let attempts_before: i64 = before.iter().map(|x| x.delivery_count).sum();
    let max_before = before.iter().map(|x| x.delivery_count).max().unwrap_or(0);

    // Run 2: the same folder and file, devices online.
    set_devices_online(app, true)?;
    let t1 = Instant::now();
    let host = start_host(app).await?;
    let checked = async {
        let want: Vec<u64> = (0..count).collect();
        for d in 0..devices {
            let dev = format!("Device/dev-{d}");
            wait_for(
                &format!("{dev} to receive firmware 0..{count}"),
                BOUND,
                || async {
                    let s = ask(&host, &dev, "state", json!({})).await?;
                    let got = u64s(&s, "firmware")?;
                    if got == want {
                        Ok(Ok(()))
                    } else if want.starts_with(&got) {
                        Ok(Err(format!("has {got:?}")))
                    } else {
                        bail!("{dev} received firmware out of order or twice: {got:?}")
                    }
                },
            )
            .await?;
        }
        drained(&host).await?;
        dlq_empty(&host).await
    }
    .await;
    let recovery_ms = t1.elapsed().as_millis() as u64;
    host.stop().await;
    checked?;

    let after = device_rows(app).await?;
    for b in &before {
        let a = after
            .iter()
            .find(|a| a.id == b.id)
            .with_context(|| format!("message {} vanished after run 2", b.id))?;
        ensure!(a.acked, "message {a:?} not acked after run 2");
        ensure!(
            a.delivery_count >= b.delivery_count,
            "message {} restarted from {} attempts (had {} before run 2)",
            b.id,
            a.delivery_count,
            b.delivery_count
        );
    }
    ensure!(
        after.len() == before.len(),
        "run 2 stored {} extra device messages",
        after.len() - before.len()
    );
    Ok(with_counts(
        &c,
        json!({"targets": devices, "messages": devices * count,
        "rollout_ms": rollout_ms, "killed": status.to_string(),
        "attempts_before_restart": attempts_before, "max_attempts_before_restart": max_before,
        "recovery_ms": recovery_ms}),
    ))
}
