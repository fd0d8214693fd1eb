#!/usr/bin/env bash
# Installs every toolchain `sluice build` needs for Go, Python and TypeScript guests (and the
# Rust wasm target), and the Python linters of scripts/lint-guests.sh (ruff, mypy; the other
# languages' linters come with their toolchains). Idempotent and non-interactive: a fresh CI
# machine runs it once, a developer runs it again at no cost. After it, guest builds need no
# network.
#
#   bash scripts/guest-toolchains.sh                  # python (+ ruff, mypy), typescript, go, rust target
#   bash scripts/guest-toolchains.sh --with-wit-bindgen   # also the wit-bindgen CLI (~5 min),
#                       # to regenerate the Go bindings and to test that they are fresh
#                       # (host/build/tests/bindings_fresh.rs; scripts/test.sh passes it)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMPONENTIZE_PY_VERSION="0.25.1"
WIT_BINDGEN_VERSION="0.63.0"
# The Python linters of scripts/lint-guests.sh (settings: ruff.toml, guests/python/pyproject.toml).
RUFF_VERSION="0.17.6"
MYPY_VERSION="2.4.1"
# Go 1.27 is needed by the wit-bindgen Go runtime; the go command fetches this toolchain from
# the module proxy the first time (~76 MB, ~10 s).
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"

with_wit_bindgen=0
for arg in "$@"; do
  case "$arg" in
    --with-wit-bindgen) with_wit_bindgen=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

say() { printf '[guest-toolchains] %s\n' "$*" >&2; }

# --- Python: componentize-py -------------------------------------------------------------
# (pip's output is captured first: `pip show | grep -q` under pipefail fails on SIGPIPE.)
installed_cpy="$(python3 -m pip show componentize-py 2>/dev/null || true)"
if command -v componentize-py >/dev/null 2>&1 \
  && grep -qx "Version: ${COMPONENTIZE_PY_VERSION}" <<<"$installed_cpy"; then
  say "componentize-py ${COMPONENTIZE_PY_VERSION}: present"
else
  say "installing componentize-py ${COMPONENTIZE_PY_VERSION}"
  python3 -m pip install --quiet --disable-pip-version-check "componentize-py==${COMPONENTIZE_PY_VERSION}"
fi
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pytest
if [[ "$(ruff --version 2>/dev/null || true)" == "ruff ${RUFF_VERSION}" ]] \
  && [[ "$(mypy --version 2>/dev/null || true)" == "mypy ${MYPY_VERSION} "* ]]; then
  say "ruff ${RUFF_VERSION}, mypy ${MYPY_VERSION}: present"
else
  say "installing ruff ${RUFF_VERSION}, mypy ${MYPY_VERSION}"
  python3 -m pip install --quiet --disable-pip-version-check "ruff==${RUFF_VERSION}" "mypy==${MYPY_VERSION}"
fi

# --- TypeScript: jco, componentize-js, esbuild, typescript (pinned by package-lock.json) --
TS_DIR="$ROOT/guests/typescript"
stamp="$TS_DIR/node_modules/.sluice-lock-sha"
want="$(sha256sum "$TS_DIR/package-lock.json" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  say "guests/typescript node_modules: up to date"
else
  say "npm ci in guests/typescript"
  (cd "$TS_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi

# --- Go: the 1.27 toolchain (no third-party modules: the wit-bindgen runtime is vendored) --
if ! command -v go >/dev/null 2>&1; then
  say "no go command: install Go >= 1.21 (e.g. apt-get install golang-go); GOTOOLCHAIN does the rest"
  exit 1
fi
say "go toolchain: $(cd "$ROOT/guests/go" && go version)"

# --- Rust guests: the wasm32-wasip2 target -------------------------------------------------
if command -v rustup >/dev/null 2>&1; then
  if rustup target list --installed | grep -qx wasm32-wasip2; then
    say "rust target wasm32-wasip2: present"
  else
    say "adding rust target wasm32-wasip2"
    rustup target add wasm32-wasip2
  fi
fi

# --- Optional: wit-bindgen CLI, to regenerate (and check) the committed Go bindings ---------
if [[ $with_wit_bindgen == 1 ]]; then
  if wit-bindgen --version 2>/dev/null | grep -q "${WIT_BINDGEN_VERSION}"; then
    say "wit-bindgen ${WIT_BINDGEN_VERSION}: present"
  else
    say "installing wit-bindgen-cli ${WIT_BINDGEN_VERSION} (Go generator only, ~5 min)"
    cargo install --locked "wit-bindgen-cli@${WIT_BINDGEN_VERSION}" --no-default-features --features go
  fi
fi
say "done"
