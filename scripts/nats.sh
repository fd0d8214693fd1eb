#!/usr/bin/env bash
# Make a real nats-server (JetStream on) available on loopback for the cluster tests and benches.
#
#   eval "$(scripts/nats.sh)"      # exports SLUICE_TEST_NATS_URL and SLUICE_NATS_SERVER
#   scripts/nats.sh install        # only makes sure the binary exists (exports SLUICE_NATS_SERVER)
#   scripts/nats.sh stop           # stops the server started here
#
# Idempotent: a server already running from $SLUICE_NATS_DIR is reused. The binary is
# nats-server $SLUICE_NATS_VERSION (pinned below), built once with `go install` through the Go
# module proxy into ~/.cache/sluice/nats-server/<version> (~1 min on a cold 2-core machine; Go
# comes from scripts/guest-toolchains.sh, and the go command fetches the toolchain the server's
# go.mod asks for). Debian's nats-server package is 2.9.10, whose JetStream API replies
# async-nats 0.51 cannot decode (creating a KV bucket fails with "data did not match any variant
# of untagged enum Response"), so it is not used. SLUICE_NATS_SERVER=/path/to/nats-server uses
# that binary instead (it must be at least $MIN_VERSION). Tests spawn their own servers from the
# same binary (sluice_cluster::testing::NatsServer reads SLUICE_NATS_SERVER).
# The server listens on 127.0.0.1 on a free port, with its JetStream store in $SLUICE_NATS_DIR
# and max_payload 8 MB (Sluice's default max_payload_bytes is 5 MiB; NATS' default is 1 MB).
# Logs go to stderr; stdout carries only the export lines.
set -euo pipefail

DIR="${SLUICE_NATS_DIR:-${TMPDIR:-/tmp}/sluice-nats}"
# The version the cluster tests run against (async-nats 0.51 is built for servers up to 2.14).
VERSION_PIN="${SLUICE_NATS_VERSION:-v2.14.10}"
MIN_VERSION="2.14.0"
CACHE="$HOME/.cache/sluice/nats-server/$VERSION_PIN"
log() { echo "nats.sh: $*" >&2; }

find_bin() {
    if [ -n "${SLUICE_NATS_SERVER:-}" ]; then
        [ -x "$SLUICE_NATS_SERVER" ] || { log "SLUICE_NATS_SERVER=$SLUICE_NATS_SERVER is not an executable"; exit 1; }
        echo "$SLUICE_NATS_SERVER"; return 0
    fi
    if [ -x "$CACHE/nats-server" ]; then echo "$CACHE/nats-server"; fi
    return 0
}

version_of() { "$1" --version 2>/dev/null | sed -n 's/.*v\([0-9][0-9.]*\).*/\1/p' | head -n 1; }

install() {
    command -v go >/dev/null 2>&1 || { log "no go command: run scripts/guest-toolchains.sh (or install Go >= 1.21)"; exit 1; }
    log "building nats-server $VERSION_PIN with go install"
    mkdir -p "$CACHE"
    GOBIN="$CACHE" go install "github.com/nats-io/nats-server/v2@$VERSION_PIN" >&2
}

running() { [ -f "$DIR/pid" ] && kill -0 "$(cat "$DIR/pid")" 2>/dev/null; }

if [ "${1:-}" = "stop" ]; then
    if running; then
        pid="$(cat "$DIR/pid")"
        kill "$pid" 2>/dev/null || true
        # Bounded wait for the process to go (lame-duck off: it exits on SIGTERM at once).
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        kill -9 "$pid" 2>/dev/null || true
        log "stopped nats-server $pid"
    fi
    rm -f "$DIR/pid"
    exit 0
fi

BIN="$(find_bin)"
if [ -z "$BIN" ]; then
    install
    BIN="$(find_bin)"
fi
[ -n "$BIN" ] || { log "no nats-server found after install"; exit 1; }
VERSION="$(version_of "$BIN")"
if [ -z "$VERSION" ] || [ "$(printf '%s\n%s\n' "$MIN_VERSION" "$VERSION" | sort -V | head -n 1)" != "$MIN_VERSION" ]; then
    log "$BIN is version '${VERSION:-unknown}'; host/cluster needs at least $MIN_VERSION"
    log "(set SLUICE_NATS_VERSION=v2.x.y to build a newer one with go install)"
    exit 1
fi

if [ "${1:-}" = "install" ]; then
    echo "export SLUICE_NATS_SERVER=$BIN"
    exit 0
fi

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
        return
    fi
    local p
    for p in $(seq 54222 54322); do
        if ! (: >"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
    done
    return 1
}

if running && [ -f "$DIR/port" ]; then
    PORT="$(cat "$DIR/port")"
    log "reusing nats-server $(cat "$DIR/pid") in $DIR on port $PORT"
else
    rm -rf "$DIR"
    mkdir -p "$DIR/jetstream"
    PORT="$(free_port)"
    cat >"$DIR/nats.conf" <<CONF
listen: 127.0.0.1:$PORT
max_payload: 8MB
jetstream {
  store_dir: "$DIR/jetstream"
}
CONF
    "$BIN" -c "$DIR/nats.conf" -t >&2 2>&1 || { log "bad config $DIR/nats.conf"; exit 1; }
    nohup "$BIN" -c "$DIR/nats.conf" >"$DIR/server.log" 2>&1 </dev/null &
    echo $! >"$DIR/pid"
    echo "$PORT" >"$DIR/port"
    # Bounded wait until the server accepts connections (JetStream is on before it listens).
    for _ in $(seq 1 200); do
        (: >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
        running || { cat "$DIR/server.log" >&2; exit 1; }
        sleep 0.05
    done
    (: >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || { log "nats-server did not listen on $PORT"; cat "$DIR/server.log" >&2; exit 1; }
    log "started nats-server $VERSION ($BIN) in $DIR on 127.0.0.1:$PORT"
fi

echo "export SLUICE_NATS_SERVER=$BIN"
echo "export SLUICE_TEST_NATS_URL=nats://127.0.0.1:$PORT"
