//! Names on NATS: cluster and node id grammar, the subjects and buckets of one cluster, and the
//! escaping that turns an actor id or a topic segment into one NATS token.
//!
//! Everything a cluster puts on NATS is under its name, so two clusters share one NATS account
//! without seeing each other:
//!
//! | what | name |
//! |---|---|
//! | a host's request subject | `sluice.<cluster>.host.<node>` |
//! | a bus topic `a.b` | `sluice.<cluster>.bus.a.b` |
//! | members (KV) | `sluice_<cluster>_members` |
//! | actor directory (KV) | `sluice_<cluster>_actors` |
//! | current module per type, load reports (KV) | `sluice_<cluster>_modules` |
//! | module bytes (object store) | `sluice_<cluster>_wasm` |

use std::fmt::Write as _;

/// Longest cluster name: bucket names (`sluice_<cluster>_members`) stay short.
pub const MAX_CLUSTER_NAME: usize = 32;
/// Longest node id.
pub const MAX_NODE_ID: usize = 64;

/// A name that is not a valid cluster name or node id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {value:?} must be 1..={max} characters of [A-Za-z0-9_-]")]
pub struct NameError {
    /// `cluster name` or `node id`.
    pub what: &'static str,
    /// The refused value.
    pub value: String,
    /// Its length limit.
    pub max: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn check(what: &'static str, value: &str, max: usize) -> Result<(), NameError> {
    if value.is_empty() || value.len() > max || !value.chars().all(is_name_char) {
        return Err(NameError {
            what,
            value: value.to_string(),
            max,
        });
    }
    Ok(())
}

/// Cluster names are one NATS token and part of bucket names: `[A-Za-z0-9_-]{1,32}`.
pub fn validate_cluster_name(name: &str) -> Result<(), NameError> {
    check("cluster name", name, MAX_CLUSTER_NAME)
}

/// Node ids are one NATS token and one KV key: `[A-Za-z0-9_-]{1,64}`.
pub fn validate_node_id(id: &str) -> Result<(), NameError> {
    check("node id", id, MAX_NODE_ID)
}

/// The subjects and bucket names of one cluster. Built from a validated cluster name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    cluster: String,
}

impl Names {
    /// Names for `cluster` (validated).
    pub fn new(cluster: &str) -> Result<Self, NameError> {
        validate_cluster_name(cluster)?;
        Ok(Self {
            cluster: cluster.to_string(),
        })
    }

    /// The cluster name.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The subject a host serves remote tell/ask on: `sluice.<cluster>.host.<node>`.
    pub fn host_subject(&self, node: &str) -> String {
        format!("sluice.{}.host.{node}", self.cluster)
    }

    /// The prefix of every bus subject: `sluice.<cluster>.bus`.
    pub fn bus_prefix(&self) -> String {
        format!("sluice.{}.bus", self.cluster)
    }

    /// The KV bucket of members.
    pub fn members_bucket(&self) -> String {
        format!("sluice_{}_members", self.cluster)
    }

    /// The KV bucket of the actor directory.
    pub fn actors_bucket(&self) -> String {
        format!("sluice_{}_actors", self.cluster)
    }

    /// The KV bucket of current module versions and per-host load reports.
    pub fn modules_bucket(&self) -> String {
        format!("sluice_{}_modules", self.cluster)
    }

    /// The object store of module bytes.
    pub fn wasm_store(&self) -> String {
        format!("sluice_{}_wasm", self.cluster)
    }
}

/// Bytes kept as they are in an escaped token; every other byte becomes `=HH`.
fn is_plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Escapes `s` into one NATS token that is also a valid KV key fragment: `[A-Za-z0-9_-]` stay,
/// every other byte (`.`, `*`, `>`, `=`, space, `/`, non-ASCII UTF-8) becomes `=HH` (upper-case
/// hex). Injective (each byte maps to a fixed string and `=` is itself escaped), so two different
/// ids never share a key or a subject. Empty input gives an empty token; callers refuse that.
pub fn escape_token(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if is_plain(b) {
            out.push(b as char);
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "={b:02X}");
        }
    }
    out
}

/// Reverses [`escape_token`]; `None` for anything it could not have produced.
pub fn unescape_token(token: &str) -> Option<String> {
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'=' {
            let hex = token.get(i + 1..i + 3)?;
            let v = u8::from_str_radix(hex, 16).ok()?;
            // Only upper-case hex of a byte that needed escaping round-trips.
            if is_plain(v) || hex.bytes().any(|h| h.is_ascii_lowercase()) {
                return None;
            }
            out.push(v);
            i += 3;
        } else if is_plain(b) {
            out.push(b);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_cluster() {
        let n = Names::new("prod-eu").unwrap();
        assert_eq!(n.host_subject("h1"), "sluice.prod-eu.host.h1");
        assert_eq!(n.bus_prefix(), "sluice.prod-eu.bus");
        assert_eq!(n.members_bucket(), "sluice_prod-eu_members");
        assert_eq!(n.actors_bucket(), "sluice_prod-eu_actors");
        assert_eq!(n.modules_bucket(), "sluice_prod-eu_modules");
        assert_eq!(n.wasm_store(), "sluice_prod-eu_wasm");
    }

    #[test]
    fn bad_names_are_refused_with_the_grammar() {
        for bad in ["", "a.b", "a b", "a*", ">", "é", &"x".repeat(33)] {
            let e = Names::new(bad).unwrap_err();
            assert!(e.to_string().contains("[A-Za-z0-9_-]"), "{e}");
        }
        assert!(validate_node_id(&"n".repeat(64)).is_ok());
        assert!(validate_node_id(&"n".repeat(65)).is_err());
    }

    #[test]
    fn escaping_round_trips_and_yields_one_token() {
        for s in [
            "plain_key-1",
            "user.1",
            "a b",
            "*",
            ">",
            "=41",
            "k/with/slashes",
            "ключ",
            "🦀",
        ] {
            let t = escape_token(s);
            assert!(t.bytes().all(|b| is_plain(b) || b == b'='), "{t}");
            assert_eq!(unescape_token(&t).as_deref(), Some(s));
        }
        assert_eq!(escape_token("user.1"), "user=2E1");
    }

    #[test]
    fn unescape_refuses_what_escape_cannot_produce() {
        for bad in ["=4", "=zz", "=41", "a.b", "=2e", "=FF"] {
            assert_eq!(unescape_token(bad), None, "{bad}");
        }
    }
}
