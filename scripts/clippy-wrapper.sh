#!/usr/bin/env bash
# RUSTC_WORKSPACE_WRAPPER for scripts/test.sh: the host workspace's own crates are compiled by
# clippy-driver, which lints them (CLIPPY_ARGS, e.g. -D warnings) while it builds them, so the
# test build is also the clippy pass. `cargo clippy` would check the whole dependency graph a
# second time in check mode: 11 of a cold CI run's 63 minutes.
#
# Cargo hands the wrapper every workspace member of whichever workspace it builds, and tests
# run cargo on other workspaces too (guests/rust, a `sluice new` project, a user's crate under
# `sluice build`): those get plain rustc, exactly as without a wrapper.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${CARGO_MANIFEST_DIR:-}/" in
  "$root"/guests/* | "$root"/examples/job_queue_outbox/rust/*) ;;
  "$root"/*) exec clippy-driver "$@" ;;
esac
exec "$@"
