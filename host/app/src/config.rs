//! `app-config.toml`: the whole file of an app folder, parsed and validated.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sluice_runtime::{BusSettings, ChildSpec, HostConfig, LoadError};

/// The `[supervisor]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SupervisorConfig {
    /// The supervised actor types.
    pub children: Vec<ChildSpec>,
}

/// The `[ingress]` table: who may call the HTTP ingress, and as which principal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngressSettings {
    /// Bearer token → the principal its calls run as. The principal `"*"` marks a gateway
    /// token: a front end that authenticates users itself and names each call's principal
    /// in `x-sluice-principal` (`system` when it names none). With tokens set, every
    /// `/actors` request needs one. Empty (the default): no token is needed, and
    /// `x-sluice-principal` is believed only while the ingress listens on loopback.
    pub tokens: BTreeMap<String, String>,
}

impl IngressSettings {
    /// Rejects empty tokens and principals that cannot be carried.
    pub fn validate(&self) -> Result<(), LoadError> {
        for (token, principal) in &self.tokens {
            if token.is_empty() || token.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(LoadError::Config(
                    "ingress.tokens: a token must be non-empty, without spaces or control characters"
                        .into(),
                ));
            }
            if principal.is_empty()
                || principal.len() > 256
                || principal.chars().any(char::is_control)
            {
                return Err(LoadError::Config(format!(
                    "ingress.tokens: principal {principal:?} must be 1..=256 printable characters"
                )));
            }
        }
        Ok(())
    }
}

/// A whole `app-config.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppConfig {
    /// The app's name (a top-level `name = "…"`, before any table). `sluice deploy` refuses a
    /// host that runs an app of another name. Default: the app folder's name
    /// ([`AppConfig::app_name`]).
    pub name: Option<String>,
    /// Host settings.
    pub host: HostConfig,
    /// Actor types.
    pub supervisor: SupervisorConfig,
    /// The outbox's settings (see the outbox crate).
    pub outbox: Option<toml::Table>,
    /// The `[bus]` table: bounds, rate limits, subscriptions.
    pub bus: BusSettings,
    /// The `[ingress]` table: bearer tokens and the principals they stand for.
    pub ingress: IngressSettings,
    /// The `[cluster]` table, read by `sluice run` when it joins a cluster (see
    /// docs/cluster.md); kept as TOML here so an app folder needs no NATS to be loaded.
    pub cluster: Option<toml::Table>,
}

impl AppConfig {
    /// Parses `app-config.toml` text.
    pub fn parse(text: &str) -> Result<Self, LoadError> {
        let cfg: Self = toml::from_str(text).map_err(|e| LoadError::Config(e.to_string()))?;
        cfg.host.validate()?;
        cfg.bus.validate()?;
        cfg.ingress.validate()?;
        if let Some(n) = &cfg.name
            && (n.is_empty() || n.len() > 128 || n.chars().any(char::is_control))
        {
            return Err(LoadError::Config(
                "name: the app name must be 1..=128 printable characters".into(),
            ));
        }
        for c in &cfg.supervisor.children {
            c.validate()?;
        }
        Ok(cfg)
    }

