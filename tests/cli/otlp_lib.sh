# shellcheck shell=bash
# A test collector for the tracing tests (tests/cli/*_trace_test.sh);
# sourced after fakemodel_lib.sh, which it needs (FM_DIR, read_port, fail,
# pass).  otlp_start runs otlp_collector.py - it keeps each OTLP/HTTP
# export's body - and sets OTLP_URL, its traces endpoint; spans_of writes
# the spans received so far, one JSON line each, decoded by protoc against
# the pinned definitions (otlp_spans.py); jq reads them.
OTLP_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OTLP_PROTO=$OTLP_LIB_DIR/../../third_party/opentelemetry-proto
OTLP_PID=

otlp_cleanup() {
    if [ -n "$OTLP_PID" ]; then
        kill -KILL "$OTLP_PID" 2>/dev/null
        wait "$OTLP_PID" 2>/dev/null
    fi
}

# otlp_start: the collector, on 127.0.0.1:0; sets OTLP_URL and OTLP_PORT.
otlp_start() {
    OTLP_DIR=$FM_DIR/otlp
    mkdir -p "$OTLP_DIR"
    python3 "$OTLP_LIB_DIR/otlp_collector.py" "$OTLP_DIR" >"$FM_DIR/otlp.out" \
        2>"$FM_DIR/otlp.err" &
    OTLP_PID=$!
    OTLP_PORT=$(read_port "$OTLP_PID" "$FM_DIR/otlp.out" "$FM_DIR/otlp.err" collector) ||
        exit 1
    OTLP_URL=http://127.0.0.1:$OTLP_PORT/v1/traces
}

# otlp_reset: forget what was received.
otlp_reset() {
    rm -f "$OTLP_DIR"/*.pb
}

# spans_of FILE: the spans received, one JSON line each, into FILE.
spans_of() {
    python3 "$OTLP_LIB_DIR/otlp_spans.py" "$OTLP_DIR" "$OTLP_PROTO" >"$1"
}

# check DESCRIPTION JQ_EXPRESSION FILE: the expression, over the spans in
# FILE slurped as an array, is true.
check() {
    if jq -e -s "$2" "$3" >/dev/null; then
        pass "$1"
    else
        fail "$1: $2 is not true of $(jq -c -s '.' "$3" | head -c 1500)"
    fi
}
