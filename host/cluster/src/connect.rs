//! Connecting to NATS: a bounded first attempt with a typed error, then async-nats reconnects
//! forever; the connection's state and events are exposed to the host.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use tokio::sync::{broadcast, watch};

use crate::config::{ClusterConfig, ConfigError};
use crate::metrics;
use crate::names::Names;

/// Connection events kept for slow readers of [`Connection::events`]; older ones are dropped
/// for a lagging reader (the current state is always in [`Connection::state`]).
pub const EVENT_CAPACITY: usize = 64;

/// Why the first connection failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A credentials, nkey seed or TLS file could not be read.
    #[error("cluster: cannot read {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No server answered (refused, unresolvable, TLS or authentication failure).
    #[error("cluster: cannot reach NATS at {url}: {reason}")]
    Unreachable {
        /// The configured URL(s).
        url: String,
        /// The client's reason.
        reason: String,
    },
    /// No server answered within `connect_timeout_ms`.
    #[error("cluster: NATS at {url} did not answer within {after:?}")]
    Timeout {
        /// The configured URL(s).
        url: String,
        /// The bound.
        after: Duration,
    },
}

/// The connection's state as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Connected to a server.
    Connected,
    /// Lost the server; async-nats is reconnecting (publishes are buffered meanwhile).
    Disconnected,
    /// Closed for good (drained or dropped).
    Closed,
}

/// Something that happened to the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionEvent {
    /// (Re)connected.
    Connected,
    /// Lost the server.
    Disconnected,
    /// The server is shutting down gracefully (lame duck): it will drop us soon.
    LameDuck,
    /// This client started draining (closing after in-flight work).
    Draining,
    /// A subscription fell behind and the client dropped messages.
    SlowConsumer,
    /// The server reported an error (e.g. an authorization violation).
    ServerError(String),
    /// The client hit an error.
    ClientError(String),
    /// Closed for good.
    Closed,
}

impl ConnectionEvent {
    /// A bounded metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Disconnected => "disconnected",
            Self::LameDuck => "lame_duck",
            Self::Draining => "draining",
            Self::SlowConsumer => "slow_consumer",
            Self::ServerError(_) => "server_error",
            Self::ClientError(_) => "client_error",
            Self::Closed => "closed",
        }
    }
}

/// A live NATS connection of one cluster member.
#[derive(Clone, Debug)]
pub struct Connection {
    client: async_nats::Client,
    jetstream: jetstream::Context,
    names: Arc<Names>,
    node_id: Arc<str>,
    replicas: usize,
    state: watch::Receiver<ConnectionState>,
    events: broadcast::Sender<ConnectionEvent>,
}

fn read_file(path: &PathBuf) -> Result<String, ConnectError> {
    std::fs::read_to_string(path).map_err(|source| ConnectError::File {
        path: path.clone(),
        source,
    })
}

fn check_readable(path: &PathBuf) -> Result<(), ConnectError> {
    read_file(path).map(|_| ())
}

/// A fresh node id: 12 hex digits of a random UUID.
pub fn generate_node_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(12);
    format!("n{id}")
}

/// Runs `f` unless the connection whose state is `state` drops first (or is down already):
/// then `None`, at once. The client keeps a JetStream request whose connection dropped
/// waiting well past its timeout (over 10 s in `tests/directory.rs`), and its answer can no
/// longer come: core NATS keeps nothing for a subscriber that is away.
pub(crate) async fn unless_dropped<F: std::future::Future>(
    state: &watch::Receiver<ConnectionState>,
    f: F,
) -> Option<F::Output> {
    let mut state = state.clone();
    tokio::select! {
        biased;
        _ = state.wait_for(|s| *s != ConnectionState::Connected) => None,
        r = f => Some(r),
    }
}

/// What an operation cut short by [`unless_dropped`] reports.
pub(crate) const DROPPED_IN_FLIGHT: &str =
    "this host lost its NATS connection with the operation in flight";

/// How long to wait before reconnect attempt `attempts` (1-based): at once, then doubling
/// from 2 ms, never more than `cap` (the heartbeat interval). The client's own schedule
/// caps at 4 s, so a server back after a few seconds' outage could be found only 4 s later,
/// while this member's lease runs out one heartbeat before the member TTL: its actors would
/// stop for an outage shorter than the TTL.
fn reconnect_delay(attempts: usize, cap: Duration) -> Duration {
    if attempts <= 1 {
        return Duration::ZERO;
    }
    let exp = u32::try_from(attempts - 1).unwrap_or(u32::MAX).min(32);
    Duration::from_millis(2u64.saturating_pow(exp)).min(cap)
}

