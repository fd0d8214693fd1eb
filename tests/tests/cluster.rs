//! Many hosts as one: real `sluice run --cluster` processes on loopback, a real nats-server
//! (the pinned build from scripts/nats.sh, started per test) and a real Postgres outbox.
//! Every call goes through a host's HTTP ingress, like a user's.
//!
//! Needs `SLUICE_NATS_SERVER` (or nats-server on PATH) and `SLUICE_TEST_POSTGRES_URL`; the
//! test command installs and starts both, so in CI a missing one fails.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_cluster::testing::NatsServer;
use sluice_tests::{SluiceRun, fresh_postgres_database, rust_app, sluice_binary, wait_for};

/// Heartbeat and member TTL of the test clusters: a dead host is gone after 1.5 s.
const CLUSTER: &str = r#"
[cluster]
heartbeat_ms = 300
member_ttl_ms = 1500
"#;

fn app_config() -> String {
    app_config_with(4000)
}

/// The compile cache every test host shares (`sluice run` would use its app folder's, and
/// each test's app folder is new: three hosts compiling the same modules cold took ~50 s).
fn cache_line() -> String {
    let dir = sluice_tests::root().join("target/sluice-test-cache");
    format!("cache_dir = {:?}", dir.display().to_string())
}

fn app_config_with(max_activations: usize) -> String {
    let cache = cache_line();
    format!(
        r#"
name = "cluster-test"

[host]
# Counters keep their state for the whole test: no idle deactivation.
idle_deactivate_ms = 0
max_activations = {max_activations}
{cache}
{CLUSTER}
[[supervisor.children]]
name = "echo"
actor_type = "Echo"
module = "echo.wasm"

[[supervisor.children]]
name = "slow"
actor_type = "Slow"
module = "slow.wasm"
mailbox_capacity = 2
"#
    )
}

const NODES: [&str; 3] = ["h1", "h2", "h3"];

struct Cluster {
    nats: NatsServer,
    db: String,
    hosts: Vec<SluiceRun>,
    _apps: Vec<tempfile::TempDir>,
}

async fn start_host(nats: &NatsServer, db: &str, node: &str) -> (SluiceRun, tempfile::TempDir) {
    start_host_with(nats, db, node, &app_config()).await
}

async fn start_host_with(
    nats: &NatsServer,
    db: &str,
    node: &str,
    config: &str,
) -> (SluiceRun, tempfile::TempDir) {
    start_member(nats, db, node, config, &[], &[]).await
}

/// `sluice run` of an app folder holding the Rust `echo` and `slow` guests and `config`, as
/// member `node`, with `extra` flags and `env` besides the cluster's.
async fn start_member(
    nats: &NatsServer,
    db: &str,
    node: &str,
    config: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (SluiceRun, tempfile::TempDir) {
    start_member_at(&nats.url(), db, node, config, extra, env).await
}

/// As [`start_member`], joining through the NATS URL `url` (a proxy the test can cut).
async fn start_member_at(
    url: &str,
    db: &str,
    node: &str,
    config: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (SluiceRun, tempfile::TempDir) {
    let app = rust_app(&["echo", "slow"], config);
    let mut args = vec!["--cluster", url, "--node-id", node, "--database-url", db];
    args.extend_from_slice(extra);
    let run = SluiceRun::start(
        &sluice_binary("sluice-cluster-test"),
        app.path(),
        &args,
        env,
    )
    .await;
    (run, app)
}

/// Three members that each see all three with both types deployed. `None`: no Postgres
/// outside CI (skipped loudly).
async fn three_hosts(db_name: &str) -> Option<Cluster> {
    three_hosts_with(db_name, |_| app_config()).await
}

async fn three_hosts_with(db_name: &str, config: impl Fn(&str) -> String) -> Option<Cluster> {
    let db = fresh_postgres_database(db_name).await?;
    let nats = NatsServer::start()
        .await
        .expect("the test nats-server (scripts/nats.sh install)");
    let mut hosts = Vec::new();
    let mut apps = Vec::new();
    for node in NODES {
        let (h, a) = start_host_with(&nats, &db, node, &config(node)).await;
        hosts.push(h);
        apps.push(a);
    }
    for h in &hosts {
        wait_members(h, &NODES).await;
    }
    Some(Cluster {
        nats,
        db,
        hosts,
        _apps: apps,
    })
}

async fn status(h: &SluiceRun) -> Value {
    reqwest::get(format!("{}/admin/status", h.admin))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits until `h` sees exactly `nodes` as live members, each with Echo and Slow deployed.
async fn wait_members(h: &SluiceRun, nodes: &[&str]) {
    let what = format!("{} to see members {nodes:?}", h.admin);
    wait_for(Duration::from_secs(30), &what, || async move {
        let s = status(h).await;
        let members = &s["cluster"]["members"];
        let ok = members.as_object().is_some_and(|m| {
            m.len() == nodes.len()
                && nodes.iter().all(|n| {
                    m.get(*n).is_some_and(|t| {
                        t.as_array()
                            .is_some_and(|t| t.len() == 2 && t.contains(&"Echo".into()))
                    })
                })
        });
        if ok { Ok(()) } else { Err(s) }
    })
    .await;
}

/// The first key of `ty` that placement puts on `node` (of the three).
fn key_on(ty: &str, node: &str) -> String {
    (0..)
        .map(|k| format!("{ty}/{k}"))
        .find(|id| owner(id, &NODES) == node)
        .unwrap()
}

/// A field of `ty`'s row in a status's `actor_types`.
fn type_field(status: &Value, ty: &str, field: &str) -> u64 {
    status["actor_types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["actor_type"] == ty)
        .unwrap()[field]
        .as_u64()
        .unwrap()
}

/// The member placement puts `id` on, of `nodes`.
fn owner(id: &str, nodes: &[&str]) -> String {
    sluice_cluster::placement::place(id, nodes.iter().copied())
        .unwrap()
        .to_string()
}

async fn post(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    body: &str,
    deadline_ms: Option<u64>,
) -> (u16, Value) {
    let mut r = client
        .post(format!("{base}/actors/{path}"))
        .body(body.to_string());
    if let Some(ms) = deadline_ms {
        r = r.header("x-sluice-deadline-ms", ms.to_string());
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let bytes = r.bytes().await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into())),
    )
}

/// Outbox load through the ingress: sender `Echo/snd-{s}` (`s < senders`) dispatches
/// `s{s}-{i:04}` (`i < sends`, in order) to every receiver, through the ingresses in `via` in
/// turn (a test adds or drops one as hosts join or die). A dispatch whose request fails (its
/// host died, or lost NATS: the outcome is unknown) is sent again and counted in `resent`.
struct Dispatches {
    via: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    sent: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    resent: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    senders: usize,
    sends: usize,
    receivers: Vec<String>,
}

impl Dispatches {
    fn start(via: Vec<String>, senders: usize, sends: usize, receivers: Vec<String>) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        let client = reqwest::Client::new();
        let mut d = Self {
            via: std::sync::Arc::new(std::sync::Mutex::new(via)),
            sent: Default::default(),
            resent: Default::default(),
            tasks: Vec::new(),
            senders,
            sends,
            receivers,
        };
        for s in 0..senders {
            let (client, via, sent, resent) = (
                client.clone(),
                d.via.clone(),
                d.sent.clone(),
                d.resent.clone(),
            );
            let receivers = d.receivers.clone();
            d.tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                for i in 0..sends {
                    let body = serde_json::json!({
                        "targets": receivers, "msg_type": "record", "payload": format!("s{s}-{i:04}"),
                    })
                    .to_string();
                    let mut attempt = 0;
                    loop {
                        let host = {
                            let via = via.lock().unwrap();
                            via[(s + i + attempt) % via.len()].clone()
                        };
                        let path = format!("{host}/actors/Echo/snd-{s}/ask/dispatch");
                        match client.post(path).body(body.clone()).send().await {
                            Ok(r) if r.status() == 200 => {
                                let reply: Value = r.json().await.unwrap();
                                assert_eq!(reply["ok"], true, "snd-{s} via {host}: {reply}");
                                break;
                            }
                            // A 503 (the sender's host is gone, or cut off) or a dead
                            // connection: the dispatch may or may not have happened.
                            _ => {
                                resent.fetch_add(1, Relaxed);
                                attempt += 1;
                                assert!(
                                    started.elapsed() < Duration::from_secs(240),
                                    "snd-{s} stuck at {i}"
                                );
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        }
                    }
                    sent.fetch_add(1, Relaxed);
                }
            }));
        }
        d
    }

    fn sent(&self) -> usize {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn resent(&self) -> usize {
        self.resent.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn total(&self) -> usize {
        self.senders * self.sends
    }

    /// Waits (at most 120 s) until `n` dispatches were acknowledged.
    async fn wait_sent(&self, n: usize) {
        let what = format!("{n} dispatches to be acknowledged");
        wait_for(Duration::from_secs(120), &what, || {
            let sent = self.sent();
            std::future::ready(if sent >= n {
                Ok(())
            } else {
                Err(format!("stalled at {sent} of {n}"))
            })
        })
        .await;
    }

    fn add_via(&self, ingress: &str) {
        self.via.lock().unwrap().push(ingress.to_string());
    }

    fn drop_via(&self, ingress: &str) {
        self.via.lock().unwrap().retain(|v| v != ingress);
    }

    /// Waits for every sender to finish.
    async fn finish(&mut self) {
        for t in self.tasks.drain(..) {
            t.await.unwrap();
        }
    }

    /// Waits (at most `bound`) until every receiver, asked through `ingress`, recorded every
    /// message, and checks that each sender's messages first arrived in the order sent
    /// (per-receiver FIFO). Returns the duplicates over all receivers, or the first receiver
    /// and sender whose messages arrived out of order.
    async fn wait_delivered(&self, ingress: &str, bound: Duration) -> Result<usize, Misorder> {
        let client = reqwest::Client::new();
        let mut dups = 0;
        for r in &self.receivers {
            let total = self.total();
            let items: Vec<String> =
                wait_for(bound, &format!("{r} to have every message"), || async {
                    let (status, reply) =
                        post(&client, ingress, &format!("{r}/ask/recorded"), "", None).await;
                    let items: Vec<String> =
                        serde_json::from_value(reply["items"].clone()).unwrap_or_default();
                    let distinct: std::collections::BTreeSet<&String> = items.iter().collect();
                    if status == 200 && distinct.len() == total {
                        Ok(items)
                    } else {
                        Err((status, distinct.len()))
                    }
                })
                .await;
            for s in 0..self.senders {
                let mut seen = std::collections::HashSet::new();
                let first: Vec<&String> = items
                    .iter()
                    .filter(|m| m.starts_with(&format!("s{s}-")) && seen.insert(*m))
                    .collect();
                let want: Vec<String> = (0..self.sends).map(|i| format!("s{s}-{i:04}")).collect();
                if let Some(at) = (0..want.len()).find(|i| first.get(*i) != Some(&&want[*i])) {
                    return Err(Misorder {
                        receiver: r.clone(),
                        expected: want[at].clone(),
                        arrived: first.get(at).map(|m| m.to_string()).unwrap_or_default(),
                        around: first[at.saturating_sub(3)..(at + 4).min(first.len())]
                            .iter()
                            .map(|m| m.to_string())
                            .collect(),
                    });
                }
            }
            dups += items.len() - total;
        }
        Ok(dups)
    }
}

impl Dispatches {
    /// [`Dispatches::wait_delivered`] (60 s), which must find every sender's messages in
    /// order: a misorder prints the outbox rows around it (from `db`) and what the hosts
    /// logged about them (with `sluice::outbox=debug`), and fails the test.
    async fn delivered_in_order(&self, ingress: &str, db: &str, hosts: &[&SluiceRun]) -> usize {
        match self.wait_delivered(ingress, Duration::from_secs(60)).await {
            Ok(dups) => dups,
            Err(m) => {
                let ids = dump_outbox_rows(db, &m).await;
                dump_outbox_lines(hosts, &ids);
                panic!("per-receiver FIFO broken: {m}");
            }
        }
    }
}

/// A sender's messages first arrived at a receiver out of the order sent.
struct Misorder {
    receiver: String,
    /// The message that should have come next.
    expected: String,
    /// The one that came instead.
    arrived: String,
    /// The first arrivals around it.
    around: Vec<String>,
}

impl std::fmt::Display for Misorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} arrived where {} should have (first arrivals around it: {:?})",
            self.receiver, self.arrived, self.expected, self.around
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_hosts_run_each_key_once_and_every_counter_counts_without_gap() {
    let Some(c) = three_hosts("sluice_cluster_counters").await else {
        return;
    };
    const KEYS: usize = 300;
    const ASKS: usize = 6000;
    let client = reqwest::Client::new();
    let ingress: Vec<String> = c.hosts.iter().map(|h| h.ingress.clone()).collect();
    // 48 workers, each asking random keys through random hosts' ingress.
    let mut tasks = Vec::new();
    for w in 0..48u64 {
        let client = client.clone();
        let ingress = ingress.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen: Vec<(usize, u64)> = Vec::new();
            let mut x = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for _ in 0..ASKS / 48 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = (x % KEYS as u64) as usize;
                let host = &ingress[((x >> 32) % 3) as usize];
                let (status, body) =
                    post(&client, host, &format!("Echo/{key}/ask/record"), "x", None).await;
                assert_eq!(status, 200, "Echo/{key} via {host}: {body}");
                seen.push((key, body["count"].as_u64().expect("a count")));
            }
            seen
        }));
    }
    let mut per_key: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for t in tasks {
        for (k, n) in t.await.unwrap() {
            per_key.entry(k).or_default().push(n);
        }
    }
    let mut total = 0;
    for (k, mut counts) in per_key {
        counts.sort_unstable();
        let want: Vec<u64> = (1..=counts.len() as u64).collect();
        assert_eq!(
            counts, want,
            "Echo/{k}: replies must be 1..n with no gap and no repeat"
        );
        total += counts.len();
    }
    assert_eq!(total, ASKS);
    // Placement spread the keys: every host holds claims, and together exactly the keys.
    let mut claims = 0;
    for h in &c.hosts {
        let s = status(h).await;
        let n = s["cluster"]["claims"].as_u64().unwrap();
        assert!(n > 0, "{} holds no actor: {s}", h.admin);
        assert_eq!(s["cluster"]["connected"], true);
        assert_eq!(s["cluster"]["lease_valid"], true);
        claims += n;
    }
    assert_eq!(claims as usize, KEYS);
    // `sluice status` on any member says where the live actors are: per member, per type,
    // as of each member's last heartbeat.
    let what = format!("the live Echo counts per member to add up to {KEYS}");
    let per_host = wait_for(Duration::from_secs(10), &what, || async {
        let s = status(&c.hosts[2]).await;
        let actors = s["cluster"]["actors"].as_object().unwrap().clone();
        let per_host: Vec<u64> = NODES
            .iter()
            .map(|n| actors[*n]["Echo"].as_u64().unwrap())
            .collect();
        if per_host.iter().sum::<u64>() == KEYS as u64 {
            Ok(per_host)
        } else {
            Err(s)
        }
    })
    .await;
    assert!(per_host.iter().all(|n| *n > 0), "{per_host:?}");
    drop(c.nats);
    let _ = c.db;
}

