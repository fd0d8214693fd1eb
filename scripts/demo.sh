#!/usr/bin/env bash
# The main job: build every language's job_queue_outbox leader (examples/job_queue_outbox/
# {rust,go,python,typescript}) with `sluice build`, run every scenario of its PROTOCOL.md on a
# real host with an SQLite outbox (offline_delivery kills a `sluice run` child and restarts on
# the same file), check every invariant and print one row per scenario, one column per
# language. Then the embedded Rust job queue. Exits non-zero if any invariant fails.
#
# The host is built once: one `cargo build` of the three packages makes `sluice`, the driver
# and the embedded example, and they run from there (a `cargo run -p X` of one package
# resolves features for that package alone and can rebuild wasmtime). Each phase prints a
# line with the elapsed time; the last line is the overall count, e.g. `35/35 passed`.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.27.3

source scripts/phase.sh

# The guest toolchains download (network-bound) while the host compiles (CPU-bound): on a cold
# machine they take minutes that the build hides. Their log is printed once both are done.
mkdir -p target/demo
toolchains_log=target/demo/guest-toolchains.log
bash scripts/guest-toolchains.sh >"$toolchains_log" 2>&1 &
toolchains_pid=$!
trap 'kill "$toolchains_pid" 2>/dev/null || true' EXIT

phase "building the host, the driver and the embedded example (one cargo build; the guest toolchains install meanwhile)"
target="${CARGO_TARGET_DIR:-target}/debug"
bin="$PWD/target/demo/bin"
mkdir -p "$bin"
# The binaries run from private copies, so another checkout sharing the target directory
# cannot swap them mid-run; `sluice` says which checkout it was built from.
for try in 1 2 3; do
  cargo build -p sluice-cli -p job-queue-outbox -p job-queue-embedded
  for b in sluice job-queue-outbox job-queue-embedded; do
    cp -f "$target/$b" "$bin/$b.tmp" && mv -f "$bin/$b.tmp" "$bin/$b"
  done
  [ "$(SLUICE_PRINT_BUILD_ROOT=1 "$bin/sluice")" = "$PWD/host/cli" ] && break
  echo "   $target/sluice came from another checkout; building again ($try)" >&2
done

phase "guest toolchains (installed once: wasm32-wasip2, componentize-py, npm ci, Go $GOTOOLCHAIN; log: $toolchains_log)"
if ! wait "$toolchains_pid"; then
  cat "$toolchains_log" >&2
  echo "the guest toolchains did not install (above)" >&2
  exit 1
fi
trap - EXIT
sed 's/^/   /' "$toolchains_log" >&2

phase "building the Rust test guests for the embedded example (guests/rust, wasm32-wasip2)"
(cd guests/rust && env -u CARGO_TARGET_DIR cargo build --release --target wasm32-wasip2)

phase "job_queue_outbox: every scenario, every language (sluice build, SQLite outbox)"
status=0
# The web console of the scenario that is running (SLUICE_DEMO_CONSOLE=ADDR moves it).
SLUICE_BIN="$bin/sluice" "$bin/job-queue-outbox" rust go python typescript \
  --console "${SLUICE_DEMO_CONSOLE:-127.0.0.1:7401}" | tee target/demo/job-queue-outbox.txt \
  || status=$?

phase "job_queue embedded (Rust test guests, host embedded as a library, SQLite outbox)"
"$bin/job-queue-embedded" guests/rust/target/wasm32-wasip2/release target/demo \
  | tee target/demo/job-queue-embedded.txt || status=$?
phase ""

# One overall line from the two runs' last lines (`N/M passed[, K failed]`).
passed=0
total=0
parts=()
for run in job-queue-outbox job-queue-embedded; do
  last=$(tail -n 1 "target/demo/$run.txt" 2>/dev/null || true)
  if [[ $last =~ ^([0-9]+)/([0-9]+)\ passed ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    total=$((total + BASH_REMATCH[2]))
    parts+=("$run ${BASH_REMATCH[1]}/${BASH_REMATCH[2]}")
  else
    if [ "$status" -eq 0 ]; then status=1; fi
    parts+=("$run: no result")
  fi
done
echo
echo "$passed/$total passed (${parts[0]}, ${parts[1]}) in $(clock $((SECONDS - t0)))"
exit "$status"
