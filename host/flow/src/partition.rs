//! Receiver → partition mapping (FNV-1a 64), so all messages for one receiver share a partition.

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64-bit, over the bytes of `data`.
pub fn fnv1a_64(data: &[u8]) -> u64 {
    data.iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

/// The partition (in `0..partitions`) that owns `receiver`. Stable across processes and hosts:
/// it is stored with each outbox row, so changing the partition count only affects new rows.
///
/// # Panics
/// If `partitions` is 0.
pub fn partition_for(receiver: &str, partitions: u32) -> u32 {
    assert!(partitions > 0, "partition count must be at least 1");
    (fnv1a_64(receiver.as_bytes()) % u64::from(partitions)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_64_matches_reference_vectors() {
        // From the FNV reference test suite (isthe.com/chongo/tech/comp/fnv).
        assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn partition_is_stable_and_in_range() {
        assert_eq!(partition_for("Worker/1", 4), partition_for("Worker/1", 4));
        for i in 0..1000 {
            assert!(partition_for(&format!("Worker/{i}"), 7) < 7);
        }
        assert_eq!(partition_for("anything", 1), 0);
    }

    #[test]
    fn receivers_spread_over_partitions() {
        let mut counts = [0u32; 4];
        for i in 0..4000 {
            counts[partition_for(&format!("Worker/{i}"), 4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
    }
}
