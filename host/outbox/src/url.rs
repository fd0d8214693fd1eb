//! Which store an outbox lives in, parsed once from a database URL.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::channel::Backend;
use crate::error::Error;

/// A parsed `--database-url`: the backend and where its data is.
///
/// | written | parsed |
/// |---|---|
/// | `sqlite://PATH`, `sqlite:PATH`, or a plain `PATH` with no scheme | [`DatabaseUrl::Sqlite`] |
/// | `postgres://…`, `postgresql://…` | [`DatabaseUrl::Postgres`] (the URL as given) |
/// | any other `scheme://…` | [`Error::UnsupportedDatabaseUrl`] |
///
/// Parsing does not depend on the backends compiled in: a Postgres URL parses in a build
/// without the `postgres` feature, and opening it fails with [`Error::BackendNotCompiled`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// An SQLite file (created if missing).
    Sqlite(PathBuf),
    /// A Postgres connection URL.
    Postgres(String),
}

impl DatabaseUrl {
    /// The backend this URL names.
    pub fn backend(&self) -> Backend {
        match self {
            DatabaseUrl::Sqlite(_) => Backend::Sqlite,
            DatabaseUrl::Postgres(_) => Backend::Postgres,
        }
    }
}

impl FromStr for DatabaseUrl {
    type Err = Error;

    fn from_str(url: &str) -> Result<Self, Error> {
        let unsupported = || Error::UnsupportedDatabaseUrl(url.to_string());
        if url.trim().is_empty() {
            return Err(unsupported());
        }
        match url.split_once("://") {
            Some(("postgres" | "postgresql", rest)) if !rest.is_empty() => {
                Ok(DatabaseUrl::Postgres(url.to_string()))
            }
            Some(("sqlite", path)) if !path.is_empty() => Ok(DatabaseUrl::Sqlite(path.into())),
            Some(_) => Err(unsupported()),
            None => match url.strip_prefix("sqlite:") {
                Some("") => Err(unsupported()),
                Some(path) => Ok(DatabaseUrl::Sqlite(path.into())),
                None => Ok(DatabaseUrl::Sqlite(url.into())),
            },
        }
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatabaseUrl::Sqlite(p) => write!(f, "sqlite://{}", p.display()),
            DatabaseUrl::Postgres(u) => f.write_str(u),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_spelling_picks_its_backend_and_an_unknown_scheme_is_refused() {
        let p = |s: &str| s.parse::<DatabaseUrl>();
        assert_eq!(
            p("sqlite:///tmp/o.db").unwrap(),
            DatabaseUrl::Sqlite("/tmp/o.db".into())
        );
        assert_eq!(
            p("sqlite://rel/o.db").unwrap(),
            DatabaseUrl::Sqlite("rel/o.db".into())
        );
        assert_eq!(
            p("sqlite:o.db").unwrap(),
            DatabaseUrl::Sqlite("o.db".into())
        );
        assert_eq!(
            p("/var/lib/o.db").unwrap(),
            DatabaseUrl::Sqlite("/var/lib/o.db".into())
        );
        for pg in ["postgres://u@h:5/db", "postgresql://h/db"] {
            assert_eq!(p(pg).unwrap(), DatabaseUrl::Postgres(pg.into()));
            assert_eq!(p(pg).unwrap().backend(), Backend::Postgres);
        }
        for bad in [
            "mysql://h/db",
            "postgresx://h/db",
            "postgres://",
            "sqlite://",
            "",
        ] {
            let e = p(bad).unwrap_err();
            assert!(
                matches!(&e, Error::UnsupportedDatabaseUrl(u) if u == bad),
                "{bad}: {e}"
            );
            assert!(e.to_string().contains("sqlite://PATH"), "{e}");
        }
        // The old `starts_with("postgres")` took this for Postgres.
        assert!(p("postgresx://h/db").is_err());
    }
}
