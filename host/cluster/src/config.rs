//! Cluster configuration: the serde `[cluster]` table of app-config.toml, and a validating
//! builder.
//!
//! ```toml
//! [cluster]
//! url = "nats://10.0.0.5:4222"   # several: "nats://a:4222,nats://b:4222"
//! name = "prod"                   # default "default"
//! node_id = "edge-7"              # default: generated at start
//! heartbeat_ms = 1000
//! member_ttl_ms = 5000
//! credentials_file = "/etc/sluice/host.creds"
//! [cluster.tls]
//! ca_file = "/etc/sluice/ca.pem"
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::names::{self, NameError};

/// Default cluster name.
pub const DEFAULT_CLUSTER_NAME: &str = "default";
/// Default heartbeat interval, ms.
pub const DEFAULT_HEARTBEAT_MS: u64 = 1_000;
/// Default member TTL, ms: a host silent this long is gone for everyone.
pub const DEFAULT_MEMBER_TTL_MS: u64 = 5_000;
/// Default bound on connecting at start, ms.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// The smallest member TTL: JetStream's delete markers for expired entries live at least 1 s.
pub const MIN_MEMBER_TTL_MS: u64 = 1_000;

/// Why a `[cluster]` table was refused. The message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `url` is empty or a server URL in it is malformed.
    #[error("cluster.url {url:?}: {reason}")]
    Url {
        /// The value as written.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `name` or `node_id` breaks the name grammar.
    #[error("cluster: {0}")]
    Name(#[from] NameError),
    /// A field is out of range or malformed.
    #[error("cluster.{field}: {reason}")]
    Field {
        /// The field.
        field: &'static str,
        /// The rule it breaks.
        reason: String,
    },
    /// Authentication options that cannot go together, or one missing its partner.
    #[error("cluster: {0}")]
    Auth(&'static str),
    /// TLS options that cannot go together.
    #[error("cluster.tls: {0}")]
    Tls(&'static str),
}

/// TLS towards NATS, as NATS clients offer it. All paths are PEM files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// Refuse to talk to a server without TLS. Default false (a `tls://` URL, or a server that
    /// requires TLS, turns it on anyway).
    pub required: bool,
    /// Extra root certificates to trust (e.g. a private CA).
    pub ca_file: Option<PathBuf>,
    /// Client certificate for mutual TLS; needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// Client key for mutual TLS; needs `cert_file`.
    pub key_file: Option<PathBuf>,
    /// TLS handshake before the server's INFO (the server's `handshake_first`). Default false.
    pub handshake_first: bool,
}

/// The `[cluster]` table. Only `url` has no default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// NATS server URL(s), comma-separated (`nats://`, `tls://`, `ws://`).
    pub url: String,
    /// Cluster name: hosts with the same name over the same NATS act as one. Default
    /// `default`. `[A-Za-z0-9_-]{1,32}`.
    pub name: String,
    /// This host's id, unique in the cluster. `None` (default): generated at start, so a
    /// restarted host is a new member. Set it to keep one id per machine. `[A-Za-z0-9_-]{1,64}`.
    pub node_id: Option<String>,
    /// Heartbeat interval, ms. Default 1000.
    pub heartbeat_ms: u64,
    /// A member silent this long is gone for everyone, ms. Default 5000. At least
    /// 3 × `heartbeat_ms` and at least 1000.
    pub member_ttl_ms: u64,
    /// Bound on the first connection at start, ms. Default 5000. Later disconnections are
    /// retried forever.
    pub connect_timeout_ms: u64,
    /// JetStream replicas of the cluster's buckets when this host creates them. Default 1 (a
    /// single nats-server); 3 on a NATS cluster, so a member entry or a directory entry that
    /// was acknowledged survives the loss of a server (docs/cluster.md). 1..=5.
    pub replicas: usize,
    /// The JetStream domain to use (a leaf node's hub domain), if any.
    pub jetstream_domain: Option<String>,
    /// A NATS credentials file (JWT + nkey seed), e.g. from `nsc`.
    pub credentials_file: Option<PathBuf>,
    /// A file holding an nkey seed (`SU…`).
    pub nkey_seed_file: Option<PathBuf>,
    /// User name; needs `password`.
    pub user: Option<String>,
    /// Password; needs `user`.
    pub password: Option<String>,
    /// An authentication token.
    pub token: Option<String>,
    /// TLS options.
    pub tls: TlsConfig,
    /// Frames of tells (up to 64 tells each) in flight to one other host at once. Default 8;
    /// 1 sends the next frame only after the previous one's receipts. 1..=64.
    pub tell_frames_in_flight: usize,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            name: DEFAULT_CLUSTER_NAME.to_string(),
            node_id: None,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            member_ttl_ms: DEFAULT_MEMBER_TTL_MS,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            replicas: 1,
            jetstream_domain: None,
            credentials_file: None,
            nkey_seed_file: None,
            user: None,
            password: None,
            token: None,
            tls: TlsConfig::default(),
            tell_frames_in_flight: 8,
        }
    }
}

