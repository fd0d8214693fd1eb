//! The one bounded wait of Sluice's test suites: poll a condition until it holds, or panic
//! naming what never happened once a bound of wall-clock time has passed.
//!
//! A crate of its own so that every test suite can use it without a dependency cycle:
//! `sluice-tests` (which depends on the whole host) re-exports it, and the crates it depends
//! on (`sluice-cluster`, …) take it as a dev-dependency.
//!
//! The bound is wall-clock time (`std::time::Instant`), and the pause between polls is a
//! tokio sleep. Under tokio's paused time a sleep returns at once, so a wait on real I/O
//! would spin through its polls: a suite on paused time that bounds its waits in virtual time
//! keeps its own helper (the outbox's `eventually`).
//!
//! [`machine`] holds the benches' probe of the machine's state, shared the same way.
#![warn(missing_docs)]

pub mod machine;

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

/// The pause between two polls of [`wait_until`] and [`wait_until_async`]: conditions on
/// in-process state are cheap to read.
pub const POLL: Duration = Duration::from_millis(5);

/// The pause between two polls of [`wait_for`]: its checks usually make a request (HTTP,
/// SQL), which a 2-core machine running other tests should not be flooded with.
pub const POLL_REQUEST: Duration = Duration::from_millis(20);

/// Polls `cond` until it holds; panics with `what` once `bound` has passed.
pub async fn wait_until<F: FnMut() -> bool>(bound: Duration, what: &str, mut cond: F) {
    wait_until_async(bound, what, || std::future::ready(cond())).await;
}

/// Polls the async `cond` until it holds; panics with `what` once `bound` has passed.
pub async fn wait_until_async<F, Fut>(bound: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        assert!(
            start.elapsed() < bound,
            "timed out after {bound:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Runs `check` until it returns `Ok`, and returns that value; panics with `what` and the
/// last `Err` (what was seen instead) once `bound` has passed.
pub async fn wait_for<T, E, F, Fut>(bound: Duration, what: &str, mut check: F) -> T
where
    E: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let start = Instant::now();
    loop {
        match check().await {
            Ok(v) => return v,
            Err(seen) => assert!(
                start.elapsed() < bound,
                "timed out after {bound:?} waiting for {what}; last seen: {seen:?}"
            ),
        }
        tokio::time::sleep(POLL_REQUEST).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_condition_that_holds_later_ends_the_wait() {
        let mut n = 0;
        wait_until(Duration::from_secs(5), "three polls", || {
            n += 1;
            n == 3
        })
        .await;
        assert_eq!(n, 3);
        let got = wait_for(Duration::from_secs(5), "a value", || {
            n += 1;
            std::future::ready(if n == 5 { Ok(n) } else { Err(n) })
        })
        .await;
        assert_eq!(got, 5);
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 20ms waiting for never")]
    async fn a_condition_that_never_holds_fails_the_test_once_the_bound_passes() {
        wait_until_async(Duration::from_millis(20), "never", || async { false }).await;
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for a value; last seen: \"still 7\"")]
    async fn wait_for_fails_with_what_it_saw_last() {
        wait_for(Duration::from_millis(20), "a value", || async {
            Err::<(), _>("still 7")
        })
        .await;
    }
}
