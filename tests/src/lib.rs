//! Shared support for the end-to-end tests: build the real guests once, start real hosts,
//! wait on conditions with a bound (never a bare sleep).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sluice_runtime::{ChildSpec, Host, HostConfig};

pub mod raw;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Builds the Rust test guests (once per test binary; cargo itself serialises concurrent
/// builds) and returns the path of guest `name` (`echo`, `slow`, `crash`, `loop`, `hog`, `flood`,
/// `probe`).
pub fn rust_guest(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    let dir = root().join("guests/rust");
    BUILT.get_or_init(|| {
        let status = job_queue_outbox::cargo()
            .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
            .current_dir(&dir)
            .env_remove("CARGO_TARGET_DIR")
            .status()
            .expect("running cargo for the Rust guests");
        assert!(status.success(), "building the Rust test guests failed");
    });
    let p = dir
        .join("target/wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(p.exists(), "guest {name} missing at {}", p.display());
    p
}

/// A temporary app folder for `sluice run`: each named Rust test guest copied in as
/// `<name>.wasm`, and `config` as its `app-config.toml`.
pub fn rust_app(guests: &[&str], config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary app folder");
    for name in guests {
        std::fs::copy(rust_guest(name), dir.path().join(format!("{name}.wasm")))
            .expect("copying a guest into the app folder");
    }
    std::fs::write(dir.path().join("app-config.toml"), config).expect("writing app-config.toml");
    dir
}

/// The `sluice` binary (debug), built and copied to a private path named `name` once per test
/// binary, so a concurrent build elsewhere in the shared target dir cannot swap it mid-test.
/// Tests running in parallel share the copy: copying again over a binary another test is
/// running fails with "Text file busy".
pub fn sluice_binary(name: &str) -> PathBuf {
    sluice_binary_of(name, job_queue_outbox::Profile::Debug)
}

/// As [`sluice_binary`], of the release build (for the benchmarks that start hosts).
pub fn sluice_release_binary(name: &str) -> PathBuf {
    sluice_binary_of(name, job_queue_outbox::Profile::Release)
}

fn sluice_binary_of(name: &str, profile: job_queue_outbox::Profile) -> PathBuf {
    static COPIES: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut copies = COPIES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = copies.iter().find(|(n, _)| n == name) {
        return path.clone();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let tmp = target.join("tmp");
    std::fs::create_dir_all(&tmp).expect("creating target/tmp");
    // Written beside and renamed into place: a process still running an earlier copy (a
    // previous run of this test binary) keeps its own file.
    let private = tmp.join(format!("{name}-{}", short_hash(&root())));
    let staged = tmp.join(format!("{name}.{}", std::process::id()));
    for attempt in 0.. {
        let exe = job_queue_outbox::cargo_build_sluice(profile).unwrap_or_else(|e| panic!("{e}"));
        std::fs::copy(&exe, &staged).expect("copying the sluice binary");
        if job_queue_outbox::built_from_this_checkout(&staged).unwrap_or_else(|e| panic!("{e}")) {
            break;
        }
        assert!(
            attempt < 20,
            "target/debug/sluice keeps coming from another checkout"
        );
    }
    std::fs::rename(&staged, &private).expect("moving the sluice binary into place");
    copies.push((name.to_string(), private.clone()));
    private
}

fn short_hash(p: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    p.hash(&mut h);
    format!("{:08x}", h.finish() as u32)
}

/// A `sluice run APP` child process on loopback ports the OS picks: where it listens, and
/// every line it has printed on stdout and stderr. Killed (SIGKILL) on drop.
pub struct SluiceRun {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT` of the ingress.
    pub ingress: String,
    /// `http://127.0.0.1:PORT` of the admin API.
    pub admin: String,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl SluiceRun {
    /// Starts `bin run app --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 ARGS…` with `env`
    /// added to the test's environment, and waits (bounded) until it prints both addresses.
    /// A `--listen` or `--admin-listen` in `args` replaces the default one.
    pub async fn start(bin: &Path, app: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(bin);
        cmd.arg("run").arg(app);
        for flag in ["--listen", "--admin-listen"] {
            if !args.contains(&flag) {
                cmd.args([flag, "127.0.0.1:0"]);
            }
        }
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawning sluice run");
        let stdout = collect_lines(child.stdout.take().expect("piped stdout"));
        let stderr = collect_lines(child.stderr.take().expect("piped stderr"));
        let mut run = Self {
            child,
            ingress: String::new(),
            admin: String::new(),
            stdout,
            stderr,
        };
        let what = "sluice run to listen (print its ingress and admin addresses)";
        let (ingress, admin) = wait_for(Duration::from_secs(120), what, || {
            let printed = |prefix: &str| {
                run.stdout
                    .lock()
                    .unwrap()
                    .iter()
                    .find_map(|l| l.strip_prefix(prefix).map(|u| u.trim().to_string()))
            };
            let listening = match (printed("sluice: ingress on "), printed("sluice: admin on ")) {
                (Some(i), Some(a)) => Ok((i, a)),
                _ => {
                    if let Ok(Some(status)) = run.child.try_wait() {
                        panic!(
                            "sluice run exited ({status}) before listening; stderr:\n{}",
                            run.stderr.lock().unwrap().join("\n")
                        );
                    }
                    Err(run.stdout.lock().unwrap().clone())
                }
            };
            std::future::ready(listening)
        })
        .await;
        run.ingress = ingress;
        run.admin = admin;
        run
    }

    /// Whether any stdout line so far contains `text`.
    pub fn stdout_has(&self, text: &str) -> bool {
        self.stdout.lock().unwrap().iter().any(|l| l.contains(text))
    }

    /// Whether any stderr line so far contains `text`.
    pub fn stderr_has(&self, text: &str) -> bool {
        self.stderr.lock().unwrap().iter().any(|l| l.contains(text))
    }

    /// Every stderr line so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Every stdout line so far.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    /// Sends SIGTERM (a graceful stop).
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// SIGKILL, at once.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits (bounded) for the process to exit; `None` if it is still running.
    pub async fn wait_exit(&mut self, bound: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < bound {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }
}

impl Drop for SluiceRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `stream` line by line on a thread of its own (so the child never blocks on a full
/// pipe), keeping every line.
fn collect_lines(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    use std::io::BufRead;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        // Bytes, not `lines()`: one line that is not UTF-8 (a guest may log anything) would
        // end the collection there.
        let mut reader = std::io::BufReader::new(stream);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let text = String::from_utf8_lossy(&line);
            sink.lock()
                .unwrap()
                .push(text.trim_end_matches(['\n', '\r']).to_string());
            line.clear();
        }
    });
    lines
}

/// A host configuration for tests: small pool, shared compile cache (idle actors stay for the
/// default 300 s; `lifecycle.rs` sets its own timeout).
pub fn test_config() -> HostConfig {
    HostConfig {
        max_activations: 64,
        cache_dir: Some(root().join("target/sluice-test-cache")),
        ..HostConfig::default()
    }
}

/// Starts a host and deploys `children`, each `(spec, guest name)`.
pub async fn host_with(cfg: HostConfig, children: Vec<(ChildSpec, &str)>) -> Host {
    let host = Host::new(cfg).expect("host starts");
    for (spec, guest) in children {
        let bytes = std::fs::read(rust_guest(guest)).expect("guest readable");
        host.deploy(spec, bytes).await.expect("guest deploys");
    }
    host
}

/// The suites' one bounded wait (its own crate, so the host crates' tests use it too).
pub use sluice_test_wait::{wait_for, wait_until, wait_until_async};

/// Runs a future that completes without waiting — a tell into a local mailbox — in one poll,
/// for the sync conditions of [`wait_until`]. Panics if it would wait.
pub fn ready<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("expected a future that completes at once"),
    }
}

/// Parses a JSON reply.
pub fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "reply is not JSON ({e}): {}",
            String::from_utf8_lossy(bytes)
        )
    })
}

