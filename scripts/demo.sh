#!/usr/bin/env bash
# The main job: build the guests, start an embedded host on SQLite, run the job_queue_outbox
# scenarios and print a per-scenario report. Exits non-zero if any invariant fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.27.3
echo "== building guests" >&2
rustup target add wasm32-wasip2 >/dev/null
(cd guests/rust && cargo build --quiet --release --target wasm32-wasip2)
echo "== building the host" >&2
cargo build --quiet -p job-queue-embedded
echo "== job_queue_outbox (Rust guests, embedded host, SQLite outbox)" >&2
exec target/debug/job-queue-embedded guests/rust/target/wasm32-wasip2/release target/demo
