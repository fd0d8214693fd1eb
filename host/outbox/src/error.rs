//! The outbox's error type, with transient/permanent classification (sqlx's pattern).

/// `Result` with the outbox's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the outbox can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database refused or failed a statement.
    #[error("outbox database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A schema migration failed on open.
    #[error("outbox migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The configuration is invalid (message says which field and why).
    #[error("invalid outbox configuration: {0}")]
    Config(String),
    /// A message or request was malformed (empty receiver, bad headers, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The outbox (or its relay) has been shut down.
    #[error("outbox is shut down")]
    Closed,
    /// The SQLite store is owned by another open outbox (it keeps claims in its process).
    #[error("outbox store in use: {0}")]
    InUse(String),
    /// A database URL with a scheme no backend answers to.
    #[error(
        "unsupported database URL {0:?}: expected sqlite://PATH (or a plain path) or postgres://…"
    )]
    UnsupportedDatabaseUrl(String),
    /// The URL names a backend this build was compiled without.
    #[error("this build of sluice-outbox has no {0} backend (enable its `{0}` feature)")]
    BackendNotCompiled(crate::channel::Backend),
}

impl Error {
    /// Whether retrying the same operation later may succeed (busy database, lost connection,
    /// pool exhaustion, serialization failure). Everything else is permanent.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Database(e) => db_error_is_transient(e),
            Error::Migrate(_)
            | Error::Config(_)
            | Error::InvalidArgument(_)
            | Error::Closed
            | Error::InUse(_)
            | Error::UnsupportedDatabaseUrl(_)
            | Error::BackendNotCompiled(_) => false,
        }
    }
}

fn db_error_is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => {
            let code = db.code();
            matches!(
                code.as_deref(),
                // SQLite: SQLITE_BUSY (5), SQLITE_LOCKED (6) and their extended codes.
                Some("5") | Some("6") | Some("261") | Some("517") | Some("262")
                // Postgres: serialization failure, deadlock, too many connections,
                // admin shutdown, crash shutdown, cannot connect now, lock not available.
                | Some("40001") | Some("40P01") | Some("53300") | Some("57P01")
                | Some("57P02") | Some("57P03") | Some("55P03")
            )
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_timeouts_are_transient_and_config_errors_are_not() {
        assert!(Error::Database(sqlx::Error::PoolTimedOut).is_transient());
        assert!(!Error::Database(sqlx::Error::RowNotFound).is_transient());
        assert!(!Error::Config("x".into()).is_transient());
    }
}
