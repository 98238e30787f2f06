# A scratch PostgreSQL server for the ledger's tests; sourced, not run.
#
# pg_start: initdb into a new scratch directory as an unprivileged user
# (the invoking one, or `postgres` / `nobody` when running as root: the
# server refuses to run as root), then start it listening on a Unix socket
# in that directory only (no TCP), and wait until it accepts connections.
# Sets PG_URI (postgresql://sg@/sgtest?host=SOCKDIR), PG_DIR, PG_BIN.
# pg_stop / pg_start_again stop and restart the same cluster (a test of the
# database going away mid-run), pg_freeze / pg_thaw make it stop answering
# and answer again; the EXIT trap stops it and removes it.
# When no PostgreSQL server binaries are found, pg_start exits 77 (skipped).
# SG_PG_BINDIR picks the binaries' directory.

PG_DIR=
PG_BIN=
PG_USER=
PG_URI=

pg_find_bin() {
    local d
    local onpath
    onpath=$(command -v initdb 2>/dev/null) && onpath=$(dirname "$(readlink -f "$onpath")")
    for d in "${SG_PG_BINDIR:-}" "$onpath" \
        $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] &&
            [ -x "$d/psql" ] && [ -x "$d/pg_isready" ]; then
            PG_BIN=$d
            return 0
        fi
    done
    return 1
}

# pg_as CMD...: run CMD as the server's user.
pg_as() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$PG_USER" -- "$@"
    else
        "$@"
    fi
}

pg_cleanup() {
    pg_thaw
    if [ -n "$PG_DIR" ] && [ -f "$PG_DIR/data/postmaster.pid" ]; then
        pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1
    fi
    [ -n "$PG_DIR" ] && rm -rf "$PG_DIR"
}

pg_start() {
    if ! pg_find_bin; then
        echo "SKIP: no PostgreSQL server binaries (initdb, pg_ctl, postgres): apt-get install postgresql"
        exit 77
    fi
    PG_USER=$(id -un)
    if [ "$(id -u)" -eq 0 ]; then
        PG_USER=nobody
        if id postgres >/dev/null 2>&1; then
            PG_USER=postgres
        fi
    fi
    PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sg-pg.XXXXXX")
    chmod 0755 "$PG_DIR"
    [ "$(id -u)" -eq 0 ] && chown "$PG_USER" "$PG_DIR"
    if ! pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -U sg -A trust -E UTF8 --no-sync \
        --no-instructions >"$PG_DIR/initdb.log" 2>&1; then
        echo "initdb failed:" >&2
        cat "$PG_DIR/initdb.log" >&2
        exit 1
    fi
    pg_start_again || exit 1
    PG_URI="postgresql://sg@/sgtest?host=$PG_DIR"
    pg_as "$PG_BIN/psql" -X -q -h "$PG_DIR" -U sg -d postgres -c 'CREATE DATABASE sgtest' \
        >/dev/null || exit 1
}

# pg_start_again: start the cluster (again), wait until it is ready.
pg_start_again() {
    if ! pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 30 \
        -o "-c listen_addresses='' -k $PG_DIR -c max_connections=100" start >/dev/null; then
        echo "postgres did not start:" >&2
        cat "$PG_DIR/server.log" >&2
        return 1
    fi
    for _ in $(seq 1 100); do
        "$PG_BIN/pg_isready" -q -h "$PG_DIR" -U sg && return 0
        sleep 0.05
    done
    echo "postgres not ready" >&2
    return 1
}

# pg_stop [MODE]: stop the server (fast: clients are disconnected at once).
pg_stop() {
    pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m "${1:-fast}" -w stop >/dev/null
}

# pg_freeze / pg_thaw: the server stops answering, and answers again.
# SIGSTOP to the postmaster and every process it started: the connections
# stay open and new ones are queued by the kernel, but nothing is read or
# answered (a server that hangs, not one that is gone).
PG_FROZEN=
pg_freeze() {
    local pm
    pm=$(head -n 1 "$PG_DIR/data/postmaster.pid")
    PG_FROZEN="$pm $(pgrep -P "$pm" | tr '\n' ' ')"
    kill -STOP $PG_FROZEN
}
pg_thaw() {
    if [ -n "$PG_FROZEN" ]; then
        kill -CONT $PG_FROZEN 2>/dev/null
        PG_FROZEN=
    fi
}

# pg_sql SQL: one statement through psql, unaligned output without headers.
pg_sql() {
    "$PG_BIN/psql" -X -q -A -t -h "$PG_DIR" -U sg -d sgtest -c "$1"
}
