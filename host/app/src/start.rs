//! Starting a host for an app folder: engine and actor types from the config, the outbox in
//! the database it names (SQLite in the app folder by default), every child deployed before
//! the relay starts delivering.

use std::path::{Path, PathBuf};

use sluice_runtime::{Host, HostConfig, HostError, LoadError};

use crate::config::AppConfig;

/// Why an app could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    /// `app-config.toml` (or a module it names) could not be read or is invalid.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The host could not start (engine, instance pool).
    #[error(transparent)]
    Host(#[from] HostError),
    /// The outbox's database could not be opened or migrated.
    #[error("outbox: {0}")]
    Outbox(#[from] sluice_outbox::Error),
    /// The database URL names a backend this build does not have.
    #[error("database URL {url:?}: {reason}")]
    Database {
        /// The URL as given.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The app folder could not be prepared (its `.sluice` directory).
    #[error("{path}: {source}")]
    Io {
        /// What was being created.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Where the outbox lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// An SQLite file (`sqlite://PATH` or a plain path).
    Sqlite(PathBuf),
    /// A Postgres server shared by hosts (`postgres://…` or `postgresql://…`).
    Postgres(String),
}

impl Database {
    /// Parses a `--database-url`: `postgres://…`, `postgresql://…`, `sqlite://PATH`, or
    /// `sqlite:PATH`. Any other scheme is refused (a typo must not silently pick a backend).
    pub fn parse(url: &str) -> Result<Self, AppError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url.to_string()));
        }
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            if path.is_empty() {
                return Err(AppError::Database {
                    url: url.into(),
                    reason: "names no file".into(),
                });
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        Err(AppError::Database {
            url: url.into(),
            reason: "expected postgres://…, postgresql://… or sqlite://PATH".into(),
        })
    }
}

/// Starts a host for the app in `dir`: its `[host]` settings (then `overrides`), every
/// child deployed, and the outbox in `dir/.sluice/outbox.db`.
pub async fn start(
    dir: &Path,
    overrides: impl FnMut(&mut HostConfig),
) -> Result<(Host, AppConfig), AppError> {
    start_with(dir, None, overrides).await
}

/// As [`start`], with the outbox in `database` when given.
pub async fn start_with(
    dir: &Path,
    database: Option<&Database>,
    mut overrides: impl FnMut(&mut HostConfig),
) -> Result<(Host, AppConfig), AppError> {
    let app = AppConfig::load(dir)?;
    let mut cfg = app.host.clone();
    if cfg.cache_dir.is_none() {
        cfg.cache_dir = Some(dir.join(".sluice").join("cache"));
    }
    cfg.bus = app.bus.clone();
    overrides(&mut cfg);
    let host = Host::new(cfg)?;
    let mut ocfg: sluice_outbox::OutboxConfig = match &app.outbox {
        Some(t) => toml::Value::Table(t.clone())
            .try_into()
            .map_err(|e| LoadError::Config(format!("[outbox]: {e}")))?,
        None => sluice_outbox::OutboxConfig::default(),
    };
    if ocfg.actor_types.is_empty() {
        // One limiter per configured actor type (bulkheads); the set is bounded by config.
        ocfg.actor_types = app
            .supervisor
            .children
            .iter()
            .map(|c| c.actor_type.clone())
            .collect();
    }
    let outbox = match database {
        Some(Database::Postgres(url)) => sluice_outbox::Outbox::open_postgres(url, ocfg).await?,
        Some(Database::Sqlite(path)) => sluice_outbox::Outbox::open_sqlite(path, ocfg).await?,
        None => {
            let d = dir.join(".sluice");
            std::fs::create_dir_all(&d).map_err(|source| AppError::Io {
                path: d.display().to_string(),
                source,
            })?;
            sluice_outbox::Outbox::open_sqlite(d.join("outbox.db"), ocfg).await?
        }
    };
    // Deploy first so relayed messages find their actor types.
    for child in &app.supervisor.children {
        host.deploy_file(child.clone(), dir).await?;
    }
    host.attach_outbox(outbox);
    Ok((host, app))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_urls_pick_a_backend_or_are_refused() {
        assert_eq!(
            Database::parse("postgres://u@h/db").unwrap(),
            Database::Postgres("postgres://u@h/db".into())
        );
        assert!(matches!(
            Database::parse("postgresql://h/db").unwrap(),
            Database::Postgres(_)
        ));
        assert_eq!(
            Database::parse("sqlite:///tmp/o.db").unwrap(),
            Database::Sqlite("/tmp/o.db".into())
        );
        assert_eq!(
            Database::parse("sqlite:o.db").unwrap(),
            Database::Sqlite("o.db".into())
        );
        for bad in [
            "postgre://h/db",
            "mysql://h/db",
            "/tmp/o.db",
            "sqlite://",
            "",
        ] {
            let e = Database::parse(bad).unwrap_err();
            assert!(matches!(e, AppError::Database { .. }), "{bad}: {e}");
        }
    }
}
