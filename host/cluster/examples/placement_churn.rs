//! Placement churn at cluster scale, simulated (no NATS): rendezvous placement of N actors
//! over 100 hosts; how many actors a join, a leave, a crash and rolling restarts move; per-type
//! balance when types are deployed on subsets of hosts; directory and heartbeat sizes from
//! the real encoders. docs/cluster.md quotes its output.
//!
//! `cargo run --release -p sluice-cluster --example placement_churn [-- --actors N --hosts H --seed S]`
//! Deterministic for a given seed.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_cluster::directory::{Owner, directory_key, entry_value};
use sluice_cluster::membership::{MemberRecord, TypeVersion};
use sluice_cluster::names::Names;
use sluice_cluster::placement::{ActorHash, NodeHash, weight};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Owner index (into `hosts`) of every actor, over the hosts for which `eligible` holds.
fn place_all(actors: &[ActorHash], hosts: &[(String, NodeHash)], eligible: &[bool]) -> Vec<u32> {
    actors
        .iter()
        .map(|a| {
            let mut best = (0u64, u32::MAX);
            for (i, (_, h)) in hosts.iter().enumerate() {
                if eligible[i] {
                    let w = weight(*h, *a);
                    if best.1 == u32::MAX || w > best.0 {
                        best = (w, i as u32);
                    }
                }
            }
            best.1
        })
        .collect()
}

fn moved(
    a: &[u32],
    b: &[u32],
    hosts_a: &[(String, NodeHash)],
    hosts_b: &[(String, NodeHash)],
) -> usize {
    a.iter()
        .zip(b)
        .filter(|(x, y)| hosts_a[**x as usize].0 != hosts_b[**y as usize].0)
        .count()
}

fn balance(owners: &[u32], n_hosts: usize) -> (usize, f64, usize) {
    let mut count = vec![0usize; n_hosts];
    for o in owners {
        count[*o as usize] += 1;
    }
    let live: Vec<usize> = count.into_iter().filter(|c| *c > 0).collect();
    let mean = live.iter().sum::<usize>() as f64 / live.len() as f64;
    (
        *live.iter().min().unwrap(),
        mean,
        *live.iter().max().unwrap(),
    )
}

fn pct(x: usize, of: usize) -> f64 {
    100.0 * x as f64 / of as f64
}

