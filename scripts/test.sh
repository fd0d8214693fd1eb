#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what it needs, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.27.3
# The toolchains are installed below, so a missing one is a failure, never a skipped test
# (`sluice_build::toolchains_required`, the one gate every test asks).
export SLUICE_REQUIRE_GUEST_TOOLCHAINS=1
# No incremental state: a test run builds once, and its incremental dirs cost gigabytes of disk.
export CARGO_INCREMENTAL=0

# Phases with their times (see the README for the last CI run's).
source scripts/phase.sh

phase "toolchains"
rustup target add wasm32-wasip2 >/dev/null
# With the pinned wit-bindgen CLI (~5 min once, then cached in ~/.cargo/bin): the freshness
# test of the committed Go bindings (host/build/tests/bindings_fresh.rs) needs it.
bash scripts/guest-toolchains.sh --with-wit-bindgen
# Chromium, promtool and the console's npm packages for tests/tests/console.rs.
bash scripts/console-deps.sh
# A real Postgres on loopback for the outbox's Postgres tests (installs it if missing).
eval "$(bash scripts/postgres.sh)"
trap 'bash scripts/postgres.sh stop >/dev/null 2>&1 || true' EXIT
# The pinned nats-server for the cluster tests (go install, once: ~1 min on a cold machine).
# The tests spawn, kill and restart their own servers from this binary (SLUICE_NATS_SERVER);
# a missing binary fails them, never skips them.
eval "$(bash scripts/nats.sh install)"

phase "lint (rustfmt, one-backend builds, the guests)"
cargo fmt --all -- --check
# An embedder that takes one outbox backend builds, and links no driver of the other.
# sluice-runtime has no backend code of its own (its features only forward to sluice-outbox's),
# so it builds with one backend when sluice-outbox does and the runtime names none of the items
# sluice-outbox gates on a backend. Checking those two costs seconds; checking sluice-runtime
# itself checked wasmtime and cranelift in check mode: 12 of the 14 minutes of a cold lint phase.
if grep -rnE '\b(SqliteChannel|PostgresChannel|open_sqlite|open_postgres)\b' host/runtime/src; then
  echo "sluice-runtime names a backend-gated item of sluice-outbox (above): gate it on the feature" >&2
  exit 1
fi
for backend in sqlite postgres; do
  cargo check --quiet -p sluice-outbox --no-default-features --features "$backend"
  other=$([ "$backend" = sqlite ] && echo postgres || echo sqlite)
  # Read whole before grep: `grep -q` quitting early would fail the pipe under pipefail.
  tree=$(cargo tree -p sluice-runtime --no-default-features --features "$backend" -e features)
  if grep -qi "sqlx-$other\|sqlx/$other" <<<"$tree"; then
    echo "sluice-runtime with only $backend still pulls in sqlx's $other" >&2
    exit 1
  fi
done
# The guests: go vet/gofmt, ruff/mypy, tsc, rustfmt/clippy (wasm32), and each SDK README's
# actor example compiled as written (~10 s warm, ~1.5 min with a cold guests/rust/target).
bash scripts/lint-guests.sh

# clippy-driver compiles the workspace's own crates (scripts/clippy-wrapper.sh), with warnings
# denied: one build of the dependency graph serves clippy and the tests. Exported from here on,
# so every cargo run after this point (the guests below, and the ones tests start: the sluice
# binary, the Rust test guests) finds the fingerprints this build leaves.
export RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/clippy-wrapper.sh"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

phase "build guests"
(cd guests/rust && cargo build --release --target wasm32-wasip2)

phase "clippy and the test build (one compile of every target, linted as it builds)"
cargo test --workspace --all-targets --no-run

phase "test"
# The shared Postgres sat idle through the build: if it stopped meanwhile (a full disk stops
# it for good), postgres.sh starts it again on its data and port, and says so.
eval "$(bash scripts/postgres.sh)"
# Every language's error mapping, the 200k-call soak per language, every test guest of every
# language built (through the guest cache) and run on the real host, and `sluice build`
# through the CLI: nothing is left out, nothing is ignored.
status=0
cargo test --workspace --no-fail-fast -- --test-threads=4 || status=$?
phase ""
if [ "$status" -ne 0 ]; then
  # What a failed run needs to be read from its log alone: is the shared Postgres still up,
  # what did it last say, and was the machine short of disk or memory.
  echo "== diagnostics (tests failed with $status)"
  bash scripts/postgres.sh status || true
  df -h . "${TMPDIR:-/tmp}" || true
  free -m || true
fi
exit "$status"
