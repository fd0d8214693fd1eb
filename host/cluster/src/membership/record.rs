//! A member entry as stored in the members bucket (JSON, so `nats kv get` shows it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::names::{self, Names};

/// Largest member entry accepted from the bucket (a hostile or corrupt one is ignored).
pub const MAX_RECORD_BYTES: usize = 256 * 1024;

/// One deployed actor type on a member: its module version and content hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeVersion {
    /// The host's version counter for the type (bumped by each deploy).
    pub version: u64,
    /// The module's content hash (`sha256:<hex>`, the module store's key).
    pub hash: String,
    /// Live activations of the type on the member, as of its last heartbeat (what
    /// `sluice status` shows per member). Absent in records of older hosts: 0.
    #[serde(default)]
    pub live: u64,
}

/// What a member says about itself. Rewritten by every heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    /// The node id (also the key).
    pub node: String,
    /// Random per join: a restarted host with the same node id is a new incarnation, and
    /// directory entries name the incarnation that owns them.
    pub incarnation: String,
    /// Where it serves remote tell/ask.
    pub subject: String,
    /// When this incarnation joined, Unix ms (informational: never compared across hosts).
    pub started_at_ms: u64,
    /// The wire format version it speaks (`transport::WIRE_VERSION`).
    pub wire_version: u8,
    /// Deployed actor types and their modules.
    pub types: BTreeMap<String, TypeVersion>,
}

/// Why a member entry was ignored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Larger than [`MAX_RECORD_BYTES`].
    #[error("member entry {key:?} is {len} bytes (limit {MAX_RECORD_BYTES})")]
    TooLarge {
        /// The key.
        key: String,
        /// Its size.
        len: usize,
    },
    /// Not a member record.
    #[error("member entry {key:?} is not a member record: {source}")]
    Json {
        /// The key.
        key: String,
        /// The decoder's reason.
        source: serde_json::Error,
    },
    /// A record whose fields contradict its key or the cluster's names.
    #[error("member entry {key:?}: {reason}")]
    Inconsistent {
        /// The key.
        key: String,
        /// What does not fit.
        reason: String,
    },
}

impl MemberRecord {
    /// Encodes for the bucket.
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings, integers and a string map always serializes.
        serde_json::to_vec(self).expect("member record serializes")
    }

    /// Decodes and checks an entry read under `key`.
    pub fn decode(key: &str, bytes: &[u8], names: &Names) -> Result<Self, RecordError> {
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(RecordError::TooLarge {
                key: key.to_string(),
                len: bytes.len(),
            });
        }
        let r: Self = serde_json::from_slice(bytes).map_err(|source| RecordError::Json {
            key: key.to_string(),
            source,
        })?;
        let bad = |reason: String| RecordError::Inconsistent {
            key: key.to_string(),
            reason,
        };
        if r.node != key {
            return Err(bad(format!("names node {:?}", r.node)));
        }
        names::validate_node_id(&r.node).map_err(|e| bad(e.to_string()))?;
        if r.subject != names.host_subject(&r.node) {
            return Err(bad(format!("subject {:?} is not this node's", r.subject)));
        }
        if r.incarnation.is_empty() || r.incarnation.len() > 64 {
            return Err(bad("incarnation must be 1..=64 characters".into()));
        }
        Ok(r)
    }

    /// Whether the member has deployed `actor_type`.
    pub fn has_type(&self, actor_type: &str) -> bool {
        self.types.contains_key(actor_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(names: &Names) -> MemberRecord {
        MemberRecord {
            node: "h1".into(),
            incarnation: "abc".into(),
            subject: names.host_subject("h1"),
            started_at_ms: 1,
            wire_version: 1,
            types: BTreeMap::from([(
                "Counter".into(),
                TypeVersion {
                    version: 3,
                    hash: "sha256:00".into(),
                    live: 0,
                },
            )]),
        }
    }

    #[test]
    fn round_trips_and_checks_the_key() {
        let names = Names::new("c").unwrap();
        let r = record(&names);
        assert_eq!(MemberRecord::decode("h1", &r.to_json(), &names).unwrap(), r);
        assert!(r.has_type("Counter") && !r.has_type("Other"));
        let e = MemberRecord::decode("h2", &r.to_json(), &names).unwrap_err();
        assert!(e.to_string().contains("names node \"h1\""), "{e}");
    }

    #[test]
    fn foreign_or_hostile_entries_are_typed_errors() {
        let names = Names::new("c").unwrap();
        assert!(matches!(
            MemberRecord::decode("h1", b"{not json", &names),
            Err(RecordError::Json { .. })
        ));
        let big = vec![b' '; MAX_RECORD_BYTES + 1];
        assert!(matches!(
            MemberRecord::decode("h1", &big, &names),
            Err(RecordError::TooLarge { .. })
        ));
        let mut r = record(&names);
        r.subject = "elsewhere".into();
        assert!(matches!(
            MemberRecord::decode("h1", &r.to_json(), &names),
            Err(RecordError::Inconsistent { .. })
        ));
    }
}
