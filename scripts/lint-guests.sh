#!/usr/bin/env bash
# Lints the guest side: every SDK, template, test actor and example in Go, Python, TypeScript
# and Rust, and compiles each SDK README's actor example as written and runs the README's unit
# test of it in a project laid out as `sluice new` lays one out (so a README that drifts from
# its SDK, or whose test no longer matches its example, fails). Runs every check, prints the
# output of those that fail, and exits non-zero if any did. `scripts/test.sh` runs it in its
# `== lint` step; it needs the toolchains `scripts/guest-toolchains.sh` installs (ruff and mypy
# included).
#
#   bash scripts/lint-guests.sh                 # everything
#   bash scripts/lint-guests.sh go readmes      # some of: go python typescript rust readmes
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
# Guest crates are checked in guests/rust/target (see Rust below), whatever the caller exported.
unset CARGO_TARGET_DIR
# One mypy cache for every run below (it git-ignores itself), not one per folder mypy starts in.
export MYPY_CACHE_DIR="$ROOT/.mypy_cache"
TSC=(node "$ROOT/guests/typescript/node_modules/typescript/bin/tsc")
MYPY_CONFIG="$ROOT/guests/python/pyproject.toml"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# Seconds since $1 (an earlier `now`), to a tenth.
now() { echo "${EPOCHREALTIME/./}"; }
since() { local us=$(($(now) - $1)); printf '%d.%d' $((us / 1000000)) $((us / 100000 % 10)); }

failed=()
# check NAME CMD...: runs one check quietly; on failure prints its output and records it.
check() {
  local name=$1 t0 out
  t0=$(now)
  shift
  if out="$("$@" 2>&1)"; then
    printf '[lint-guests] ok    %5ss  %s\n' "$(since "$t0")" "$name" >&2
  else
    printf '[lint-guests] FAIL  %5ss  %s\n%s\n' "$(since "$t0")" "$name" "$out" >&2
    failed+=("$name")
  fi
}

# silent CMD...: fails when CMD fails or prints anything (gofmt -l lists unformatted files).
silent() {
  local out
  out="$("$@")" || return 1
  [[ -z $out ]] || { printf '%s\n' "$out"; return 1; }
}

# indir DIR CMD...: runs CMD in DIR.
indir() { (cd "$1" && shift && "$@"); }