const SCHEMES: [&str; 5] = ["nats://", "tls://", "ws://", "wss://", "nats+tls://"];

fn check_url(url: &str) -> Result<(), ConfigError> {
    let bad = |reason: String| ConfigError::Url {
        url: url.to_string(),
        reason,
    };
    if url.trim().is_empty() {
        return Err(bad("no NATS server URL (e.g. nats://127.0.0.1:4222)".into()));
    }
    for server in url.split(',').map(str::trim) {
        let rest = SCHEMES
            .iter()
            .find_map(|s| server.strip_prefix(s))
            .ok_or_else(|| {
                bad(format!(
                    "{server:?} must start with nats://, tls://, ws:// or wss://"
                ))
            })?;
        let host_port = rest.rsplit('@').next().unwrap_or(rest);
        let host_port = host_port.split('/').next().unwrap_or(host_port);
        if host_port.is_empty() {
            return Err(bad(format!("{server:?} has no host")));
        }
        // `[v6]:port`, `host:port` or `host`.
        let port = match host_port.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((_, after)) => after.strip_prefix(':'),
                None => return Err(bad(format!("{server:?} has an unclosed '['"))),
            },
            None => host_port.rsplit_once(':').map(|(_, p)| p),
        };
        if let Some(port) = port
            && port.parse::<u16>().is_err()
        {
            return Err(bad(format!("{server:?} has a bad port {port:?}")));
        }
    }
    Ok(())
}

impl ClusterConfig {
    /// A config for `url` with every other field at its default.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }

    /// A builder for `url`, starting from the defaults.
    pub fn builder(url: impl Into<String>) -> ClusterConfigBuilder {
        ClusterConfigBuilder(Self::new(url))
    }

    /// The heartbeat interval.
    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms)
    }

    /// The member TTL.
    pub fn member_ttl(&self) -> Duration {
        Duration::from_millis(self.member_ttl_ms)
    }

    /// The bound on connecting at start.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_url(&self.url)?;
        names::validate_cluster_name(&self.name)?;
        if let Some(id) = &self.node_id {
            names::validate_node_id(id)?;
        }
        let field = |field, reason: String| Err(ConfigError::Field { field, reason });
        if !(10..=60_000).contains(&self.heartbeat_ms) {
            return field("heartbeat_ms", "must be in 10..=60000".into());
        }
        if self.member_ttl_ms < MIN_MEMBER_TTL_MS {
            return field(
                "member_ttl_ms",
                format!("must be at least {MIN_MEMBER_TTL_MS} (JetStream's shortest marker TTL)"),
            );
        }
        if self.member_ttl_ms < 3 * self.heartbeat_ms {
            return field(
                "member_ttl_ms",
                format!(
                    "must be at least 3 x heartbeat_ms ({}), so one late heartbeat does not end a member",
                    3 * self.heartbeat_ms
                ),
            );
        }
        if !(100..=600_000).contains(&self.connect_timeout_ms) {
            return field("connect_timeout_ms", "must be in 100..=600000".into());
        }
        if !(1..=5).contains(&self.replicas) {
            return field("replicas", "must be in 1..=5".into());
        }
        if !(1..=64).contains(&self.tell_frames_in_flight) {
            return field("tell_frames_in_flight", "must be in 1..=64".into());
        }
        if let Some(d) = &self.jetstream_domain
            && (d.is_empty()
                || !d
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        {
            return field(
                "jetstream_domain",
                "must be 1+ characters of [A-Za-z0-9_-]".into(),
            );
        }
        let schemes = [
            self.credentials_file.is_some(),
            self.nkey_seed_file.is_some(),
            self.user.is_some() || self.password.is_some(),
            self.token.is_some(),
        ];
        if schemes.iter().filter(|s| **s).count() > 1 {
            return Err(ConfigError::Auth(
                "use one of credentials_file, nkey_seed_file, user+password, token",
            ));
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(ConfigError::Auth("user and password go together"));
        }
        if self.tls.cert_file.is_some() != self.tls.key_file.is_some() {
            return Err(ConfigError::Tls("cert_file and key_file go together"));
        }
        Ok(())
    }
}

/// Builder for [`ClusterConfig`]; `build` validates.
#[derive(Debug, Clone)]
pub struct ClusterConfigBuilder(ClusterConfig);

