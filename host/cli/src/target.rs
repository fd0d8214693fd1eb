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
    config_path_in(&process_env)
}

fn process_env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

fn config_path_in(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
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
    resolve_in(api, flag, &process_env)
}

/// As [`resolve`], reading variables through `env` (a test's, in place of the process's).
pub fn resolve_in(
    api: Api,
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Target> {
    let (var, default) = match api {
        Api::Admin => (ADMIN_ENV, DEFAULT_ADMIN),
        Api::Ingress => (INGRESS_ENV, DEFAULT_INGRESS),
    };
    if let Some(f) = flag {
        return Ok(Target {
            url: f.to_string(),
            source: "--host".into(),
        });
    }
    if let Some(v) = env(var).filter(|v| !v.is_empty()) {
        return Ok(Target {
            url: v,
            source: var.into(),
        });
    }
    if let Some(path) = config_path_in(env).filter(|p| p.exists()) {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let file: ConfigFile =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let chosen = env("SLUICE_CONTEXT")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn with<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_flag_beats_the_variable_which_beats_the_context_which_beats_the_default() {
        let dir = std::env::temp_dir().join(format!("sluice-target-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.toml");
        std::fs::write(
            &file,
            "current = \"a\"\n[contexts.a]\nadmin = \"http://a:1\"\n[contexts.b]\nadmin = \"http://b:1\"\ningress = \"http://b:2\"\n",
        )
        .unwrap();
        let cfg = file.to_str().unwrap();
        let url = |api, flag, vars: &[(&str, &str)]| resolve_in(api, flag, &with(vars)).unwrap();

        let t = url(Api::Admin, Some("http://f:1"), &[(ADMIN_ENV, "http://e:1")]);
        assert_eq!(
            (t.url.as_str(), t.source.as_str()),
            ("http://f:1", "--host")
        );
        let t = url(
            Api::Admin,
            None,
            &[(ADMIN_ENV, "http://e:1"), ("SLUICE_CONFIG", cfg)],
        );
        assert_eq!(
            (t.url.as_str(), t.source.as_str()),
            ("http://e:1", ADMIN_ENV)
        );
        let t = url(Api::Admin, None, &[("SLUICE_CONFIG", cfg)]);
        assert_eq!(t.url, "http://a:1");
        assert!(t.source.starts_with("context a ("), "{}", t.source);
        // Context `a` names no ingress: the default, said so.
        let t = url(Api::Ingress, None, &[("SLUICE_CONFIG", cfg)]);
        assert_eq!(
            (t.url.as_str(), t.source.as_str()),
            (DEFAULT_INGRESS, "default")
        );
        let t = url(
            Api::Ingress,
            None,
            &[("SLUICE_CONFIG", cfg), ("SLUICE_CONTEXT", "b")],
        );
        assert_eq!(t.url, "http://b:2");
        let e = resolve_in(
            Api::Admin,
            None,
            &with(&[("SLUICE_CONFIG", cfg), ("SLUICE_CONTEXT", "nope")]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("context \"nope\" is not in"), "{e}");
        let t = url(Api::Admin, None, &[("HOME", "/nonexistent")]);
        assert_eq!(
            (t.url.as_str(), t.source.as_str()),
            (DEFAULT_ADMIN, "default")
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