/// Builds the client options from the config (auth, TLS, timeouts).
fn options(
    config: &ClusterConfig,
    node_id: &str,
) -> Result<async_nats::ConnectOptions, ConnectError> {
    let mut o = async_nats::ConnectOptions::new()
        .name(format!("sluice {}/{node_id}", config.name))
        .connection_timeout(config.connect_timeout())
        // Requests set their own timeout from the caller's deadline.
        .request_timeout(None)
        .reconnect_delay_callback({
            let cap = config.heartbeat();
            move |attempts| reconnect_delay(attempts, cap)
        });
    if let Some(path) = &config.credentials_file {
        let creds = read_file(path)?;
        o = o.credentials(&creds).map_err(|source| ConnectError::File {
            path: path.clone(),
            source,
        })?;
    }
    if let Some(path) = &config.nkey_seed_file {
        o = o.nkey(read_file(path)?.trim().to_string());
    }
    if let (Some(user), Some(password)) = (&config.user, &config.password) {
        o = o.user_and_password(user.clone(), password.clone());
    }
    if let Some(token) = &config.token {
        o = o.token(token.clone());
    }
    let tls = &config.tls;
    if tls.required {
        o = o.require_tls(true);
    }
    if tls.handshake_first {
        o = o.tls_first();
    }
    if let Some(ca) = &tls.ca_file {
        check_readable(ca)?;
        o = o.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&tls.cert_file, &tls.key_file) {
        check_readable(cert)?;
        check_readable(key)?;
        o = o.add_client_certificate(cert.clone(), key.clone());
    }
    Ok(o)
}

/// Connects to NATS as this config says, within `connect_timeout_ms`.
///
/// An unreachable server at start is an error (so `sluice run --cluster` can exit non-zero);
/// once connected, a lost server is retried forever and reported through
/// [`Connection::state`] and [`Connection::events`].
pub async fn connect(config: &ClusterConfig) -> Result<Connection, ConnectError> {
    config.validate()?;
    let names = Names::new(&config.name).map_err(ConfigError::from)?;
    let node_id = config.node_id.clone().unwrap_or_else(generate_node_id);
    let (state_tx, state) = watch::channel(ConnectionState::Connected);
    let (events, _) = broadcast::channel(EVENT_CAPACITY);
    let events_tx = events.clone();
    let opts = options(config, &node_id)?.event_callback(move |event| {
        let (next, ev) = match event {
            async_nats::Event::Connected => {
                (Some(ConnectionState::Connected), ConnectionEvent::Connected)
            }
            async_nats::Event::Disconnected => (
                Some(ConnectionState::Disconnected),
                ConnectionEvent::Disconnected,
            ),
            async_nats::Event::Closed => (Some(ConnectionState::Closed), ConnectionEvent::Closed),
            async_nats::Event::LameDuckMode => (None, ConnectionEvent::LameDuck),
            async_nats::Event::Draining => (None, ConnectionEvent::Draining),
            async_nats::Event::SlowConsumer(_) => (None, ConnectionEvent::SlowConsumer),
            async_nats::Event::ServerError(e) => {
                (None, ConnectionEvent::ServerError(e.to_string()))
            }
            async_nats::Event::ClientError(e) => {
                (None, ConnectionEvent::ClientError(e.to_string()))
            }
        };
        if let Some(s) = next {
            state_tx.send_replace(s);
        }
        metrics::connection_event(ev.label());
        tracing::info!(event = ev.label(), "nats connection");
        // No receiver is fine: nobody is listening for events.
        let _ = events_tx.send(ev);
        async {}
    });
    let url = config.url.clone();
    let client =
        match tokio::time::timeout(config.connect_timeout(), opts.connect(url.as_str())).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return Err(ConnectError::Unreachable {
                    url,
                    reason: e.to_string(),
                });
            }
            Err(_) => {
                return Err(ConnectError::Timeout {
                    url,
                    after: config.connect_timeout(),
                });
            }
        };
    let jetstream = match &config.jetstream_domain {
        Some(domain) => jetstream::with_domain(client.clone(), domain),
        None => jetstream::new(client.clone()),
    };
    Ok(Connection {
        client,
        jetstream,
        names: Arc::new(names),
        node_id: node_id.into(),
        replicas: config.replicas,
        state,
        events,
    })
}

impl Connection {
    /// The NATS client (core publish/subscribe/request).
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// The JetStream context (KV, object store).
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.jetstream
    }

    /// The cluster's subjects and buckets.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// This member's node id (configured or generated).
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// JetStream replicas for buckets this host creates.
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// The connection state now; `changed().await` on a clone to follow it.
    pub fn state(&self) -> watch::Receiver<ConnectionState> {
        self.state.clone()
    }

    /// Events from now on (bounded: [`EVENT_CAPACITY`]).
    pub fn events(&self) -> broadcast::Receiver<ConnectionEvent> {
        self.events.subscribe()
    }

    /// Returns once the server has processed everything this connection sent before (e.g. a
    /// subscription is in place for other connections' publishes). `flush` only empties the
    /// socket buffer; this is a request to a subject nobody serves, which the server answers
    /// "no responders" in order after the earlier protocol.
    pub async fn round_trip(&self) -> Result<(), String> {
        let subject = format!("_SLUICE.sync.{}", uuid::Uuid::new_v4().simple());
        let request = async_nats::Request::new()
            .payload(bytes::Bytes::new())
            .timeout(Some(Duration::from_secs(10)));
        match self.client.send_request(subject, request).await {
            Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => Ok(()),
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The largest message the server accepts (its `max_payload`).
    pub fn server_max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }

    /// The server's version string.
    pub fn server_version(&self) -> String {
        self.client.server_info().version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_attempts_back_off_to_the_heartbeat_and_no_further() {
        let cap = Duration::from_millis(300);
        let delays: Vec<u128> = (1..=12)
            .map(|a| reconnect_delay(a, cap).as_millis())
            .collect();
        assert_eq!(delays, [0, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(reconnect_delay(usize::MAX, cap), cap);
    }
}