impl ClusterConfigBuilder {
    /// Cluster name (default `default`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.0.name = name.into();
        self
    }
    /// This host's id (default: generated at start).
    pub fn node_id(mut self, id: impl Into<String>) -> Self {
        self.0.node_id = Some(id.into());
        self
    }
    /// Heartbeat interval, ms (default 1000).
    pub fn heartbeat_ms(mut self, ms: u64) -> Self {
        self.0.heartbeat_ms = ms;
        self
    }
    /// Member TTL, ms (default 5000).
    pub fn member_ttl_ms(mut self, ms: u64) -> Self {
        self.0.member_ttl_ms = ms;
        self
    }
    /// Bound on the first connection, ms (default 5000).
    pub fn connect_timeout_ms(mut self, ms: u64) -> Self {
        self.0.connect_timeout_ms = ms;
        self
    }
    /// JetStream replicas of buckets this host creates (default 1).
    pub fn replicas(mut self, n: usize) -> Self {
        self.0.replicas = n;
        self
    }
    /// A JetStream domain (default none).
    pub fn jetstream_domain(mut self, domain: impl Into<String>) -> Self {
        self.0.jetstream_domain = Some(domain.into());
        self
    }
    /// A NATS credentials file.
    pub fn credentials_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.0.credentials_file = Some(path.into());
        self
    }
    /// A file holding an nkey seed.
    pub fn nkey_seed_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.0.nkey_seed_file = Some(path.into());
        self
    }
    /// User and password.
    pub fn user_password(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.0.user = Some(user.into());
        self.0.password = Some(password.into());
        self
    }
    /// An authentication token.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.0.token = Some(token.into());
        self
    }
    /// Frames of tells in flight to one host (see the field).
    pub fn tell_frames_in_flight(mut self, n: usize) -> Self {
        self.0.tell_frames_in_flight = n;
        self
    }

    /// TLS options.
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.0.tls = tls;
        self
    }
    /// Validates and returns the config.
    pub fn build(self) -> Result<ClusterConfig, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_documented_values_and_valid() {
        let c = ClusterConfig::new("nats://127.0.0.1:4222");
        assert_eq!(c.name, "default");
        assert_eq!(c.heartbeat_ms, 1000);
        assert_eq!(c.member_ttl_ms, 5000);
        assert_eq!(c.connect_timeout_ms, 5000);
        assert_eq!(c.node_id, None);
        c.validate().unwrap();
    }

    #[test]
    fn cluster_table_parses_from_toml() {
        #[derive(Deserialize)]
        struct App {
            cluster: ClusterConfig,
        }
        let app: App = toml::from_str(
            r#"
            [cluster]
            url = "nats://a:4222, tls://b:4443"
            name = "prod"
            node_id = "edge-7"
            heartbeat_ms = 500
            member_ttl_ms = 2000
            user = "sluice"
            password = "secret"
            [cluster.tls]
            ca_file = "/etc/ca.pem"
            "#,
        )
        .unwrap();
        let c = app.cluster;
        c.validate().unwrap();
        assert_eq!(c.node_id.as_deref(), Some("edge-7"));
        assert_eq!(c.member_ttl(), Duration::from_secs(2));
        assert_eq!(c.tls.ca_file, Some(PathBuf::from("/etc/ca.pem")));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = toml::from_str::<ClusterConfig>("url = \"nats://a\"\nheartbeat = 5").unwrap_err();
        assert!(e.to_string().contains("unknown field `heartbeat`"), "{e}");
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases: Vec<(ClusterConfigBuilder, &str)> = vec![
            (ClusterConfig::builder(""), "cluster.url"),
            (
                ClusterConfig::builder("http://a:1"),
                "must start with nats://",
            ),
            (ClusterConfig::builder("nats://a:99999"), "bad port"),
            (ClusterConfig::builder("nats://"), "no host"),
            (
                ClusterConfig::builder("nats://a").name("a.b"),
                "cluster name",
            ),
            (ClusterConfig::builder("nats://a").node_id("n 1"), "node id"),
            (
                ClusterConfig::builder("nats://a").heartbeat_ms(0),
                "heartbeat_ms",
            ),
            (
                ClusterConfig::builder("nats://a").member_ttl_ms(500),
                "at least 1000",
            ),
            (
                ClusterConfig::builder("nats://a")
                    .heartbeat_ms(1000)
                    .member_ttl_ms(2000),
                "3 x heartbeat_ms (3000)",
            ),
            (
                ClusterConfig::builder("nats://a")
                    .token("t")
                    .user_password("u", "p"),
                "use one of",
            ),
            (
                ClusterConfig::builder("nats://a").tls(TlsConfig {
                    cert_file: Some("c.pem".into()),
                    ..TlsConfig::default()
                }),
                "cert_file and key_file",
            ),
        ];
        for (b, want) in cases {
            let e = b.build().unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should mention {want:?}");
        }
        let half = ClusterConfig {
            user: Some("u".into()),
            ..ClusterConfig::new("nats://a")
        };
        assert!(
            half.validate()
                .unwrap_err()
                .to_string()
                .contains("user and password")
        );
    }
}
