//! Clients of the ingress and admin API, used by `sluice call|tell|deploy|status`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine as _;
use sluice_app::AppConfig;

use crate::admin::DeployRequest;

/// How long a client command waits for a host that is starting (nothing listening yet)
/// before it gives up.
pub const WAIT_FOR_HOST: Duration = Duration::from_secs(10);

/// Sends the request `make` builds, again every 100 ms while nothing accepts the connection,
/// for at most `WAIT_FOR_HOST`: a host that is starting has not bound its port yet. A request
/// that was refused at connect was never sent, so sending it again is safe for a tell too.
async fn send_waiting(
    what: &str,
    make: impl Fn() -> reqwest::RequestBuilder,
) -> anyhow::Result<reqwest::Response> {
    let start = std::time::Instant::now();
    let mut said = false;
    loop {
        match make().send().await {
            Ok(r) => return Ok(r),
            Err(e) if e.is_connect() && start.elapsed() < WAIT_FOR_HOST => {
                // A note for a person at a terminal; a script reads only the outcome.
                if !said && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                    eprintln!(
                        "waiting up to {} s for the {what} to start…",
                        WAIT_FOR_HOST.as_secs()
                    );
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Never sent (a URL over the 65534 bytes a request line may carry here): say so,
            // without echoing the URL.
            Err(e) if e.is_builder() => {
                return Err(anyhow::Error::new(e.without_url())
                    .context("the request could not be sent as HTTP"));
            }
            Err(e) if e.is_connect() => {
                return Err(anyhow::Error::new(e).context(format!(
                    "{what} unreachable (waited {} s)",
                    WAIT_FOR_HOST.as_secs()
                )));
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("{what} unreachable"))),
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .expect("http client")
}

/// The outcome of an ask/tell over HTTP: status and body.
pub struct CallOutcome {
    /// HTTP status.
    pub status: u16,
    /// Response body.
    pub body: Vec<u8>,
}

/// What a call says about itself besides its payload.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallHeaders<'a> {
    /// The call's deadline (`x-sluice-deadline-ms`).
    pub deadline_ms: Option<u64>,
    /// The principal it is made for (`x-sluice-principal`).
    pub principal: Option<&'a str>,
    /// The ingress bearer token.
    pub token: Option<&'a str>,
}

/// `s` as one path segment: every byte but `[A-Za-z0-9-._~]` percent-encoded, so a key may
/// hold `/`, `?`, `#` or `%`, and a control character reaches the host (which refuses it)
/// instead of being dropped by URL parsing.
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// POSTs to the ingress: `verb` is `ask` or `tell`.
pub async fn call(
    base: &str,
    verb: &str,
    actor: &str,
    msg_type: &str,
    payload: Vec<u8>,
    headers: &CallHeaders<'_>,
) -> anyhow::Result<CallOutcome> {
    let CallHeaders {
        deadline_ms,
        principal,
        token,
    } = *headers;
    let Some((ty, key)) = actor.split_once('/') else {
        bail!("actor must be TYPE/KEY, got {actor:?}")
    };
    let url = format!(
        "{}/actors/{}/{}/{verb}/{}",
        base.trim_end_matches('/'),
        segment(ty),
        segment(key),
        segment(msg_type)
    );
    let http = client();
    let resp = send_waiting("ingress", || {
        let mut req = http.post(&url).body(payload.clone());
        if let Some(d) = deadline_ms {
            req = req.header(crate::ingress::DEADLINE_HEADER, d.to_string());
        }
        if let Some(p) = principal {
            req = req.header(crate::ingress::PRINCIPAL_HEADER, p);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req
    })
    .await?;
    Ok(CallOutcome {
        status: resp.status().as_u16(),
        body: resp.bytes().await?.to_vec(),
    })
}

/// What `sluice deploy` reports: where it went and what each type became.
#[derive(Debug, Clone)]
pub struct DeployReport {
    /// The admin API reached.
    pub host: String,
    /// The app that host runs (`None`: a host that does not say, e.g. an embedded one).
    pub host_app: Option<String>,
    /// Per actor type: its version after the deploy and whether it was unchanged.
    pub types: Vec<(String, u64, bool)>,
}

/// How a deploy treats a host that runs another app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppCheck {
    /// Refuse it (the default).
    Refuse,
    /// Deploy anyway (`--force`).
    Force,
}

/// Deploys every child of the app in `dir` through the admin API at `base`, reporting each.
/// First reads the host's status (waiting briefly for a host that is starting) and refuses a
/// host whose app is another one, unless `check` is [`AppCheck::Force`]; the host checks
/// again on each deploy request.
pub async fn deploy(
    base: &str,
    dir: &Path,
    token: Option<&str>,
    check: AppCheck,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<DeployReport> {
    let app = AppConfig::load(dir)?;
    let name = app.app_name(dir);
    let base = base.trim_end_matches('/');
    let status: serde_json::Value = serde_json::from_str(&status(base, token).await?)
        .context("the admin API's status is not JSON")?;
    let host_app = status["app"].as_str().map(str::to_string);
    match &host_app {
        Some(h) => progress(&format!("host {base} runs app {h:?}")),
        None => progress(&format!("host {base} (it does not name its app)")),
    }
    if let Some(h) = &host_app
        && *h != name
    {
        if check == AppCheck::Refuse {
            bail!(
                "the host at {base} runs app {h:?}, not {name:?} (from {}): nothing deployed; pass --force to deploy there anyway",
                dir.display()
            );
        }
        progress(&format!("--force: deploying app {name:?} into app {h:?}"));
    }
    let http = client();
    let mut types = Vec::new();
    for child in &app.supervisor.children {
        let path = dir.join(&child.module);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        progress(&format!(
            "[{}] sending {} ({}); the host compiles it unless unchanged or cached",
            child.actor_type,
            path.display(),
            size(bytes.len())
        ));
        let started = std::time::Instant::now();
        let body = DeployRequest {
            child: child_json(child)?,
            module_base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
            app: (check == AppCheck::Refuse).then(|| name.clone()),
        };
        let resp = send_waiting("admin API", || {
            let req = http.post(format!("{base}/admin/deploy")).json(&body);
            match token {
                Some(t) => req.bearer_auth(t),
                None => req,
            }
        })
        .await?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            bail!("deploying {} failed ({status}): {text}", child.actor_type);
        }
        let out: DeployResponse = serde_json::from_str(&text)
            .with_context(|| format!("the admin API's deploy answer: {text}"))?;
        let took = started.elapsed().as_secs_f64();
        progress(&format!(
            "[{}] {}",
            child.actor_type,
            if out.unchanged {
                format!(
                    "unchanged: same module and spec, version {} kept (running actors keep their state)",
                    out.version
                )
            } else if out.cached {
                format!(
                    "done: version {} (machine code cached, loaded in {} ms; {took:.1} s in all)",
                    out.version, out.compile_ms
                )
            } else {
                format!(
                    "done: version {} (compiled in {:.1} s; {took:.1} s in all)",
                    out.version,
                    out.compile_ms as f64 / 1000.0
                )
            }
        ));
        if let Some(r) = &out.cluster {
            for line in roll_out_lines(&child.actor_type, r) {
                progress(&line);
            }
        }
        types.push((child.actor_type.clone(), out.version, out.unchanged));
    }
    Ok(DeployReport {
        host: base.to_string(),
        host_app,
        types,
    })
}

/// The admin API's answer to a deploy.
#[derive(Debug, serde::Deserialize)]
struct DeployResponse {
    version: u64,
    #[serde(default)]
    unchanged: bool,
    #[serde(default)]
    cached: bool,
    #[serde(default)]
    compile_ms: u64,
    /// On a member of a cluster: the roll-out to every member.
    #[serde(default)]
    cluster: Option<serde_json::Value>,
}

/// One line per member of a cluster roll-out: the version it serves, or why it kept its own.
fn roll_out_lines(ty: &str, r: &serde_json::Value) -> Vec<String> {
    if let Some(e) = r["error"].as_str() {
        return vec![format!("[{ty}] {e}")];
    }
    let version = r["version"].as_u64().unwrap_or(0);
    let mut out = Vec::new();
    for h in r["hosts"].as_array().into_iter().flatten() {
        let node = h["node"].as_str().unwrap_or("?");
        out.push(match h["error"].as_str() {
            None => format!("[{ty}] cluster version {version}: {node} serves it"),
            Some(e) => {
                format!("[{ty}] cluster version {version}: {node} kept its running version: {e}")
            }
        });
    }
    out
}

/// `n` bytes for people: `812 B`, `44 KB`, `2.6 MB`.
fn size(n: usize) -> String {
    match n {
        n if n < 1000 => format!("{n} B"),
        n if n < 1_000_000 => format!("{} KB", n / 1000),
        n => format!("{:.1} MB", n as f64 / 1e6),
    }
}

fn child_json(child: &sluice_runtime::ChildSpec) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::to_value(child)?)
}

