#!/usr/bin/env bash
# How many upstream connections sg-proxy opens for a burst of h2 streams
# to sg-fakemodel on TLS (ALPN h2), and the proxy's RSS per open stream.
#
#   bench/proxy_h2_conns.sh SG_PROXY SG_FAKEMODEL [N] [RUNS] [FM_ARGS...]
#
# Each run: a fresh sg-fakemodel (FM_ARGS, e.g. --h2-max-streams 40) and
# a fresh sg-proxy (--profile openai); N streams (default 1000) opened at
# once by bench/proxy_memory.py, each quiet after its first token; then
# the connections sg-fakemodel saw opened (/_stats connections_total, less
# the probe's own).  RUNS default 3.
set -u
PX=$1
FM=$2
N=${3:-1000}
RUNS=${4:-3}
shift $(($# < 4 ? $# : 4))
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/proxy_lib.sh" sg-proxy-h2-conns
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge $((N + 256)) ] ||
    echo "note: hard limit on open files $(ulimit -Hn), $((N + 256)) wanted" >&2
ulimit -n "$(ulimit -Hn)"
for r in $(seq 1 "$RUNS"); do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    "$FM" --port 0 --quiet --write-ca "$DIR/ca.pem" "$@" >"$DIR/fm.out" 2>"$DIR/fm.err" &
    fm=$!
    PIDS+=("$fm")
    fm_port=$(port_of "$fm" "$DIR/fm.out")
    "$PX" --listen 127.0.0.1:0 --upstream "https://localhost:$fm_port" --cacert "$DIR/ca.pem" \
        --profile openai --log /dev/null --max-connections $((N + 64)) \
        >"$DIR/px.out" 2>"$DIR/px.err" &
    px=$!
    PIDS+=("$px")
    px_port=$(port_of "$px" "$DIR/px.out")
    rss=$(python3 "$HERE/proxy_memory.py" --port "$px_port" --pid "$px" -n "$N" --bursts 1 \
        --settle 0.5 | grep -o 'open=[0-9/]* .*per_stream_RSS_kib=[0-9.]*' |
        sed 's/ secs.*VmRSS_kib=[0-9]*//')
    total=$(curl -sS -m 5 "http://127.0.0.1:$fm_port/_stats" | grep -o '"connections_total":[0-9]*' |
        cut -d: -f2)
    echo "run $r: N=$N upstream_connections=$((total - 1)) $rss load=$load"
    kill -KILL "$px" "$fm"
    wait "$px" "$fm" 2>/dev/null
done
