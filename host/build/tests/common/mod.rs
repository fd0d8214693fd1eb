//! Shared by `sluice-build`'s integration tests: the one way a test skips.

/// Skips the calling test (it returns next), loudly: panics when
/// [`sluice_build::toolchains_required`] (CI, `scripts/test.sh`), otherwise writes `reason` to
/// the process's stderr directly, past the test harness's output capture (which swallows
/// `eprintln!` of a passing test), so a skip never reads as a pass.
pub fn skip(reason: impl std::fmt::Display) {
    assert!(
        !sluice_build::toolchains_required(),
        "not skipping under CI / SLUICE_REQUIRE_GUEST_TOOLCHAINS: {reason}"
    );
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "*** SKIPPING: {reason} ***");
}
