//! The web console (`/ui` on the admin listener of `sluice run`), the metrics' HELP text and
//! the operator files under `ops/`, tested with the real tools: a real `sluice run`, Debian's
//! headless Chromium driven through playwright-core (`host/cli/console/test/driver.mjs`), and
//! Debian's `promtool`. `scripts/test.sh` installs all of them (`scripts/console-deps.sh`);
//! a missing one fails these tests, it never skips them.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use sluice_tests::{SluiceRun, root, rust_app, sluice_binary, wait_for};

const T: Duration = Duration::from_secs(60);

fn console_dir() -> PathBuf {
    root().join("host/cli/console")
}

/// Where screenshots go: `<target>/console-screenshots/`.
fn artifacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("creating the screenshot folder");
    dir
}

fn require(tool: &str, path: &Path) {
    assert!(
        path.exists(),
        "{tool} is missing at {}: run `bash scripts/console-deps.sh` (scripts/test.sh does)",
        path.display()
    );
}

/// A headless Chromium operated by `driver.mjs`: one JSON command per line each way.
struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Browser {
    fn start() -> Self {
        require("chromium", Path::new("/usr/bin/chromium"));
        require(
            "playwright-core (npm ci in host/cli/console)",
            &console_dir().join("node_modules/playwright-core"),
        );
        let mut child = Command::new("node")
            .arg("test/driver.mjs")
            .current_dir(console_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting node test/driver.mjs");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends one command and returns its answer; panics on a driver error.
    fn cmd(&mut self, c: Value) -> Value {
        writeln!(self.stdin, "{c}").expect("writing to the driver");
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("reading from the driver");
        let answer: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("driver answered {line:?} to {c}: {e}"));
        assert_eq!(answer["ok"], true, "driver failed {c}: {}", answer["error"]);
        answer
    }

    fn open(&mut self, url: &str, credentials: Option<(&str, &str)>) -> u64 {
        let mut c = json!({"cmd": "open", "url": url});
        if let Some((u, p)) = credentials {
            c["user"] = json!(u);
            c["password"] = json!(p);
        }
        self.cmd(c)["status"].as_u64().expect("a status")
    }

    /// Waits (bounded) until the cell's text matches `re`; returns the text.
    fn wait(&mut self, cell: &str, re: &str) -> String {
        self.cmd(json!({"cmd": "wait_text", "sel": sel(cell), "re": re, "timeout_ms": 60_000}))
            ["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Clicks, answering a confirm dialog with `confirm`; returns the dialog's text.
    fn click(&mut self, cell: &str, confirm: bool) -> String {
        self.cmd(json!({"cmd": "click", "sel": sel(cell), "confirm": confirm}))["dialog"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Saves a screenshot under [`artifacts`] and prints its path (so a CI log names it,
    /// whether or not the test goes on to pass).
    fn screenshot(&mut self, name: &str) -> PathBuf {
        let path = artifacts().join(name);
        self.cmd(json!({"cmd": "screenshot", "path": path}));
        eprintln!("console screenshot: {}", path.display());
        path
    }

    /// The sparkline of actor type `ty`'s row: its painted pixels, and its highest painted
    /// row as a fraction of the height (0 = top; `None` when nothing is drawn).
    fn sparkline(&mut self, ty: &str) -> (u64, Option<f64>) {
        let row = format!("tr:has({}) td.spark", sel(&format!("type:{ty}:name")));
        let a = self.cmd(json!({"cmd": "painted", "sel": row}));
        (
            a["pixels"].as_u64().expect("a pixel count"),
            a["top"].as_f64(),
        )
    }

    fn page_errors(&mut self) -> Vec<String> {
        serde_json::from_value(self.cmd(json!({"cmd": "errors"}))["errors"].clone())
            .expect("a list of errors")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"cmd": "close"}));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sel(cell: &str) -> String {
    format!("[data-cell=\"{cell}\"]")
}

/// The number at the start of a cell's text (`1,024` → 1024).
fn number(text: &str) -> f64 {
    let t: String = text
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    t.parse()
        .unwrap_or_else(|_| panic!("no number in {text:?}"))
}

async fn post(url: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn ask(run: &SluiceRun, actor: &str, msg_type: &str, body: Value) -> Value {
    let (status, v) = post(
        &format!("{}/actors/{actor}/ask/{msg_type}", run.ingress),
        body,
    )
    .await;
    assert_eq!(status, 200, "ask {actor} {msg_type}: {v}");
    v
}

/// `GET` of an admin API path of `run`, as JSON.
async fn admin_json(run: &SluiceRun, path: &str) -> Value {
    reqwest::get(format!("{}{path}", run.admin))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn dead_letters(run: &SluiceRun) -> Vec<Value> {
    let v = admin_json(run, "/admin/dlq").await;
    v["dead_letters"].as_array().cloned().unwrap_or_default()
}

/// Polls the admin API's DLQ until `cond` holds (bounded).
async fn wait_dlq(run: &SluiceRun, what: &str, cond: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let cond = &cond;
    wait_for(T, what, || async move {
        let d = dead_letters(run).await;
        if cond(&d) { Ok(d) } else { Err(d) }
    })
    .await
}

/// Waits (bounded) until actor type `ty` has one live actor running its first turn with
/// nothing queued behind it.
async fn wait_first_turn(run: &SluiceRun, ty: &str) {
    let what = format!("the first {ty} turn to run with nothing queued behind it");
    wait_for(T, &what, || async {
        let s = admin_json(run, "/admin/status").await;
        let t = s["actor_types"]
            .as_array()
            .and_then(|a| a.iter().find(|t| t["actor_type"] == ty).cloned())
            .unwrap_or_else(|| panic!("{ty} in status: {s}"));
        if t["active"] == 1 && t["queued"] == 0 && s["inflight_turns"].as_u64() >= Some(1) {
            Ok(())
        } else {
            Err(s)
        }
    })
    .await;
}

/// One `Echo` actor type (the echo test guest).
const ECHO_APP: &str =
    "[[supervisor.children]]\nname = \"echo\"\nactor_type = \"Echo\"\nmodule = \"echo.wasm\"\n";

const FLOW_APP: &str = r#"
[[supervisor.children]]
name = "echo"
actor_type = "Echo"
module = "echo.wasm"

# A full `error` mailbox: one long turn running, two queued, the rest refused.
[[supervisor.children]]
name = "slow"
actor_type = "Slow"
module = "slow.wasm"
mailbox_capacity = 2
mailbox_strategy = "error"

# A `drop_newest` mailbox of one: one long turn running, one queued, the rest dropped.
[[supervisor.children]]
name = "lossy"
actor_type = "Lossy"
module = "slow.wasm"
mailbox_capacity = 1
mailbox_strategy = "drop_newest"

# Restarted after its first trap, stopped after its second.
[[supervisor.children]]
name = "crash"
actor_type = "Crash"
module = "crash.wasm"
max_restarts = 1
restart_window_ms = 600000

# The outbox's receiver: one message at a time, so a burst is backpressure.
[[supervisor.children]]
name = "sink"
actor_type = "Sink"
module = "slow.wasm"
mailbox_capacity = 1
mailbox_strategy = "error"

# A routed bus subscription whose subscriber takes 600 ms per event (the payload): events wait
# in its per-principal queues.
[[supervisor.children]]
name = "audit"
actor_type = "Audit"
module = "slow.wasm"
keys = ["main"]

[bus]
delivery_window = 1

[[bus.subscriptions]]
actor_type = "Audit"
key = "main"
topic = "audit.*"
mode = "routed"

[outbox]
partitions = 2
relay_interval_ms = 5

[outbox.concurrency]
initial_limit = 8
min_limit = 1
max_limit = 16
strategy = "aimd"

[outbox.retry_policy]
max_attempts = 100
base_ms = 10
cap_ms = 100
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_full_mailbox_backpressure_and_the_dlq_live_and_replays_from_the_page()
{
    let app = rust_app(&["echo", "slow", "crash"], FLOW_APP);
    assert!(FLOW_APP.contains("delivery_window = 1"));
    let bin = sluice_binary("sluice-console");
    let run = SluiceRun::start(&bin, app.path(), &[], &[]).await;
    let url = format!("{}/ui", run.admin);
    assert!(
        run.stdout_has(&format!("sluice: console on {url}")),
        "sluice run prints the console URL"
    );
    let mut b = Browser::start();
    assert_eq!(b.open(&url, None), 200);
    b.wait("conn", "^live$");
    b.wait("type:Slow:name", "^Slow v1$");
    b.wait("deploy:Sink:1", "at start");

    // A dead letter: a message for a type that is not deployed yet is dead-lettered at once
    // (NOT_FOUND is permanent).
    let r = ask(
        &run,
        "Echo/1",
        "dispatch",
        json!({"targets": ["Late/1"], "msg_type": "record", "payload": "poison", "mode": "cast"}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    let dl = wait_dlq(&run, "one dead letter", |d| d.len() == 1).await;
    let id = dl[0]["id"].as_i64().unwrap();
    b.wait("dlq:count", "^1$");
    b.wait(&format!("dlq:{id}:attempts"), "^1$");

    // A full `error` mailbox: a 3 s turn running (waited for, so the count below does not
    // depend on how fast the actor takes its first message), then five more for two slots.
    let tell_slow = format!("{}/actors/Slow/full/tell/x", run.ingress);
    assert_eq!(post(&tell_slow, json!(3000)).await.0, 202);
    wait_first_turn(&run, "Slow").await;
    let mut refused = 0;
    for _ in 0..5 {
        let (status, _) = post(&tell_slow, json!(3000)).await;
        if status == 429 {
            refused += 1;
        }
    }
    assert_eq!(refused, 3, "one running and two queued; the rest refused");
    b.wait("type:Slow:queued", "^2$");
    b.wait("type:Slow:refused", "^3$");
    b.wait("type:Slow:oldest_queued_ms", r"^\d+(\.\d)? s$");
    // Slow's sparkline is drawn and its depth line rose off the baseline (two queued).
    let what = "Slow's sparkline to be drawn with its depth line in the upper half";
    wait_for(T, what, || {
        let (pixels, top) = b.sparkline("Slow");
        std::future::ready(if pixels > 0 && top.is_some_and(|t| t < 0.5) {
            Ok(())
        } else {
            Err(format!("{pixels} pixels, highest at {top:?} of its height"))
        })
    })
    .await;

    // A `drop_newest` mailbox of one: a 2 s turn running, then a tell whose 300 ms deadline
    // passes while it waits (skipped when its turn comes), then three dropped tells.
    let tell_lossy = format!("{}/actors/Lossy/l/tell/x", run.ingress);
    assert_eq!(post(&tell_lossy, json!(2000)).await.0, 202);
    wait_first_turn(&run, "Lossy").await;
    let r = reqwest::Client::new()
        .post(&tell_lossy)
        .header("x-sluice-deadline-ms", "300")
        .body("1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    assert_eq!(r.json::<Value>().await.unwrap()["receipt"], "queued");
    for _ in 0..3 {
        let (status, v) = post(&tell_lossy, json!(1)).await;
        assert_eq!(
            (status, v["receipt"].as_str()),
            (202, Some("dropped-newest"))
        );
    }
    b.wait("type:Lossy:dropped", "^3$");
    b.wait("type:Lossy:skipped", "^1$");
    // Its one turn took 2 s: the p99 (and p50) of the frame it ended in.
    let p99 = b.wait("type:Lossy:p99_ms", r"^\d\.\d s$");
    assert!((1.9..2.6).contains(&number(&p99)), "{p99}");

    // A trap: restarted (max_restarts = 1); a second: stopped.
    let boom = format!("{}/actors/Crash/1/ask/boom", run.ingress);
    assert_ne!(post(&boom, json!("")).await.0, 200);
    b.wait("type:Crash:restarts", "^1$");
    b.wait("type:Crash:stopped", r"^0 \(0 total\)$");
    assert_ne!(post(&boom, json!("")).await.0, 200);
    b.wait("type:Crash:stopped", r"^1 \(1 total\)$");
    assert_eq!(
        b.wait("type:Crash:restarts", "^\\d+$"),
        "1",
        "no restart after the stop"
    );

    // Backpressure: 30 dispatches to two Sink actors (150 ms turns, one message each at a
    // time) through the outbox, while the relay's limiters start at 8.
    for _ in 0..30 {
        let r = ask(
            &run,
            "Echo/1",
            "dispatch",
            json!({"targets": ["Sink/a", "Sink/b"], "msg_type": "work", "payload": "150", "mode": "cast"}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
    }
    b.wait("outbox:pending", "^[1-9]");
    // The AIMD limit of Sink halves from 8 in at least one partition.
    let now = b.wait("limiter:Sink:now", r"p\d [1-7] ");
    assert!(now.contains("(min 1, max 16)"), "{now}");
    b.wait("type:Sink:turns_per_s", r"^[1-9]");
    // 150 ms turns: the median of a second's turns, from the log-scale histogram (buckets of
    // 12.5 %), is about that (a loaded machine may stretch a turn, never shorten it).
    let p50 = b.wait("type:Sink:p50_ms", r"^1\d\d ms$");
    assert!((130.0..200.0).contains(&number(&p50)), "{p50}");
    let p99 = b.wait("type:Sink:p99_ms", r"^\d+ ms$");
    assert!((130.0..400.0).contains(&number(&p99)), "{p99}");
    let backpressure = number(&b.wait("outbox:backpressure", "^[1-9]"));
    assert!(backpressure >= 1.0);
    let shot = b.screenshot("console-under-load.png");

    // The load passes: the numbers follow it down.
    b.wait("outbox:pending", "^0$");
    b.wait("outbox:delivered", r"^(6\d|[7-9]\d|\d{3,})$");
    b.wait("type:Slow:queued", "^0$");
    b.wait("type:Sink:queued", "^0$");
    b.wait("type:Sink:turns_per_s", "^0$");
    b.screenshot("console-drained.png");

    // The bus: two principals publish to the routed subscription faster than Audit handles
    // the events; the heavier one is listed first.
    for (principal, n) in [("user:alice", 3), ("user:bob", 6)] {
        for _ in 0..n {
            let r = ask_as(
                &run,
                principal,
                "Echo/1",
                "publish",
                json!({"topic": "audit.event", "payload": "600"}),
            )
            .await;
            assert_eq!(r["ok"], true, "{r}");
        }
    }
    let bus = "bus:Audit/main:audit.*";
    b.wait(&format!("{bus}:active_principals"), "^2$");
    let top = b.wait(&format!("{bus}:top"), "^user:bob ");
    assert!(top.contains(", user:alice "), "{top}");
    b.wait(&format!("{bus}:bytes_in_use"), "[1-9]");
    // The README's picture (docs/console.png) is this one, colour-reduced with pngquant.
    b.screenshot("console-bus.png");
    b.wait(&format!("{bus}:active_principals"), "^0$");
    b.wait(&format!("{bus}:delivered"), "^9$");

    // Fix the poison message's cause (deploy Late), then replay it from the page.
    let late = rust_app(
        &["echo"],
        "[[supervisor.children]]\nname = \"late\"\nactor_type = \"Late\"\nmodule = \"echo.wasm\"\n",
    );
    sluice_cli::client::deploy(
        &run.admin,
        late.path(),
        None,
        sluice_cli::client::AppCheck::Force,
        |_| {},
    )
    .await
    .expect("deploying Late");
    let deployed = b.wait("deploy:Late:1", "ago");
    assert!(!deployed.contains("at start"), "{deployed}");
    b.cmd(json!({"cmd": "fill", "sel": sel("dlq:filter"), "value": "Late/1"}));
    b.wait("dlq:replay-all", "^Replay all for Late/1$");
    // Dismissing the confirmation sends nothing.
    let asked = b.click(&format!("dlq:replay:{id}"), false);
    assert!(
        asked.contains(&format!("Replay dead letter #{id}")),
        "{asked}"
    );
    assert_eq!(dead_letters(&run).await.len(), 1);
    let asked = b.click(&format!("dlq:replay:{id}"), true);
    assert!(asked.contains("Late/1"), "{asked}");
    b.wait("dlq:status", "^replayed 1$");
    b.wait("dlq:count", "^0$");
    wait_dlq(&run, "an empty DLQ", |d| d.is_empty()).await;
    let items = wait_for(T, "the replayed message to arrive at Late/1", || async {
        let r = ask(&run, "Late/1", "recorded", json!("")).await;
        match r["items"].as_array() {
            Some(items) if !items.is_empty() => Ok(items.clone()),
            _ => Err(r),
        }
    })
    .await;
    assert_eq!(items, vec![json!("poison")], "delivered exactly once");

    // Purge from the page: another dead letter, for a type that never comes.
    b.cmd(json!({"cmd": "fill", "sel": sel("dlq:filter"), "value": ""}));
    ask(
        &run,
        "Echo/1",
        "dispatch",
        json!({"targets": ["Gone/1"], "msg_type": "record", "payload": "x", "mode": "cast"}),
    )
    .await;
    let gone = wait_dlq(&run, "the Gone/1 dead letter", |d| d.len() == 1).await[0]["id"]
        .as_i64()
        .unwrap();
    b.wait(&format!("dlq:{gone}:attempts"), "^1$");
    b.screenshot("console-dlq.png");
    let asked = b.click(&format!("dlq:purge:{gone}"), true);
    assert!(asked.contains("for good"), "{asked}");
    b.wait("dlq:status", "^purged 1$");
    b.wait("dlq:count", "^0$");
    assert!(dead_letters(&run).await.is_empty());
    b.wait("outbox:dead_lettered", "^2$");
    b.screenshot("console-after-replay.png");
    let errors = b.page_errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:?}");
    eprintln!("screenshots in {}", shot.parent().unwrap().display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_the_console_needs_the_admin_token_like_the_admin_api() {
    let app = rust_app(&["echo"], ECHO_APP);
    let bin = sluice_binary("sluice-console");
    let run = SluiceRun::start(
        &bin,
        app.path(),
        &["--admin-listen", "0.0.0.0:0", "--admin-token", "s3cret"],
        &[],
    )
    .await;
    // Printed as 0.0.0.0:PORT; reach it over loopback.
    let admin = run.admin.replace("0.0.0.0", "127.0.0.1");
    let c = reqwest::Client::new();
    for path in [
        "/ui",
        "/ui/app.js",
        "/ui/api/frames",
        "/ui/api/stream",
        "/admin/status",
    ] {
        let url = format!("{admin}{path}");
        let r = c.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path} without a token");
        assert_eq!(
            r.headers()["www-authenticate"],
            r#"Basic realm="sluice admin", charset="UTF-8""#,
            "{path}"
        );
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["code"], "unauthenticated", "{path}");
        let r = c.get(&url).bearer_auth("wrong").send().await.unwrap();
        assert_eq!(r.status(), 401, "{path} with a wrong token");
        let r = c
            .get(&url)
            .basic_auth("anyone", Some("wrong"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path} with a wrong password");
        if path != "/ui/api/stream" {
            let r = c.get(&url).bearer_auth("s3cret").send().await.unwrap();
            assert_eq!(r.status(), 200, "{path} with the token");
        }
    }
    // A real browser: refused without credentials, the live page with the token as the
    // Basic password.
    let mut b = Browser::start();
    assert_eq!(b.open(&format!("{admin}/ui"), None), 401);
    assert_eq!(
        b.open(&format!("{admin}/ui"), Some(("operator", "s3cret"))),
        200
    );
    b.wait("conn", "^live$");
    b.wait("type:Echo:name", "^Echo v1$");
    b.wait("dlq:count", "^0$");
    b.screenshot("console-with-token.png");
    // A cross-origin POST (another site's page) is refused even with the credentials.
    let r = c
        .post(format!("{admin}/admin/dlq/purge"))
        .bearer_auth("s3cret")
        .header("origin", "http://evil.example")
        .body(r#"{"all": true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_loopback_without_a_token_only_loopback_host_names_are_answered() {
    let app = rust_app(&["echo"], ECHO_APP);
    let bin = sluice_binary("sluice-console");
    let run = SluiceRun::start(&bin, app.path(), &[], &[]).await;
    let c = reqwest::Client::new();
    let port = run.admin.rsplit(':').next().unwrap();
    for (host, want) in [
        (format!("127.0.0.1:{port}"), 200),
        (format!("localhost:{port}"), 200),
        (format!("[::1]:{port}"), 200),
        // A name rebound to 127.0.0.1 by its owner's DNS: a page there must not read /ui.
        (format!("rebound.example:{port}"), 403),
    ] {
        let r = c
            .get(format!("{}/ui/api/frames", run.admin))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want, "Host: {host}");
    }
    let r = c
        .post(format!("{}/admin/dlq/replay", run.admin))
        .header("origin", "http://evil.example")
        .body(r#"{"all": true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "cross-origin POST");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "permission-denied");
    // The console's own page posts with its own origin.
    let r = c
        .post(format!("{}/admin/dlq/replay", run.admin))
        .header("origin", run.admin.as_str())
        .body(r#"{"all": true}"#)
        .send()
        .await
        .unwrap();
    assert_ne!(r.status(), 403, "same-origin POST");
}

#[test]
fn the_committed_console_bundle_is_what_the_pinned_packages_build() {
    require(
        "esbuild (npm ci in host/cli/console)",
        &console_dir().join("node_modules/esbuild"),
    );
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("node")
        .arg("build.mjs")
        .arg(out.path())
        .current_dir(console_dir())
        .status()
        .expect("running node build.mjs");
    assert!(status.success(), "build.mjs failed");
    for f in ["index.html", "app.js", "app.css"] {
        let built = std::fs::read(out.path().join(f)).unwrap();
        let committed = std::fs::read(console_dir().join("dist").join(f)).unwrap();
        assert!(
            built == committed,
            "host/cli/console/dist/{f} is stale: run `npm ci && npm run build` in host/cli/console and commit dist/"
        );
    }
}

/// Every metric family `sluice run` serves: the runtime's, the outbox's, the bus's and the
/// CLI's. The promtool test exercises a host until each one is present, and the Grafana test
/// checks the dashboard charts each one and nothing else.
const FAMILIES: &[&str] = &[
    // runtime (host/runtime/src/metrics_help.rs)
    "sluice_turns_total",
    "sluice_turn_seconds",
    "sluice_queue_seconds",
    "sluice_turns_skipped_total",
    "sluice_turn_batches_total",
    "sluice_batched_turns_total",
    "sluice_deadline_exceeded_total",
    "sluice_mailbox_refused_total",
    "sluice_mailbox_dropped_total",
    "sluice_actor_traps_total",
    "sluice_actor_restarts_total",
    "sluice_actor_stopped_total",
    "sluice_actor_activations_total",
    "sluice_actor_deactivations_total",
    "sluice_actor_evictions_total",
    "sluice_admission_refusals_total",
    "sluice_tell_reliable_total",
    "sluice_bus_deliveries_total",
    "sluice_bus_delivery_retries_total",
    "sluice_bus_publish_refused_total",
    // CLI (host/cli/src/metrics_export.rs)
    "sluice_mailbox_depth",
    "sluice_mailbox_oldest_age_seconds",
    "sluice_outbox_limiter_min_limit",
    "sluice_outbox_limiter_max_limit",
    // outbox (host/outbox/src/metrics_help.rs)
    "sluice_outbox_queue_depth",
    "sluice_outbox_oldest_pending_age_seconds",
    "sluice_outbox_relay_delivered_total",
    "sluice_outbox_relay_retries_total",
    "sluice_outbox_relay_backpressure_total",
    "sluice_outbox_relay_errors_total",
    "sluice_outbox_relay_retry_budget_exhausted_total",
    "sluice_outbox_relay_dead_lettered_total",
    "sluice_outbox_relay_delivery_seconds",
    "sluice_outbox_relay_batch_size",
    "sluice_outbox_partition_relayed",
    "sluice_outbox_limiter_current_limit",
    "sluice_outbox_limiter_in_flight",
    "sluice_outbox_limiter_acquire_rejected_total",
    "sluice_outbox_limiter_success_total",
    "sluice_outbox_limiter_rejection_total",
    "sluice_outbox_dispatch_targets_total",
    "sluice_outbox_reminders_armed_total",
    "sluice_outbox_reminders_cancelled_total",
    "sluice_outbox_reminders_promoted_total",
    "sluice_outbox_reminder_lag_seconds",
    // bus (host/bus/src/metrics.rs)
    "sluice_bus_events_published_total",
    "sluice_bus_receiver_lagged_total",
    "sluice_bus_active_principals",
    "sluice_bus_budget_in_use_bytes",
    "sluice_bus_byte_evictions_total",
    "sluice_bus_quantum_starved_total",
    "sluice_bus_route_refused_total",
    "sluice_ipc_rate_limited_total",
    "sluice_bus_dispatcher_queues",
    "sluice_bus_dispatch_dropped_total",
    "sluice_bus_dispatcher_overflow_total",
];

fn promtool() -> &'static str {
    require(
        "promtool (Debian's prometheus package)",
        Path::new(sluice_tests::PROMTOOL),
    );
    sluice_tests::PROMTOOL
}

const BUSY_APP: &str = r#"
[[supervisor.children]]
name = "echo"
actor_type = "Echo"
module = "echo.wasm"

[[supervisor.children]]
name = "slow"
actor_type = "Slow"
module = "slow.wasm"
mailbox_capacity = 1
mailbox_strategy = "error"

[[supervisor.children]]
name = "crash"
actor_type = "Crash"
module = "crash.wasm"
max_restarts = 1
restart_window_ms = 60000

[[supervisor.children]]
name = "audit"
actor_type = "Audit"
module = "echo.wasm"
keys = ["main"]

[[supervisor.children]]
name = "watch"
actor_type = "Watch"
module = "echo.wasm"
keys = ["main"]

[[supervisor.children]]
name = "session"
actor_type = "Session"
module = "slow.wasm"

[bus]
dispatch_queue_capacity = 1
dispatch_max_queues_per_actor_type = 1
route_budget_bytes = 4096

[bus.rate_limit]
default_quota_bytes_per_sec = 1048576
quotas = { "user:tiny" = 64 }

[[bus.subscriptions]]
actor_type = "Audit"
key = "main"
topic = "orders.*"
mode = "routed"

[[bus.subscriptions]]
actor_type = "Watch"
key = "main"
topic = "orders.*"
mode = "broadcast"

[[bus.subscriptions]]
actor_type = "Session"
topic = "chat.*"
mode = "dispatch"

[outbox]
partitions = 2

[outbox.retry_policy]
max_attempts = 2
base_ms = 10
cap_ms = 50
"#;

/// Asks `actor` as `principal` (believed on a loopback ingress without tokens).
async fn ask_as(
    run: &SluiceRun,
    principal: &str,
    actor: &str,
    msg_type: &str,
    body: Value,
) -> Value {
    let r = reqwest::Client::new()
        .post(format!("{}/actors/{actor}/ask/{msg_type}", run.ingress))
        .header("x-sluice-principal", principal)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    assert!(
        status == 200,
        "{actor} {msg_type} as {principal}: {status} {v}"
    );
    v
}

async fn families_served(run: &SluiceRun) -> (String, Vec<String>) {
    let text = reqwest::get(format!("{}/metrics", run.ingress))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let families = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect();
    (text, families)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_hosts_metrics_pass_promtool_check_metrics_with_every_family_present() {
    promtool();
    let app = rust_app(&["echo", "slow", "crash"], BUSY_APP);
    let bin = sluice_binary("sluice-console");
    let run = SluiceRun::start(&bin, app.path(), &[], &[]).await;

    // Turns, refusals of a full mailbox, tell-reliable through the outbox, dispatch with
    // backpressure, and a dead letter.
    for _ in 0..3 {
        post(&format!("{}/actors/Slow/a/tell/x", run.ingress), json!(300)).await;
    }
    ask(
        &run,
        "Echo/1",
        "tell_reliable",
        json!({"to": "Slow/a", "msg_type": "x", "payload": "10"}),
    )
    .await;
    ask(&run, "Echo/1", "dispatch", json!({"targets": ["Slow/b", "Slow/c", "Nobody/1"], "msg_type": "x", "payload": "50", "mode": "cast"})).await;
    // A reminder due at once (armed, promoted, its lag measured) and one cancelled.
    for (name, delay) in [("", 0), ("later", 60_000)] {
        let req = json!({"name": name, "delay_ms": delay, "msg_type": "x", "payload": "r"});
        ask(&run, "Echo/1", "remind", req).await;
    }
    ask(&run, "Echo/1", "cancel_reminder", json!({"name": "later"})).await;
    // Traps until the supervisor stops the actor (max_restarts = 1).
    for _ in 0..3 {
        post(
            &format!("{}/actors/Crash/1/ask/boom", run.ingress),
            json!(""),
        )
        .await;
    }
    // The bus: routed and broadcast events, a refused topic, an event larger than the route
    // budget, dispatch to one principal's queue (capacity 1: drops) and a second principal
    // (over the one-queue cap: overflow), and an IPC rate-limit refusal.
    ask_as(
        &run,
        "user:a",
        "Echo/1",
        "publish",
        json!({"topic": "orders.new", "payload": "o-1"}),
    )
    .await;
    let bad = ask_as(
        &run,
        "user:a",
        "Echo/1",
        "publish",
        json!({"topic": "orders..bad", "payload": "x"}),
    )
    .await;
    assert_eq!(bad["ok"], false, "{bad}");
    ask_as(
        &run,
        "user:a",
        "Echo/1",
        "publish",
        json!({"topic": "orders.big", "payload": "x".repeat(5000)}),
    )
    .await;
    for _ in 0..4 {
        ask_as(
            &run,
            "user:a",
            "Echo/1",
            "publish",
            json!({"topic": "chat.msg", "payload": "200"}),
        )
        .await;
    }
    ask_as(
        &run,
        "user:b",
        "Echo/1",
        "publish",
        json!({"topic": "chat.msg", "payload": "1"}),
    )
    .await;
    let limited = ask_as(
        &run,
        "user:tiny",
        "Echo/1",
        "tell",
        json!({"to": "Echo/2", "msg_type": "x", "payload": "y".repeat(100)}),
    )
    .await;
    assert_eq!(limited["ok"], false, "{limited}");

    let (text, served) = wait_for(T, "every metric family to be served", || async {
        let (text, served) = families_served(&run).await;
        let missing: Vec<_> = FAMILIES
            .iter()
            .filter(|f| !served.iter().any(|s| s == *f))
            .collect();
        if missing.is_empty() {
            Ok((text, served))
        } else {
            Err(format!("missing {missing:?}"))
        }
    })
    .await;
    let unknown: Vec<_> = served
        .iter()
        .filter(|s| !FAMILIES.contains(&s.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "families this test does not know: {unknown:?}"
    );
    let help = text
        .lines()
        .filter(|l| l.starts_with("# HELP sluice_"))
        .count();
    assert_eq!(help, FAMILIES.len(), "one HELP line per family");

    // Durations are histograms, and their counts are the turns: Echo/1 ran at least the 13
    // asks above, each one turn.
    for family in [
        "sluice_turn_seconds",
        "sluice_queue_seconds",
        "sluice_outbox_relay_delivery_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} histogram\n")),
            "{family} is not a histogram:\n{text}"
        );
    }
    let echo_turns: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("sluice_turn_seconds_count{actor_type=\"Echo\"} "))
        .expect("Echo's turn count")
        .parse()
        .unwrap();
    let under_inf: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("sluice_turn_seconds_bucket{actor_type=\"Echo\",le=\"+Inf\"} ")
        })
        .expect("Echo's +Inf bucket")
        .parse()
        .unwrap();
    assert!(echo_turns >= 13.0, "{echo_turns} Echo turns");
    assert_eq!(under_inf, echo_turns, "+Inf bucket and count agree");

    let verdict = sluice_tests::promtool_check_metrics(&text);
    eprintln!(
        "promtool check metrics ({} families): {verdict:?}",
        FAMILIES.len()
    );
    assert_eq!(verdict, Ok(()), "promtool check metrics");
}

#[test]
fn the_alert_rules_pass_promtool_check_rules_and_their_unit_tests() {
    let promtool = promtool();
    let dir = root().join("ops/prometheus");
    for args in [
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts_test.yml"],
    ] {
        let out = Command::new(promtool)
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("running promtool");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("promtool {}:\n{said}", args.join(" "));
        assert!(out.status.success(), "promtool {}: {said}", args.join(" "));
        assert!(said.contains("SUCCESS"), "{said}");
    }
}

#[test]
fn the_grafana_dashboard_charts_every_metric_family_and_no_other() {
    let text = std::fs::read_to_string(root().join("ops/grafana/sluice.json")).unwrap();
    let dash: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut used = std::collections::BTreeSet::new();
    let panels = dash["panels"].as_array().expect("panels");
    for p in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{}", p["title"]);
        for t in targets {
            let expr = t["expr"].as_str().expect("an expr");
            let mut rest = expr;
            while let Some(i) = rest.find("sluice_") {
                let series: String = rest[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                rest = &rest[i + series.len()..];
                // A histogram's series are its family's name plus a suffix.
                let name = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| {
                        series
                            .strip_suffix(s)
                            .filter(|f| FAMILIES.contains(f))
                            .map(str::to_string)
                    })
                    .unwrap_or(series);
                assert!(
                    FAMILIES.contains(&name.as_str()),
                    "{} uses unknown {name}",
                    p["title"]
                );
                used.insert(name);
            }
        }
    }
    let unused: Vec<_> = FAMILIES.iter().filter(|f| !used.contains(**f)).collect();
    assert!(
        unused.is_empty(),
        "families the dashboard does not chart: {unused:?}"
    );
}

/// The reminders panel: what actors armed is listed live (soonest due first, with its name,
/// type, size and time to go), a filter narrows it to one actor, and a named reminder is
/// cancelled from the page after a confirmation (declining it cancels nothing); the admin API
/// agrees, and the cancelled reminder never arrives while the others do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_pending_reminders_and_cancels_one_from_the_page() {
    let app = rust_app(&["echo"], ECHO_APP);
    let bin = sluice_binary("sluice-console");
    let run = SluiceRun::start(&bin, app.path(), &[], &[]).await;
    let arm = |name: &str, delay_ms: u64| json!({"name": name, "delay_ms": delay_ms, "msg_type": "record", "payload": name});
    for (actor, name, delay) in [
        ("Echo/a", "nightly", 3_600_000),
        ("Echo/a", "", 10_000),
        ("Echo/b", "retry", 600_000),
    ] {
        let r = ask(&run, actor, "remind", arm(name, delay)).await;
        assert_eq!(r["ok"], true, "{r}");
    }
    let listed = |v: &Value| -> Vec<(i64, String)> {
        v["reminders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_i64().unwrap(),
                    r["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let pending = admin_json(&run, "/admin/reminders").await;
    let rows = listed(&pending);
    let names: Vec<&str> = rows.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["", "retry", "nightly"], "{pending}");
    let (anon, retry, nightly) = (rows[0].0, rows[1].0, rows[2].0);

    let mut b = Browser::start();
    assert_eq!(b.open(&format!("{}/ui", run.admin), None), 200);
    b.wait("rem:count", "^3$");
    b.wait(&format!("rem:{anon}:name"), "^\\(anonymous\\)$");
    b.wait(&format!("rem:{nightly}:due"), "^(59m|1h 0m)");
    b.wait(&format!("rem:{retry}:due"), "^(9m|10m 0s)");
    b.cmd(json!({"cmd": "fill", "sel": sel("rem:filter"), "value": "Echo/b"}));
    b.wait("rem:count", "^1$");
    b.cmd(json!({"cmd": "fill", "sel": sel("rem:filter"), "value": ""}));
    // The anonymous one arrives when due, and leaves the list.
    b.wait("rem:count", "^2$");
    let recorded = ask(&run, "Echo/a", "recorded", json!("")).await;
    assert_eq!(recorded["items"], json!([""]), "{recorded}");

    let asked = b.click(&format!("rem:cancel:{retry}"), false);
    assert!(asked.contains("\"retry\" of Echo/b"), "{asked}");
    b.wait("rem:count", "^2$");
    let asked = b.click(&format!("rem:cancel:{retry}"), true);
    assert!(asked.contains("retry"), "{asked}");
    b.wait("rem:status", "^cancelled retry$");
    b.wait("rem:count", "^1$");
    b.screenshot("console-reminders.png");
    let pending = admin_json(&run, "/admin/reminders").await;
    assert_eq!(listed(&pending), [(nightly, "nightly".to_string())]);
    assert!(b.page_errors().is_empty(), "{:?}", b.page_errors());
}