fn main() {
    let n_actors = arg("--actors", 1_000_000) as usize;
    let n_hosts = arg("--hosts", 100) as usize;
    let seed = arg("--seed", 42);
    let mut rng = StdRng::seed_from_u64(seed);
    println!("placement churn: {n_actors} actors, {n_hosts} hosts, seed {seed}");

    let types = ["Counter", "Cart", "Session", "Device", "Order"];
    let ids: Vec<String> = (0..n_actors)
        .map(|i| {
            format!(
                "{}/user-{:08}",
                types[i % types.len()],
                rng.random::<u32>() ^ i as u32
            )
        })
        .collect();
    let actors: Vec<ActorHash> = ids.iter().map(|id| ActorHash::new(id)).collect();
    let hosts_of = |names: &[String]| -> Vec<(String, NodeHash)> {
        names
            .iter()
            .map(|n| (n.clone(), NodeHash::new(n)))
            .collect()
    };
    let names: Vec<String> = (0..n_hosts).map(|i| format!("host-{i:03}")).collect();
    let hosts = hosts_of(&names);
    let all = vec![true; n_hosts];
    let base = place_all(&actors, &hosts, &all);
    let (min, mean, max) = balance(&base, n_hosts);
    println!(
        "balance: actors per host min {min} / mean {mean:.0} / max {max} (max/mean {:.3})",
        max as f64 / mean
    );

    // Join.
    let mut joined_names = names.clone();
    joined_names.push(format!("host-{n_hosts:03}"));
    let joined = hosts_of(&joined_names);
    let after_join = place_all(&actors, &joined, &vec![true; n_hosts + 1]);
    let m = moved(&base, &after_join, &hosts, &joined);
    let to_new = after_join
        .iter()
        .filter(|o| **o as usize == n_hosts)
        .count();
    println!(
        "join of 1 host: placement changes for {m} actors ({:.3}%, expected 1/{} = {:.3}%); all to the newcomer: {}",
        pct(m, n_actors),
        n_hosts + 1,
        100.0 / (n_hosts + 1) as f64,
        m == to_new
    );

    // Leave / crash (same placement effect; differs in when the directory lets go).
    let gone = rng.random_range(0..n_hosts);
    let mut without = all.clone();
    without[gone] = false;
    let after_leave = place_all(&actors, &hosts, &without);
    let m = moved(&base, &after_leave, &hosts, &hosts);
    let from_gone = base.iter().filter(|o| **o as usize == gone).count();
    let mut receivers = vec![0usize; n_hosts];
    for (b, a) in base.iter().zip(&after_leave) {
        if b != a {
            receivers[*a as usize] += 1;
        }
    }
    let took = receivers.iter().filter(|c| **c > 0).count();
    println!(
        "leave or crash of {}: placement changes for {m} actors ({:.3}%), all of them its own: {}; spread over {took} hosts (max {} each)",
        names[gone],
        pct(m, n_actors),
        m == from_gone,
        receivers.iter().max().unwrap()
    );

    // Rolling restart, stable node ids: each host leaves and comes back under the same id.
    // Placement comes back to the same owner; the actors of the restarting host move out and
    // (for new activations) back.
    // Each actor belongs to exactly one host, so each is deactivated exactly once.
    let total: usize = (0..n_hosts)
        .map(|h| base.iter().filter(|o| **o as usize == h).count())
        .sum();
    println!(
        "rolling restart, stable node ids: {total} actors deactivated once each ({:.1}% of all), placement identical afterwards",
        pct(total, n_actors)
    );
    // Rolling restart with generated ids (the default): every host comes back as a new name.
    // Incremental: when host h is renamed, its actors are placed afresh and every other actor
    // moves only if the new name outweighs its current owner.
    let mut cur_hosts = hosts.clone();
    let mut cur = base.clone();
    let mut cur_w: Vec<u64> = cur
        .iter()
        .zip(&actors)
        .map(|(o, a)| weight(cur_hosts[*o as usize].1, *a))
        .collect();
    let mut changes = 0;
    for h in 0..n_hosts {
        let name = format!("host-{h:03}-r{}", rng.random::<u16>());
        cur_hosts[h] = (name.clone(), NodeHash::new(&name));
        for (i, a) in actors.iter().enumerate() {
            let w_new = weight(cur_hosts[h].1, *a);
            if cur[i] as usize == h {
                // Its old owner is gone: best of all current hosts (the new name included).
                let (w, o) = cur_hosts
                    .iter()
                    .enumerate()
                    .map(|(j, (_, nh))| (weight(*nh, *a), j as u32))
                    .max()
                    .unwrap();
                cur[i] = o;
                cur_w[i] = w;
                changes += 1;
            } else if w_new > cur_w[i] {
                cur[i] = h as u32;
                cur_w[i] = w_new;
                changes += 1;
            }
        }
    }
    println!(
        "rolling restart, generated node ids: {changes} placement changes ({:.2} per actor)",
        changes as f64 / n_actors as f64
    );

    // Types on subsets: each type deployed on a random 60% of hosts.
    for t in &types[..2] {
        let eligible: Vec<bool> = (0..n_hosts).map(|_| rng.random_bool(0.6)).collect();
        let of_type: Vec<ActorHash> = ids
            .iter()
            .zip(&actors)
            .filter(|(id, _)| id.starts_with(t))
            .map(|(_, a)| *a)
            .collect();
        let owners = place_all(&of_type, &hosts, &eligible);
        let (min, mean, max) = balance(&owners, n_hosts);
        println!(
            "type {t} on {} of {n_hosts} hosts: {} actors, per host min {min} / mean {mean:.0} / max {max}",
            eligible.iter().filter(|e| **e).count(),
            of_type.len()
        );
    }

    // Sizes from the real encoders.
    let owner = Owner {
        node: "host-042".into(),
        incarnation: "3f2a9c0d5e7b8a61".into(),
    };
    let key_bytes: usize = ids
        .iter()
        .take(10_000)
        .map(|id| directory_key(id).unwrap().len())
        .sum::<usize>()
        / 10_000;
    let value_bytes = entry_value(&owner).len();
    let subject_prefix = "$KV.sluice_prod_actors.".len();
    // JetStream file store: a message record is ~22 bytes of header plus subject, headers and data.
    let per_entry = 22 + subject_prefix + key_bytes + value_bytes;
    println!(
        "directory entry: key {key_bytes} B, value {value_bytes} B, ~{per_entry} B stored per live actor (~{:.2} GB at 10M actors, before the server's per-subject index)",
        per_entry as f64 * 10e6 / 1e9
    );
    let names_c = Names::new("prod").unwrap();
    let mut record = MemberRecord {
        node: "host-042".into(),
        incarnation: "3f2a9c0d5e7b8a61".into(),
        subject: names_c.host_subject("host-042"),
        started_at_ms: 1_764_000_000_000,
        wire_version: 1,
        types: BTreeMap::new(),
    };
    for n in [0usize, 10, 50] {
        record.types = (0..n)
            .map(|i| {
                (
                    format!("ActorType{i:02}"),
                    TypeVersion {
                        version: 12,
                        hash: format!("sha256:{}", "ab".repeat(32)),
                        live: 0,
                    },
                )
            })
            .collect();
        let bytes = record.to_json().len();
        println!(
            "member record with {n} types: {bytes} B; at {n_hosts} hosts and 1 heartbeat/s: {:.0} KB/s written, {:.1} MB/s delivered to {n_hosts} watchers",
            (bytes * n_hosts) as f64 / 1e3,
            (bytes * n_hosts * n_hosts) as f64 / 1e6
        );
    }
}