/// GETs `/admin/status`.
pub async fn status(base: &str, token: Option<&str>) -> anyhow::Result<String> {
    let http = client();
    let url = format!("{}/admin/status", base.trim_end_matches('/'));
    let resp = send_waiting("admin API", || {
        let req = http.get(&url);
        match token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    })
    .await?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("status failed ({status}): {text}");
    }
    Ok(text)
}

/// What `sluice reminders` does.
pub enum RemindersOp {
    /// List pending reminders.
    List {
        /// Only this actor's.
        receiver: Option<String>,
        /// At most this many.
        limit: Option<u32>,
    },
    /// Cancel one named reminder.
    Cancel(crate::admin::CancelReminder),
}

/// `sluice reminders list|cancel` against the admin API; the JSON it answered.
pub async fn reminders(base: &str, token: Option<&str>, op: RemindersOp) -> anyhow::Result<String> {
    let base = base.trim_end_matches('/');
    let (what, req) = match &op {
        RemindersOp::List { receiver, limit } => {
            let mut r = client().get(format!("{base}/admin/reminders"));
            if let Some(rcv) = receiver {
                r = r.query(&[("receiver", rcv)]);
            }
            if let Some(n) = limit {
                r = r.query(&[("limit", n)]);
            }
            ("list", r)
        }
        RemindersOp::Cancel(body) => (
            "cancel",
            client()
                .post(format!("{base}/admin/reminders/cancel"))
                .json(body),
        ),
    };
    admin_text(req, token, &format!("reminders {what}")).await
}

/// `sluice dlq`: `op` is `list`, `replay` or `purge`; `body` selects for replay/purge.
pub async fn dlq(
    base: &str,
    token: Option<&str>,
    op: &str,
    receiver: Option<&str>,
    body: &crate::admin::DlqRequest,
) -> anyhow::Result<String> {
    let base = base.trim_end_matches('/');
    let req = match op {
        "list" => {
            let mut r = client().get(format!("{base}/admin/dlq"));
            if let Some(rcv) = receiver {
                r = r.query(&[("receiver", rcv)]);
            }
            r
        }
        "replay" | "purge" => client().post(format!("{base}/admin/dlq/{op}")).json(body),
        other => bail!("unknown dlq operation {other:?} (list, replay, purge)"),
    };
    admin_text(req, token, &format!("dlq {op}")).await
}

/// Sends an admin API request (with the bearer token, if any); the body of a success, else
/// an error naming `what` with the status and the body.
async fn admin_text(
    mut req: reqwest::RequestBuilder,
    token: Option<&str>,
    what: &str,
) -> anyhow::Result<String> {
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.context("admin API unreachable")?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("{what} failed ({status}): {text}");
    }
    Ok(text)
}
