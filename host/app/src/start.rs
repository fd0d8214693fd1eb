//! Starting a host for an app folder: engine and actor types from the config, the outbox in
//! the database it names (SQLite in the app folder by default), every child deployed before
//! the relay starts delivering.

use std::path::Path;

use sluice_outbox::DatabaseUrl;
use sluice_runtime::{ChildSpec, Deployed, Host, HostConfig, HostError, LoadError};

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
    /// The outbox's database URL is not one this build can open, or the database could not
    /// be opened or migrated.
    #[error("outbox: {0}")]
    Outbox(#[from] sluice_outbox::Error),
    /// The step run before the first deploy (joining a cluster) failed.
    #[error("{0}")]
    Prepare(String),
    /// The app folder could not be prepared (its `.sluice` directory).
    #[error("{path}: {source}")]
    Io {
        /// What was being created.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Starts a host for the app in `dir`: its `[host]` settings (then `overrides`), every
/// child deployed, and the outbox in `dir/.sluice/outbox.db`.
pub async fn start(
    dir: &Path,
    overrides: impl FnMut(&mut HostConfig),
) -> Result<(Host, AppConfig), AppError> {
    start_with(dir, None, overrides).await
}

/// One step of starting an app, for a caller that shows progress.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartStep<'a> {
    /// This child's module is about to be compiled (or loaded from the compile cache).
    Compiling {
        /// The child.
        child: &'a ChildSpec,
        /// The module's size.
        bytes: usize,
    },
    /// This child is deployed.
    Deployed {
        /// The child.
        child: &'a ChildSpec,
        /// Its version, whether the cache had its machine code, and the time taken.
        deployed: Deployed,
    },
}

/// As [`start`], with the outbox in `database` when given.
pub async fn start_with(
    dir: &Path,
    database: Option<&DatabaseUrl>,
    overrides: impl FnMut(&mut HostConfig),
) -> Result<(Host, AppConfig), AppError> {
    start_reporting(dir, database, overrides, |_| {}).await
}

/// As [`start_with`], calling `progress` before and after each child's deploy.
pub async fn start_reporting(
    dir: &Path,
    database: Option<&DatabaseUrl>,
    overrides: impl FnMut(&mut HostConfig),
    progress: impl FnMut(StartStep<'_>),
) -> Result<(Host, AppConfig), AppError> {
    let app = AppConfig::load(dir)?;
    start_prepared(dir, app, database, overrides, progress, async |_: &Host| {
        Ok(())
    })
    .await
}

/// As [`start_reporting`] for an already loaded `app`, running `prepare` on the new host
/// before anything is deployed or relayed (where a cluster installs its route and
/// activation hooks, so that no actor runs before they are in place).
pub async fn start_prepared(
    dir: &Path,
    app: AppConfig,
    database: Option<&DatabaseUrl>,
    mut overrides: impl FnMut(&mut HostConfig),
    mut progress: impl FnMut(StartStep<'_>),
    prepare: impl AsyncFnOnce(&Host) -> Result<(), AppError>,
) -> Result<(Host, AppConfig), AppError> {
    let mut cfg = app.host.clone();
    if cfg.cache_dir.is_none() {
        cfg.cache_dir = Some(dir.join(".sluice").join("cache"));
    }
    cfg.bus = app.bus.clone();
    overrides(&mut cfg);
    let host = Host::new(cfg)?;
    prepare(&host).await?;
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
        Some(url) => sluice_outbox::Outbox::open(url, ocfg).await?,
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
        let path = dir.join(&child.module);
        let bytes = std::fs::read(&path).map_err(|source| LoadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        progress(StartStep::Compiling {
            child,
            bytes: bytes.len(),
        });
        let deployed = host.deploy_report(child.clone(), bytes).await?;
        progress(StartStep::Deployed { child, deployed });
    }
    host.attach_outbox(outbox);
    Ok((host, app))
}
