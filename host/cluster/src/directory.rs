//! The actor directory: one KV entry per live actor, `Type/key` → the member incarnation that
//! runs it. The entry, not the hash, is the truth: an actor runs only on the host whose claim
//! created (or took over) its entry.
//!
//! - **claim**: create-only; of any number of concurrent claimers exactly one succeeds.
//! - **release**: a delete that names the claim's revision, so a host can never delete an
//!   entry that was taken over from it.
//! - **take over**: only an entry whose owner incarnation the *server* no longer holds as a
//!   member (its entry expired `member_ttl` after its last heartbeat, or it left), and only
//!   by a compare-and-set on the entry's revision, so of several takers exactly one wins.
//!
//! Claimers must be live members (`me` = [`Membership::owner`](crate::membership::Membership::owner),
//! while it holds its lease): an entry whose owner is not a member is fair game for any taker,
//! so a claim made under an identity that never joined is taken over at once.
//!
//! Keys are `<escaped type>.<escaped key>` (names.rs), so one type's actors share a prefix.

use std::time::{SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv::{self, CreateErrorKind, Operation, UpdateErrorKind};
use serde::{Deserialize, Serialize};

use crate::buckets::{self, BucketError, KvSpec};
use crate::connect::{self, Connection, ConnectionState};
use crate::membership::{self, MembershipError};
use crate::metrics;
use crate::names::{Names, escape_token};

/// Largest directory value accepted.
const MAX_ENTRY_BYTES: usize = 4096;

/// Why a directory operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirectoryError {
    /// A bucket could not be opened.
    #[error(transparent)]
    Bucket(#[from] BucketError),
    /// Not a `Type/key` id.
    #[error("INVALID_ARGUMENT: actor id {0:?} is not of the form Type/key")]
    InvalidActorId(String),
    /// The KV operation failed (NATS unreachable, timeout).
    #[error("cluster: directory {op} failed: {reason}")]
    Kv {
        /// The operation.
        op: &'static str,
        /// The client's reason.
        reason: String,
    },
    /// Release refused: the entry is no longer the one this claim created (taken over).
    #[error("cluster: {actor} is no longer held by this claim (revision {revision})")]
    NotOwner {
        /// The actor.
        actor: String,
        /// The claim's revision.
        revision: u64,
    },
    /// Take-over refused: the owner is still a live member.
    #[error("cluster: {actor} is held by live member {node}")]
    OwnerLive {
        /// The actor.
        actor: String,
        /// Its owner.
        node: String,
    },
    /// Take-over lost the race: the entry changed since it was read.
    #[error("cluster: {actor} changed hands while taking it over")]
    Conflict {
        /// The actor.
        actor: String,
    },
    /// The liveness check failed.
    #[error(transparent)]
    Membership(#[from] MembershipError),
}

/// Who runs an actor: a member incarnation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// Node id.
    pub node: String,
    /// The member's incarnation at claim time.
    pub incarnation: String,
}

/// The stored value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stored {
    #[serde(flatten)]
    owner: Owner,
    /// Unix ms at claim (informational).
    claimed_at_ms: u64,
}

/// Proof of holding an actor: what `release` needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The actor id.
    pub actor: String,
    /// The entry's revision (the ownership epoch: it changes on every take-over).
    pub revision: u64,
}

/// An entry held by someone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The owner; `None` when the stored value is not a directory entry (foreign or corrupt),
    /// which any member may take over.
    pub owner: Option<Owner>,
    /// The entry's revision.
    pub revision: u64,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This member holds the actor (newly, or it already did).
    Claimed(Claim),
    /// Another member holds it.
    Held(Held),
}

/// The directory of one cluster.
#[derive(Clone)]
pub struct Directory {
    kv: kv::Store,
    members: kv::Store,
    names: Names,
    /// To fail at once while disconnected (see [`Directory::online`]).
    nats: async_nats::Client,
    /// To fail an operation in flight when the connection drops ([`Directory::in_flight`]).
    state: tokio::sync::watch::Receiver<ConnectionState>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn kv_err(op: &'static str) -> impl Fn(&dyn std::fmt::Display) -> DirectoryError {
    move |e| DirectoryError::Kv {
        op,
        reason: e.to_string(),
    }
}

/// The KV key of `actor_id`: `<escaped type>.<escaped key>`.
pub fn directory_key(actor_id: &str) -> Result<String, DirectoryError> {
    match actor_id.split_once('/') {
        Some((t, k)) if !t.is_empty() && !k.is_empty() => {
            Ok(format!("{}.{}", escape_token(t), escape_token(k)))
        }
        _ => Err(DirectoryError::InvalidActorId(actor_id.to_string())),
    }
}

impl Directory {
    /// Opens the directory (and, for liveness checks, the members bucket) of `conn`'s cluster.
    /// `member_ttl` must be the cluster's.
    pub async fn open(
        conn: &Connection,
        member_ttl: std::time::Duration,
    ) -> Result<Self, DirectoryError> {
        let kv = buckets::open_kv(
            conn,
            KvSpec {
                bucket: conn.names().actors_bucket(),
                description: "Sluice actor directory (Type/key -> owner)",
                max_age: std::time::Duration::ZERO,
            },
        )
        .await?;
        let members = membership::members_bucket(conn, member_ttl).await?;
        Ok(Self {
            kv,
            members,
            names: conn.names().clone(),
            nats: conn.client().clone(),
            state: conn.state(),
        })
    }