/// Starts a 1.5 s turn of `Slow/{key}` through `via`.
fn occupy(
    client: &reqwest::Client,
    via: &str,
    key: usize,
) -> tokio::task::JoinHandle<(u16, Value)> {
    let client = client.clone();
    let via = via.to_string();
    tokio::spawn(async move {
        post(
            &client,
            &via,
            &format!("Slow/{key}/ask/sleep"),
            "1500",
            None,
        )
        .await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_mailbox_and_a_deadline_on_another_host_come_back_typed_as_local_ones() {
    let Some(c) = three_hosts("sluice_cluster_errors").await else {
        return;
    };
    let client = reqwest::Client::new();
    // Slow keys owned by h2, called through h1's ingress.
    let mut on_h2 = (0..).filter(|k| owner(&format!("Slow/{k}"), &NODES) == "h2");
    let (full, late) = (on_h2.next().unwrap(), on_h2.next().unwrap());
    let (via, h2) = (&c.hosts[0].ingress, &c.hosts[1]);

    // While its turn runs, the capacity-2 mailbox takes two tells and refuses the third with
    // exactly the local message and its retry hint.
    // While its long turn runs, the capacity-2 mailbox refuses a third message with exactly
    // the local message and its retry hint. (Tells sent before the long turn starts run at
    // once: the loop ends only once it holds the actor.)
    let busy = occupy(&client, via, full);
    let what = format!("a tell to Slow/{full} to be refused by its full mailbox");
    let body = wait_for(Duration::from_secs(10), &what, || async {
        let (s, b) = post(&client, via, &format!("Slow/{full}/tell/sleep"), "1", None).await;
        match s {
            202 => {
                assert_eq!(b["receipt"], "queued", "{b}");
                Err(b)
            }
            429 => Ok(b),
            other => panic!("{other}: {b}"),
        }
    })
    .await;
    assert_eq!(body["code"], "resource-exhausted");
    let retry = body["retry_after_ms"].as_u64().expect("retry_after_ms");
    assert_eq!(
        body["message"],
        format!("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms={retry})"),
        "the same message a local full mailbox gives"
    );
    assert_eq!(busy.await.unwrap().0, 200);

    // An ask that cannot start within its 100 ms: skipped, decided on the owner, 504. (One
    // sent before the long turn started runs at once and is answered 200: send again.)
    let busy = occupy(&client, via, late);
    let what = format!("an ask to Slow/{late} to be skipped by its owner past its deadline");
    let body = wait_for(Duration::from_secs(10), &what, || async {
        let (s, b) = post(
            &client,
            via,
            &format!("Slow/{late}/ask/sleep"),
            "1",
            Some(100),
        )
        .await;
        match s {
            200 => Err((s, b)),
            // The caller's own verdict, when the owner's came later than the grace (a loaded
            // machine): it cannot know whether the turn ran. The owner's is what this checks.
            504 if b["message"]
                == "DEADLINE_EXCEEDED: call-timeout (the turn may still be running)" =>
            {
                Err((s, b))
            }
            504 => Ok(b),
            other => panic!("{other}: {b}"),
        }
    })
    .await;
    assert_eq!(body["code"], "deadline-exceeded");
    assert_eq!(body["skipped"], true, "{body}");
    assert_eq!(busy.await.unwrap().0, 200);

    // h2 ran them; h1 never activated a Slow.
    let s1 = status(&c.hosts[0]).await;
    assert_eq!(
        type_field(&s1, "Slow", "active"),
        0,
        "no Slow may run on h1: {s1}"
    );
    assert_eq!(type_field(&status(h2).await, "Slow", "active"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_host_hands_its_actors_off_and_a_killed_one_is_replaced_after_its_ttl() {
    let Some(mut c) = three_hosts("sluice_cluster_handoff").await else {
        return;
    };
    let client = reqwest::Client::new();
    let (k3, k2) = (key_on("Echo", "h3"), key_on("Echo", "h2"));
    let via = c.hosts[0].ingress.clone();
    for k in [&k3, &k2] {
        let (s, b) = post(&client, &via, &format!("{k}/ask/record"), "x", None).await;
        assert_eq!((s, b["count"].as_u64()), (200, Some(1)), "{k}");
    }
    // SIGTERM: h3 ends its actors, releases their claims and leaves at once; the next
    // message activates the key elsewhere, well before a member TTL.
    c.hosts[2].terminate();
    let exit = c.hosts[2].wait_exit(Duration::from_secs(20)).await;
    assert!(exit.is_some_and(|s| s.success()), "h3 exit: {exit:?}");
    assert!(
        c.hosts[2].stdout_has("sluice: cluster: left"),
        "{:?}",
        c.hosts[2].stdout_lines()
    );
    let left = Instant::now();
    // Gone from h1's view at once (its entry was deleted, not left to expire).
    wait_members(&c.hosts[0], &["h1", "h2"]).await;
    let (s, b) = post(&client, &via, &format!("{k3}/ask/record"), "x", None).await;
    assert_eq!(s, 200, "{k3} after h3 left: {b}");
    assert_eq!(b["count"], 1, "a fresh activation on a remaining member");
    assert!(
        left.elapsed() < Duration::from_millis(1500),
        "served again before a member TTL would have passed: {:?}",
        left.elapsed()
    );

    // SIGKILL: h2's keys fail typed (UNAVAILABLE) until its TTL passes, then run elsewhere.
    c.hosts[1].kill();
    let killed = Instant::now();
    loop {
        let (s, b) = post(&client, &via, &format!("{k2}/ask/record"), "x", None).await;
        if s == 200 {
            assert_eq!(b["count"], 1);
            break;
        }
        assert_eq!(s, 503, "{b}");
        assert_eq!(b["code"], "unavailable", "{b}");
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "{k2} not served again within TTL 1.5 s + 8.5 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failover = killed.elapsed();
    assert!(failover < Duration::from_secs(10), "{failover:?}");
}

/// A timer outlives its actor's activation: `Echo/k` arms a timer on h1, deactivates when
/// idle (h1's idle timeout is 300 ms), and meanwhile h2 has joined and placement now puts
/// `k` there. The timer fires on h1
/// and goes through the cluster's route like any tell, so it activates `k` on h2 instead of
/// being refused on h1 ("not claimed by this host") and lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_reaches_its_actor_after_it_deactivated_and_moved_to_another_host() {
    let Some(db) = fresh_postgres_database("sluice_cluster_timer").await else {
        return;
    };
    let nats = NatsServer::start()
        .await
        .expect("the test nats-server (scripts/nats.sh install)");
    let config = app_config().replace("idle_deactivate_ms = 0", "idle_deactivate_ms = 300");
    assert_ne!(config, app_config(), "the idle timeout is set");
    let (h1, _a1) = start_host_with(&nats, &db, "h1", &config).await;
    wait_members(&h1, &["h1"]).await;
    // A key that h1 runs while alone, and that placement gives h2 once it has joined.
    let k = (0..)
        .map(|k| format!("Echo/t{k}"))
        .find(|id| owner(id, &["h1", "h2"]) == "h2")
        .unwrap();
    let client = reqwest::Client::new();
    let delay_ms = 6000;
    let req = serde_json::json!({"delay_ms": delay_ms, "msg_type": "record", "payload": "tick"});
    let armed = Instant::now();
    let (s, b) = post(
        &client,
        &h1.ingress,
        &format!("{k}/ask/schedule"),
        &req.to_string(),
        None,
    )
    .await;
    assert_eq!((s, &b), (200, &serde_json::json!({"ok": true})));
    assert_eq!(type_field(&status(&h1).await, "Echo", "active"), 1);

    // h2 keeps its actors (no idle timeout), so k's state is still there to be read.
    let (h2, _a2) = start_host(&nats, &db, "h2").await;
    wait_members(&h1, &["h1", "h2"]).await;
    wait_members(&h2, &["h1", "h2"]).await;
    // k goes idle on h1 and ends there (its claim released).
    let what = format!("{k} to deactivate on h1");
    wait_for(Duration::from_secs(10), &what, || async {
        match type_field(&status(&h1).await, "Echo", "active") {
            0 => Ok(()),
            n => Err(format!("{n} Echo active on h1")),
        }
    })
    .await;
    assert!(
        armed.elapsed() < Duration::from_millis(delay_ms - 1000),
        "the setup outlasted the timer's delay ({:?}): the test proves nothing",
        armed.elapsed()
    );

    // The timer fires on h1 and activates k on h2, which records it.
    let what = format!("the timer to activate {k} on h2");
    wait_for(Duration::from_secs(20), &what, || async {
        match type_field(&status(&h2).await, "Echo", "active") {
            0 => Err(format!(
                "no Echo active on h2; h1 said {:?}",
                h1.stdout_lines()
            )),
            _ => Ok(()),
        }
    })
    .await;
    assert!(
        armed.elapsed() >= Duration::from_millis(delay_ms),
        "fired early"
    );
    let (s, b) = post(&client, &h1.ingress, &format!("{k}/ask/recorded"), "", None).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["items"], serde_json::json!(["tick"]), "{b}");
    assert_eq!(
        type_field(&status(&h1).await, "Echo", "active"),
        0,
        "k runs once, on h2"
    );
    drop(nats);
}

/// A durable reminder outlives the member that armed it, where a timer does not: `k` runs on
/// h1 and arms both (a reminder through `outbox.remind`, a timer through `host.schedule`);
/// h1 is stopped (SIGTERM) before either is due. The reminder is a row of the shared outbox, so
/// h2 moves it into the outbox when due and delivers it, activating `k` there; the timer was
/// in h1's memory and is gone with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_outlives_the_member_that_armed_it_and_a_timer_does_not() {
    let Some(db) = fresh_postgres_database("sluice_cluster_reminder").await else {
        return;
    };
    let nats = NatsServer::start()
        .await
        .expect("the test nats-server (scripts/nats.sh install)");
    let (mut h1, _a1) = start_host(&nats, &db, "h1").await;
    let (h2, _a2) = start_host(&nats, &db, "h2").await;
    wait_members(&h1, &["h1", "h2"]).await;
    wait_members(&h2, &["h1", "h2"]).await;
    let k = (0..)
        .map(|k| format!("Echo/r{k}"))
        .find(|id| owner(id, &["h1", "h2"]) == "h1")
        .unwrap();
    let client = reqwest::Client::new();
    let delay_ms = 4000;
    let armed = Instant::now();
    // Through h2's ingress: the calls run on h1, where k lives.
    let remind = serde_json::json!({"name": "wake", "delay_ms": delay_ms, "msg_type": "record",
        "payload": "reminder"});
    let timer = serde_json::json!({"delay_ms": delay_ms, "msg_type": "record", "payload": "timer"});
    for (op, req) in [("remind", remind), ("schedule", timer)] {
        let path = format!("{k}/ask/{op}");
        let (s, b) = post(&client, &h2.ingress, &path, &req.to_string(), None).await;
        assert_eq!((s, &b), (200, &serde_json::json!({"ok": true})), "{op}");
    }
    assert_eq!(type_field(&status(&h1).await, "Echo", "active"), 1);

    h1.terminate();
    let exit = h1.wait_exit(Duration::from_secs(20)).await;
    assert!(exit.is_some_and(|s| s.success()), "h1 exit: {exit:?}");
    assert!(
        armed.elapsed() < Duration::from_millis(delay_ms - 1000),
        "h1 stopped too late ({:?}): the test proves nothing",
        armed.elapsed()
    );
    wait_members(&h2, &["h2"]).await;

    let what = format!("the reminder to reach {k} on h2");
    let b = wait_for(Duration::from_secs(30), &what, || async {
        let (s, b) = post(&client, &h2.ingress, &format!("{k}/ask/recorded"), "", None).await;
        match b["items"].as_array() {
            Some(items) if s == 200 && !items.is_empty() => Ok(b),
            _ => Err(b),
        }
    })
    .await;
    assert!(
        armed.elapsed() >= Duration::from_millis(delay_ms),
        "fired early"
    );
    // Past the timer's due time too: only the reminder arrived, once.
    let what = "h2's outbox to have nothing pending";
    wait_for(Duration::from_secs(10), what, || async {
        use sqlx::Connection as _;
        let mut c = sqlx::PgConnection::connect(&db).await.unwrap();
        let pending: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM outbox_messages WHERE NOT acked AND NOT dead_lettered) \
             + (SELECT count(*) FROM outbox_reminders)",
        )
        .fetch_one(&mut c)
        .await
        .unwrap();
        if pending == 0 { Ok(()) } else { Err(pending) }
    })
    .await;
    assert_eq!(b["envelopes"][0]["sender"], k.as_str(), "{b}");
    let (s, b) = post(&client, &h2.ingress, &format!("{k}/ask/recorded"), "", None).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["items"], serde_json::json!(["reminder"]), "{b}");
    drop(nats);
}

/// A bus event published on one host reaches subscribers that run on other hosts, once each
/// and in publish order: a routed subscription (`Echo/audit`) and a dispatch subscription
/// (`Echo/{principal}`), neither on the publisher's host. Every member has the same
/// subscriptions; only the publishing host delivers its events, through the cluster's route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bus_event_reaches_subscribers_on_other_hosts_once_each_in_order() {
    let with_subscriptions = |_: &str| {
        app_config()
            + r#"
[[bus.subscriptions]]
actor_type = "Echo"
key = "audit"
topic = "evt.*.created"

[[bus.subscriptions]]
actor_type = "Echo"
topic = "evt.*.created"
mode = "dispatch"
"#
    };
    let Some(c) = three_hosts_with("sluice_cluster_bus", with_subscriptions).await else {
        return;
    };
    let audit_on = owner("Echo/audit", &NODES);
    let pub_on = NODES.iter().find(|n| **n != audit_on).unwrap().to_string();
    let publisher = key_on("Echo", &pub_on);
    let principal = (0..)
        .map(|i| format!("user{i}"))
        .find(|p| owner(&format!("Echo/{p}"), &NODES) != pub_on)
        .unwrap();
    let client = reqwest::Client::new();
    // Through a third host's ingress, so the publishing turn itself is a remote call.
    let via = &c.hosts[NODES.iter().position(|n| *n == audit_on).unwrap()].ingress;
    let sent: Vec<String> = (0..5).map(|i| format!("order {i}")).collect();
    for payload in &sent {
        let event = serde_json::json!({"topic": "evt.order.created", "payload": payload});
        let resp = client
            .post(format!("{via}/actors/{publisher}/ask/publish"))
            .header("x-sluice-principal", &principal)
            .body(event.to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap();
        assert_eq!((status, &body), (200, &serde_json::json!({"ok": true})));
    }
    for subscriber in ["Echo/audit".to_string(), format!("Echo/{principal}")] {
        let what = format!("{subscriber} to record the {} events {sent:?}", sent.len());
        let items = wait_for(Duration::from_secs(20), &what, || async {
            let (s, b) = post(
                &client,
                via,
                &format!("{subscriber}/ask/recorded"),
                "",
                None,
            )
            .await;
            assert_eq!(s, 200, "{b}");
            let items: Vec<String> = serde_json::from_value(b["items"].clone()).unwrap();
            if items.len() >= sent.len() {
                Ok(items)
            } else {
                Err(items)
            }
        })
        .await;
        assert_eq!(
            items, sent,
            "{subscriber}: every event once, in publish order"
        );
        let envelopes = &post(
            &client,
            via,
            &format!("{subscriber}/ask/recorded"),
            "",
            None,
        )
        .await
        .1["envelopes"];
        assert_eq!(envelopes[0]["principal"], principal.as_str(), "{envelopes}");
        assert_eq!(envelopes[0]["sender"], publisher.as_str(), "{envelopes}");
    }
}

/// Waits until `h` sees member `node` with every type of `types` deployed.
async fn wait_member_types(h: &SluiceRun, node: &str, types: &[String]) {
    let what = format!("{} to see {node} with {types:?}", h.admin);
    wait_for(Duration::from_secs(60), &what, || async move {
        let s = status(h).await;
        let has = s["cluster"]["members"][node].as_array().is_some_and(|t| {
            types
                .iter()
                .all(|ty| t.contains(&Value::String(ty.clone())))
        });
        if has { Ok(()) } else { Err(s) }
    })
    .await;
}

/// Asks `EchoX/1` on `via` to make one SDK call (`tell`, `ask`) and returns its report.
async fn via_guest(
    client: &reqwest::Client,
    via: &str,
    echo: &str,
    call: &str,
    req: Value,
) -> Value {
    let (s, b) = post(
        client,
        via,
        &format!("{echo}/1/ask/{call}"),
        &req.to_string(),
        None,
    )
    .await;
    assert_eq!(s, 200, "{echo} {call}: {b}");
    b
}

/// A Go, a Python and a TypeScript guest on h1 call a Rust `Slow` that runs only on h2: a
/// tell into its full capacity-2 mailbox comes back to each as exactly the local
/// `RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=N)`, and an ask queued behind a long
/// turn past its 100 ms comes back DEADLINE_EXCEEDED, skipped on h2.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn guests_of_every_language_see_another_hosts_full_mailbox_and_deadline_as_local_ones() {
    use sluice_tests::{Lang, guest};
    let Some(db) = fresh_postgres_database("sluice_cluster_polyglot").await else {
        return;
    };
    let langs: Vec<(Lang, String)> = [Lang::Go, Lang::Python, Lang::TypeScript]
        .into_iter()
        .filter_map(|l| {
            let path = guest(l, "echo")?;
            Some((l, path.display().to_string()))
        })
        .collect();
    let echo_types: Vec<String> = langs.iter().map(|(l, _)| format!("Echo{l:?}")).collect();
    let nats = NatsServer::start()
        .await
        .expect("the test nats-server (scripts/nats.sh install)");
    // h1: an echo guest per language (no Slow); h2: Slow only, so every Slow key lives there.
    let host = format!("[host]\n{}\n", cache_line());
    let mut h1_config = format!("name = \"cluster-polyglot\"\n{host}{CLUSTER}");
    for ((_, path), ty) in langs.iter().zip(&echo_types) {
        h1_config.push_str(&format!(
            "\n[[supervisor.children]]\nname = \"{ty}\"\nactor_type = \"{ty}\"\nmodule = {path:?}\n"
        ));
    }
    let h2_config = format!(
        "name = \"cluster-polyglot\"\n{host}{CLUSTER}\n[[supervisor.children]]\nname = \"slow\"\nactor_type = \"Slow\"\nmodule = \"slow.wasm\"\nmailbox_capacity = 2\n"
    );
    let (h1, _a1) = start_host_with(&nats, &db, "h1", &h1_config).await;
    let (h2, _a2) = start_host_with(&nats, &db, "h2", &h2_config).await;
    wait_member_types(&h1, "h2", &["Slow".to_string()]).await;
    wait_member_types(&h2, "h1", &echo_types).await;

    let client = reqwest::Client::new();
    let via = &h1.ingress;
    for (i, echo) in echo_types.iter().enumerate() {
        let (full, late) = (2 * i, 2 * i + 1);
        // A long turn holds Slow/{full}; the guest's tells fill its two slots, then one is
        // refused.
        let busy = occupy(&client, via, full);
        let what = format!("{echo}'s tell to Slow/{full} to be refused by its full mailbox");
        let refused = wait_for(Duration::from_secs(10), &what, || async {
            let req = serde_json::json!({"to": format!("Slow/{full}"), "msg_type": "sleep", "payload": "1"});
            let r = via_guest(&client, via, echo, "tell", req).await;
            if r["ok"] == false { Ok(r) } else { Err(r) }
        })
        .await;
        let e = &refused["error"];
        assert_eq!(e["type"], "ResourceExhausted", "{echo}: {refused}");
        assert_eq!(e["code"], "resource-exhausted", "{echo}: {refused}");
        let retry = e["retry_after_ms"]
            .as_u64()
            .unwrap_or_else(|| panic!("{echo}: no hint: {refused}"));
        assert!(retry >= 1, "{echo}: {refused}");
        assert_eq!(
            e["message"],
            format!("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms={retry})"),
            "{echo}: the message a local full mailbox gives"
        );
        assert_eq!(busy.await.unwrap().0, 200);

        // An ask that cannot start within its 100 ms.
        let busy = occupy(&client, via, late);
        let what = format!("{echo}'s ask to Slow/{late} to time out behind the long turn");
        let late_reply = wait_for(Duration::from_secs(10), &what, || async {
            let req = serde_json::json!({
                "to": format!("Slow/{late}"), "msg_type": "sleep", "payload": "1", "timeout_ms": 100,
            });
            let r = via_guest(&client, via, echo, "ask", req).await;
            if r["ok"] == false { Ok(r) } else { Err(r) }
        })
        .await;
        let e = &late_reply["error"];
        assert_eq!(e["type"], "DeadlineExceeded", "{echo}: {late_reply}");
        assert_eq!(e["code"], "deadline-exceeded", "{echo}: {late_reply}");
        assert_eq!(e["skipped"], true, "{echo}: decided on h2: {late_reply}");
        assert_eq!(
            e["message"], "DEADLINE_EXCEEDED: call-timeout (skipped: the queued turn never ran)",
            "{echo}: {late_reply}"
        );
        assert_eq!(busy.await.unwrap().0, 200);
    }
    // h2 ran every Slow; h1 has no Slow to run.
    assert!(type_field(&status(&h2).await, "Slow", "active") >= 2);
    drop(nats);
}

