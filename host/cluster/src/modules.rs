//! Module distribution: module bytes in a JetStream object store keyed by content hash, the
//! current module of each actor type in the `sluice_<cluster>_modules` KV bucket (so a host
//! that joins later finds it), and each member's load report per type (ok, or failed with
//! the reason: a member that cannot load a version keeps its old one and says so).
//!
//! Keys: `current.<type>` → [`CurrentModule`]; `report.<type>.<node>` → [`LoadReport`].

use std::time::{SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv::{self, Operation};
use async_nats::jetstream::object_store::{GetErrorKind, InfoErrorKind, ObjectStore};
use futures_util::{Stream, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::buckets::{self, BucketError, KvSpec};
use crate::connect::{self, Connection, ConnectionState};
use crate::metrics;
use crate::names::{escape_token, unescape_token};

/// Default largest module accepted from the store (Python and JS guests are 10–20 MB).
pub const DEFAULT_MAX_MODULE_BYTES: usize = 256 * 1024 * 1024;
/// Largest KV record accepted.
const MAX_RECORD_BYTES: usize = 64 * 1024;

/// Why a module operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModuleError {
    /// A bucket could not be opened.
    #[error(transparent)]
    Bucket(#[from] BucketError),
    /// NATS refused or did not answer.
    #[error("cluster: module {op} failed: {reason}")]
    Nats {
        /// The operation.
        op: &'static str,
        /// The client's reason.
        reason: String,
    },
    /// No module with this hash in the store.
    #[error("cluster: module {0} is not in the store")]
    NotFound(String),
    /// The stored bytes do not hash to their name.
    #[error("cluster: module {hash} is corrupt in the store (its bytes hash to {got})")]
    Corrupt {
        /// The name asked for.
        hash: String,
        /// What the bytes hash to.
        got: String,
    },
    /// Larger than the limit.
    #[error("cluster: module {hash} is {size} bytes, over the limit of {max}")]
    TooLarge {
        /// The hash.
        hash: String,
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A record in the bucket is not what this host wrote.
    #[error("cluster: record {key:?} is malformed: {reason}")]
    Record {
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// Concurrent deploys of one type kept winning over this one.
    #[error("cluster: deploy of {0} lost to concurrent deploys; retry")]
    Conflict(String),
}

/// The current module of an actor type, cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentModule {
    /// The actor type.
    pub actor_type: String,
    /// Cluster-wide version, bumped by each deploy of the type.
    pub version: u64,
    /// Content hash of the module bytes (`sha256:<hex>`).
    pub hash: String,
    /// Module size in bytes.
    pub size: u64,
    /// The runtime's deploy spec (mailbox, limits, ...), opaque here.
    pub spec: serde_json::Value,
    /// The node that deployed it.
    pub deployed_by: String,
    /// Unix ms of the deploy (informational).
    pub deployed_at_ms: u64,
}

/// What a member made of a module version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadReport {
    /// The version it tried.
    pub version: u64,
    /// Its hash.
    pub hash: String,
    /// `None` = loaded and serving; `Some(reason)` = refused, the old version keeps serving.
    pub error: Option<String>,
    /// Unix ms (informational).
    pub at_ms: u64,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The content hash that names module bytes: `sha256:<hex>`.
pub fn content_hash(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn nats(op: &'static str) -> impl Fn(&dyn std::fmt::Display) -> ModuleError {
    move |e| ModuleError::Nats {
        op,
        reason: e.to_string(),
    }
}

fn decode<T: for<'de> Deserialize<'de>>(key: &str, bytes: &[u8]) -> Result<T, ModuleError> {
    let bad = |reason: String| ModuleError::Record {
        key: key.to_string(),
        reason,
    };
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(bad(format!("{} bytes", bytes.len())));
    }
    serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))
}

/// The cluster's module store.
#[derive(Clone)]
pub struct ModuleStore {
    objects: ObjectStore,
    kv: kv::Store,
    node: String,
    max_module_bytes: usize,
    /// To fail an operation in flight when the connection drops ([`ModuleStore::online`]).
    state: tokio::sync::watch::Receiver<ConnectionState>,
}

impl ModuleStore {
    /// Opens (creating on first use) the module store of `conn`'s cluster.
    pub async fn open(conn: &Connection) -> Result<Self, ModuleError> {
        let names = conn.names();
        let objects = buckets::open_objects(
            conn,
            &names.wasm_store(),
            "Sluice module bytes by content hash",
        )
        .await?;
        let kv = buckets::open_kv(
            conn,
            KvSpec {
                bucket: names.modules_bucket(),
                description: "Sluice current module per actor type, and load reports",
                max_age: std::time::Duration::ZERO,
            },
        )
        .await?;
        Ok(Self {
            objects,
            kv,
            node: conn.node_id().to_string(),
            max_module_bytes: DEFAULT_MAX_MODULE_BYTES,
            state: conn.state(),
        })
    }

    /// Sets the largest module `get` accepts.
    pub fn with_max_module_bytes(mut self, max: usize) -> Self {
        self.max_module_bytes = max;
        self
    }

    /// Runs `op` (`f`), failing it at once if this host is not connected to NATS or as soon
    /// as the connection drops ([`connect::unless_dropped`]): a deploy or a load report then
    /// fails with a clear error instead of hanging on a request that cannot be answered.
    async fn online<T>(
        &self,
        op: &'static str,
        f: impl std::future::Future<Output = Result<T, ModuleError>>,
    ) -> Result<T, ModuleError> {
        connect::unless_dropped(&self.state, f)
            .await
            .unwrap_or_else(|| {
                metrics::module_op(op, "error");
                Err(ModuleError::Nats {
                    op,
                    reason: connect::DROPPED_IN_FLIGHT.into(),
                })
            })
    }

    fn object_name(hash: &str) -> String {
        // Object names become subject tokens (base64): any string works; keep it readable.
        hash.replace(':', "-")
    }

    /// Stores module bytes (once per content) and returns their hash.
    pub async fn put(&self, bytes: &[u8]) -> Result<String, ModuleError> {
        self.online("put", self.put_now(bytes)).await
    }

    async fn put_now(&self, bytes: &[u8]) -> Result<String, ModuleError> {
        let hash = content_hash(bytes);
        let name = Self::object_name(&hash);
        match self.objects.info(&name).await {
            Ok(info) if info.size == bytes.len() => {
                metrics::module_op("put", "exists");
                return Ok(hash);
            }
            Ok(_) => {}
            Err(e) if e.kind() == InfoErrorKind::NotFound => {}
            Err(e) => return Err(nats("put")(&e)),
        }
        let mut reader = bytes;
        self.objects
            .put(name.as_str(), &mut reader)
            .await
            .map_err(|e| {
                metrics::module_op("put", "error");
                nats("put")(&e)
            })?;
        metrics::module_op("put", "ok");
        Ok(hash)
    }

    /// Fetches module bytes by hash, checking size and content against the hash.
    pub async fn get(&self, hash: &str) -> Result<Vec<u8>, ModuleError> {
        self.online("get", self.get_now(hash)).await
    }

    async fn get_now(&self, hash: &str) -> Result<Vec<u8>, ModuleError> {
        let name = Self::object_name(hash);
        let mut object = match self.objects.get(&name).await {
            Ok(o) => o,
            Err(e) if e.kind() == GetErrorKind::NotFound => {
                metrics::module_op("get", "not_found");
                return Err(ModuleError::NotFound(hash.to_string()));
            }
            Err(e) => return Err(nats("get")(&e)),
        };
        let size = object.info().size;
        if size > self.max_module_bytes {
            return Err(ModuleError::TooLarge {
                hash: hash.to_string(),
                size,
                max: self.max_module_bytes,
            });
        }
        let mut bytes = Vec::with_capacity(size);
        // Bounded read: never more than the limit, whatever the object says its size is.
        (&mut object)
            .take(self.max_module_bytes as u64 + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| nats("get")(&e))?;
        let got = content_hash(&bytes);
        if got != hash {
            metrics::module_op("get", "corrupt");
            return Err(ModuleError::Corrupt {
                hash: hash.to_string(),
                got,
            });
        }
        metrics::module_op("get", "ok");
        Ok(bytes)
    }

    /// Makes `hash` the current module of `actor_type` (the bytes must have been `put`),
    /// bumping the type's cluster-wide version with a revision check, so of two concurrent
    /// deploys each gets its own version and the later one wins.
    pub async fn announce(
        &self,
        actor_type: &str,
        hash: &str,
        spec: serde_json::Value,
    ) -> Result<CurrentModule, ModuleError> {
        self.online("announce", self.announce_now(actor_type, hash, spec))
            .await
    }

    async fn announce_now(
        &self,
        actor_type: &str,
        hash: &str,
        spec: serde_json::Value,
    ) -> Result<CurrentModule, ModuleError> {
        let size = self
            .objects
            .info(Self::object_name(hash))
            .await
            .map_err(|e| match e.kind() {
                InfoErrorKind::NotFound => ModuleError::NotFound(hash.to_string()),
                _ => nats("announce")(&e),
            })?
            .size as u64;
        let key = format!("current.{}", escape_token(actor_type));
        // Each round one of the concurrent deployers wins; losers retry after a short random
        // pause (deploys of one type racing are rare; the bound keeps a flapping one finite).
        for attempt in 0..64 {
            if attempt > 0 {
                let jitter = 1 + (uuid::Uuid::new_v4().as_u128() % 8) as u64;
                tokio::time::sleep(std::time::Duration::from_millis(jitter)).await;
            }
            let existing = self
                .kv
                .entry(key.as_str())
                .await
                .map_err(|e| nats("announce")(&e))?;
            let (version, revision) = match &existing {
                Some(e) if e.operation == Operation::Put => {
                    let cur: CurrentModule = decode(&key, &e.value)?;
                    (cur.version + 1, Some(e.revision))
                }
                Some(e) => (1, Some(e.revision)),
                None => (1, None),
            };
            let record = CurrentModule {
                actor_type: actor_type.to_string(),
                version,
                hash: hash.to_string(),
                size,
                spec: spec.clone(),
                deployed_by: self.node.clone(),
                deployed_at_ms: unix_ms(),
            };
            let json = serde_json::to_vec(&record).expect("module record serializes");
            let written = match revision {
                Some(rev) => self.kv.update(key.as_str(), json.into(), rev).await.is_ok(),
                None => self.kv.create(key.as_str(), json.into()).await.is_ok(),
            };
            if written {
                metrics::module_op("announce", "ok");
                return Ok(record);
            }
        }
        metrics::module_op("announce", "conflict");
        Err(ModuleError::Conflict(actor_type.to_string()))
    }

    /// The current module of `actor_type`, if it was ever deployed to the cluster.
    pub async fn current(&self, actor_type: &str) -> Result<Option<CurrentModule>, ModuleError> {
        self.online("current", self.current_now(actor_type)).await
    }

    async fn current_now(&self, actor_type: &str) -> Result<Option<CurrentModule>, ModuleError> {
        let key = format!("current.{}", escape_token(actor_type));
        match self
            .kv
            .entry(key.as_str())
            .await
            .map_err(|e| nats("current")(&e))?
        {
            Some(e) if e.operation == Operation::Put => Ok(Some(decode(&key, &e.value)?)),
            _ => Ok(None),
        }
    }

    /// Every type's current module: what a joining host loads.
    pub async fn all_current(&self) -> Result<Vec<CurrentModule>, ModuleError> {
        self.online("list", self.all_current_now()).await
    }

    async fn all_current_now(&self) -> Result<Vec<CurrentModule>, ModuleError> {
        let keys: Vec<String> = self
            .kv
            .keys()
            .await
            .map_err(|e| nats("list")(&e))?
            .try_collect()
            .await
            .map_err(|e| nats("list")(&e))?;
        let mut out = Vec::new();
        for key in keys.iter().filter(|k| k.starts_with("current.")) {
            if let Some(e) = self
                .kv
                .entry(key.as_str())
                .await
                .map_err(|e| nats("list")(&e))?
                && e.operation == Operation::Put
            {
                out.push(decode(key, &e.value)?);
            }
        }
        Ok(out)
    }

    /// Deploys from now on (and the current one of every type first): what every member
    /// follows to roll new versions. Malformed records come out as errors; the stream goes on.
    pub async fn watch_current(
        &self,
    ) -> Result<impl Stream<Item = Result<CurrentModule, ModuleError>> + use<>, ModuleError> {
        let watch = self
            .kv
            .watch_with_history("current.>")
            .await
            .map_err(|e| nats("watch")(&e))?;
        Ok(watch.filter_map(|entry| {
            std::future::ready(match entry {
                Ok(e) if e.operation == Operation::Put => Some(decode(&e.key, &e.value)),
                Ok(_) => None,
                Err(e) => Some(Err(nats("watch")(&e))),
            })
        }))
    }

    /// Records this member's result of loading `module`.
    pub async fn report(
        &self,
        module: &CurrentModule,
        error: Option<String>,
    ) -> Result<(), ModuleError> {
        self.online("report", self.report_now(module, error)).await
    }

    async fn report_now(
        &self,
        module: &CurrentModule,
        error: Option<String>,
    ) -> Result<(), ModuleError> {
        let key = format!(
            "report.{}.{}",
            escape_token(&module.actor_type),
            escape_token(&self.node)
        );
        let report = LoadReport {
            version: module.version,
            hash: module.hash.clone(),
            error,
            at_ms: unix_ms(),
        };
        let json = serde_json::to_vec(&report).expect("load report serializes");
        self.kv
            .put(key.as_str(), json.into())
            .await
            .map_err(|e| nats("report")(&e))?;
        metrics::module_op(
            "report",
            if report.error.is_none() {
                "ok"
            } else {
                "failed"
            },
        );
        Ok(())
    }

    /// Every member's last load report for `actor_type`, by node id.
    pub async fn reports(
        &self,
        actor_type: &str,
    ) -> Result<Vec<(String, LoadReport)>, ModuleError> {
        self.online("reports", self.reports_now(actor_type)).await
    }

    async fn reports_now(
        &self,
        actor_type: &str,
    ) -> Result<Vec<(String, LoadReport)>, ModuleError> {
        let prefix = format!("report.{}.", escape_token(actor_type));
        let keys: Vec<String> = self
            .kv
            .keys()
            .await
            .map_err(|e| nats("reports")(&e))?
            .try_collect()
            .await
            .map_err(|e| nats("reports")(&e))?;
        let mut out = Vec::new();
        for key in keys.iter().filter(|k| k.starts_with(&prefix)) {
            let Some(node) = unescape_token(&key[prefix.len()..]) else {
                continue;
            };
            if let Some(e) = self
                .kv
                .entry(key.as_str())
                .await
                .map_err(|e| nats("reports")(&e))?
                && e.operation == Operation::Put
            {
                out.push((node, decode(key, &e.value)?));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}
