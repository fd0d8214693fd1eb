//! Deploys across the cluster: a deploy on any member puts the module in the cluster's module
//! store and makes it the type's current version; every member follows the current versions
//! (a member that joins later first gets each type's current one), loads what it does not run
//! yet, and reports the outcome, so the deploying command can say, per host, what happened.
//! A member that cannot load a version keeps the one it has and says why.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use parking_lot::Mutex;
use sluice_cluster::membership::{MemberView, TypeVersion};
use sluice_cluster::modules::{CurrentModule, ModuleError, ModuleStore};
use sluice_runtime::{ChildSpec, Host};
use tokio::sync::watch;

/// How long a member keeps trying a module fetch or report NATS cut short.
const FETCH_PATIENCE: Duration = Duration::from_secs(60);

/// Runs module-store operation `op` again while NATS cuts it short (the connection dropped,
/// or was down), backing off to 2 s, for up to [`FETCH_PATIENCE`]. Anything else (not found,
/// corrupt, too large) is final.
async fn patiently<T, F: std::future::Future<Output = Result<T, ModuleError>>>(
    what: &'static str,
    op: impl Fn() -> F,
) -> Result<T, ModuleError> {
    let give_up = Instant::now() + FETCH_PATIENCE;
    let mut backoff = Duration::from_millis(50);
    loop {
        match op().await {
            Err(e @ ModuleError::Nats { .. }) if Instant::now() < give_up => {
                tracing::warn!(error = %e, "cluster: module {what} failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
            done => return done,
        }
    }
}

/// What one member made of a rolled-out version.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostOutcome {
    /// The member's node id.
    pub node: String,
    /// `None`: it serves the new version. Otherwise why it kept the old one, or that it did
    /// not report in time.
    pub error: Option<String>,
}

/// A deploy as the cluster took it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RollOut {
    /// The cluster-wide version the deploy made current.
    pub version: u64,
    /// Each live member's outcome, by node id.
    pub hosts: Vec<HostOutcome>,
}

/// What each type runs here: module hash and spec (a new spec with the same bytes is a new
/// deploy too).
type Running = HashMap<String, (String, serde_json::Value)>;

/// The module side of a member.
pub(crate) struct Modules {
    store: ModuleStore,
    host: Host,
    running: Mutex<Running>,
    /// The types and versions to announce in the member record (placement's candidates).
    announced: Mutex<BTreeMap<String, TypeVersion>>,
}