/// `partition="p"` samples of `sluice_outbox_partition_relayed` that are 1 on `h`: the
/// partitions whose lease `h`'s relay holds.
async fn relayed_partitions(h: &SluiceRun) -> Vec<u32> {
    let text = reqwest::get(format!("{}/metrics", h.ingress))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut parts: Vec<u32> = text
        .lines()
        .filter_map(|l| l.strip_prefix("sluice_outbox_partition_relayed{partition=\""))
        .filter_map(|l| l.split_once("\"} "))
        .filter(|(_, v)| v.trim() == "1")
        .map(|(p, _)| p.parse().unwrap())
        .collect();
    parts.sort_unstable();
    parts
}

/// Waits until each of `hosts` (named `nodes`) relays exactly its rendezvous share of the
/// outbox's `partitions`, both as its status says and as the leases it holds.
async fn wait_relay_shares(hosts: &[&SluiceRun], nodes: &[&str], partitions: u32) {
    let what = "each host to relay its share (seen: node, want, status, leases held)";
    wait_for(Duration::from_secs(15), what, || async move {
        let mut seen = Vec::new();
        let mut ok = true;
        for (h, n) in hosts.iter().zip(nodes) {
            let want = sluice_node::relay_share(n, nodes.iter().copied(), partitions);
            let s = status(h).await;
            let listed: Vec<u32> = serde_json::from_value(s["cluster"]["relayed"].clone()).unwrap();
            let held = relayed_partitions(h).await;
            ok &= listed == want && held == want;
            seen.push((n.to_string(), want, listed, held));
        }
        if ok { Ok(()) } else { Err(seen) }
    })
    .await;
}