    /// Fails `op` at once while this host is not connected to NATS. The client would queue
    /// the request until it reconnects, so the caller (a call being routed, a relay batch)
    /// would wait out JetStream's 5 s timeout for an answer that cannot come.
    fn online(&self, op: &'static str) -> Result<(), DirectoryError> {
        if self.nats.connection_state() == async_nats::connection::State::Connected {
            return Ok(());
        }
        metrics::directory_op(op, "error");
        Err(DirectoryError::Kv {
            op,
            reason: "this host is not connected to NATS now".into(),
        })
    }

    /// Runs `op`'s KV request `f`, failing it as soon as the connection drops. The client
    /// keeps a request whose connection dropped until JetStream's 5 s timeout, and the
    /// answer can no longer come (core NATS keeps no reply for a subscriber that is away):
    /// a call being routed would wait that out, past its own deadline.
    ///
    /// A write abandoned this way may still have been applied. That is safe for every
    /// write here: an entry created or taken over for this incarnation counts as claimed
    /// the next time this incarnation claims it ([`Directory::claim`]), and until then it
    /// routes calls to this member, which claims it on the first one.
    async fn in_flight<F: std::future::Future>(
        &self,
        op: &'static str,
        f: F,
    ) -> Result<F::Output, DirectoryError> {
        connect::unless_dropped(&self.state, f)
            .await
            .ok_or_else(|| {
                metrics::directory_op(op, "error");
                DirectoryError::Kv {
                    op,
                    reason: connect::DROPPED_IN_FLIGHT.into(),
                }
            })
    }

    /// Who holds `actor_id`, if anyone.
    pub async fn lookup(&self, actor_id: &str) -> Result<Option<Held>, DirectoryError> {
        let key = directory_key(actor_id)?;
        self.online("lookup")?;
        let entry = self
            .in_flight("lookup", self.kv.entry(key))
            .await?
            .map_err(|e| kv_err("lookup")(&e));
        metrics::directory_op("lookup", if entry.is_ok() { "ok" } else { "error" });
        Ok(entry?
            .filter(|e| e.operation == Operation::Put)
            .map(|e| Held {
                owner: decode(&e.value),
                revision: e.revision,
            }))
    }

    /// Claims `actor_id` for `me` (create-only). Finding it already held by `me` counts as
    /// claimed (a release that failed earlier, or a second activation path).
    pub async fn claim(&self, actor_id: &str, me: &Owner) -> Result<ClaimOutcome, DirectoryError> {
        let key = directory_key(actor_id)?;
        self.online("claim")?;
        let value = encode(me);
        // A claim races at most with releases: create fails, the entry is gone by the time we
        // read it, create again. Bounded so a flapping key cannot spin us.
        for _ in 0..3 {
            match self
                .in_flight("claim", self.kv.create(&key, value.clone().into()))
                .await?
            {
                Ok(revision) => {
                    metrics::directory_op("claim", "ok");
                    return Ok(ClaimOutcome::Claimed(Claim {
                        actor: actor_id.to_string(),
                        revision,
                    }));
                }
                Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {}
                Err(e) => {
                    metrics::directory_op("claim", "error");
                    return Err(kv_err("claim")(&e));
                }
            }
            if let Some(held) = self.lookup(actor_id).await? {
                if held.owner.as_ref() == Some(me) {
                    metrics::directory_op("claim", "ok");
                    return Ok(ClaimOutcome::Claimed(Claim {
                        actor: actor_id.to_string(),
                        revision: held.revision,
                    }));
                }
                metrics::directory_op("claim", "held");
                return Ok(ClaimOutcome::Held(held));
            }
        }
        metrics::directory_op("claim", "conflict");
        Err(DirectoryError::Conflict {
            actor: actor_id.to_string(),
        })
    }

    /// Releases a claim (at deactivation): deletes the entry if it is still this claim's.
    pub async fn release(&self, claim: &Claim) -> Result<(), DirectoryError> {
        let key = directory_key(&claim.actor)?;
        self.online("release")?;
        match self
            .in_flight(
                "release",
                self.kv.delete_expect_revision(&key, Some(claim.revision)),
            )
            .await?
        {
            Ok(()) => {
                metrics::directory_op("release", "ok");
                Ok(())
            }
            Err(e) if e.kind() == kv::DeleteErrorKind::WrongLastRevision => {
                metrics::directory_op("release", "not_owner");
                Err(DirectoryError::NotOwner {
                    actor: claim.actor.clone(),
                    revision: claim.revision,
                })
            }
            Err(e) => {
                metrics::directory_op("release", "error");
                Err(kv_err("release")(&e))
            }
        }
    }

