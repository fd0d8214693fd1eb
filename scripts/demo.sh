#!/usr/bin/env bash
# The main job: build every language's job_queue_outbox leader (examples/job_queue_outbox/
# {rust,go,python,typescript}) with `sluice build`, run every scenario of its PROTOCOL.md on a
# real host with an SQLite outbox (offline_delivery kills a `sluice run` child and restarts on
# the same file), check every invariant and print one row per scenario, one column per
# language. Then the embedded Rust job queue. Exits non-zero if any invariant fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.27.3
echo "== guest toolchains" >&2
bash scripts/guest-toolchains.sh
echo "== building the host and the driver" >&2
cargo build --quiet -p sluice-cli -p job-queue-outbox -p job-queue-embedded
status=0
echo "== job_queue_outbox: every scenario, every language (sluice build, SQLite outbox)" >&2
# The web console of the scenario that is running (SLUICE_DEMO_CONSOLE=ADDR moves it).
cargo run --quiet -p job-queue-outbox -- rust go python typescript \
  --console "${SLUICE_DEMO_CONSOLE:-127.0.0.1:7401}" || status=$?
echo "== job_queue embedded (Rust test guests, host embedded as a library, SQLite outbox)" >&2
(cd guests/rust && env -u CARGO_TARGET_DIR cargo build --quiet --release --target wasm32-wasip2)
cargo run --quiet -p job-queue-embedded -- guests/rust/target/wasm32-wasip2/release target/demo \
  || status=$?
exit "$status"
