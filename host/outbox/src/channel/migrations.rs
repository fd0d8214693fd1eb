//! The schema migrations of each backend, embedded at compile time by `build.rs` and handed
//! to sqlx's `Migrator` as a [`MigrationSource`] (no `sqlx::migrate!` proc-macro).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// `(version, description, sql)` of each file, in version order.
type Files = &'static [(i64, &'static str, &'static str)];

#[cfg(feature = "sqlite")]
pub(crate) const SQLITE: Files = include!(concat!(env!("OUT_DIR"), "/migrations_sqlite.rs"));
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: Files = include!(concat!(env!("OUT_DIR"), "/migrations_postgres.rs"));

/// One backend's embedded files as a migration source.
#[derive(Debug)]
struct Embedded(Files);

impl MigrationSource<'static> for Embedded {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 'static>> {
        Box::pin(async move { Ok(migrations(self.0)) })
    }
}

/// The files as sqlx migrations: the checksum is the SHA-384 of the text, as sqlx computes it
/// when it reads a directory, and a file that starts with `-- no-transaction` runs outside a
/// transaction, as there.
fn migrations(files: Files) -> Vec<Migration> {
    files
        .iter()
        .map(|&(version, description, sql)| {
            Migration::new(
                version,
                Cow::Borrowed(description),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                sql.starts_with("-- no-transaction"),
            )
        })
        .collect()
}

/// A migrator over one backend's files.
pub(crate) async fn migrator(files: Files) -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded(files)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded list is what sqlx reads from the directory: same versions, descriptions,
    /// checksums and transaction mode, so a database migrated by a build that used
    /// `sqlx::migrate!` (or by sqlx's CLI) validates against this one.
    async fn same_as_directory(files: Files, dir: &str) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let from_dir = Migrator::new(dir.as_path()).await.unwrap();
        let embedded = migrator(files).await.unwrap();
        let key = |m: &Migration| {
            (
                m.version,
                m.description.to_string(),
                m.checksum.to_vec(),
                m.no_tx,
                m.migration_type,
            )
        };
        let a: Vec<_> = from_dir.iter().map(key).collect();
        let b: Vec<_> = embedded.iter().map(key).collect();
        assert!(!a.is_empty(), "no migrations found in {}", dir.display());
        assert_eq!(a, b);
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn sqlite_list_matches_the_directory() {
        same_as_directory(SQLITE, "migrations/sqlite").await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn postgres_list_matches_the_directory() {
        same_as_directory(POSTGRES, "migrations/postgres").await;
    }
}