/// The outbox of a cluster is shared, and each partition is relayed by one member: the
/// rendezvous share of its node id. A fourth host joining while 6 senders dispatch to 12
/// receivers through random hosts' ingress takes its share over from the others (within
/// seconds, not the 30 s partition lease), and every receiver gets every message once, each
/// sender's in the order sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_joining_host_takes_its_share_of_outbox_partitions_under_load_and_fifo_holds() {
    const PARTITIONS: u32 = 8;
    const SENDERS: usize = 6;
    const RECEIVERS: usize = 12;
    const SENDS: usize = 60;
    let config = |_: &str| format!("{}\n[outbox]\npartitions = {PARTITIONS}\n", app_config());
    let Some(mut c) = three_hosts_with("sluice_cluster_partitions", config).await else {
        return;
    };
    let hosts: Vec<&SluiceRun> = c.hosts.iter().collect();
    wait_relay_shares(&hosts, &NODES, PARTITIONS).await;

    let targets: Vec<String> = (0..RECEIVERS).map(|r| format!("Echo/rcv-{r}")).collect();
    let ingress = c.hosts.iter().map(|h| h.ingress.clone()).collect();
    let mut load = Dispatches::start(ingress, SENDERS, SENDS, targets);
    // A quarter in, h4 joins; the senders use its ingress too from then on.
    load.wait_sent(load.total() / 4).await;
    let (h4, app4) = start_host(&c.nats, &c.db, "h4").await;
    let four = ["h1", "h2", "h3", "h4"];
    for h in c.hosts.iter().chain([&h4]) {
        wait_members(h, &four).await;
    }
    let all: Vec<&SluiceRun> = c.hosts.iter().chain([&h4]).collect();
    wait_relay_shares(&all, &four, PARTITIONS).await;
    assert!(
        load.sent() < load.total(),
        "the senders finished before the shares moved: the test did not rebalance under load"
    );
    load.add_via(&h4.ingress);
    load.finish().await;
    // Every host stayed up: every dispatch was acknowledged the first time.
    assert_eq!(load.resent(), 0, "a dispatch failed while a host joined");

    // Every receiver: each sender's messages once each, in the order sent.
    let dups = load
        .delivered_in_order(
            &h4.ingress,
            &c.db,
            &c.hosts.iter().chain([&h4]).collect::<Vec<_>>(),
        )
        .await;
    assert_eq!(dups, 0, "a message came twice");
    c.hosts.push(h4);
    c._apps.push(app4);
}

/// A trace crosses hosts: a call through h1's ingress to an actor h2 runs is one trace, the
/// turn on h2 a child of h1's ingress span (the `traceparent` travels in the wire frame), both
/// hosts exporting to one OTLP receiver. And while they export, each host's stderr log still
/// prints every debug event `RUST_LOG` asks for: the log and the exporter filter per layer,
/// and a per-layer `RUST_LOG` filter once dropped most `sluice::activations` lines of a
/// clustered host.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_to_another_host_is_one_trace_across_both_and_the_logs_keep_their_debug_events() {
    use opentelemetry_proto::tonic::trace::v1::Span;
    let Some(db) = fresh_postgres_database("sluice_cluster_traces").await else {
        return;
    };
    let nats = NatsServer::start()
        .await
        .expect("the test nats-server (scripts/nats.sh install)");
    let (otlp, received) = sluice_tests::otlp::otlp_receiver().await;
    let mut hosts = Vec::new();
    let mut apps = Vec::new();
    for node in ["h1", "h2"] {
        let (run, app) = start_member(
            &nats,
            &db,
            node,
            &app_config(),
            &["--otlp-endpoint", &otlp],
            &[
                ("OTEL_BSP_SCHEDULE_DELAY", "100"),
                ("RUST_LOG", "info,sluice::activations=debug"),
            ],
        )
        .await;
        hosts.push(run);
        apps.push(app);
    }
    for h in &hosts {
        wait_members(h, &["h1", "h2"]).await;
    }
    let key = (0..)
        .map(|k| format!("Echo/t{k}"))
        .find(|id| owner(id, &["h1", "h2"]) == "h2")
        .unwrap();
    let resp = reqwest::Client::new()
        .post(format!("{}/actors/{key}/ask/echo", hosts[0].ingress))
        .body("across")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let tp = resp.headers()["traceparent"].to_str().unwrap().to_string();
    let parts: Vec<&str> = tp.split('-').collect();
    let (trace_id, ingress_id) = (parts[1].to_string(), parts[2].to_string());
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let of_trace = |s: &Span| hex(&s.trace_id) == trace_id;
    let what = format!("a turn span in trace {trace_id}");
    let turn = wait_for(Duration::from_secs(30), &what, || {
        let spans = received.spans();
        let seen: Vec<(String, String)> = spans
            .iter()
            .map(|s| (s.name.clone(), hex(&s.trace_id)))
            .collect();
        std::future::ready(
            spans
                .into_iter()
                .find(|s| of_trace(s) && s.name == "turn")
                .ok_or(seen),
        )
    })
    .await;
    assert_eq!(
        hex(&turn.parent_span_id),
        ingress_id,
        "the turn on h2 is the child of h1's ingress span"
    );
    // h2 ran it; h1 has no Echo live.
    assert_eq!(type_field(&status(&hosts[1]).await, "Echo", "active"), 1);
    assert_eq!(type_field(&status(&hosts[0]).await, "Echo", "active"), 0);

    // 64 more keys through h1's ingress, spread over both hosts: each activation prints its
    // `activated` line on its owner's stderr.
    let keys: Vec<String> = (0..64).map(|k| format!("Echo/log{k}")).collect();
    for key in &keys {
        let resp = reqwest::Client::new()
            .post(format!("{}/actors/{key}/ask/echo", hosts[0].ingress))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{key}");
    }
    let on_h2 = keys
        .iter()
        .filter(|k| owner(k, &["h1", "h2"]) == "h2")
        .count();
    assert!(on_h2 > 0 && on_h2 < keys.len(), "{on_h2} of 64 on h2");
    wait_for(
        Duration::from_secs(20),
        "an `activated` line for each of the 64 keys on its owner's stderr",
        || {
            let missing: Vec<&String> = keys
                .iter()
                .filter(|k| {
                    let field = format!("actor={k} ");
                    let of_owner = &hosts[if owner(k, &["h1", "h2"]) == "h1" {
                        0
                    } else {
                        1
                    }];
                    !of_owner.stderr_lines().iter().any(|l| {
                        l.contains("sluice::activations")
                            && l.contains("activated")
                            && l.contains(&field)
                    })
                })
                .collect();
            std::future::ready(if missing.is_empty() {
                Ok(())
            } else {
                Err(missing)
            })
        },
    )
    .await;
    drop(nats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_is_refused_with_what_to_do_on_sqlite_and_on_an_unreachable_nats() {
    let app = rust_app(&["echo", "slow"], &app_config());
    let bin = sluice_binary("sluice-cluster-test");
    let out = std::process::Command::new(&bin)
        .args(["run"])
        .arg(app.path())
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(["--cluster", "nats://127.0.0.1:4222"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--cluster needs the outbox in Postgres") && err.contains("--database-url"),
        "{err}"
    );
    let Some(db) = fresh_postgres_database("sluice_cluster_refused").await else {
        return;
    };
    // A port nothing listens on.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("nats://{}", dead.local_addr().unwrap());
    drop(dead);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(&bin)
            .args(["run"])
            .arg(app.path())
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(["--cluster", &url, "--database-url", &db])
            .output(),
    )
    .await
    .expect("an unreachable NATS fails within the connect timeout")
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("joining the cluster at"), "{err}");
}