impl Modules {
    pub fn new(store: ModuleStore, host: Host) -> Self {
        Self {
            store,
            host,
            running: Mutex::new(HashMap::new()),
            announced: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records what this host deployed itself (its app folder at start, or a deploy through
    /// its admin API), and returns the member record's types.
    pub fn deployed_here(
        &self,
        spec: &ChildSpec,
        hash: String,
        version: u64,
    ) -> BTreeMap<String, TypeVersion> {
        let json = serde_json::to_value(spec).unwrap_or_default();
        self.running
            .lock()
            .insert(spec.actor_type.clone(), (hash.clone(), json));
        let mut a = self.announced.lock();
        a.insert(
            spec.actor_type.clone(),
            TypeVersion {
                version,
                hash,
                live: 0,
            },
        );
        a.clone()
    }

    /// The types and versions this host announces.
    pub fn announced(&self) -> BTreeMap<String, TypeVersion> {
        self.announced.lock().clone()
    }

    /// Makes this host's modules the cluster's current ones where the cluster has none yet
    /// (the first host of an app seeds them; later ones follow what is current).
    pub async fn seed(&self, children: &[(ChildSpec, Vec<u8>)]) -> Result<(), ModuleError> {
        for (spec, bytes) in children {
            if self.store.current(&spec.actor_type).await?.is_none() {
                let hash = self.store.put(bytes).await?;
                let json = serde_json::to_value(spec).unwrap_or_default();
                let current = self.store.announce(&spec.actor_type, &hash, json).await?;
                self.store.report(&current, None).await?;
            }
        }
        Ok(())
    }

    /// Deploys `spec`/`bytes` cluster-wide after this host loaded it, and waits (at most
    /// `wait`) for every live member with the type to report.
    pub async fn roll_out(
        &self,
        spec: &ChildSpec,
        bytes: &[u8],
        view: &watch::Receiver<Arc<MemberView>>,
        wait: Duration,
    ) -> Result<RollOut, ModuleError> {
        let hash = self.store.put(bytes).await?;
        let json = serde_json::to_value(spec).unwrap_or_default();
        let current = self
            .store
            .announce(&spec.actor_type, &hash, json.clone())
            .await?;
        self.running
            .lock()
            .insert(spec.actor_type.clone(), (hash, json));
        self.store.report(&current, None).await?;
        let start = Instant::now();
        loop {
            let reports: HashMap<String, _> = self
                .store
                .reports(&spec.actor_type)
                .await?
                .into_iter()
                .filter(|(_, r)| r.version >= current.version)
                .collect();
            let members: Vec<String> = view
                .borrow()
                .members()
                .map(|m| m.record.node.clone())
                .collect();
            let done = members.iter().all(|m| reports.contains_key(m));
            if done || start.elapsed() >= wait {
                let hosts = members
                    .into_iter()
                    .map(|node| {
                        let error = match reports.get(&node) {
                            Some(r) => r.error.clone(),
                            None => Some(format!("no report within {wait:?}")),
                        };
                        HostOutcome { node, error }
                    })
                    .collect();
                return Ok(RollOut {
                    version: current.version,
                    hosts,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Follows the cluster's current modules for as long as the member lives: loads each
    /// version this host does not run yet and reports the outcome. `announce` gets the
    /// member record's types after each load.
    pub async fn follow(self: Arc<Self>, announce: impl Fn(BTreeMap<String, TypeVersion>)) {
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.store.watch_current().await {
                Ok(mut stream) => {
                    backoff = Duration::from_millis(100);
                    while let Some(item) = stream.next().await {
                        match item {
                            Ok(m) => self.apply(m, &announce).await,
                            Err(e) => tracing::warn!(error = %e, "cluster: module watch"),
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cluster: cannot watch modules; retrying"),
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    async fn apply(&self, m: CurrentModule, announce: &impl Fn(BTreeMap<String, TypeVersion>)) {
        let same = self
            .running
            .lock()
            .get(&m.actor_type)
            .is_some_and(|(h, s)| *h == m.hash && *s == m.spec);
        let error = if same {
            None
        } else {
            self.load(&m, announce).await.err()
        };
        if let Some(e) = &error {
            tracing::warn!(actor_type = %m.actor_type, version = m.version, error = %e,
                "cluster: keeping the running version of a type whose new version did not load");
        }
        // Written patiently too: a member whose report is lost is listed by `sluice deploy`
        // as not having reported, although it serves the new version.
        if let Err(e) = patiently("report", || self.store.report(&m, error.clone())).await {
            tracing::warn!(error = %e, "cluster: module load report not written");
        }
    }

    /// The bytes of module `hash`, fetched [`patiently`]: a member that lost its connection
    /// mid-rollout would otherwise keep the old version (and report so) until the next deploy.
    pub(crate) async fn fetch(&self, hash: &str) -> Result<Vec<u8>, String> {
        patiently("fetch", || self.store.get(hash))
            .await
            .map_err(|e| e.to_string())
    }

    async fn load(
        &self,
        m: &CurrentModule,
        announce: &impl Fn(BTreeMap<String, TypeVersion>),
    ) -> Result<(), String> {
        let spec: ChildSpec = serde_json::from_value(m.spec.clone())
            .map_err(|e| format!("the deploy's spec does not parse here: {e}"))?;
        if spec.actor_type != m.actor_type {
            return Err(format!(
                "the deploy's spec names type {:?}, not {:?}",
                spec.actor_type, m.actor_type
            ));
        }
        let bytes = self.fetch(&m.hash).await?;
        let version = self
            .host
            .deploy(spec.clone(), bytes)
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(actor_type = %m.actor_type, cluster_version = m.version, version,
            "cluster: loaded the current module");
        announce(self.deployed_here(&spec, m.hash.clone(), version));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use sluice_cluster::testing::{NatsServer, Proxy};
    use sluice_cluster::{ClusterConfig, ConnectionState};
    use sluice_runtime::HostConfig;

    use super::*;

    /// A member whose connection is down when a new version reaches it fetches the bytes once
    /// it is back, instead of keeping the old version for good.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fetch_while_disconnected_is_retried_once_nats_is_back() {
        let server = NatsServer::start().await.expect("the test nats-server");
        let proxy = Proxy::start(format!("127.0.0.1:{}", server.port())).await;
        let config = ClusterConfig::builder(proxy.url())
            .name("fetch")
            .node_id("m")
            .heartbeat_ms(100)
            .member_ttl_ms(1_000)
            .build()
            .unwrap();
        let conn = sluice_cluster::connect(&config).await.unwrap();
        let store = ModuleStore::open(&conn).await.unwrap();
        let bytes = b"not really wasm, but bytes".to_vec();
        let hash = store.put(&bytes).await.unwrap();
        let host = Host::new(HostConfig::default()).unwrap();
        let modules = Arc::new(Modules::new(store, host));

        proxy.cut();
        let mut state = conn.state();
        tokio::time::timeout(
            Duration::from_secs(10),
            state.wait_for(|s| *s != ConnectionState::Connected),
        )
        .await
        .expect("the client sees the cut")
        .unwrap();
        // Its first attempt fails at once (no connection); the proxy refuses until healed.
        let fetch = tokio::spawn({
            let modules = modules.clone();
            let hash = hash.clone();
            async move { modules.fetch(&hash).await }
        });
        proxy.heal();
        let got = tokio::time::timeout(Duration::from_secs(20), fetch)
            .await
            .expect("the fetch ends once NATS is back")
            .unwrap();
        assert_eq!(got, Ok(bytes));
    }
}
