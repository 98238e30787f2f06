#!/usr/bin/env bash
# sg-proxy's memory per open stream, and after bursts of streams.
#
#   bench/proxy_memory.sh SG_PROXY SG_FAKEMODEL [N] [BURSTS] [VMEM_KIB]
#
# Starts sg-fakemodel (every stream sends one token, then stalls: open and
# quiet, as a model thinking) and sg-proxy in front of it (--profile
# openai), opens N streams at once through the proxy (default 1000),
# reads the proxy's VmSize and VmRSS with all of them open, closes them,
# and reads them again; BURSTS times (default 3).  With VMEM_KIB the proxy
# runs under `ulimit -v VMEM_KIB` (its address space limit).  Prints the
# lines of bench/proxy_memory.py; exits 0 when every stream opened.
set -u
PX=$1
FM=$2
N=${3:-1000}
BURSTS=${4:-3}
VMEM=${5:-}
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=$(mktemp -d "${TMPDIR:-/tmp}/sg-proxy-memory.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    rm -rf "$DIR"
}
trap cleanup EXIT
# every stream holds a client socket and an upstream one in the proxy
ulimit -n $((4 * N + 256)) 2>/dev/null || ulimit -n "$(ulimit -Hn)"

port_of() { # PID FILE: the port a server prints alone on its first line
    for _ in $(seq 1 200); do
        [ -s "$2" ] && head -n 1 "$2" | grep -qx '[0-9]*' && break
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    head -n 1 "$2"
}

"$FM" --port 0 --quiet >"$DIR/fm.out" 2>"$DIR/fm.err" &
PIDS+=($!)
FM_PORT=$(port_of "$!" "$DIR/fm.out")
[ -n "$FM_PORT" ] || { echo "sg-fakemodel did not start" >&2; cat "$DIR/fm.err" >&2; exit 2; }

(
    [ -z "$VMEM" ] || ulimit -v "$VMEM"
    exec "$PX" --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$FM_PORT" \
        --profile openai --max-connections $((N + 64)) --budget 10m \
        --log /dev/null
) >"$DIR/px.out" 2>"$DIR/px.err" &
PX_PID=$!
PIDS+=("$PX_PID")
PX_PORT=$(port_of "$PX_PID" "$DIR/px.out")
[ -n "$PX_PORT" ] || { echo "sg-proxy did not start" >&2; cat "$DIR/px.err" >&2; exit 2; }

python3 "$HERE/proxy_memory.py" --port "$PX_PORT" --pid "$PX_PID" -n "$N" \
    --bursts "$BURSTS" | tee "$DIR/result"
grep -q '^open_all=yes' "$DIR/result"