    /// Takes `actor_id` over from `held` (what a claim or lookup returned) for `me`: allowed
    /// only when the server no longer holds the owner's incarnation as a member, and only if
    /// the entry is still at `held.revision`.
    pub async fn take_over(
        &self,
        actor_id: &str,
        me: &Owner,
        held: &Held,
    ) -> Result<Claim, DirectoryError> {
        let key = directory_key(actor_id)?;
        self.online("takeover")?;
        if let Some(owner) = &held.owner {
            if owner == me {
                return Ok(Claim {
                    actor: actor_id.to_string(),
                    revision: held.revision,
                });
            }
            let live = self
                .in_flight(
                    "takeover",
                    membership::is_live_on_server(
                        &self.members,
                        &self.names,
                        &owner.node,
                        &owner.incarnation,
                    ),
                )
                .await??;
            if live {
                metrics::directory_op("takeover", "owner_live");
                return Err(DirectoryError::OwnerLive {
                    actor: actor_id.to_string(),
                    node: owner.node.clone(),
                });
            }
        }
        match self
            .in_flight(
                "takeover",
                self.kv.update(&key, encode(me).into(), held.revision),
            )
            .await?
        {
            Ok(revision) => {
                metrics::directory_op("takeover", "ok");
                Ok(Claim {
                    actor: actor_id.to_string(),
                    revision,
                })
            }
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {
                metrics::directory_op("takeover", "conflict");
                Err(DirectoryError::Conflict {
                    actor: actor_id.to_string(),
                })
            }
            Err(e) => {
                metrics::directory_op("takeover", "error");
                Err(kv_err("takeover")(&e))
            }
        }
    }

    /// Claims `actor_id`, taking it over if its holder is no longer a member. `Held` means a
    /// live member runs it (route there) or another taker won the race (look it up again).
    pub async fn claim_or_take_over(
        &self,
        actor_id: &str,
        me: &Owner,
    ) -> Result<ClaimOutcome, DirectoryError> {
        let held = match self.claim(actor_id, me).await? {
            ClaimOutcome::Held(h) => h,
            claimed => return Ok(claimed),
        };
        match self.take_over(actor_id, me, &held).await {
            Ok(c) => Ok(ClaimOutcome::Claimed(c)),
            Err(DirectoryError::OwnerLive { .. }) => Ok(ClaimOutcome::Held(held)),
            Err(DirectoryError::Conflict { .. }) => match self.lookup(actor_id).await? {
                Some(h) => Ok(ClaimOutcome::Held(h)),
                None => Err(DirectoryError::Conflict {
                    actor: actor_id.to_string(),
                }),
            },
            Err(e) => Err(e),
        }
    }
}

/// The stored value of an entry owned by `owner` (what one live actor costs in the bucket,
/// besides its key).
pub fn entry_value(owner: &Owner) -> Vec<u8> {
    encode(owner)
}

fn encode(owner: &Owner) -> Vec<u8> {
    let stored = Stored {
        owner: owner.clone(),
        claimed_at_ms: unix_ms(),
    };
    // Two strings and an integer always serialize.
    serde_json::to_vec(&stored).expect("directory entry serializes")
}

fn decode(bytes: &[u8]) -> Option<Owner> {
    if bytes.len() > MAX_ENTRY_BYTES {
        metrics::decode_error("directory");
        return None;
    }
    match serde_json::from_slice::<Stored>(bytes) {
        Ok(s) if !s.owner.node.is_empty() => Some(s.owner),
        _ => {
            metrics::decode_error("directory");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_escape_both_parts_and_keep_the_type_prefix() {
        assert_eq!(directory_key("Counter/user.1").unwrap(), "Counter.user=2E1");
        assert_eq!(directory_key("a.b/k/x").unwrap(), "a=2Eb.k=2Fx");
        for bad in ["", "NoSlash", "/k", "T/"] {
            assert!(matches!(
                directory_key(bad),
                Err(DirectoryError::InvalidActorId(_))
            ));
        }
    }

    #[test]
    fn entries_round_trip_and_garbage_has_no_owner() {
        let me = Owner {
            node: "h1".into(),
            incarnation: "i1".into(),
        };
        assert_eq!(decode(&encode(&me)), Some(me));
        assert_eq!(decode(b"garbage"), None);
        assert_eq!(
            decode(br#"{"node":"","incarnation":"x","claimed_at_ms":0}"#),
            None
        );
        assert_eq!(decode(&vec![b'{'; MAX_ENTRY_BYTES + 1]), None);
    }
}