/// The type's version on `h`.
/// `sluice deploy APP --host` `h`'s admin API; what it printed, once it succeeded.
async fn deploy(app: &std::path::Path, h: &SluiceRun) -> String {
    let out = tokio::process::Command::new(sluice_binary("sluice-cluster-test"))
        .arg("deploy")
        .arg(app)
        .args(["--host", &h.admin])
        .output()
        .await
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    printed
}

/// The deploy output says each of `nodes` serves the new Echo.
fn assert_serves(printed: &str, nodes: &[&str]) {
    for n in nodes {
        assert!(
            printed
                .lines()
                .any(|l| l.contains("[Echo] cluster version")
                    && l.contains(&format!("{n} serves it"))),
            "{n}: {printed}"
        );
    }
}

async fn version_of(h: &SluiceRun, ty: &str) -> u64 {
    type_field(&status(h).await, ty, "version")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deploy_on_one_host_rolls_out_to_every_member_reports_per_host_and_reaches_a_late_joiner()
{
    // h3 fits only 2 activations, so a version with 3 supervised instances cannot load there.
    let Some(mut c) = three_hosts_with("sluice_cluster_deploy", |node| {
        app_config_with(if node == "h3" { 2 } else { 4000 })
    })
    .await
    else {
        return;
    };
    let client = reqwest::Client::new();
    // The new Echo: another module (the slow actor, which answers with its payload) and 3
    // supervised instances.
    let next = rust_app(
        &["echo", "slow"],
        &app_config().replace(
            "actor_type = \"Echo\"\nmodule = \"echo.wasm\"",
            "actor_type = \"Echo\"\nmodule = \"slow.wasm\"\ncount = 3",
        ),
    );
    let printed = deploy(next.path(), &c.hosts[0]).await;
    assert_serves(&printed, &["h1", "h2"]);
    let h3 = printed
        .lines()
        .find(|l| l.contains("[Echo] cluster version") && l.contains("h3 kept its running version"))
        .unwrap_or_else(|| panic!("no h3 line: {printed}"));
    assert!(h3.contains("max_activations"), "{h3}");

    // h2 now runs the new code for its keys; h3 still the old one for its own.
    let via = c.hosts[0].ingress.clone();
    let (s, b) = post(
        &client,
        &via,
        &format!("{}/ask/record", key_on("Echo", "h2")),
        "7",
        None,
    )
    .await;
    assert_eq!(
        (s, b),
        (200, Value::from(7)),
        "the new module answers with its payload"
    );
    let (s, b) = post(
        &client,
        &via,
        &format!("{}/ask/record", key_on("Echo", "h3")),
        "7",
        None,
    )
    .await;
    assert_eq!(
        (s, &b["count"]),
        (200, &Value::from(1)),
        "h3 kept the old module: {b}"
    );
    assert_eq!(version_of(&c.hosts[1], "Echo").await, 2);
    assert_eq!(version_of(&c.hosts[2], "Echo").await, 1);

    // A host that joins later starts from its own (old) app folder and then loads the
    // cluster's current version.
    let (h4, _app4) = start_host(&c.nats, &c.db, "h4").await;
    wait_for(
        Duration::from_secs(30),
        "h4 to load the current Echo (version 2)",
        || async {
            let s = status(&h4).await;
            if type_field(&s, "Echo", "version") >= 2 {
                Ok(())
            } else {
                Err(s)
            }
        },
    )
    .await;
    c.hosts.push(h4);
}

/// `h`'s `/metrics` exposition.
async fn metrics_text(h: &SluiceRun) -> String {
    reqwest::get(format!("{}/metrics", h.ingress))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_members_metrics_pass_promtool_check_metrics_after_cross_host_traffic() {
    let Some(c) = three_hosts("sluice_cluster_promtool").await else {
        return;
    };
    let client = reqwest::Client::new();
    let (h1, h2) = (&c.hosts[0], &c.hosts[1]);
    // Through h1's ingress to actors h2 owns: asks, a tell, and remote tells that fail.
    let echo = key_on("Echo", "h2");
    for i in 0..5 {
        let (status, body) = post(
            &client,
            &h1.ingress,
            &format!("{echo}/ask/echo"),
            &format!("{i}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{echo} via h1: {body}");
    }
    let (status, body) = post(
        &client,
        &h1.ingress,
        &format!("{echo}/tell/record"),
        "t",
        None,
    )
    .await;
    assert_eq!(status, 202, "tell {echo} via h1: {body}");
    // While one 500 ms turn runs, the capacity-2 mailbox refuses the third tell queued behind.
    let slow = key_on("Slow", "h2");
    let what = format!("a tell to {slow} via h1 to be refused by its full mailbox");
    wait_for(Duration::from_secs(10), &what, || async {
        let (status, body) = post(
            &client,
            &h1.ingress,
            &format!("{slow}/tell/sleep"),
            "500",
            None,
        )
        .await;
        match status {
            202 => Err(body),
            429 => Ok(()),
            other => panic!("tell {slow} via h1: {other} {body}"),
        }
    })
    .await;

    // The caller's and the owner's side each carry cluster families, every one with HELP, and
    // promtool has nothing to say about either.
    for (h, family) in [
        (h1, "sluice_cluster_remote_calls_sent_total"),
        (h1, "sluice_cluster_remote_call_seconds"),
        (h1, "sluice_cluster_remote_calls_failed_total"),
        (h2, "sluice_cluster_remote_calls_received_total"),
    ] {
        let text = metrics_text(h).await;
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{} serves no {family}:\n{text}",
            h.admin
        );
        let families: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE sluice_cluster_"))
            .collect();
        for f in &families {
            let name = f.split(' ').next().unwrap();
            assert!(
                text.contains(&format!("# HELP sluice_cluster_{name} ")),
                "no HELP for sluice_cluster_{name} on {}",
                h.admin
            );
        }
        assert_eq!(
            sluice_tests::promtool_check_metrics(&text),
            Ok(()),
            "promtool check metrics on {} ({} cluster families)",
            h.admin,
            families.len()
        );
    }
}

/// How many of `ids` placement puts on each of `nodes`.
fn placed_counts(ids: &[String], nodes: &[&str]) -> BTreeMap<String, u64> {
    let mut n: BTreeMap<String, u64> = nodes.iter().map(|n| (n.to_string(), 0)).collect();
    for id in ids {
        *n.get_mut(&owner(id, nodes)).unwrap() += 1;
    }
    n
}

/// Waits until each of `hosts` (members `nodes`) runs exactly the `Echo` instances
/// placement gives it, by its own status (activations, claims); at most `bound`.
async fn wait_spread(hosts: &[&SluiceRun], nodes: &[&str], ids: &[String], bound: Duration) {
    let want = placed_counts(ids, nodes);
    let what = format!(
        "each member to run the supervised Echo instances placement gives it, {want:?} (active, claims)"
    );
    wait_for(bound, &what, || async {
        let mut got = BTreeMap::new();
        for (h, n) in hosts.iter().zip(nodes) {
            let s = status(h).await;
            let active = type_field(&s, "Echo", "active");
            let claims = s["cluster"]["claims"].as_u64().unwrap();
            got.insert(n.to_string(), (active, claims));
        }
        if got.iter().all(|(n, (a, c))| (*a, *c) == (want[n], want[n])) {
            Ok(())
        } else {
            Err(got)
        }
    })
    .await;
}

/// `count = 8` is eight `Echo` instances cluster-wide, not eight per member: each runs on
/// the member placement picks (the first host alone starts all eight, and hands each to its
/// member as the others join), before any message; when that member dies, its instances
/// start on the others after its TTL, and the rest keep running where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn supervised_instances_are_spread_over_the_members_and_restarted_elsewhere_when_one_dies() {
    let config = || {
        app_config().replacen(
            "module = \"echo.wasm\"\n",
            "module = \"echo.wasm\"\ncount = 8\n",
            1,
        )
    };
    assert!(config().contains("count = 8"));
    let Some(mut c) = three_hosts_with("sluice_cluster_supervised", |_| config()).await else {
        return;
    };
    let ids: Vec<String> = (0..8).map(|k| format!("Echo/{k}")).collect();
    let hosts: Vec<&SluiceRun> = c.hosts.iter().collect();
    wait_spread(&hosts, &NODES, &ids, Duration::from_secs(15)).await;
    let spread = placed_counts(&ids, &NODES);
    assert!(
        spread.values().filter(|n| **n > 0).count() >= 2,
        "{spread:?}"
    );
    // Each instance answers as the one live activation of its key, through any host.
    let client = reqwest::Client::new();
    for (i, id) in ids.iter().enumerate() {
        let via = &c.hosts[i % 3].ingress;
        let (s, b) = post(&client, via, &format!("{id}/ask/record"), "x", None).await;
        assert_eq!((s, b["count"].as_u64()), (200, Some(1)), "{id}: {b}");
    }

    // h2 dies: its instances start on h1 and h3 (after the TTL), the others stay put.
    c.hosts[1].kill();
    let survivors = [&c.hosts[0], &c.hosts[2]];
    wait_spread(&survivors, &["h1", "h3"], &ids, Duration::from_secs(15)).await;
    for id in &ids {
        let (s, b) = post(
            &client,
            &c.hosts[0].ingress,
            &format!("{id}/ask/record"),
            "x",
            None,
        )
        .await;
        let moved = owner(id, &NODES) == "h2";
        let want = if moved { 1 } else { 2 };
        assert_eq!(
            (s, b["count"].as_u64()),
            (200, Some(want)),
            "{id} (was on {}): {b}",
            owner(id, &NODES)
        );
    }
    drop(c.nats);
}

/// Bad input between members: a version of `Echo` made current in the cluster's module bucket
/// without its bytes ever being stored (a member whose upload was lost, or any client with
/// access to the bucket). Every member refuses it with a typed report, keeps its running
/// version and its actors' state, and a real deploy afterwards rolls out as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_version_announced_without_its_bytes_is_refused_by_every_member_which_keeps_serving() {
    use sluice_cluster::modules::{CurrentModule, ModuleStore, content_hash};

    let Some(c) = three_hosts("sluice_cluster_bogus_module").await else {
        return;
    };
    let client = reqwest::Client::new();
    let via = c.hosts[0].ingress.clone();
    let ask_record = |node: &'static str| {
        let (client, via) = (client.clone(), via.clone());
        async move {
            let (s, b) = post(
                &client,
                &via,
                &format!("{}/ask/record", key_on("Echo", node)),
                "\"x\"",
                None,
            )
            .await;
            assert_eq!(s, 200, "{node}: {b}");
            b["count"].as_u64().unwrap_or_else(|| panic!("{node}: {b}"))
        }
    };
    for node in NODES {
        assert_eq!(ask_record(node).await, 1);
    }
    let mut running = Vec::new();
    for h in &c.hosts {
        running.push(version_of(h, "Echo").await);
    }

    let intruder = sluice_cluster::connect(
        &sluice_cluster::ClusterConfig::builder(c.nats.url())
            .node_id("intruder")
            .heartbeat_ms(300)
            .member_ttl_ms(1500)
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    let store = ModuleStore::open(&intruder).await.unwrap();
    let current = store
        .current("Echo")
        .await
        .unwrap()
        .expect("the first host seeded Echo");
    let missing = content_hash(b"bytes that were never stored");
    let bogus = CurrentModule {
        version: current.version + 1,
        hash: missing.clone(),
        deployed_by: "intruder".into(),
        ..current.clone()
    };
    let kv = intruder
        .jetstream()
        .get_key_value(intruder.names().modules_bucket())
        .await
        .unwrap();
    kv.put("current.Echo", serde_json::to_vec(&bogus).unwrap().into())
        .await
        .unwrap();

    // Each member reports the version it could not load, and why.
    let reports = wait_for(
        Duration::from_secs(30),
        "every member's report on the bogus version",
        || async {
            let reports = store.reports("Echo").await.unwrap();
            let on_bogus: Vec<_> = reports
                .iter()
                .filter(|(_, r)| r.version == bogus.version)
                .collect();
            if on_bogus.len() == NODES.len() {
                Ok(reports)
            } else {
                Err(reports)
            }
        },
    )
    .await;
    for (node, r) in reports.iter().filter(|(_, r)| r.version == bogus.version) {
        let why = r
            .error
            .as_deref()
            .unwrap_or_else(|| panic!("{node} loaded it"));
        assert!(
            why.contains(&format!("module {missing} is not in the store")),
            "{node}: {why}"
        );
    }
    // Nothing changed where it runs: the same version, the counters' state, every key served.
    for (h, v) in c.hosts.iter().zip(&running) {
        assert_eq!(version_of(h, "Echo").await, *v, "{}", status(h).await);
    }
    for node in NODES {
        assert_eq!(ask_record(node).await, 2, "{node} lost its counter");
    }

    // A real deploy after it loads on every member.
    let next = rust_app(&["echo", "slow"], &app_config());
    let printed = deploy(next.path(), &c.hosts[1]).await;
    assert_serves(&printed, &NODES);
}

