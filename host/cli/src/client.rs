//! Clients of the ingress and admin API, used by `sluice call|tell|deploy|status`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine as _;
use sluice_app::AppConfig;

use crate::admin::DeployRequest;

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
    let mut req = client().post(url).body(payload);
    if let Some(d) = deadline_ms {
        req = req.header(crate::ingress::DEADLINE_HEADER, d.to_string());
    }
    if let Some(p) = principal {
        req = req.header(crate::ingress::PRINCIPAL_HEADER, p);
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        // Never sent (a URL over the 65534 bytes a request line may carry here): say so,
        // without echoing the URL.
        Err(e) if e.is_builder() => {
            return Err(anyhow::Error::new(e.without_url())
                .context("the request could not be sent as HTTP"));
        }
        Err(e) => return Err(anyhow::Error::new(e).context("ingress unreachable")),
    };
    Ok(CallOutcome {
        status: resp.status().as_u16(),
        body: resp.bytes().await?.to_vec(),
    })
}

/// Deploys every child of the app in `dir` through the admin API at `base`, reporting each.
pub async fn deploy(
    base: &str,
    dir: &Path,
    token: Option<&str>,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<()> {
    let app = AppConfig::load(dir)?;
    for child in &app.supervisor.children {
        let path = dir.join(&child.module);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        progress(&format!(
            "deploying {} ({} bytes) as {}",
            path.display(),
            bytes.len(),
            child.actor_type
        ));
        let body = DeployRequest {
            child: child_json(child)?,
            module_base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
        };
        let mut req = client()
            .post(format!("{}/admin/deploy", base.trim_end_matches('/')))
            .json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.context("admin API unreachable")?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            bail!("deploying {} failed ({status}): {text}", child.actor_type);
        }
        progress(&format!("  {text}"));
    }
    Ok(())
}

fn child_json(child: &sluice_runtime::ChildSpec) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::to_value(child)?)
}

/// GETs `/admin/status`.
pub async fn status(base: &str, token: Option<&str>) -> anyhow::Result<String> {
    let mut req = client().get(format!("{}/admin/status", base.trim_end_matches('/')));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.context("admin API unreachable")?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("status failed ({status}): {text}");
    }
    Ok(text)
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
    let mut req = match op {
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
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.context("admin API unreachable")?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("dlq {op} failed ({status}): {text}");
    }
    Ok(text)
}