/// The `items` of an echo actor's `recorded` reply, as strings.
pub fn recorded_items(reply: &serde_json::Value) -> Vec<String> {
    reply["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {reply}"))
        .iter()
        .map(|v| v.as_str().expect("string items").to_string())
        .collect()
}

/// What the echo actor `id` has recorded so far.
pub async fn recorded_by(host: &sluice_runtime::Host, id: &str) -> Vec<String> {
    let reply = host
        .ask(id, "recorded", "", Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("asking {id} what it recorded: {e}"));
    recorded_items(&json(&reply))
}

/// A guest language: every one builds the same TESTKIT actors (`guests/TESTKIT.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    /// `guests/rust` (wasm32-wasip2, wit-bindgen).
    Rust,
    /// `guests/go` (mainline Go, wasip1 c-shared + adapter).
    Go,
    /// `guests/python` (componentize-py).
    Python,
    /// `guests/typescript` (jco componentize; QuickJS unless `SLUICE_JS_ENGINE` says
    /// `starlingmonkey`, see [`js_engine`]).
    TypeScript,
}

impl Lang {
    /// Every language, Rust first (the reference).
    pub const ALL: [Lang; 4] = [Lang::Rust, Lang::Go, Lang::Python, Lang::TypeScript];

    /// The folder under `guests/`.
    pub fn dir(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Go => "go",
            Lang::Python => "python",
            Lang::TypeScript => "typescript",
        }
    }
}

