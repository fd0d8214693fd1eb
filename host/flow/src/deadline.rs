//! Deadline math for call chains: validating a per-call budget, tightening an inherited
//! deadline, and the remaining budget relayed to the next hop.
//!
//! Pure functions: the caller passes `now`; nothing here reads a clock.

use std::time::{Duration, Instant};

/// The largest per-call budget accepted: about 31 years, far beyond any sane deadline, and
/// small enough that `now + budget` can never overflow an `Instant`.
pub const MAX_BUDGET_MS: f64 = 1e12;

/// Why a per-call budget was refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InvalidBudget(pub f64);

impl std::fmt::Display for InvalidBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "deadline must be a positive finite number of milliseconds, got {}",
            self.0
        )
    }
}

impl std::error::Error for InvalidBudget {}

/// A per-call budget in milliseconds: must be positive and finite (and below
/// [`MAX_BUDGET_MS`]). `0`, negatives, `NaN` and infinities are refused.
pub fn budget_from_ms(ms: f64) -> Result<Duration, InvalidBudget> {
    if ms.is_finite() && ms > 0.0 && ms < MAX_BUDGET_MS {
        // Sub-millisecond budgets keep their precision; micros are plenty.
        Ok(Duration::from_micros((ms * 1000.0).max(1.0) as u64))
    } else {
        Err(InvalidBudget(ms))
    }
}

/// A budget carried as text (the `x-sluice-deadline-ms` header): `None` unless it parses as a
/// valid budget, in which case the caller applies its default.
pub fn budget_from_header(text: &str) -> Option<Duration> {
    budget_from_ms(text.trim().parse::<f64>().ok()?).ok()
}

/// The deadline of a call made with `budget` at `now` under an `inherited` deadline: the
/// earlier of the two. A budget can tighten a chain, never extend it.
pub fn tighten(inherited: Option<Instant>, now: Instant, budget: Duration) -> Instant {
    let mine = now + budget;
    inherited.map_or(mine, |d| d.min(mine))
}

/// The deadline of a call with no explicit budget: inherited inside a chain, else
/// `now + default` (or none when deadlines are disabled, `default = None`).
pub fn resolve(
    inherited: Option<Instant>,
    in_chain: bool,
    now: Instant,
    default: Option<Duration>,
) -> Option<Instant> {
    if in_chain {
        inherited
    } else {
        inherited.or_else(|| default.map(|d| now + d))
    }
}

/// Milliseconds left before `deadline` at `now` (0 once passed), as relayed to the next hop.
pub fn remaining_ms(deadline: Instant, now: Instant) -> u64 {
    deadline.saturating_duration_since(now).as_millis() as u64
}

/// Whether a call due by `deadline` has expired at `now`.
pub fn expired(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|d| d <= now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_must_be_positive_and_finite() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e13] {
            assert!(budget_from_ms(bad).is_err(), "{bad}");
        }
        assert_eq!(budget_from_ms(50.0).unwrap(), Duration::from_millis(50));
        assert_eq!(budget_from_ms(0.5).unwrap(), Duration::from_micros(500));
    }

    #[test]
    fn header_values_that_are_not_budgets_are_ignored() {
        for bad in ["", "0", "-5", "NaN", "inf", "soon", "1e13"] {
            assert_eq!(budget_from_header(bad), None, "{bad:?}");
        }
        assert_eq!(
            budget_from_header(" 250 "),
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn a_budget_only_tightens_an_inherited_deadline() {
        let now = Instant::now();
        let inherited = now + Duration::from_millis(100);
        assert_eq!(
            tighten(Some(inherited), now, Duration::from_millis(10)),
            now + Duration::from_millis(10)
        );
        assert_eq!(
            tighten(Some(inherited), now, Duration::from_secs(300)),
            inherited
        );
        assert_eq!(
            tighten(None, now, Duration::from_secs(300)),
            now + Duration::from_secs(300)
        );
    }

    #[test]
    fn default_applies_only_outside_a_chain() {
        let now = Instant::now();
        let d = Some(Duration::from_secs(30));
        assert_eq!(
            resolve(None, false, now, d),
            Some(now + Duration::from_secs(30))
        );
        assert_eq!(resolve(None, true, now, d), None);
        assert_eq!(resolve(None, false, now, None), None);
        let mine = now + Duration::from_secs(1);
        assert_eq!(resolve(Some(mine), false, now, d), Some(mine));
        assert_eq!(remaining_ms(mine, now), 1000);
        assert_eq!(remaining_ms(now, mine), 0);
        assert!(expired(Some(now), now) && !expired(Some(mine), now) && !expired(None, now));
    }
}
