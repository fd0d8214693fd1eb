//! Which host a client command talks to: `--host`, else an environment variable, else the
//! current context of the config file (the way kubectl contexts work), else the default port.
//!
//! The config file is `$SLUICE_CONFIG`, else `$XDG_CONFIG_HOME/sluice/config.toml`, else
//! `~/.config/sluice/config.toml`:
//!
//! ```toml
//! current = "staging"          # or SLUICE_CONTEXT=staging
//! [contexts.staging]
//! admin = "http://10.0.0.5:7401"    # deploy, status, dlq
//! ingress = "http://10.0.0.5:7400"  # call, tell
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde::Deserialize;

/// The admin API `sluice run` serves by default.
pub const DEFAULT_ADMIN: &str = "http://127.0.0.1:7401";
/// The ingress `sluice run` serves by default.
pub const DEFAULT_INGRESS: &str = "http://127.0.0.1:7400";
/// The variable naming the admin API of `deploy`, `status` and `dlq`.
pub const ADMIN_ENV: &str = "SLUICE_HOST";
/// The variable naming the ingress of `call` and `tell`.
pub const INGRESS_ENV: &str = "SLUICE_INGRESS";

/// Which listener of a host a command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// The admin API (`deploy`, `status`, `dlq`).
    Admin,
    /// The ingress (`call`, `tell`).
    Ingress,
}

/// A resolved target: its URL and where the choice came from, so a command can say both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `http://host:port`.
    pub url: String,
    /// `--host`, `SLUICE_HOST`, `context staging (PATH)` or `default`.
    pub source: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    current: Option<String>,
    #[serde(default)]
    contexts: BTreeMap<String, NamedContext>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedContext {
    admin: Option<String>,
    ingress: Option<String>,
}

/// The config file's path (it need not exist).
pub fn config_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = var("SLUICE_CONFIG") {
        return Some(PathBuf::from(p));
    }
    if let Some(x) = var("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(x).join("sluice/config.toml"));
    }
    var("HOME").map(|h| PathBuf::from(h).join(".config/sluice/config.toml"))
}

/// Resolves the target of a command: `flag` (from `--host`) first, then the environment
/// variable, then the config file's context (`SLUICE_CONTEXT` or its `current`), then the
/// default port.
pub fn resolve(api: Api, flag: Option<&str>) -> anyhow::Result<Target> {
    let (env, default) = match api {
        Api::Admin => (ADMIN_ENV, DEFAULT_ADMIN),
        Api::Ingress => (INGRESS_ENV, DEFAULT_INGRESS),
    };
    if let Some(f) = flag {
        return Ok(Target {
            url: f.to_string(),
            source: "--host".into(),
        });
    }
    if let Ok(v) = std::env::var(env)
        && !v.is_empty()
    {
        return Ok(Target {
            url: v,
            source: env.into(),
        });
    }
    if let Some(path) = config_path().filter(|p| p.exists()) {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let file: ConfigFile =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let chosen = std::env::var("SLUICE_CONTEXT")
            .ok()
            .filter(|c| !c.is_empty())
            .or(file.current.clone());
        if let Some(name) = chosen {
            let Some(ctx) = file.contexts.get(&name) else {
                bail!("context {name:?} is not in {}", path.display());
            };
            let url = match api {
                Api::Admin => ctx.admin.clone(),
                Api::Ingress => ctx.ingress.clone(),
            };
            if let Some(url) = url {
                return Ok(Target {
                    url,
                    source: format!("context {name} ({})", path.display()),
                });
            }
        }
    }
    Ok(Target {
        url: default.to_string(),
        source: "default".into(),
    })
}