/// One host's activation log (`sluice::activations`, see the supervisor): (actor, what,
/// unix ms) for each `activated` / `deactivated` line it printed.
/// On a panic (a failed check of the SIGKILL test), prints each host's activation lines of
/// the dispatch senders and receivers and its last warnings and errors, so a rare failure can
/// be read from the CI log alone.
struct DumpOnPanic<'a>(&'a [SluiceRun], u64);

impl Drop for DumpOnPanic<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        eprintln!("-- the hosts' logs (h3 SIGKILLed at unix ms {})", self.1);
        for (h, node) in self.0.iter().zip(NODES) {
            let lines = h.stderr_lines();
            let activations: Vec<&String> = lines
                .iter()
                .filter(|l| {
                    l.contains("sluice::activations")
                        && (l.contains("Echo/rcv-") || l.contains("Echo/snd-"))
                })
                .collect();
            let warnings: Vec<&String> = lines
                .iter()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .collect();
            eprintln!(
                "-- {node}: {} activation lines of senders and receivers",
                activations.len()
            );
            for l in activations.iter().take(400) {
                eprintln!("{node} {l}");
            }
            eprintln!("-- {node}: last warnings and errors of {}", warnings.len());
            for l in warnings.iter().skip(warnings.len().saturating_sub(60)) {
                eprintln!("{node} {l}");
            }
        }
    }
}

/// Prints the outbox rows (one per line) of the messages around a misorder: the receiver's
/// rows of the expected message, its two neighbours and the one that overtook it. Returns
/// their (id, partition) pairs.
async fn dump_outbox_rows(db: &str, m: &Misorder) -> Vec<(i64, i64)> {
    use sqlx::{Connection as _, Row as _};
    let Ok(mut conn) = sqlx::PgConnection::connect(db).await else {
        eprintln!("-- outbox rows: cannot connect to {db}");
        return Vec::new();
    };
    let (sender, n) = m.expected.split_once('-').unwrap();
    let n: i64 = n.parse().unwrap();
    // The payload as the sender's guest stored it: the text, bare or as a JSON string.
    let mut payloads: Vec<String> = (n - 2..=n + 2)
        .filter(|i| *i >= 0)
        .map(|i| format!("{sender}-{i:04}"))
        .chain([m.arrived.clone()])
        .collect();
    payloads.extend(payloads.clone().iter().map(|p| format!("\"{p}\"")));
    let rows = sqlx::query(
        "SELECT id, convert_from(payload, 'UTF8'), partition, sender, delivery_count, refusals, \
         created_at, send_at, claimed_until, settled_at, acked, dead_lettered, \
         COALESCE(last_error, '') FROM outbox_messages \
         WHERE receiver = $1 AND convert_from(payload, 'UTF8') = ANY($2) ORDER BY id",
    )
    .bind(&m.receiver)
    .bind(&payloads)
    .fetch_all(&mut conn)
    .await;
    eprintln!("-- outbox rows of {} for {payloads:?}", m.receiver);
    let mut ids = Vec::new();
    match rows {
        Ok(rows) => {
            for r in rows {
                ids.push((r.get::<i64, _>(0), r.get::<i64, _>(2)));
                eprintln!(
                    "id={} payload={} partition={} sender={} delivery_count={} refusals={} created_at={} send_at={} claimed_until={} settled_at={} acked={} dead={} last_error={:?}",
                    r.get::<i64, _>(0),
                    r.get::<String, _>(1),
                    r.get::<i64, _>(2),
                    r.get::<String, _>(3),
                    r.get::<i64, _>(4),
                    r.get::<i64, _>(5),
                    r.get::<i64, _>(6),
                    r.get::<i64, _>(7),
                    r.get::<i64, _>(8),
                    r.get::<i64, _>(9),
                    r.get::<bool, _>(10),
                    r.get::<bool, _>(11),
                    r.get::<String, _>(12),
                );
            }
        }
        Err(e) => eprintln!("-- outbox rows: {e}"),
    }
    ids
}

