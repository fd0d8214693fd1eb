//! `sluice run --cluster`: the cluster settings from the flags and the app's `[cluster]`
//! table, the checks made before anything starts, and announcing the deployed types.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use sluice_app::{AppConfig, DatabaseUrl};
use sluice_cluster::ClusterConfig;
use sluice_node::Node;
use sluice_runtime::ChildSpec;

/// The cluster this host joins: the `[cluster]` table, with `--cluster` replacing its `url`
/// and `--node-id` its `node_id`. `None`: no table and no flag, one host on its own.
pub fn settings(
    app: &AppConfig,
    url: Option<&str>,
    node_id: Option<&str>,
) -> anyhow::Result<Option<ClusterConfig>> {
    let mut config = match (&app.cluster, url) {
        (None, None) => {
            if node_id.is_some() {
                bail!(
                    "--node-id names this host in a cluster: pass --cluster nats://HOST:PORT too"
                );
            }
            return Ok(None);
        }
        (Some(table), _) => toml::Value::Table(table.clone())
            .try_into::<ClusterConfig>()
            .context("app-config.toml [cluster]")?,
        (None, Some(_)) => ClusterConfig::default(),
    };
    if let Some(u) = url {
        config.url = u.to_string();
    }
    if let Some(n) = node_id {
        config.node_id = Some(n.to_string());
    }
    if config.url.is_empty() {
        bail!("[cluster] needs a url (or pass --cluster nats://HOST:PORT)");
    }
    config.validate().context("cluster settings")?;
    Ok(Some(config))
}

/// A cluster shares one outbox: SQLite is one host's file, so only Postgres is accepted.
pub fn check_database(database: Option<&DatabaseUrl>) -> anyhow::Result<()> {
    match database {
        Some(DatabaseUrl::Postgres(_)) => Ok(()),
        _ => bail!(
            "--cluster needs the outbox in Postgres, shared by every host: pass --database-url postgres://USER@HOST/DB (SQLite is one host's file and cannot be shared)"
        ),
    }
}

/// The app's children with their module bytes, as this host deployed them at start.
pub fn app_children(app: &AppConfig, dir: &Path) -> anyhow::Result<Vec<(ChildSpec, Vec<u8>)>> {
    app.supervisor
        .children
        .iter()
        .map(|child| {
            let path = dir.join(&child.module);
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            Ok((child.clone(), bytes))
        })
        .collect()
}

/// A member as the admin API sees it: its part of `/admin/status`, and a deploy rolled out
/// to every member.
pub struct Member(pub Arc<Node>);

/// How long a deploy waits for every member to report.
pub const ROLL_OUT_WAIT: Duration = Duration::from_secs(60);

impl crate::admin::ClusterAdmin for Member {
    fn status(&self) -> serde_json::Value {
        serde_json::to_value(self.0.status()).unwrap_or_default()
    }

    fn roll_out(&self, spec: ChildSpec, bytes: Vec<u8>) -> crate::admin::RollOutFuture {
        let node = self.0.clone();
        Box::pin(async move {
            match node.roll_out(&spec, &bytes, ROLL_OUT_WAIT).await {
                Ok(r) => serde_json::to_value(r).unwrap_or_default(),
                Err(e) => serde_json::json!({"error": format!("cluster roll-out: {e}")}),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(text: &str) -> AppConfig {
        AppConfig::parse(text).unwrap()
    }

    #[test]
    fn flags_override_the_table_and_no_cluster_is_none() {
        assert!(settings(&app(""), None, None).unwrap().is_none());
        let c = settings(&app(""), Some("nats://127.0.0.1:4222"), Some("a"))
            .unwrap()
            .unwrap();
        assert_eq!(c.url, "nats://127.0.0.1:4222");
        assert_eq!(c.node_id.as_deref(), Some("a"));
        let t = app("[cluster]\nurl = \"nats://10.0.0.1:4222\"\nname = \"prod\"\n");
        let c = settings(&t, None, None).unwrap().unwrap();
        assert_eq!(
            (c.url.as_str(), c.name.as_str()),
            ("nats://10.0.0.1:4222", "prod")
        );
        let c = settings(&t, Some("nats://127.0.0.1:1"), None)
            .unwrap()
            .unwrap();
        assert_eq!(c.url, "nats://127.0.0.1:1");
    }

    #[test]
    fn bad_settings_are_refused_with_what_to_do() {
        let e = settings(&app(""), None, Some("a")).unwrap_err().to_string();
        assert!(e.contains("--cluster"), "{e}");
        let e = settings(&app("[cluster]\nname = \"x\"\n"), None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs a url"), "{e}");
        let e = format!(
            "{:#}",
            settings(
                &app("[cluster]\nurl = \"nats://h:1\"\nbogus = 1\n"),
                None,
                None
            )
            .unwrap_err()
        );
        assert!(e.contains("bogus"), "{e}");
        let e = check_database(None).unwrap_err().to_string();
        assert!(
            e.contains("Postgres") && e.contains("--database-url"),
            "{e}"
        );
        let sqlite: DatabaseUrl = "sqlite:///tmp/x.db".parse().unwrap();
        assert!(check_database(Some(&sqlite)).is_err());
        let pg: DatabaseUrl = "postgres://u@localhost/db".parse().unwrap();
        check_database(Some(&pg)).unwrap();
    }
}
