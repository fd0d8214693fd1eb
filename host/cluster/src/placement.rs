//! Default placement: rendezvous (highest-random-weight) hashing of an actor id over the live
//! members that have its type. Pure.
//!
//! Each (member, actor) pair gets a pseudo-random weight; the actor goes to the member with
//! the highest. When a member joins, exactly the actors it now wins move (to it, about `1/n`
//! of them); when one leaves, exactly its actors move, spread over the rest. No ring, no
//! virtual nodes, no shared state: every host computes the same answer from the same member
//! set. The weight must be identical on every host and every Sluice version of a cluster, so
//! it is built from FNV-1a and the SplitMix64 finalizer (fixed, documented arithmetic), never
//! from `std`'s hasher; a golden test pins it.
//!
//! Placement only proposes: the directory entry decides who runs an actor (directory.rs), so
//! two hosts whose member views differ for a moment never both run a key.

use sluice_flow::partition::fnv1a_64;

/// The SplitMix64 finalizer: a bijective 64-bit mixer with full avalanche.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An actor id's hash, computed once per placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActorHash(u64);

impl ActorHash {
    /// Hashes `actor_id` (`Type/key`).
    pub fn new(actor_id: &str) -> Self {
        Self(mix(fnv1a_64(actor_id.as_bytes())))
    }
}

/// A member's hash; members can cache it (it only depends on the node id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeHash(u64);

impl NodeHash {
    /// Hashes a node id.
    pub fn new(node: &str) -> Self {
        Self(fnv1a_64(node.as_bytes()))
    }
}

/// The rendezvous weight of `node` for `actor`.
pub fn weight(node: NodeHash, actor: ActorHash) -> u64 {
    mix(node.0 ^ actor.0)
}

/// The member that should run `actor_id` among `candidates` (node ids), or `None` if there are
/// none. Ties (vanishingly rare) go to the smaller node id, so every host agrees.
pub fn place<'a, I>(actor_id: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let a = ActorHash::new(actor_id);
    candidates
        .into_iter()
        .map(|n| (weight(NodeHash::new(n), a), n))
        .max_by(|(wa, na), (wb, nb)| wa.cmp(wb).then_with(|| nb.cmp(na)))
        .map(|(_, n)| n)
}

/// All `candidates` in preference order for `actor_id` (best first): the fallback order when
/// the first choice cannot take the actor.
pub fn rank<'a, I>(actor_id: &str, candidates: I) -> Vec<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let a = ActorHash::new(actor_id);
    let mut v: Vec<(u64, &str)> = candidates
        .into_iter()
        .map(|n| (weight(NodeHash::new(n), a), n))
        .collect();
    v.sort_by(|(wa, na), (wb, nb)| wb.cmp(wa).then_with(|| na.cmp(nb)));
    v.into_iter().map(|(_, n)| n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("host-{i}")).collect()
    }

    fn owners<'a>(keys: &[String], members: &'a [String]) -> Vec<&'a str> {
        keys.iter()
            .map(|k| place(k, members.iter().map(String::as_str)).unwrap())
            .collect()
    }

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("Counter/user-{i}")).collect()
    }

    #[test]
    fn weights_are_pinned_across_versions() {
        // Every host of a cluster must compute the same owner: a change here is a protocol
        // change. The values were computed independently (a 10-line Python rendering of
        // FNV-1a + SplitMix64), not copied from this code's output.
        let w = weight(NodeHash::new("host-0"), ActorHash::new("Counter/1"));
        assert_eq!(w, 0xab6a_b81f_0eb4_a74e, "{w:#x}");
        let ten = nodes(10);
        let got: Vec<&str> = (0..5)
            .map(|i| place(&format!("Counter/{i}"), ten.iter().map(String::as_str)).unwrap())
            .collect();
        assert_eq!(got, ["host-9", "host-7", "host-3", "host-1", "host-9"]);
    }

    #[test]
    fn balance_over_ten_members_is_within_five_percent() {
        let members = nodes(10);
        let ks = keys(100_000);
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for o in owners(&ks, &members) {
            *counts.entry(o).or_default() += 1;
        }
        assert_eq!(counts.len(), 10);
        for (n, c) in counts {
            assert!((9_500..=10_500).contains(&c), "{n} got {c} of 100000");
        }
    }

    #[test]
    fn a_join_moves_only_keys_the_newcomer_wins_about_one_in_n() {
        let before = nodes(10);
        let after = nodes(11);
        let ks = keys(50_000);
        let (a, b) = (owners(&ks, &before), owners(&ks, &after));
        let moved: Vec<_> = a.iter().zip(&b).filter(|(x, y)| x != y).collect();
        assert!(moved.iter().all(|(_, to)| **to == "host-10"));
        let share = moved.len() as f64 / ks.len() as f64;
        assert!((share - 1.0 / 11.0).abs() < 0.01, "moved {share}");
    }

    #[test]
    fn a_leave_moves_only_the_leavers_keys() {
        let before = nodes(10);
        let after: Vec<String> = before.iter().filter(|n| *n != "host-3").cloned().collect();
        let ks = keys(50_000);
        let (a, b) = (owners(&ks, &before), owners(&ks, &after));
        for (x, y) in a.iter().zip(&b) {
            assert!(x == y || *x == "host-3");
        }
    }

    #[test]
    fn no_candidate_no_owner_and_rank_starts_with_the_owner() {
        assert_eq!(place("T/1", std::iter::empty()), None);
        let members = nodes(5);
        let r = rank("T/1", members.iter().map(String::as_str));
        assert_eq!(r.len(), 5);
        assert_eq!(Some(r[0]), place("T/1", members.iter().map(String::as_str)));
    }

    proptest! {
        #[test]
        fn membership_changes_move_keys_only_to_or_from_the_changed_member(
            n in 2usize..20,
            removed in 0usize..20,
            key in "[A-Za-z]{1,8}/[a-z0-9]{1,12}",
        ) {
            let members = nodes(n);
            let gone = &members[removed % n];
            let rest: Vec<&str> = members.iter().map(String::as_str).filter(|m| m != gone).collect();
            let all: Vec<&str> = members.iter().map(String::as_str).collect();
            let with = place(&key, all.iter().copied()).unwrap();
            let without = place(&key, rest.iter().copied()).unwrap();
            // Leaving moves a key only if the leaver owned it; joining (the reverse) moves a key
            // only to the joiner.
            prop_assert!(with == without || with == gone.as_str());
            // Order of candidates never matters.
            let reversed = place(&key, all.iter().rev().copied()).unwrap();
            prop_assert_eq!(with, reversed);
        }
    }
}
