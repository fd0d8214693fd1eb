#!/usr/bin/env bash
# Make a real Postgres available on loopback for the outbox tests and benchmarks.
#
#   eval "$(scripts/postgres.sh)"      # exports SLUICE_TEST_POSTGRES_URL
#   scripts/postgres.sh stop           # stops the server started here
#   scripts/postgres.sh status         # is it up, and the end of its log (for failed runs)
#
# Idempotent: a server already running from $SLUICE_PG_DIR is reused. Installs Debian's
# postgresql package if initdb/pg_ctl are missing. Runs the server as the `postgres` user
# (initdb refuses root), on 127.0.0.1 and a free port, with its data in a temp dir.
# Logs go to stderr; the only stdout line is the export.
set -euo pipefail

DIR="${SLUICE_PG_DIR:-${TMPDIR:-/tmp}/sluice-pg}"
DB="${SLUICE_PG_DB:-sluice_test}"
log() { echo "postgres.sh: $*" >&2; }

find_bin() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return; fi
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"; return
    fi
}

PGBIN="$(find_bin)"
if [ -z "$PGBIN" ]; then
    log "installing postgresql (Debian package)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends postgresql >&2
    PGBIN="$(find_bin)"
fi
[ -n "$PGBIN" ] || { log "no initdb found after install"; exit 1; }

# Run a Postgres binary as the unprivileged `postgres` user when we are root.
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --create-home --shell /bin/bash postgres
        if command -v runuser >/dev/null 2>&1; then
            runuser -u postgres -- "$@"
        else
            su postgres -s /bin/bash -c "$(printf '%q ' "$@")"
        fi
    else
        "$@"
    fi
}

if [ "${1:-}" = "status" ]; then
    # For a failed test run's log: is the server up, and the end of what it said.
    as_pg "$PGBIN/pg_ctl" -D "$DIR/data" status || echo "postgres.sh: no server running in $DIR"
    [ -f "$DIR/server.log" ] && { echo "-- last lines of $DIR/server.log"; tail -n 40 "$DIR/server.log"; }
    exit 0
fi

if [ "${1:-}" = "stop" ]; then
    if [ -d "$DIR/data" ]; then as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m fast stop >&2 || true; fi
    exit 0
fi

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
        return
    fi
    local p
    for p in $(seq 55432 55532); do
        if ! (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
    done
    return 1
}

OPTS="-k $DIR -c listen_addresses=127.0.0.1 -c max_connections=300"
if [ -f "$DIR/port" ] && as_pg "$PGBIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
    PORT="$(cat "$DIR/port")"
    log "reusing the server in $DIR on port $PORT"
elif [ -f "$DIR/port" ] && [ -d "$DIR/data" ] && as_pg "$PGBIN/pg_ctl" -D "$DIR/data" \
        -l "$DIR/server.log" -w -t 60 -o "-p $(cat "$DIR/port") $OPTS" start >&2; then
    # It stopped (a full disk makes Postgres shut down for good): same data, same port.
    PORT="$(cat "$DIR/port")"
    log "the server in $DIR had stopped; restarted it on port $PORT (its log: $DIR/server.log)"
else
    [ -d "$DIR/data" ] && as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$DIR"
    mkdir -p "$DIR"
    [ "$(id -u)" -eq 0 ] && { id postgres >/dev/null 2>&1 || useradd --system --create-home postgres; chown postgres "$DIR"; }
    as_pg "$PGBIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 --locale=C >"$DIR/initdb.log" 2>&1 \
        || { cat "$DIR/initdb.log" >&2; exit 1; }
    PORT="$(free_port)"
    as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
        -o "-p $PORT $OPTS" start >&2 \
        || { cat "$DIR/server.log" >&2; exit 1; }
    echo "$PORT" > "$DIR/port"
    log "started Postgres ($PGBIN) in $DIR on 127.0.0.1:$PORT"
fi

if ! as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
    as_pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DB" >&2
fi

URL="postgres://postgres@127.0.0.1:$PORT/$DB"
export SLUICE_TEST_POSTGRES_URL="$URL"
echo "export SLUICE_TEST_POSTGRES_URL=$URL"
