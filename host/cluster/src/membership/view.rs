//! The live member view: what the members bucket says, applied in revision order. Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::record::MemberRecord;

/// A change to the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberChange {
    /// A node (or a new incarnation of it) appeared.
    Joined(Arc<MemberRecord>),
    /// A live member's record changed (e.g. it deployed a type).
    Updated {
        /// Before.
        old: Arc<MemberRecord>,
        /// After.
        new: Arc<MemberRecord>,
    },
    /// A member is gone: it left, or was silent for the member TTL.
    Left(Arc<MemberRecord>),
}

impl MemberChange {
    /// A bounded metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Joined(_) => "joined",
            Self::Updated { .. } => "updated",
            Self::Left(_) => "left",
        }
    }
}

/// One live member and the revision of its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its record.
    pub record: Arc<MemberRecord>,
    /// The KV revision that last changed the record (heartbeats that change nothing are not
    /// counted, so readers are woken only by real changes).
    pub revision: u64,
}

/// The live members, by node id. Cloned as a snapshot for readers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberView {
    members: BTreeMap<String, Member>,
    /// Highest revision applied per key, deletions included, so a replayed or reordered older
    /// event never resurrects or rolls back a member.
    seen: BTreeMap<String, u64>,
}

impl MemberView {
    /// An empty view.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies a put of `record` at `revision`. Stale revisions change nothing.
    pub fn put(&mut self, record: MemberRecord, revision: u64) -> Option<MemberChange> {
        if !self.advance(&record.node, revision) {
            return None;
        }
        if self
            .members
            .get(&record.node)
            .is_some_and(|m| *m.record == record)
        {
            // A heartbeat that changes nothing.
            return None;
        }
        let record = Arc::new(record);
        let old = self.members.insert(
            record.node.clone(),
            Member {
                record: record.clone(),
                revision,
            },
        );
        match old {
            None => Some(MemberChange::Joined(record)),
            // The same node id restarted: to everyone else that is a leave and a join. Report
            // the join; the old incarnation's directory entries are stale (directory.rs).
            Some(old) if old.record.incarnation != record.incarnation => {
                Some(MemberChange::Joined(record))
            }
            Some(old) => Some(MemberChange::Updated {
                old: old.record,
                new: record,
            }),
        }
    }

    /// Applies a delete/purge/expiry of `node` at `revision`.
    pub fn remove(&mut self, node: &str, revision: u64) -> Option<MemberChange> {
        if !self.advance(node, revision) {
            return None;
        }
        self.members
            .remove(node)
            .map(|m| MemberChange::Left(m.record))
    }

    /// Replaces the whole view by a fresh snapshot (after a watcher restart) and returns what
    /// changed, so a restart that missed a removal still reports it.
    pub fn resync(&mut self, snapshot: Vec<(MemberRecord, u64)>) -> Vec<MemberChange> {
        let mut fresh = MemberView::new();
        for (record, revision) in snapshot {
            fresh.put(record, revision);
        }
        let mut changes = Vec::new();
        for (node, m) in &self.members {
            if !fresh.members.contains_key(node) {
                changes.push(MemberChange::Left(m.record.clone()));
            }
        }
        for (node, m) in &fresh.members {
            match self.members.get(node) {
                None => changes.push(MemberChange::Joined(m.record.clone())),
                Some(old) if old.record.incarnation != m.record.incarnation => {
                    changes.push(MemberChange::Joined(m.record.clone()))
                }
                Some(old) if old.record != m.record => changes.push(MemberChange::Updated {
                    old: old.record.clone(),
                    new: m.record.clone(),
                }),
                Some(_) => {}
            }
        }
        // Keep the deletion high-water marks: a snapshot does not carry them.
        for (node, rev) in &self.seen {
            let e = fresh.seen.entry(node.clone()).or_insert(*rev);
            *e = (*e).max(*rev);
        }
        *self = fresh;
        changes
    }

    fn advance(&mut self, node: &str, revision: u64) -> bool {
        let seen = self.seen.entry(node.to_string()).or_insert(0);
        if revision <= *seen {
            return false;
        }
        *seen = revision;
        true
    }

    /// The live member `node`, if any.
    pub fn get(&self, node: &str) -> Option<&Member> {
        self.members.get(node)
    }

    /// Whether `node` is live in exactly this incarnation.
    pub fn is_live(&self, node: &str, incarnation: &str) -> bool {
        self.members
            .get(node)
            .is_some_and(|m| m.record.incarnation == incarnation)
    }

    /// Every live member, by node id.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    /// Node ids of the live members that have `actor_type` deployed: placement's candidates.
    pub fn candidates<'a>(&'a self, actor_type: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.members
            .values()
            .filter(move |m| m.record.has_type(actor_type))
            .map(|m| m.record.node.as_str())
    }

    /// Number of live members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// No live member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::membership::record::TypeVersion;

    fn rec(node: &str, inc: &str, types: &[&str]) -> MemberRecord {
        MemberRecord {
            node: node.into(),
            incarnation: inc.into(),
            subject: format!("sluice.c.host.{node}"),
            started_at_ms: 0,
            wire_version: 1,
            types: types
                .iter()
                .map(|t| {
                    (
                        t.to_string(),
                        TypeVersion {
                            version: 1,
                            hash: "h".into(),
                            live: 0,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn join_update_leave_in_revision_order() {
        let mut v = MemberView::new();
        assert!(matches!(
            v.put(rec("a", "1", &[]), 1),
            Some(MemberChange::Joined(_))
        ));
        // A heartbeat that changes nothing is no change.
        assert_eq!(v.put(rec("a", "1", &[]), 2), None);
        assert!(matches!(
            v.put(rec("a", "1", &["T"]), 3),
            Some(MemberChange::Updated { .. })
        ));
        assert_eq!(v.candidates("T").collect::<Vec<_>>(), ["a"]);
        assert!(v.is_live("a", "1") && !v.is_live("a", "2"));
        assert!(matches!(v.remove("a", 4), Some(MemberChange::Left(_))));
        assert!(v.is_empty());
    }

    #[test]
    fn stale_events_never_resurrect_or_roll_back() {
        let mut v = MemberView::new();
        v.put(rec("a", "1", &["T"]), 5);
        assert_eq!(v.put(rec("a", "1", &[]), 4), None);
        assert_eq!(v.candidates("T").count(), 1);
        v.remove("a", 6);
        assert_eq!(v.put(rec("a", "1", &["T"]), 5), None);
        assert!(v.is_empty());
    }

    #[test]
    fn a_new_incarnation_is_a_join() {
        let mut v = MemberView::new();
        v.put(rec("a", "1", &[]), 1);
        assert!(matches!(
            v.put(rec("a", "2", &[]), 2),
            Some(MemberChange::Joined(_))
        ));
        assert!(v.is_live("a", "2"));
    }

    #[test]
    fn resync_reports_what_a_restarted_watcher_missed() {
        let mut v = MemberView::new();
        v.put(rec("a", "1", &[]), 1);
        v.put(rec("b", "1", &[]), 2);
        let changes = v.resync(vec![(rec("b", "1", &["T"]), 7), (rec("c", "1", &[]), 8)]);
        let labels: Vec<_> = changes.iter().map(MemberChange::label).collect();
        assert_eq!(labels, ["left", "updated", "joined"]);
        assert_eq!(v.len(), 2);
        // An old event for "a" replayed after the resync does not bring it back.
        assert_eq!(v.put(rec("a", "1", &[]), 1), None);
    }
}
