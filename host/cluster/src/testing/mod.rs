//! A real nats-server process for tests: started on a free loopback port with JetStream in its
//! own temp dir, and stopped, killed or restarted (same port, same store) on demand, so tests
//! can take NATS away under load. Not a mock: the binary `scripts/nats.sh install` builds.
//!
//! The binary is `$SLUICE_NATS_SERVER`, else the pinned build in
//! `~/.cache/sluice/nats-server/<version>/`. A missing binary is an error (tests fail, never
//! skip).

mod proxy;

pub use proxy::Proxy;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The nats-server version `scripts/nats.sh` builds (keep the two in step).
pub const PINNED_VERSION: &str = "v2.14.10";

/// Why a test server could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestServerError {
    /// No nats-server binary.
    #[error(
        "nats-server not found (looked at $SLUICE_NATS_SERVER and {0}); run `bash scripts/nats.sh install`"
    )]
    NotInstalled(String),
    /// Spawning or preparing it failed.
    #[error("nats-server: {0}")]
    Io(#[from] std::io::Error),
    /// It did not come up in time.
    #[error("nats-server did not start within {0:?}: {1}")]
    NotReady(Duration, String),
}

/// The binary tests use.
pub fn nats_server_binary() -> Result<PathBuf, TestServerError> {
    if let Some(p) = std::env::var_os("SLUICE_NATS_SERVER") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(TestServerError::NotInstalled(p.display().to_string()));
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    let pinned = Path::new(&home)
        .join(".cache/sluice/nats-server")
        .join(PINNED_VERSION)
        .join("nats-server");
    if pinned.is_file() {
        Ok(pinned)
    } else {
        Err(TestServerError::NotInstalled(pinned.display().to_string()))
    }
}

/// A nats-server child process. Dropping it kills the process and removes its store.
pub struct NatsServer {
    binary: PathBuf,
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

/// How long a start may take.
const START_BOUND: Duration = Duration::from_secs(20);

impl NatsServer {
    /// Starts a server on a free port.
    pub async fn start() -> Result<Self, TestServerError> {
        Self::start_with("").await
    }

    /// Starts a server with `extra` appended to its config (e.g. an `authorization` block).
    pub async fn start_with(extra: &str) -> Result<Self, TestServerError> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let binary = nats_server_binary()?;
        let dir = std::env::temp_dir().join(format!(
            "sluice-nats-test-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("jetstream"))?;
        std::fs::write(dir.join("extra.conf"), extra)?;
        let mut s = Self {
            binary,
            dir,
            port: 0,
            child: None,
        };
        s.spawn().await?;
        Ok(s)
    }

    fn write_config(&self) -> Result<PathBuf, TestServerError> {
        // Port -1: the server picks one and writes it to the ports file; a restart reuses it.
        let port = if self.port == 0 {
            "-1".to_string()
        } else {
            self.port.to_string()
        };
        let extra = std::fs::read_to_string(self.dir.join("extra.conf"))?;
        let conf = format!(
            "listen: \"127.0.0.1:{port}\"\nmax_payload: 8MB\nports_file_dir: \"{dir}\"\njetstream {{\n  store_dir: \"{dir}/jetstream\"\n}}\n{extra}\n",
            dir = self.dir.display()
        );
        let path = self.dir.join("nats.conf");
        std::fs::write(&path, conf)?;
        Ok(path)
    }

    async fn spawn(&mut self) -> Result<(), TestServerError> {
        let conf = self.write_config()?;
        let log = std::fs::File::create(self.dir.join("server.log"))?;
        let mut cmd = Command::new(&self.binary);
        cmd.arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // SAFETY: the closure runs in the forked child before exec and only calls prctl, which
        // is async-signal-safe. It makes the kernel SIGKILL the server when the thread that
        // spawned it exits, so a test process that is killed (timeout, panic in a signal
        // handler) never leaves a server running. The spawning thread is the test's or a
        // runtime worker, both of which outlive the NatsServer value.
        #[cfg(target_os = "linux")]
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let ports_file = self.dir.join(format!("nats-server_{}.ports", child.id()));
        self.child = Some(child);
        let start = Instant::now();
        loop {
            if let Some(port) = read_port(&ports_file)
                && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                self.port = port;
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(TestServerError::NotReady(
                    start.elapsed(),
                    format!("exited with {status}: {}", self.log()),
                ));
            }
            if start.elapsed() > START_BOUND {
                return Err(TestServerError::NotReady(START_BOUND, self.log()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The port (stable across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the process gracefully (SIGTERM) and waits for it, at most 10 s, then kills it.
    pub async fn stop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = c.kill();
        let _ = c.wait();
    }

    /// Starts the process again on the same port with the same JetStream store.
    pub async fn restart(&mut self) -> Result<(), TestServerError> {
        self.kill();
        self.spawn().await
    }
}

fn read_port(path: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let url = v.get("nats")?.get(0)?.as_str()?;
    url.rsplit(':').next()?.parse().ok()
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
