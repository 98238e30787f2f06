# shellcheck shell=bash
# Shared helpers for the sg-proxy tests (tests/cli/sg_proxy_*_test.sh,
# tests/sdk/proxy_sdk_test.sh); sourced, not run, with the test's own
# arguments:  . "$(dirname "$0")/sg_proxy_lib.sh" "$@"
# It sets PX (the sg-proxy binary) and FM (sg-fakemodel) from them and
# brings in fakemodel_lib.sh; px_upstream starts the fake upstream
# (px_recording_upstream one that records each request: recorded TAG).  Each
# proxy listens on 127.0.0.1:0, its stdout (the port, then the report
# lines) in $FM_DIR/NAME.out; every proxy started is killed at exit, before
# the fake server's own cleanup.
PX=$1
FM=$2
# shellcheck source=../integration/fakemodel_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/fakemodel_lib.sh"

# px_upstream [sg-fakemodel options...]: starts the fake upstream (FM_PORT)
# and sets UP, its http:// base URL.
px_upstream() {
    fm_start "$FM" "$@"
    UP=http://127.0.0.1:$FM_PORT
}

# px_recording_upstream: the fake upstream, writing every request it
# reads byte for byte into $REC (sg-fakemodel --record).
px_recording_upstream() {
    REC=$FM_DIR/rec
    mkdir -p "$REC"
    px_upstream --record "$REC"
}

# rid TAG: sg-fakemodel's id of the request whose query holds _t=TAG.
rid() {
    fm_log "event=received" | grep "_t=$1[&\"]" | grep -o '"id":[0-9]*' | head -n 1 | cut -d: -f2
}

# recorded TAG: the file the recording upstream wrote for the request
# with _t=TAG (empty when it received none).
recorded() {
    local id
    id=$(rid "$1")
    [ -n "$id" ] && [ -f "$REC/$id.req" ] && echo "$REC/$id.req"
}

# masked FILE: FILE with the deadline's value (the lease left, different
# each time) and the upstream's port written as N.
masked() {
    sed -e 's/^\(X-Deadline-Ms\|x-deadline-ms\): [0-9]*\r$/\1: N\r/' \
        -e "s/127\.0\.0\.1:$FM_PORT/127.0.0.1:N/; s/localhost:$FM_PORT/localhost:N/" "$1"
}

PX_PIDS=()
px_cleanup() {
    local p
    for p in "${PX_PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    fm_cleanup
}
trap px_cleanup EXIT

# px_start NAME [sg-proxy options...]: sets PX_PORT and PX_PID.
px_start() {
    local name=$1
    shift
    "$PX" --listen 127.0.0.1:0 "$@" >"$FM_DIR/$name.out" 2>"$FM_DIR/$name.err" &
    PX_PID=$!
    PX_PIDS+=("$PX_PID")
    PX_PORT=$(read_port "$PX_PID" "$FM_DIR/$name.out" "$FM_DIR/$name.err" "sg-proxy ($name: $*)") || exit 1
}

# px_stop_all: SIGTERM to every proxy still running.  SIGTERM alone: a
# SIGCONT (timeout(1) sends one after its signal, unless --foreground) that
# lands while a proxy built with AddressSanitizer exits can hang it for good
# - LeakSanitizer stops each thread with PTRACE_ATTACH, whose SIGSTOP a
# SIGCONT discards before the thread takes it, and then waits for a stop
# that never comes.  So no test stops a proxy by timeout(1).
px_stop_all() {
    local p
    for p in "${PX_PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
}

# fm_stat NAME: sg-fakemodel's /_stats counter NAME (received,
# rate_limited, ...).
fm_stat() {
    curl -sS -m 5 "http://127.0.0.1:$FM_PORT/_stats" | grep -o "\"$1\":[0-9]*" | cut -d: -f2
}

# px_received: the requests the model paths of sg-fakemodel received.
px_received() {
    fm_stat received
}

# px_ask URL TAG [curl options...]: POST {} to URL through a proxy; the
# answer's head in $FM_DIR/TAG.head, its body in TAG.body.
px_ask() {
    local url=$1 tag=$2
    shift 2
    curl -sN -m 20 -X POST -d '{}' -D "$FM_DIR/$tag.head" -o "$FM_DIR/$tag.body" "$@" "$url"
}

# px_header TAG NAME: the value of header NAME (any case) in TAG's head.
px_header() {
    grep -i "^$2:" "$FM_DIR/$1.head" | head -n 1 | cut -d: -f2- | tr -d ' \r'
}

# px_is_refused TAG STATUS REASON SECONDS: TAG's answer is the proxy's own
# refusal by endpoint health - STATUS, X-SG-Outcome: refused, X-SG-Reason:
# REASON, x-should-retry: true, retry-after-ms, and Retry-After SECONDS (or
# up to 2 less: the time the request took to come).
px_is_refused() {
    local tag=$1 status=$2 reason=$3 secs=$4 f=$FM_DIR/$1.head
    local got ra
    got=$(head -n 1 "$f" | cut -d' ' -f2)
    ra=$(px_header "$tag" Retry-After)
    if [ "$got" = "$status" ] && [ "$(px_header "$tag" X-SG-Outcome)" = refused ] &&
        [ "$(px_header "$tag" X-SG-Reason)" = "$reason" ] &&
        [ "$(px_header "$tag" x-should-retry)" = true ] &&
        [ -n "$(px_header "$tag" retry-after-ms)" ] &&
        [ -n "$ra" ] && [ "$ra" -le "$secs" ] && [ "$ra" -ge $((secs > 2 ? secs - 2 : 1)) ]; then
        pass "$tag: $status $reason, Retry-After $ra, answered by the proxy"
    else
        fail "$tag: wanted $status $reason Retry-After $secs; got: $(tr -d '\r' <"$f" | tr '\n' '|') $(head -c 300 "$FM_DIR/$tag.body")"
    fi
}

# px_wait_state BASE ENDPOINT STATE SECONDS: polls BASE/metrics until
# ENDPOINT's state is STATE, for up to SECONDS; the last look in
# $FM_DIR/state.metrics.
px_wait_state() {
    local i
    for i in $(seq 1 $(($4 * 20))); do
        curl -s "$1/metrics" >"$FM_DIR/state.metrics"
        grep -F "sg_proxy_upstream_state{upstream=\"$2\"" "$FM_DIR/state.metrics" |
            grep -qF "state=\"$3\"} 1" && return 0
        sleep 0.05
    done
    return 1
}

# px_refused URL TAG STATUS REASON SECONDS BODY: px_ask URL TAG is the
# proxy's own refusal (px_is_refused), its body holds BODY, and the
# upstream received nothing meanwhile (sg-fakemodel's /_stats).
px_refused() {
    local before
    before=$(px_received)
    px_ask "$1" "$2"
    px_is_refused "$2" "$3" "$4" "$5"
    has "$FM_DIR/$2.body" "$6" "$2: the body holds $6"
    [ "$(px_received)" -eq "$before" ] && pass "$2: nothing went upstream" ||
        fail "$2 reached the upstream: $(px_received) received, $before before"
}

# fm_wait_received PATTERN N: waits (up to 2 s) until sg-fakemodel has
# received N requests whose log line matches PATTERN (grep -E).
fm_wait_received() {
    for _ in $(seq 1 100); do
        [ "$(fm_log "event=received" | grep -cE "$1")" -ge "$2" ] && return 0
        sleep 0.02
    done
    return 1
}
