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

# px_stop_all: SIGTERM to every proxy still running.
px_stop_all() {
    local p
    for p in "${PX_PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
}