    /// The app's name: `name` when set, else the name of the folder `dir` (made absolute, so
    /// `.` names the folder too).
    pub fn app_name(&self, dir: &Path) -> String {
        if let Some(n) = &self.name {
            return n.clone();
        }
        let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        abs.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| abs.display().to_string())
    }

    /// Reads `DIR/app-config.toml`.
    pub fn load(dir: &Path) -> Result<Self, LoadError> {
        let path = dir.join("app-config.toml");
        let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_flow::mailbox::MailboxStrategy;
    use sluice_runtime::SubscriptionMode;
    use sluice_runtime::config::MAX_ACTIVATIONS;

    #[test]
    fn parses_children_with_defaults_and_init_table() {
        let cfg = AppConfig::parse(
            r#"
            [host]
            call_timeout_ms = 500
            [[supervisor.children]]
            name = "config-server"
            actor_type = "ConfigServer"
            module = "config.wasm"
            mailbox_capacity = 2
            count = 3
            init = { version = "2.1.0" }
            "#,
        )
        .unwrap();
        assert_eq!(cfg.host.call_timeout_ms, 500);
        let c = &cfg.supervisor.children[0];
        assert_eq!(c.mailbox_capacity, 2);
        assert_eq!(c.strategy().unwrap(), MailboxStrategy::Error);
        assert_eq!(c.eager_keys(), vec!["0", "1", "2"]);
        assert_eq!(c.init_json(), r#"{"version":"2.1.0"}"#);
    }

    #[test]
    fn the_app_name_is_the_configured_one_else_the_folder_name() {
        let dir = std::env::temp_dir().join(format!("sluice-app-name-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let folder = dir.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(AppConfig::parse("").unwrap().app_name(&dir), folder);
        // `.` inside the folder names the folder too.
        let dot = dir.join(".");
        assert_eq!(AppConfig::parse("").unwrap().app_name(&dot), folder);
        let named = AppConfig::parse("name = \"shop\"\n[host]\ncall_timeout_ms = 5").unwrap();
        assert_eq!(named.app_name(&dir), "shop");
        assert!(AppConfig::parse("name = \"\"").is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn max_activations_is_bounded_by_the_address_space_it_reserves() {
        let ok = AppConfig::parse(&format!("[host]\nmax_activations = {MAX_ACTIVATIONS}"));
        assert!(ok.is_ok(), "{:?}", ok.err());
        for bad in [0, MAX_ACTIVATIONS + 1, 100_000] {
            let e = AppConfig::parse(&format!("[host]\nmax_activations = {bad}")).unwrap_err();
            assert!(e.to_string().contains("address space"), "{bad}: {e}");
        }
    }

    #[test]
    fn rejects_unknown_strategy_and_unknown_fields() {
        let e = AppConfig::parse(
            "[[supervisor.children]]\nname='a'\nactor_type='A'\nmodule='a.wasm'\nmailbox_strategy='drop_all'",
        )
        .unwrap_err();
        assert!(e.to_string().contains("mailbox_strategy"), "{e}");
        assert!(AppConfig::parse("[host]\nbogus = 1").is_err());
    }

    #[test]
    fn parses_bus_table_and_rejects_bad_patterns_typed() {
        let cfg = AppConfig::parse(
            r#"
            [bus]
            broadcast_capacity = 64
            [bus.rate_limit]
            default_quota_bytes_per_sec = 1000
            quotas = { alice = 10 }
            [[bus.subscriptions]]
            actor_type = "Audit"
            key = "1"
            topic = "orders.*"
            [[bus.subscriptions]]
            actor_type = "Dash"
            key = "0"
            topic = "orders.*.created"
            mode = "broadcast"
            [[bus.subscriptions]]
            actor_type = "Session"
            topic = "chat.*"
            mode = "dispatch"
            "#,
        )
        .unwrap();
        assert_eq!(cfg.bus.subscriptions[2].mode, SubscriptionMode::Dispatch);
        assert_eq!(cfg.bus.subscriptions[2].receiver(), "Session/{principal}");
        assert_eq!(cfg.bus.dispatch_queue_capacity, 64);
        assert_eq!(cfg.bus.dispatch_idle_ms, 60_000);
        assert_eq!(cfg.bus.dispatch_max_queues_per_actor_type, 10_000);
        let ing = AppConfig::parse("[ingress]\ntokens = { t1 = 'user:a', gw = '*' }").unwrap();
        assert_eq!(ing.ingress.tokens["t1"], "user:a");
        for bad in [
            "tokens = { '' = 'a' }",
            "tokens = { 'a b' = 'a' }",
            "tokens = { t = '' }",
        ] {
            let e = AppConfig::parse(&format!("[ingress]\n{bad}")).unwrap_err();
            assert!(e.to_string().contains("ingress.tokens"), "{bad}: {e}");
        }
        // A routed subscription needs its key; a dispatch one must not have one.
        assert!(AppConfig::parse("[[bus.subscriptions]]\nactor_type='A'\ntopic='a'").is_err());
        assert_eq!(cfg.bus.broadcast_capacity, 64);
        assert_eq!(cfg.bus.route_budget_bytes, 1 << 20);
        assert_eq!(cfg.bus.subscriptions[0].mode, SubscriptionMode::Routed);
        assert_eq!(cfg.bus.subscriptions[1].mode, SubscriptionMode::Broadcast);
        let rl = cfg.bus.rate_limit.unwrap().to_config();
        assert_eq!(rl.quota_for("alice"), 10);
        assert_eq!(rl.quota_for("bob"), 1000);
        let deep = vec!["x"; 21].join(".");
        for topic in ["orders..x", "a.b*", deep.as_str()] {
            let text = format!("[[bus.subscriptions]]\nactor_type='A'\nkey='1'\ntopic='{topic}'");
            let e = AppConfig::parse(&text).unwrap_err();
            assert!(matches!(e, LoadError::Subscription { .. }), "{topic}: {e}");
            assert!(e.to_string().contains("INVALID_ARGUMENT"), "{e}");
        }
        assert!(
            AppConfig::parse(
                "[[bus.subscriptions]]\nactor_type='A'\nkey='1'\ntopic='a'\nmode='fanout'"
            )
            .is_err()
        );
    }
}
