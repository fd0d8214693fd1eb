//! Every numeric setting has a range; a value outside it is a config error naming the field,
//! its range and what was given, before anything starts or is deployed. The hard limits the
//! ranges come from are here too.

use std::fmt::Display;
use std::ops::RangeInclusive;

use crate::error::LoadError;

/// The largest `max_activations` one host may ask for: each pool slot reserves ~8 GiB of
/// address space (two 4 GiB linear-memory reservations, which let wasmtime drop bounds
/// checks), and a process has ~128 TiB.
pub const MAX_ACTIVATIONS: u32 = 8_000;

/// The largest linear memory an instance may grow to, MiB: the pool reserves this much per
/// memory slot, so a `memory_limit_mb` above it could never be reached.
pub const MAX_MEMORY_LIMIT_MB: u64 = 512;

/// The largest payload a host may accept (`max_payload_bytes`).
pub const MAX_PAYLOAD_BYTES: usize = 64 << 20;

/// `value` of setting `field`, or a config error saying where it must lie.
pub(crate) fn check<T: PartialOrd + Display>(
    field: &str,
    value: T,
    range: RangeInclusive<T>,
) -> Result<(), LoadError> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(LoadError::Config(format!(
        "{field} must be in {}..={}, got {value}",
        range.start(),
        range.end()
    )))
}

/// As [`check`] for an optional setting (absent is always fine).
pub(crate) fn check_opt<T: PartialOrd + Display + Copy>(
    field: &str,
    value: Option<T>,
    range: RangeInclusive<T>,
) -> Result<(), LoadError> {
    value.map_or(Ok(()), |v| check(field, v, range))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_names_the_field_its_range_and_the_value() {
        assert!(check("host.x", 5u64, 1..=10).is_ok());
        let e = check("host.x", 0u64, 1..=10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid configuration: host.x must be in 1..=10, got 0"
        );
        assert!(check_opt::<u32>("c.y", None, 1..=2).is_ok());
        assert!(check_opt("c.y", Some(3u32), 1..=2).is_err());
    }
}
