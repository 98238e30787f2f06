# shellcheck shell=bash
# Shared helpers for the sg-proxy tests (tests/cli/sg_proxy_test.sh,
# tests/sdk/proxy_sdk_test.sh); sourced after fakemodel_lib.sh, not run.
# PX must name the sg-proxy binary.  Each proxy listens on 127.0.0.1:0, its
# stdout (the port, then the report lines) in $FM_DIR/NAME.out; every proxy
# started is killed at exit, before the fake server's own cleanup.

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
