# Shared helpers for the sg-fakemodel integration tests; sourced, not run.
# Each test starts its own server on --port 0, reads the port from the first
# stdout line, and stops it with SIGTERM at the end (exit status must be 0,
# which under the sanitizer build also means "no leaks").

set -u
FM_FAILS=0
FM_PID=
FM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sg-fakemodel-test.XXXXXX")

fail() {
    echo "FAIL: $*" >&2
    FM_FAILS=$((FM_FAILS + 1))
}

pass() {
    echo "ok: $*"
}

fm_cleanup() {
    if [ -n "$FM_PID" ]; then
        kill -KILL "$FM_PID" 2>/dev/null
        wait "$FM_PID" 2>/dev/null
    fi
    rm -rf "$FM_DIR"
}
trap fm_cleanup EXIT

# read_port PID OUT ERR WHAT: the port a server started as PID prints alone
# as the first line of OUT, waited for up to 10 s; on failure, says so with
# ERR's contents and returns 1.
read_port() {
    local port
    for _ in $(seq 1 200); do
        [ "$(wc -l <"$2")" -ge 1 ] && break
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    port=$(head -n 1 "$2")
    case "$port" in
    '' | *[!0-9]*)
        echo "$4 did not print its port; stderr:" >&2
        cat "$3" >&2
        return 1
        ;;
    esac
    echo "$port"
}

# fm_start BINARY [server options...]: sets FM_PORT, FM_PID, FM_CA.
fm_start() {
    local bin=$1
    shift
    FM_CA=$FM_DIR/ca.pem
    "$bin" --port 0 --quiet --write-ca "$FM_CA" "$@" >"$FM_DIR/out" 2>"$FM_DIR/err" &
    FM_PID=$!
    FM_PORT=$(read_port "$FM_PID" "$FM_DIR/out" "$FM_DIR/err" server) || exit 1
    FM_LOG=http://127.0.0.1:$FM_PORT/_log
}

# fm_stop: SIGTERM, and the server must exit 0 within 10 s.
fm_stop() {
    kill -TERM "$FM_PID"
    local rc=0
    wait "$FM_PID" || rc=$?
    FM_PID=
    if [ "$rc" -ne 0 ]; then
        fail "server exited with status $rc"
        cat "$FM_DIR/err" >&2
    fi
}

fm_finish() {
    fm_stop
    if [ "$FM_FAILS" -ne 0 ]; then
        echo "$FM_FAILS failure(s)" >&2
        exit 1
    fi
    echo "all passed"
    exit 0
}

# fm_log QUERY: the log JSON, one event a line.
fm_log() {
    curl -sS -m 5 "$FM_LOG?$1"
}

# fm_count KEY EVENT: how many EVENT events the request(s) with KEY have.
fm_count() {
    fm_log "key=$1&event=$2" | grep -c "\"event\":\"$2\""
}

# fm_wait_event KEY EVENT: wait up to 3 s for the event to be logged.
fm_wait_event() {

    for _ in $(seq 1 60); do
        [ "$(fm_count "$1" "$2")" -gt 0 ] && return 0
        sleep 0.05
    done
    return 1
}

# fm_field KEY EVENT FIELD: the value of FIELD in the first such event.
fm_field() {
    fm_log "key=$1&event=$2" | grep "\"event\":\"$2\"" | head -n 1 |
        sed -n "s/.*\"$3\":\"\{0,1\}\([^,\"}]*\).*/\1/p"
}

# ge A B: A >= B for decimals.
ge() {
    awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'
}

# For sg-stream scripts (SG, OUT and ERR set):
# expect CODE DESCRIPTION -- ARGS...: run sg-stream, check the exit status.
expect() {
    local want=$1 what=$2
    shift 3
    "$SG" "$@" >"$OUT" 2>"$ERR"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then
        pass "$what (exit $rc)"
    else
        fail "$what: exit $rc, wanted $want; stderr: $(head -c 400 "$ERR")"
    fi
}

# has FILE TEXT DESCRIPTION: FILE holds TEXT.
has() {
    if grep -qF -- "$2" "$1"; then pass "$3"; else fail "$3: '$2' not in $(head -c 400 "$1")"; fi
}