/// True when a missing guest toolchain (or Postgres) must fail the test rather than skip it:
/// `sluice-build`'s gate, the only one (CI, or `SLUICE_REQUIRE_GUEST_TOOLCHAINS` set).
pub use sluice_build::toolchains_required;

/// Skips the calling test (it returns next), loudly: panics under [`toolchains_required`],
/// otherwise writes `reason` to the process's stderr directly, past the test harness's output
/// capture (which swallows `eprintln!` of a passing test), so a skip never reads as a pass.
pub fn skip(reason: impl std::fmt::Display) {
    assert!(
        !toolchains_required(),
        "not skipping under CI / SLUICE_REQUIRE_GUEST_TOOLCHAINS: {reason}"
    );
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "*** SKIPPING: {reason} ***");
}

/// A content hash of everything a `lang` guest build reads: the language folder (SDK, testkit,
/// vendored runtime, lock files; not `node_modules`, build outputs or caches), `wit/` and
/// `sluice_build`'s sources (it post-processes some outputs, e.g. the Python leak fix, so a
/// change there must not reuse guests built before it).
fn source_hash(lang: Lang) -> String {
    use sha2::{Digest, Sha256};
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.')
                || matches!(name.as_ref(), "node_modules" | "target" | "__pycache__")
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
    let mut files = Vec::new();
    walk(&root().join("guests").join(lang.dir()), &mut files);
    walk(&root().join("wit"), &mut files);
    walk(&root().join("host").join("build").join("src"), &mut files);
    files.sort();
    let mut h = Sha256::new();
    for f in files {
        h.update(
            f.strip_prefix(root())
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

/// The guest cache folder's name for `lang` at source hash `hash`: TypeScript's names the
/// JavaScript engine too (`typescript-quickjs-<hash>`), so components of the two engines are
/// never mixed up.
fn cache_name(lang: Lang, hash: &str, engine: sluice_build::JsBackend) -> String {
    if lang == Lang::TypeScript {
        format!("{}-{engine}-{hash}", lang.dir())
    } else {
        format!("{}-{hash}", lang.dir())
    }
}

/// The JavaScript engine TypeScript test guests are built with: the one `SLUICE_JS_ENGINE`
/// names, else the default (QuickJS). Panics on an unknown name.
pub fn js_engine() -> sluice_build::JsBackend {
    sluice_build::JsBackend::resolve(None)
        .unwrap_or_else(|e| panic!("{}: {e}", sluice_build::JsBackend::ENV))
}

/// Builds TESTKIT guest `name` of `lang` with `sluice_build` (once per source hash: outputs are
/// cached in `target/guest-cache/<lang>-<hash>/`, shared by every test binary and run; a
/// TypeScript guest is built with the engine `SLUICE_JS_ENGINE` names, QuickJS by default) and
/// returns its path. `None` when the language's toolchain is missing and
/// [`toolchains_required`] is false (the test then skips, saying so through [`skip`]); under
/// the gate a missing toolchain panics with the install command.
pub fn guest(lang: Lang, name: &str) -> Option<PathBuf> {
    guest_on(lang, name, js_engine())
}

/// [`guest`], a TypeScript one built with `engine` whatever `SLUICE_JS_ENGINE` says (the
/// benchmark measures both engines in one run); `engine` means nothing to other languages.
pub fn guest_on(lang: Lang, name: &str, engine: sluice_build::JsBackend) -> Option<PathBuf> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    if lang == Lang::Rust {
        return Some(rust_guest(name));
    }
    static HASHES: Mutex<Option<HashMap<Lang, String>>> = Mutex::new(None);
    // One build at a time per test binary: two cores, and the toolchains share caches.
    static BUILD: Mutex<()> = Mutex::new(());
    let hash = HASHES
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .entry(lang)
        .or_insert_with(|| source_hash(lang))
        .clone();
    let dir = root()
        .join("target/guest-cache")
        .join(cache_name(lang, &hash, engine));
    let out = dir.join(format!("{name}.wasm"));
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    if out.exists() {
        return Some(out);
    }
    std::fs::create_dir_all(&dir).expect("creating the guest cache");
    // Build to a private name, then rename: concurrent test binaries never see half a file.
    let tmp = dir.join(format!("{name}.{}.wasm", std::process::id()));
    let src = root()
        .join("guests")
        .join(lang.dir())
        .join("testkit")
        .join(name);
    let opts = sluice_build::BuildOptions {
        output: Some(tmp.clone()),
        repo_root: Some(root()),
        js_backend: Some(engine),
        ..Default::default()
    };
    let t0 = Instant::now();
    match sluice_build::build(&src, &opts) {
        Ok(b) => {
            eprintln!(
                "built {lang:?} {name}: {:.1} MB in {:.1} s",
                b.size as f64 / 1e6,
                t0.elapsed().as_secs_f64()
            );
            std::fs::rename(&tmp, &out).expect("moving the built guest into the cache");
            Some(out)
        }
        Err(e @ sluice_build::BuildError::MissingToolchain { .. }) => {
            skip(format_args!("{lang:?} guest {name} not built: {e}"));
            None
        }
        Err(e) => panic!("building {lang:?} guest {name} failed: {e}"),
    }
}

/// Attaches an outbox on a fresh SQLite file (default config) to `host`; the returned
/// directory holds the file, so keep it as long as the host runs.
pub async fn attach_sqlite_outbox(host: &Host) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let outbox = sluice_outbox::Outbox::open_sqlite(
        dir.path().join("outbox.db"),
        sluice_outbox::OutboxConfig::default(),
    )
    .await
    .unwrap();
    host.attach_outbox(outbox);
    dir
}

/// Starts a host and deploys `children` built in `lang`; `None` (the caller returns: a loud
/// skip) when the language's toolchain is missing and [`toolchains_required`] is false; under
/// it a missing toolchain panics.
pub async fn poly_host(
    cfg: HostConfig,
    lang: Lang,
    children: Vec<(ChildSpec, &str)>,
) -> Option<Host> {
    let host = Host::new(cfg).expect("host starts");
    for (spec, name) in children {
        let path = guest(lang, name)?;
        let bytes = std::fs::read(&path).expect("guest readable");
        let ty = spec.actor_type.clone();
        if let Err(e) = host.deploy(spec, bytes).await {
            panic!("{lang:?} guest {name} does not deploy as {ty}: {e}");
        }
    }
    Some(host)
}

/// Copies the folder `from` into `to` (created), leaving out build output and caches
/// (`build`, `*.egg-info`, `__pycache__`, `.pytest_cache`, `.mypy_cache`, `.ruff_cache`): a
/// source tree that a build may write into (`pip install` builds a package in place).
pub fn copy_source_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creating the copy's folder");
    for entry in std::fs::read_dir(from).expect("reading the source folder") {
        let entry = entry.expect("a directory entry");
        let name = entry.file_name();
        let skip = [
            "build",
            "__pycache__",
            ".pytest_cache",
            ".mypy_cache",
            ".ruff_cache",
        ];
        if skip.iter().any(|n| name == *n) || name.to_string_lossy().ends_with(".egg-info") {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().expect("a file type").is_dir() {
            copy_source_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copying a source file");
        }
    }
}

/// POSTs `body` (as JSON text) to `{base}/actors/{path}` of a host's HTTP ingress and returns
/// the JSON reply; panics on a status other than 2xx.
pub async fn ingress_ask(base: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    let r = reqwest::Client::new()
        .post(format!("{base}/actors/{path}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One test per language for each behaviour named.
#[macro_export]
macro_rules! per_language {
    ($($body:ident),* $(,)?) => {$(
        mod $body {
            use $crate::Lang;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rust() { super::$body(Lang::Rust).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn go() { super::$body(Lang::Go).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn python() { super::$body(Lang::Python).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn typescript() { super::$body(Lang::TypeScript).await }
        }
    )*};
}

/// Installs this process's Prometheus recorder (the one `sluice run` uses). Call it before
/// building a host whose metrics a test reads: handles registered earlier record nothing.
pub fn install_metrics() {
    sluice_cli::metrics_export::handle();
}

/// The sum of the Prometheus samples `name` whose labels include every `k="v"` of `labels`
/// (0 when there is none). Metrics are per process and tests of one binary run in parallel,
/// so a test reads only labels (actor types) no other test uses, or only lower bounds.
pub fn metric(name: &str, labels: &[(&str, &str)]) -> f64 {
    let text = sluice_cli::metrics_export::handle().render();
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| {
            labels.iter().all(|(k, v)| {
                ['{', ',']
                    .iter()
                    .any(|c| l.contains(&format!("{c}{k}=\"{v}\"")))
            })
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The status of actor type `ty` (panics when it is not deployed).
pub fn type_status(host: &sluice_runtime::Host, ty: &str) -> sluice_runtime::TypeStatus {
    host.status()
        .into_iter()
        .find(|s| s.actor_type == ty)
        .unwrap_or_else(|| panic!("{ty} is not deployed"))
}

/// Live activations of actor type `ty` (0 when it is not deployed).
pub fn active(host: &sluice_runtime::Host, ty: &str) -> usize {
    host.status()
        .into_iter()
        .find(|s| s.actor_type == ty)
        .map_or(0, |s| s.active)
}

/// A fresh database named `NAME_PID` on the test Postgres (`SLUICE_TEST_POSTGRES_URL`, set by
/// `eval "$(scripts/postgres.sh)"`). `None` (skip, loudly) when none is set and
/// [`toolchains_required`] is false; under it (CI, `scripts/test.sh`) a missing server fails.
///
/// The databases of earlier runs (`NAME_PID` whose process is gone) are dropped first, so
/// running the tests again and again does not fill the server.
pub async fn fresh_postgres_database(name: &str) -> Option<String> {
    use sqlx::Connection as _;
    let Ok(base) = std::env::var("SLUICE_TEST_POSTGRES_URL") else {
        skip("SLUICE_TEST_POSTGRES_URL is not set: run `eval \"$(scripts/postgres.sh)\"` first");
        return None;
    };
    let mut admin = sqlx::PgConnection::connect(&base).await.unwrap();
    let earlier: Vec<String> = sqlx::query_scalar("SELECT datname FROM pg_database")
        .fetch_all(&mut admin)
        .await
        .unwrap();
    // Liveness is read from /proc; elsewhere nothing is dropped.
    let procfs = std::path::Path::new("/proc/self").exists();
    for db in earlier.into_iter().filter(|_| procfs) {
        let gone = db
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('_'))
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
        if gone {
            // Best effort: a database still in use by a leftover process stays for next time.
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {db}"))
                .execute(&mut admin)
                .await;
        }
    }
    let name = format!("{name}_{}", std::process::id());
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
        .execute(&mut admin)
        .await
        .unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let (prefix, _) = base.rsplit_once('/').unwrap();
    Some(format!("{prefix}/{name}"))
}

/// A real OTLP/HTTP trace receiver for tests of `sluice run --otlp-endpoint`.
pub mod otlp {
    use std::sync::{Arc, Mutex};

    use axum::body::Bytes;
    use axum::extract::{Request, State};
    use axum::routing::post;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::Span;
    use prost::Message as _;

    /// Every span the receiver has been sent, and every request it was sent at all.
    #[derive(Clone, Default)]
    pub struct Received {
        spans: Arc<Mutex<Vec<Span>>>,
        requests: Arc<Mutex<Vec<String>>>,
    }

    impl Received {
        /// Every span received so far.
        pub fn spans(&self) -> Vec<Span> {
            self.spans.lock().unwrap().clone()
        }

        /// Every HTTP request received so far, as `METHOD URI` (an OTLP export or anything
        /// else, e.g. a request sent to it as an HTTP proxy).
        pub fn requests(&self) -> Vec<String> {
            self.requests.lock().unwrap().clone()
        }
    }

    /// A real OTLP/HTTP trace receiver on a loopback port: POST /v1/traces with a protobuf
    /// `ExportTraceServiceRequest`. Returns its base URL. It also answers (404) and notes any
    /// other request, so it can stand as an HTTP proxy that sees every attempt to send.
    pub async fn otlp_receiver() -> (String, Received) {
        async fn accept(State(r): State<Received>, body: Bytes) -> axum::http::StatusCode {
            let Ok(req) = ExportTraceServiceRequest::decode(body) else {
                return axum::http::StatusCode::BAD_REQUEST;
            };
            let mut spans = r.spans.lock().unwrap();
            for rs in req.resource_spans {
                for ss in rs.scope_spans {
                    spans.extend(ss.spans);
                }
            }
            axum::http::StatusCode::OK
        }
        let received = Received::default();
        let noted = received.clone();
        let app = axum::Router::new()
            .route("/v1/traces", post(accept))
            .fallback(|| async { axum::http::StatusCode::NOT_FOUND })
            .with_state(received.clone())
            .layer(axum::middleware::from_fn(
                move |req: Request, next: axum::middleware::Next| {
                    let noted = noted.clone();
                    async move {
                        let line = format!("{} {}", req.method(), req.uri());
                        noted.requests.lock().unwrap().push(line);
                        next.run(req).await
                    }
                },
            ));
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(l, app).await });
        (url, received)
    }
}

/// Debian's `promtool` (the `prometheus` package; `scripts/console-deps.sh` installs it). A
/// missing one fails the test that runs it, never skips it.
pub const PROMTOOL: &str = "/usr/bin/promtool";

/// Runs `promtool check metrics` on a `/metrics` exposition: `Ok` when it exits 0 and says
/// nothing (no lint complaint at all), else its exit status and everything it said.
pub fn promtool_check_metrics(text: &str) -> Result<(), String> {
    use std::io::Write as _;
    assert!(
        Path::new(PROMTOOL).exists(),
        "promtool (Debian's prometheus package) is missing at {PROMTOOL}: run `bash scripts/console-deps.sh` (scripts/test.sh does)"
    );
    let mut child = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running promtool");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .expect("writing the metrics to promtool");
    let out = child.wait_with_output().expect("waiting for promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && said.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("exit {:?}: {said}", out.status.code()))
    }
}