# blocks FILE LANG [tests]: the bodies of the fenced LANG blocks of FILE, in order: those
# outside its "## Unit tests" section (the actor example), or with `tests` those inside it
# (the unit test of that example).
blocks() {
  awk -v open="\`\`\`$2" -v want="${3:-example}" '/^## / { tests = ($0 == "## Unit tests") }
    (want == "tests") != (tests + 0) { next }
    $0 == open { on = 1; next } on && /^```/ { on = 0; next } on' "$1"
}

# Source files under guests/ and examples/, never inside node_modules or a target dir.
sources() {
  find guests examples \( -name node_modules -o -name target -o -name .sluice \) -prune \
    -o -name "$1" -print | sort
}

# --- Go -----------------------------------------------------------------------------------
# Both platforms: the host one compiles the unit tests and fakes, wasip1 the component glue.
go_vet() {
  local pkgs
  pkgs="$(go list ./...)" || return 1
  pkgs="$(grep -v '/internal/wit/' <<<"$pkgs" || true)"
  # shellcheck disable=SC2086  # one word per package
  go vet $pkgs && GOOS=wasip1 GOARCH=wasm go vet $pkgs || return 1
  if [[ -d internal/wit ]]; then
    # The bindings wit-bindgen generates (committed as generated; bindings_fresh.rs) turn
    # linear-memory addresses (uintptr) into pointers by design: only vet's unsafeptr
    # check is off for them, and for nothing else.
    go vet -unsafeptr=false ./internal/wit/... &&
      GOOS=wasip1 GOARCH=wasm go vet -unsafeptr=false ./internal/wit/...
  fi
}

lint_go() {
  local mod
  for mod in $(sources go.mod); do
    check "go vet $(dirname "$mod")" indir "$(dirname "$mod")" go_vet
  done
  # shellcheck disable=SC2046
  check "gofmt -l guests examples" silent gofmt -l $(sources '*.go')
}

# --- Python -------------------------------------------------------------------------------
# mypy once per project: the SDK folder as a whole (its test actors are all `app`, hence
# explicit package bases), each example actor folder (one holding an app.py) from inside it,
# and any other Python file of the examples on its own.
lint_python() {
  local dir f
  check "ruff check" ruff check --quiet guests/python examples
  check "ruff format --check" ruff format --check --quiet guests/python examples
  check "mypy guests/python" indir guests/python mypy --config-file "$MYPY_CONFIG" \
    --explicit-package-bases sluice sluice_main.py template testkit \
    $(cd guests/python && ls tests/*.py)
  local projects=()
  for f in $(sources app.py | grep '^examples/'); do
    dir="$(dirname "$f")"
    projects+=("$dir")
    check "mypy $dir" indir "$dir" mypy --config-file "$MYPY_CONFIG" .
  done
  for f in $(sources '*.py' | grep '^examples/'); do
    local inside=0
    for dir in "${projects[@]}"; do [[ $f == "$dir"/* ]] && inside=1; done
    [[ $inside == 1 ]] || check "mypy $f" indir "$(dirname "$f")" mypy --config-file "$MYPY_CONFIG" "$(basename "$f")"
  done
}

# --- TypeScript ---------------------------------------------------------------------------
# Every tsconfig of the SDK, its template and the examples: each `tsconfig.json` checks actor
# code without Node's types (guests run in StarlingMonkey or QuickJS), each
# `tsconfig.test.json` the unit tests beside it with them (node:test, node:assert).
lint_typescript() {
  local cfg
  for cfg in $(sources 'tsconfig*.json' | grep -v '/tsconfig\.base\.json$'); do
    check "tsc -p $cfg" "${TSC[@]}" --noEmit -p "$cfg"
  done
}

# --- Rust ---------------------------------------------------------------------------------
# Every guest crate is its own workspace: guests/rust (SDK and test actors), the template,
# and each example crate that declares `[workspace]` (the examples that are host-workspace
# members are linted with the host). All of them depend on guests/rust/sdk through the same
# locked versions, so their checks share guests/rust's target dir: a cold run compiles
# wit-bindgen and serde once, not once per crate.
GUEST_TARGET="$ROOT/guests/rust/target"
rust_crates() {
  echo guests/rust
  echo guests/rust/template
  # shellcheck disable=SC2046
  grep -lx '\[workspace\]' $(sources Cargo.toml | grep '^examples/') | xargs -r -n1 dirname
}

clippy() { # DIR: clippy for wasm32-wasip2, warnings denied, lock files as committed
  CARGO_TARGET_DIR="$GUEST_TARGET" cargo clippy --quiet --locked --manifest-path "$1/Cargo.toml" \
    --target wasm32-wasip2 --all-targets -- -D warnings
}

lint_rust() {
  local dir
  for dir in $(rust_crates); do
    check "cargo fmt --check $dir" indir "$dir" cargo fmt --all -- --check
    check "cargo clippy $dir" clippy "$dir"
  done
}

# --- The SDK READMEs' actor examples, as written --------------------------------------------
readme_go() {
  local d="$WORK/readme-go"
  mkdir -p "$d"
  blocks guests/go/README.md go >"$d/main.go"
  [[ -s $d/main.go ]] || { echo "guests/go/README.md has no go block"; return 1; }
  # The template's go.mod with its replace lines made absolute, as `sluice new go` does.
  sed -e "s#=> \.\./witpkg#=> $ROOT/guests/go/witpkg#" -e "s#=> \.\.\$#=> $ROOT/guests/go#" \
    guests/go/template/go.mod >"$d/go.mod"
  blocks guests/go/README.md go tests >"$d/main_test.go"
  [[ -s $d/main_test.go ]] || { echo "guests/go/README.md has no go unit test"; return 1; }
  # vet for wasip1 compiles the actor as a component would be; the unit test runs natively.
  silent gofmt -l "$d/main.go" "$d/main_test.go" &&
    (cd "$d" && GOOS=wasip1 GOARCH=wasm go vet . && go vet . && go test -count=1 .)
}

readme_python() {
  local d="$WORK/readme-python"
  mkdir -p "$d"
  blocks guests/python/README.md python >"$d/app.py"
  [[ -s $d/app.py ]] || { echo "guests/python/README.md has no python block"; return 1; }
  blocks guests/python/README.md python tests >"$d/test_app.py"
  [[ -s $d/test_app.py ]] || { echo "guests/python/README.md has no python unit test"; return 1; }
  # The template's pyproject.toml with pytest pointed at this SDK, as `sluice new python` does.
  sed "s#^pythonpath = \[\"..\"\]#pythonpath = [\"$ROOT/guests/python\"]#" \
    guests/python/template/pyproject.toml >"$d/pyproject.toml"
  (cd "$d" && mypy --config-file "$MYPY_CONFIG" app.py test_app.py &&
    python3 -m pytest -q -p no:cacheprovider)
}

readme_typescript() {
  local d="$WORK/readme-typescript" sdk="$ROOT/guests/typescript"
  mkdir -p "$d"
  blocks guests/typescript/README.md ts >"$d/app.ts"
  [[ -s $d/app.ts ]] || { echo "guests/typescript/README.md has no ts block"; return 1; }
  blocks guests/typescript/README.md ts tests >"$d/app.test.ts"
  [[ -s $d/app.test.ts ]] || { echo "guests/typescript/README.md has no ts unit test"; return 1; }
  # The template's package.json and tsconfigs with every `../` the SDK's absolute path, as
  # `sluice new typescript` writes them: tsconfig.json checks the actor as `sluice build` does
  # (tools/build.mjs), and `npm test` type-checks the test (tsconfig.test.json), then runs it.
  sed "s# \.\./# $sdk/#g" guests/typescript/template/package.json >"$d/package.json"
  local cfg
  for cfg in tsconfig.json tsconfig.test.json; do
    sed "s#\"\.\./#\"$sdk/#g" "guests/typescript/template/$cfg" >"$d/$cfg"
  done
  "${TSC[@]}" --noEmit -p "$d/tsconfig.json" && (cd "$d" && npm test --silent)
}

readme_rust() {
  local d="$WORK/readme-rust"
  mkdir -p "$d/src"
  blocks guests/rust/README.md rust >"$d/src/lib.rs"
  [[ -s $d/src/lib.rs ]] || { echo "guests/rust/README.md has no rust block"; return 1; }
  # Its unit tests at the end of src/lib.rs, as in the template.
  grep -q . <(blocks guests/rust/README.md rust tests) ||
    { echo "guests/rust/README.md has no rust unit test"; return 1; }
  { echo; blocks guests/rust/README.md rust tests; } >>"$d/src/lib.rs"
  # The README's Cargo.toml lines (the test-only ones after the others) under the template's
  # package name, so the template's Cargo.lock serves as it is (and the target dir is warm
  # from the clippy runs above).
  {
    printf '[package]\nname = "my-actor"\nversion = "0.1.0"\nedition = "2024"\n\n'
    { blocks guests/rust/README.md toml; blocks guests/rust/README.md toml tests; } |
      sed "s#/path/to/sluice#$ROOT#"
    printf '\n[workspace]\n'
  } >"$d/Cargo.toml"
  cp guests/rust/template/Cargo.lock "$d/"
  # clippy for wasm32 as the component is built; the unit tests run natively.
  clippy "$d" && CARGO_TARGET_DIR="$GUEST_TARGET" cargo test --quiet --locked \
    --manifest-path "$d/Cargo.toml"
}

lint_readmes() {
  local lang
  for lang in go python typescript rust; do
    check "guests/$lang/README.md actor example and unit test" "readme_$lang"
  done
}

sections=("$@")
[[ ${#sections[@]} -gt 0 ]] || sections=(go python typescript rust readmes)
t0=$(now)
for s in "${sections[@]}"; do
  case "$s" in
    go | python | typescript | rust | readmes) "lint_$s" ;;
    *) echo "unknown section: $s (go python typescript rust readmes)" >&2; exit 2 ;;
  esac
done
printf '[lint-guests] %d check(s) failed, %s s in all\n' "${#failed[@]}" "$(since "$t0")" >&2
if [[ ${#failed[@]} -gt 0 ]]; then
  printf '[lint-guests] failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
