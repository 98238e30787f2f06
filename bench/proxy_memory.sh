#!/usr/bin/env bash
# sg-proxy's memory per open stream, and after bursts of streams; nginx
# beside it on the same upstream.
#
#   bench/proxy_memory.sh SG_PROXY SG_FAKEMODEL [N] [BURSTS] [VMEM_KIB]
#
# Starts sg-fakemodel (every stream sends one token, then stalls: open and
# quiet, as a model thinking) and sg-proxy in front of it (--profile
# openai), opens N streams at once through the proxy (default 1000),
# reads the proxy's VmSize and VmRSS with all of them open, closes them,
# and reads them again; BURSTS times (default 3).  With VMEM_KIB the proxy
# runs under `ulimit -v VMEM_KIB` (its address space limit).  Then the same
# through nginx (bench/nginx/proxy.conf: proxy_buffering off, unprivileged
# on loopback; its one worker measured), a fresh process, unless NGINX is
# set empty (NGINX=path: that binary; default: nginx when on the PATH).
# QUIET=S also reads both S seconds after every stream opened (all quiet).
# Each proxy gets one request (GET /, a 404 from upstream) before its
# baseline is read.
# Prints the lines of bench/proxy_memory.py, each after its proxy's name;
# exits 0 when every stream opened.
set -u
PX=$1
FM=$2
N=${3:-1000}
BURSTS=${4:-3}
VMEM=${5:-}
NGINX=${NGINX-$(command -v nginx || true)}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/proxy_lib.sh" sg-proxy-memory
# every stream holds a client socket and an upstream one in the proxy
ulimit -n $((4 * N + 256)) 2>/dev/null || ulimit -n "$(ulimit -Hn)"

start_fakemodel "$FM"

# measure NAME PORT PID: the bursts through one proxy.
measure() {
    python3 "$HERE/proxy_memory.py" --port "$2" --pid "$3" -n "$N" --bursts "$BURSTS" \
        --quiet "${QUIET:-0}" |
        sed "s/^/$1: /" | tee -a "$DIR/result"
}

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
# one request before the baseline, as nginx gets one (start_nginx's
# readiness probe): what a process's first request touches once (code
# pages, libcurl's and the library's first tables) is no stream's
curl -s -o /dev/null "http://127.0.0.1:$PX_PORT/"
measure sg-proxy "$PX_PORT" "$PX_PID"
kill -KILL "$PX_PID"
wait "$PX_PID" 2>/dev/null

if [ -n "$NGINX" ]; then
    start_nginx "$NGINX"
    measure nginx "$NGX_PORT" "$NGX_PID"
fi
[ "$(grep -c 'open_all=yes' "$DIR/result")" -eq "$(grep -c 'open_all=' "$DIR/result")" ]