/// Prints each host's `sluice::outbox` debug lines about the rows `ids` ((id, partition)
/// pairs): the immediate attempts of dispatches (`id=N`) and the relay claims of a row's
/// partition whose id range holds it.
fn dump_outbox_lines(hosts: &[&SluiceRun], ids: &[(i64, i64)]) {
    let field = |l: &str, name: &str| -> Option<i64> {
        l.split(&format!(" {name}="))
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    for (n, h) in hosts.iter().enumerate() {
        for l in h
            .stderr_lines()
            .iter()
            .filter(|l| l.contains("sluice::outbox"))
        {
            let partition = field(l, "partition");
            let about = match (field(l, "id"), field(l, "first"), field(l, "last")) {
                (Some(id), _, _) => ids.iter().any(|(i, _)| *i == id),
                (_, Some(first), Some(last)) => ids
                    .iter()
                    .any(|(id, p)| Some(*p) == partition && (first..=last).contains(id)),
                _ => false,
            };
            if about {
                eprintln!("host #{} {l}", n + 1);
            }
        }
    }
}

fn activation_log(h: &SluiceRun) -> Vec<(String, String, u64)> {
    h.stderr_lines()
        .iter()
        .filter(|l| l.contains("sluice::activations"))
        .filter_map(|l| {
            let what = if l.contains(" activated") {
                "activated"
            } else if l.contains(" deactivated") {
                "deactivated"
            } else {
                return None;
            };
            let actor = l.split(" actor=").nth(1)?.split_whitespace().next()?;
            let at = l.split(" at_ms=").nth(1)?.split_whitespace().next()?;
            Some((actor.to_string(), what.to_string(), at.parse().ok()?))
        })
        .collect()
}

/// The results of `tasks`, in order.
async fn futures_join<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// SIGKILL one of three hosts in the middle of a run of asks and outbox dispatches:
/// - every dispatched message reaches every receiver at least once; duplicates stay within
///   what the kill can cause (the dispatches whose HTTP request died with the host and were
///   sent again, plus one claimed relay batch per partition the dead host relayed);
/// - keyed counters on the surviving hosts count every acknowledged ask once, with no gap
///   (their asks go through the survivors' ingress: an ask whose ingress dies has an unknown
///   outcome);
/// - the dead host's keys answer again within the member TTL plus 8.5 s;
/// - the survivors relay the dead host's outbox partitions within the member TTL plus 8.5 s,
///   not after the 30 s partition lease;
/// - the activation logs of all three hosts show no key live on two hosts at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_host_killed_under_load_loses_no_acknowledged_message_and_no_key_runs_twice_at_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    const PARTITIONS: u32 = 8;
    const BATCH: u32 = 200;
    const SENDERS: usize = 6;
    const RECEIVERS: usize = 12;
    const SENDS: usize = 700; // 6 × 700 dispatches × 12 receivers = 50 400 outbox messages
    const ASKERS: usize = 4;
    const ASKS: usize = 2_500; // per asker: 10 000 asks
    const COUNTERS: usize = 300;
    let Some(db) = fresh_postgres_database("sluice_cluster_sigkill").await else {
        return;
    };
    let nats = NatsServer::start()
        .await
        .expect("the test nats-server (scripts/nats.sh install)");
    let config = format!(
        "{}\n[outbox]\npartitions = {PARTITIONS}\nrelay_batch_size = {BATCH}\n",
        app_config()
    );
    let log = [(
        "RUST_LOG",
        "info,sluice::activations=debug,sluice::outbox=debug",
    )];
    let mut hosts = Vec::new();
    let mut apps = Vec::new();
    for node in NODES {
        let (h, a) = start_member(&nats, &db, node, &config, &[], &log).await;
        hosts.push(h);
        apps.push(a);
    }
    for h in &hosts {
        wait_members(h, &NODES).await;
    }
    let client = reqwest::Client::new();
    let ingress: Vec<String> = hosts.iter().map(|h| h.ingress.clone()).collect();

    // Receivers the kill cannot take state from: their owner is h1 or h2, with or without h3.
    let receivers: Vec<String> = (0..)
        .map(|r| format!("Echo/rcv-{r}"))
        .filter(|id| owner(id, &NODES) != "h3")
        .take(RECEIVERS)
        .collect();
    // Through every host's ingress, the dead one's too until the kill.
    let mut load = Dispatches::start(ingress.clone(), SENDERS, SENDS, receivers);

    // Counters asked through h1's and h2's ingress only. Each asker owns its keys (key k
    // belongs to asker k % ASKERS), so its replies per key arrive in order.
    let asked = Arc::new(AtomicUsize::new(0));
    let mut askers = Vec::new();
    for a in 0..ASKERS {
        let (client, ingress, asked) = (client.clone(), ingress.clone(), asked.clone());
        askers.push(tokio::spawn(async move {
            let keys: Vec<usize> = (0..COUNTERS).filter(|k| k % ASKERS == a).collect();
            // Per key: each acknowledged ask's count, when it was first sent and when it was
            // answered (unix ms).
            let mut counts: BTreeMap<String, Vec<(u64, u64, u64)>> = BTreeMap::new();
            let started = Instant::now();
            for i in 0..ASKS {
                let id = format!("Echo/c-{}", keys[i % keys.len()]);
                let via = &ingress[i % 2];
                let sent = unix_ms();
                loop {
                    let attempt = Instant::now();
                    let (status, reply) =
                        post(&client, via, &format!("{id}/ask/record"), "1", Some(10_000)).await;
                    if status == 200 {
                        let n = reply["count"].as_u64().unwrap();
                        counts
                            .entry(id.clone())
                            .or_default()
                            .push((n, sent, unix_ms()));
                        break;
                    }
                    // Only a dead host's key fails, as UNAVAILABLE: until its TTL passes, and
                    // for an ask that was on its way to the host as it died, once the host
                    // leaves the members (its outcome unknown, as the message says) — well
                    // before the ask's 10 s deadline.
                    assert_eq!(owner(&id, &NODES), "h3", "{id}: {status} {reply}");
                    assert_eq!(
                        (status, reply["code"].as_str()),
                        (503, Some("unavailable")),
                        "{id}: {reply}"
                    );
                    assert!(
                        attempt.elapsed() < Duration::from_millis(1_500 + 3_500),
                        "{id} failed only after {:?}: {reply}",
                        attempt.elapsed()
                    );
                    assert!(
                        started.elapsed() < Duration::from_secs(240),
                        "{id} never came back"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                asked.fetch_add(1, Relaxed);
            }
            counts
        }));
    }

    // Failover probes: keys h3 runs, asked once before the kill and then (each by its own
    // task, so no ask stuck on its way to the dead host delays them) until a survivor answers.
    let probe_keys: Vec<String> = (0..)
        .map(|k| format!("Echo/probe-{k}"))
        .filter(|id| owner(id, &NODES) == "h3")
        .take(8)
        .collect();
    for id in &probe_keys {
        let (s, b) = post(&client, &ingress[0], &format!("{id}/ask/record"), "1", None).await;
        assert_eq!((s, &b["count"]), (200, &Value::from(1)), "{id}: {b}");
    }

    // A quarter of the dispatches in, SIGKILL h3.
    load.wait_sent(load.total() / 4).await;
    let asked_at_kill = asked.load(Relaxed);
    load.drop_via(&hosts[2].ingress);
    hosts[2].kill();
    let killed_ms = unix_ms();
    let killed = Instant::now();
    // A failure below prints what the hosts said about the senders and receivers.
    let _dump = DumpOnPanic(&hosts, killed_ms);
    let probes: Vec<_> = probe_keys
        .iter()
        .map(|id| {
            let (client, via, id) = (client.clone(), ingress[0].clone(), id.clone());
            tokio::spawn(async move {
                loop {
                    let (s, b) =
                        post(&client, &via, &format!("{id}/ask/record"), "1", Some(2_000)).await;
                    if s == 200 {
                        // A fresh activation on a survivor: h3's state died with it.
                        assert_eq!(b["count"], 1, "{id}: {b}");
                        return killed.elapsed().as_millis() as u64;
                    }
                    assert!(matches!(s, 503 | 504), "{id}: {s} {b}");
                    assert!(
                        killed.elapsed() < Duration::from_secs(60),
                        "{id} never came back"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        })
        .collect();
    assert!(
        asked_at_kill < ASKERS * ASKS,
        "the asks finished before the kill: the test did not kill under load"
    );
    // The survivors hold the dead host's outbox partitions once they see it gone (its leases
    // are ended then), not when its 30 s partition lease (the default) would lapse.
    wait_relay_shares(&[&hosts[0], &hosts[1]], &["h1", "h2"], PARTITIONS).await;
    let takeover = killed.elapsed();
    assert!(
        takeover < Duration::from_millis(1_500 + 8_500),
        "the survivors took the dead host's partitions only after {takeover:?}"
    );

    let mut counts: BTreeMap<String, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for a in askers {
        counts.extend(a.await.unwrap());
    }
    load.finish().await;
    let survivors = ["h1", "h2"];
    for (id, seen) in &counts {
        let ns: Vec<u64> = seen.iter().map(|(n, _, _)| *n).collect();
        if owner(id, &NODES) == "h3" {
            // Counted afresh where it runs now: the answers after the kill end in 1..m.
            let after: Vec<u64> = seen
                .iter()
                .filter(|(_, _, at)| *at > killed_ms)
                .map(|(n, _, _)| *n)
                .collect();
            let restart = after.iter().rposition(|n| *n == 1).unwrap_or(0);
            let tail = &after[restart..];
            assert_eq!(
                tail,
                (1..=tail.len() as u64).collect::<Vec<_>>(),
                "{id} after the kill: {ns:?}"
            );
        } else {
            assert_eq!(owner(id, &survivors), owner(id, &NODES));
            assert_eq!(
                ns,
                (1..=ns.len() as u64).collect::<Vec<_>>(),
                "{id}: every acknowledged ask counted once, no gap"
            );
        }
    }
    let failovers: Vec<u64> = futures_join(probes).await;
    let bound = 1_500 + 8_500;
    assert!(
        failovers.iter().all(|ms| *ms < bound),
        "a dead host's key answered again only after {:?} ms (bound {bound} ms); all: {failovers:?}",
        failovers.iter().max()
    );

    // Every message at least once at every receiver, each sender's first copies in order;
    // duplicates only as the kill explains.
    let resent = load.resent();
    let h3_partitions = (0..PARTITIONS)
        .filter(|p| sluice_node::relay_share("h3", NODES.iter().copied(), PARTITIONS).contains(p))
        .count();
    let dup_bound = resent * RECEIVERS + h3_partitions * BATCH as usize;
    let dups = load
        .delivered_in_order(&ingress[0], &db, &hosts.iter().collect::<Vec<_>>())
        .await;
    assert!(
        dups <= dup_bound,
        "{dups} duplicates; the kill explains at most {dup_bound} ({resent} dispatches sent again × {RECEIVERS} receivers + {h3_partitions} partitions × a batch of {BATCH})"
    );

    // No key live on two hosts at once: each host's activations as intervals (h3's end at
    // the kill, where they did not end before), compared per key across hosts.
    let mut intervals: BTreeMap<String, Vec<(u64, u64, &str)>> = BTreeMap::new();
    for (h, node) in hosts.iter().zip(NODES) {
        let mut open: BTreeMap<String, u64> = BTreeMap::new();
        for (actor, what, at) in activation_log(h) {
            if what == "activated" {
                open.insert(actor, at);
            } else if let Some(from) = open.remove(&actor) {
                intervals.entry(actor).or_default().push((from, at, node));
            }
        }
        let end = if node == "h3" { killed_ms } else { u64::MAX };
        for (actor, from) in open {
            intervals.entry(actor).or_default().push((from, end, node));
        }
    }
    assert!(
        intervals.keys().any(|k| k.starts_with("Echo/c-")),
        "no activation log: {:?}",
        hosts[0].stderr_lines().iter().take(5).collect::<Vec<_>>()
    );
    let mut moved = 0;
    for (actor, mut spans) in intervals {
        spans.sort();
        for w in spans.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "{actor} was live on {} from {} and on {} from {} until {}",
                w[1].2,
                w[1].0,
                w[0].2,
                w[0].0,
                w[0].1
            );
        }
        moved += usize::from(spans.iter().any(|s| s.2 == "h3") && spans.len() > 1);
    }
    assert!(moved > 0, "no key moved off the dead host");
    eprintln!(
        "sigkill under load: partitions taken over after {takeover:?}, failover p_max {:?} ms over {} keys, {dups} duplicates (bound {dup_bound}), {resent} dispatches resent, {moved} actors moved, run {:?}",
        failovers.iter().max(),
        failovers.len(),
        killed.elapsed()
    );
    drop(apps);
}

/// Asks `Echo/c-{k}` (`k < counters`) `asks` times in turn through the ingresses in `via`:
/// an ask that fails (503 or 504 while NATS is away) is counted in `failed` and sent again.
/// The task returns each key's acknowledged counts, in the order acknowledged.
struct Asks {
    asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    failed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<BTreeMap<String, Vec<u64>>>,
}

fn ask_counters(via: Vec<String>, counters: usize, asks: usize) -> Asks {
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let failed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (counter, failures) = (asked.clone(), failed.clone());
    let task = tokio::spawn(async move {
        let client = reqwest::Client::new();
        let mut counts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let started = Instant::now();
        for i in 0..asks {
            let id = format!("Echo/c-{}", i % counters);
            let mut attempt = 0;
            loop {
                let host = &via[(i + attempt) % via.len()];
                let (status, reply) =
                    post(&client, host, &format!("{id}/ask/record"), "1", Some(5_000)).await;
                if status == 200 {
                    counts
                        .entry(id.clone())
                        .or_default()
                        .push(reply["count"].as_u64().unwrap());
                    break;
                }
                assert!(
                    matches!(status, 503 | 504),
                    "{id} via {host}: {status} {reply}"
                );
                assert!(
                    started.elapsed() < Duration::from_secs(240),
                    "{id} never answered again: {status} {reply}"
                );
                attempt += 1;
                failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        counts
    });
    Asks {
        asked,
        failed,
        task,
    }
}

/// nats-server killed and started again (same port, same JetStream store) in the middle of
/// asks and outbox dispatches through every host's ingress:
/// - every host reconnects: each sees all three members again with a valid lease;
/// - no acknowledged ask is lost: each counter's acknowledged counts only grow (state that
///   was lost, or a key run twice, would count from 1 again);
/// - every acknowledged dispatch reaches every receiver at least once, each sender's messages
///   first in the order sent, with duplicates only from dispatches sent again and one relay
///   batch per partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nats_server_restarted_under_load_loses_nothing_acknowledged_and_every_host_reconnects() {
    const PARTITIONS: u32 = 8;
    const BATCH: u32 = 50;
    const SENDERS: usize = 4;
    const RECEIVERS: usize = 6;
    const SENDS: usize = 300;
    const COUNTERS: usize = 60;
    const ASKS: usize = 3_000;
    // The server is down for well under the member TTL, so the members' entries and leases
    // outlive it (a lapsed lease would stop every actor and lose the counters' state). Calls
    // in flight fail as soon as the connection drops, and hosts reconnect within a heartbeat
    // of the server's return, so the outage is the restart's own time plus ~0.5 s.
    let config = |_: &str| {
        format!(
            "{}\n[outbox]\npartitions = {PARTITIONS}\nrelay_batch_size = {BATCH}\n",
            app_config()
                .replace("heartbeat_ms = 300", "heartbeat_ms = 500")
                .replace("member_ttl_ms = 1500", "member_ttl_ms = 8000")
        )
    };
    let Some(mut c) = three_hosts_with("sluice_cluster_nats_restart", config).await else {
        return;
    };
    let ingress: Vec<String> = c.hosts.iter().map(|h| h.ingress.clone()).collect();
    let receivers: Vec<String> = (0..RECEIVERS).map(|r| format!("Echo/rcv-{r}")).collect();
    let mut load = Dispatches::start(ingress.clone(), SENDERS, SENDS, receivers);
    let asks = ask_counters(ingress.clone(), COUNTERS, ASKS);
    let relaxed = std::sync::atomic::Ordering::Relaxed;

    load.wait_sent(load.total() / 4).await;
    let asked_at_restart = asks.asked.load(relaxed);
    // Down until the load has felt it (remote asks fail at once without NATS), then up again
    // well within the member TTL, so the members' entries outlive the outage.
    // (Calls in flight fail as soon as a host's connection drops, not at their deadline.)
    let failed_before = asks.failed.load(relaxed);
    let down = Instant::now();
    c.nats.kill();
    wait_for(
        Duration::from_secs(3),
        "an ask to fail without NATS",
        || async {
            let failed = asks.failed.load(relaxed);
            if failed > failed_before {
                Ok(())
            } else {
                Err(failed)
            }
        },
    )
    .await;
    for h in &c.hosts {
        wait_for(
            Duration::from_secs(3),
            &format!("{} to see NATS gone", h.admin),
            || async {
                let s = status(h).await;
                if s["cluster"]["connected"] == false {
                    Ok(())
                } else {
                    Err(s)
                }
            },
        )
        .await;
    }
    c.nats.restart().await.expect("nats-server restarts");
    let outage = down.elapsed();
    assert!(
        load.sent() < load.total() && asked_at_restart < ASKS,
        "the load finished before the restart: the test did not restart under load"
    );
    for h in &c.hosts {
        wait_members(h, &NODES).await;
        wait_for(
            Duration::from_secs(30),
            &format!("{} to be connected with a valid lease again", h.admin),
            || async {
                let s = status(h).await;
                if s["cluster"]["connected"] == true && s["cluster"]["lease_valid"] == true {
                    Ok(())
                } else {
                    Err(s)
                }
            },
        )
        .await;
    }
    let reconnected = down.elapsed();

    let counts = asks.task.await.unwrap();
    let failed = asks.failed.load(relaxed);
    load.finish().await;
    for (id, ns) in &counts {
        assert!(
            ns.windows(2).all(|w| w[1] > w[0]),
            "{id}: an acknowledged count was lost or repeated: {ns:?}"
        );
    }
    assert_eq!(counts.values().map(Vec::len).sum::<usize>(), ASKS);
    let resent = load.resent();
    let dup_bound = resent * RECEIVERS + PARTITIONS as usize * BATCH as usize;
    let dups = load
        .delivered_in_order(&ingress[0], &c.db, &c.hosts.iter().collect::<Vec<_>>())
        .await;
    assert!(
        dups <= dup_bound,
        "{dups} duplicates; the restart explains at most {dup_bound} ({resent} dispatches sent again × {RECEIVERS} receivers + {PARTITIONS} partitions × a batch of {BATCH})"
    );
    eprintln!(
        "nats restart under load: server down {outage:?}, every host reconnected after {reconnected:?}, {failed} asks failed and sent again, {resent} dispatches resent, {dups} duplicates (bound {dup_bound})"
    );
}

/// The dead-lettered outbox rows of `db`: (id, receiver, reason, last error).
async fn dead_lettered(db: &str) -> Vec<(i64, String, String, String)> {
    use sqlx::Connection as _;
    let mut c = sqlx::PgConnection::connect(db).await.unwrap();
    sqlx::query_as(
        "SELECT id, receiver, coalesce(dead_reason, ''), coalesce(last_error, '') \
         FROM outbox_messages WHERE dead_lettered ORDER BY id",
    )
    .fetch_all(&mut c)
    .await
    .unwrap()
}

/// The wall-clock stamps of `h`'s log lines that contain `what`, in order.
fn logged(h: &SluiceRun, what: &str) -> Vec<String> {
    h.stderr_lines()
        .into_iter()
        .filter(|l| l.contains(what))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// A member cut off from NATS (it joined through a proxy the test cuts) while dispatches flow
/// through the others' ingress:
/// - it stops relaying its outbox partitions once its own cluster lease lapses (before the
///   others can see it gone), though Postgres is still there for it, and its actors stop;
/// - the others relay its partitions once they see it gone (its partition leases ended, not
///   waited out: the default lease is 30 s);
/// - every receiver gets every message, each sender's in the order sent;
/// - healed, it rejoins as a new incarnation without a restart and serves its keys again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_cut_off_from_nats_stops_relaying_and_the_others_take_its_partitions_at_once() {
    const PARTITIONS: u32 = 8;
    const BATCH: u32 = 50;
    const SENDERS: usize = 4;
    const RECEIVERS: usize = 6;
    const SENDS: usize = 200;
    let Some(db) = fresh_postgres_database("sluice_cluster_cut_off").await else {
        return;
    };
    let nats = NatsServer::start()
        .await
        .expect("the test nats-server (scripts/nats.sh install)");
    let proxy = sluice_cluster::testing::Proxy::start(format!("127.0.0.1:{}", nats.port())).await;
    let config = format!(
        "{}\n[outbox]\npartitions = {PARTITIONS}\nrelay_batch_size = {BATCH}\n",
        app_config()
    );
    let mut hosts = Vec::new();
    let mut apps = Vec::new();
    for node in NODES {
        let url = if node == "h3" {
            proxy.url()
        } else {
            nats.url()
        };
        let (h, a) = start_member_at(&url, &db, node, &config, &[], &[]).await;
        hosts.push(h);
        apps.push(a);
    }
    for h in &hosts {
        wait_members(h, &NODES).await;
    }
    let all: Vec<&SluiceRun> = hosts.iter().collect();
    wait_relay_shares(&all, &NODES, PARTITIONS).await;
    assert!(
        !relayed_partitions(&hosts[2]).await.is_empty(),
        "h3 relays no partition: the cut would prove nothing"
    );

    // Receivers that stay where they are when h3 goes.
    let receivers: Vec<String> = (0..)
        .map(|r| format!("Echo/rcv-{r}"))
        .filter(|id| owner(id, &NODES) != "h3")
        .take(RECEIVERS)
        .collect();
    // An actor h3 runs, idle when the cut comes.
    let client = reqwest::Client::new();
    let on_h3 = key_on("Echo", "h3");
    let (st, reply) = post(
        &client,
        &hosts[0].ingress,
        &format!("{on_h3}/ask/record"),
        "x",
        None,
    )
    .await;
    assert_eq!(st, 200, "{reply}");
    let via = vec![hosts[0].ingress.clone(), hosts[1].ingress.clone()];
    let mut load = Dispatches::start(via, SENDERS, SENDS, receivers);
    load.wait_sent(load.total() / 4).await;
    const TOOK: &str = "cluster: relaying outbox partitions";
    let shares_before: Vec<usize> = hosts[..2].iter().map(|h| logged(h, TOOK).len()).collect();
    proxy.cut();
    let cut = Instant::now();

    wait_for(
        Duration::from_secs(10),
        "h3 to stop relaying once its lease lapsed (seen: status, leases held)",
        || async {
            let s = status(&hosts[2]).await;
            let listed: Vec<u32> = serde_json::from_value(s["cluster"]["relayed"].clone()).unwrap();
            let held = relayed_partitions(&hosts[2]).await;
            // Fenced: its actors stopped too (activations under the lapsed lease end).
            let live = type_field(&s, "Echo", "active");
            if listed.is_empty()
                && held.is_empty()
                && s["cluster"]["lease_valid"] == false
                && live == 0
            {
                Ok(())
            } else {
                Err((listed, held, s["cluster"]["lease_valid"].clone(), live))
            }
        },
    )
    .await;
    let stopped = cut.elapsed();
    wait_relay_shares(&[&hosts[0], &hosts[1]], &["h1", "h2"], PARTITIONS).await;
    let takeover = cut.elapsed();
    // h3 gave its partitions up before another member took any of them (the log lines'
    // wall clocks, one machine): when its lease lapsed, not when the others saw it gone.
    let gave_up = logged(&hosts[2], "lease lapsed: relaying no outbox partition");
    let moved: Vec<String> = hosts[..2]
        .iter()
        .zip(&shares_before)
        .flat_map(|(h, before)| logged(h, TOOK)[*before..].to_vec())
        .collect();
    assert!(
        !gave_up.is_empty() && !moved.is_empty() && moved.iter().all(|m| *m > gave_up[0]),
        "h3 gave its partitions up at {gave_up:?}; the others took their new shares at {moved:?}"
    );
    assert!(
        takeover < Duration::from_millis(1_500 + 8_500),
        "the others took h3's partitions only after {takeover:?}"
    );
    assert!(
        load.sent() < load.total(),
        "the senders finished before the partitions moved: the test did not cut under load"
    );
    load.finish().await;
    // h3's relay failed every attempt while it was cut off (no NATS to route through): that
    // was its outage, not the messages' failures, so none may be dead-lettered for it (one
    // was, for max_attempts, before such attempts stopped counting).
    let dead = dead_lettered(&db).await;
    assert!(dead.is_empty(), "dead-lettered during the cut: {dead:?}");
    let resent = load.resent();
    let dup_bound = resent * RECEIVERS + PARTITIONS as usize * BATCH as usize;
    let dups = load
        .delivered_in_order(&hosts[0].ingress, &db, &hosts.iter().collect::<Vec<_>>())
        .await;
    assert!(
        dups <= dup_bound,
        "{dups} duplicates; the cut explains at most {dup_bound}"
    );
    eprintln!(
        "member cut off: it stopped relaying {stopped:?} after the cut, the others held its partitions after {takeover:?}, {resent} dispatches resent, {dups} duplicates"
    );

    // Healed: its entry expired meanwhile, so it rejoins as a new incarnation (no restart),
    // takes its share back and serves its keys again, afresh (state went with the fence).
    proxy.heal();
    let healed = Instant::now();
    for h in &hosts {
        wait_members(h, &NODES).await;
    }
    wait_for(
        Duration::from_secs(15),
        "h3 to hold a valid lease again",
        || async {
            let s = status(&hosts[2]).await;
            if s["cluster"]["lease_valid"] == true {
                Ok(())
            } else {
                Err(s)
            }
        },
    )
    .await;
    let all: Vec<&SluiceRun> = hosts.iter().collect();
    wait_relay_shares(&all, &NODES, PARTITIONS).await;
    let (st, reply) = post(
        &client,
        &hosts[0].ingress,
        &format!("{on_h3}/ask/record"),
        "y",
        None,
    )
    .await;
    assert_eq!(st, 200, "{reply}");
    assert_eq!(
        reply["count"], 1,
        "{on_h3} kept state across the fence: {reply}"
    );
    assert_eq!(
        type_field(&status(&hosts[2]).await, "Echo", "active"),
        1,
        "{on_h3} runs on h3 again"
    );
    eprintln!(
        "member cut off: back and relaying its share {:?} after the heal",
        healed.elapsed()
    );
    drop(apps);
}
