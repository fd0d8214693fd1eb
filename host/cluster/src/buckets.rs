//! Opening the cluster's JetStream buckets: create when missing, otherwise check that the
//! existing bucket agrees with what this host needs (every host of a cluster must).

use std::time::Duration;

use async_nats::jetstream::kv;
use async_nats::jetstream::object_store::{self, ObjectStore};
use async_nats::jetstream::stream::StorageType;

use crate::connect::Connection;

/// A bucket could not be opened, or exists with a configuration this host cannot use.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BucketError {
    /// JetStream refused or did not answer.
    #[error("cluster: cannot open bucket {bucket}: {reason}")]
    Open {
        /// The bucket.
        bucket: String,
        /// JetStream's reason.
        reason: String,
    },
    /// The bucket exists in memory storage: a NATS restart would lose every entry, and with it
    /// the guarantee that a member's entry outlives its lease (docs/cluster.md).
    #[error(
        "cluster: bucket {0} uses memory storage; the cluster needs file storage (delete it and let a host recreate it)"
    )]
    MemoryStorage(String),
    /// The bucket exists with another expiry (hosts configured with different `member_ttl_ms`).
    #[error(
        "cluster: bucket {bucket} expires entries after {existing:?}, this host is configured for {wanted:?}: every host of a cluster needs the same member_ttl_ms"
    )]
    AgeMismatch {
        /// The bucket.
        bucket: String,
        /// Its max_age.
        existing: Duration,
        /// This host's.
        wanted: Duration,
    },
}

/// What a KV bucket must look like.
#[derive(Debug, Clone)]
pub(crate) struct KvSpec {
    pub bucket: String,
    pub description: &'static str,
    /// Entries expire this long after their last write (`ZERO`: never). With expiry, the server
    /// leaves a delete marker so watchers see it.
    pub max_age: Duration,
}

/// Creates `spec.bucket` (file storage, history 1, the connection's replicas) or opens the
/// existing one and checks its expiry.
pub(crate) async fn open_kv(conn: &Connection, spec: KvSpec) -> Result<kv::Store, BucketError> {
    let js = conn.jetstream();
    let open_err = |e: &dyn std::fmt::Display| BucketError::Open {
        bucket: spec.bucket.clone(),
        reason: e.to_string(),
    };
    let store = match js.get_key_value(&spec.bucket).await {
        Ok(store) => store,
        Err(_) => {
            let config = kv::Config {
                bucket: spec.bucket.clone(),
                description: spec.description.to_string(),
                history: 1,
                max_age: spec.max_age,
                // A marker lives as long as an entry would; 1 s is JetStream's minimum.
                limit_markers: (!spec.max_age.is_zero())
                    .then(|| spec.max_age.max(Duration::from_secs(1))),
                storage: StorageType::File,
                num_replicas: conn.replicas(),
                ..Default::default()
            };
            match js.create_key_value(config).await {
                Ok(store) => store,
                // Another host created it between our get and create: use theirs.
                Err(create) => js
                    .get_key_value(&spec.bucket)
                    .await
                    .map_err(|_| open_err(&create))?,
            }
        }
    };
    let status = store.status().await.map_err(|e| open_err(&e))?;
    if status.info.config.storage == StorageType::Memory {
        return Err(BucketError::MemoryStorage(spec.bucket));
    }
    let existing = status.info.config.max_age;
    if existing != spec.max_age {
        return Err(BucketError::AgeMismatch {
            bucket: spec.bucket,
            existing,
            wanted: spec.max_age,
        });
    }
    Ok(store)
}

/// Creates or opens the object store `bucket` (file storage, the connection's replicas).
pub(crate) async fn open_objects(
    conn: &Connection,
    bucket: &str,
    description: &'static str,
) -> Result<ObjectStore, BucketError> {
    let js = conn.jetstream();
    if let Ok(store) = js.get_object_store(bucket).await {
        return Ok(store);
    }
    let config = object_store::Config {
        bucket: bucket.to_string(),
        description: Some(description.to_string()),
        storage: StorageType::File,
        num_replicas: conn.replicas(),
        ..Default::default()
    };
    match js.create_object_store(config).await {
        Ok(store) => Ok(store),
        Err(create) => js
            .get_object_store(bucket)
            .await
            .map_err(|_| BucketError::Open {
                bucket: bucket.to_string(),
                reason: create.to_string(),
            }),
    }
}
