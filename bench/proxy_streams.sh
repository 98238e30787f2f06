#!/usr/bin/env bash
# Many streams on one sg-proxy process: over HTTP/1.1 to sg-fakemodel, and
# over HTTP/2 to it on TLS.
#
#   [PHASES="memory whole stall"] bench/proxy_streams.sh SG_PROXY SG_FAKEMODEL \
#       [N_H1] [N_H2] [STALLED]
#
# For each upstream (N_H1 streams over HTTP/1.1, default 10000; N_H2 over
# h2 on TLS, default 10000), each time a fresh sg-proxy (--profile openai):
#   memory: N streams open at once, each quiet after its first token
#           (bench/proxy_memory.py, one burst): RSS per open stream;
#   whole:  N streams at once, each 10 tokens 200 ms apart
#           (bench/proxy_streams.py): how many ended whole, the proxy's CPU
#           per token and per stream, its peak RSS;
#   stall:  N streams under --idle 1s, of which STALLED (default 1000)
#           stall together after STALL_AFTER tokens (default 3, 10 ms
#           apart: 30 ms after they open, so the opening of all of them
#           is in the measure; 40 stalls them 400 ms later, after they
#           streamed together): how late each in-band
#           idle_timeout came after the idle clock's deadline (p50, p99,
#           max): as the client saw it (after its last token; stamped by
#           its loop, and by the kernel's receive stamps: "rx"), and from
#           the upstream's side (sg-fakemodel's stall start + the idle
#           clock): when the client was told, and when sg-fakemodel saw
#           the stream end.  The other N - STALLED are opened first and
#           stream on beside them (BG_QUERY, default 60 tokens 500 ms
#           apart; "bg_whole": how many of them ended whole).
# PHASES (default all three) names the measures to run.
# MEM_QUIET=S: the memory phase reads the proxy's memory again S seconds
# after every stream opened (the streams quiet since their first token).
# Over HTTP/1.1 each stream holds two descriptors in the proxy: N_H1 needs
# a hard limit on open files above 2 N_H1 + 64 (10,000: 20,064).  The
# script raises its hard limit to 2 N + 256 when it can (as root, or where
# the hard limit allows), else says so and runs what fits.
set -u
PX=$1
FM=$2
N_H1=${3:-10000}
N_H2=${4:-10000}
STALLED=${5:-1000}
PHASES=${PHASES:-memory whole stall}
MEM_QUIET=${MEM_QUIET:-0} # memory: read it again this many seconds later, all quiet
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/proxy_lib.sh" sg-proxy-streams
BG_QUERY=${BG_QUERY:-n=60&gap=500}
STALL_AFTER=${STALL_AFTER:-3} # stall: tokens before the stall, at most 49
BG_TOKENS=${BG_QUERY#n=}
BG_TOKENS=${BG_TOKENS%%&*}
need=$((2 * N_H1 > N_H2 ? 2 * N_H1 + 256 : N_H2 + 256))
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt "$need" ]; then
    ulimit -Hn "$need" 2>/dev/null ||
        echo "note: hard limit on open files $(ulimit -Hn), $need wanted: HTTP/1.1 streams past $((($(ulimit -Hn) - 64) / 2)) fail" >&2
fi
ulimit -n "$(ulimit -Hn)"
echo "open files: hard limit $(ulimit -Hn); load average $(cut -d' ' -f1-3 /proc/loadavg)"

"$FM" --port 0 --quiet --write-ca "$DIR/ca.pem" >"$DIR/fm.out" 2>"$DIR/fm.err" &
PIDS+=($!)
FM_PORT=$(port_of "$!" "$DIR/fm.out")
[ -n "$FM_PORT" ] || { echo "sg-fakemodel did not start" >&2; exit 2; }

# proxy NAME UPSTREAM N [ARGS...]: a fresh sg-proxy; PX_PORT, PX_PID.
proxy() {
    local name=$1 up=$2 n=$3
    shift 3
    "$PX" --listen 127.0.0.1:0 --upstream "$up" --profile openai --budget 10m \
        --max-connections $((n + 64)) --log /dev/null "$@" >"$DIR/$name.out" 2>"$DIR/$name.err" &
    PX_PID=$!
    PIDS+=("$PX_PID")
    PX_PORT=$(port_of "$PX_PID" "$DIR/$name.out")
    [ -n "$PX_PORT" ] || { echo "sg-proxy ($name) did not start" >&2; cat "$DIR/$name.err" >&2; exit 2; }
}
stop() {
    kill -KILL "$PX_PID"
    wait "$PX_PID" 2>/dev/null
    sleep 2 # the upstream's side of the closed connections goes too
}

run() { # LABEL UPSTREAM N [sg-proxy ARGS...]
    local label=$1 up=$2 n=$3
    shift 3
    if [[ " $PHASES " == *" memory "* ]]; then
        proxy "$label-mem" "$up" "$n" "$@"
        python3 "$HERE/proxy_memory.py" --port "$PX_PORT" --pid "$PX_PID" -n "$n" \
            --bursts 1 --settle 3 --quiet "$MEM_QUIET" | sed "s/^/$label memory: /"
        stop
    fi
    if [[ " $PHASES " == *" whole "* ]]; then
        proxy "$label" "$up" "$n" "$@"
        python3 "$HERE/proxy_streams.py" --port "$PX_PORT" --pid "$PX_PID" -n "$n" \
            --query "n=10&gap=200" --tokens 10 | sed "s/^/$label whole: /"
        stop
    fi
    if [[ " $PHASES " == *" stall "* ]]; then
        local bg=$((n > STALLED ? n - STALLED : 0))
        # no breaker: the stalls (and any stream the machine's load holds
        # past the idle clock) are failures that would open it, and later
        # requests would wait for it rather than measure the clock
        proxy "$label-stall" "$up" "$((bg + STALLED))" --idle 1s --breaker-failures 0 "$@"
        python3 "$HERE/proxy_streams.py" --port "$PX_PORT" --pid "$PX_PID" -n "$STALLED" \
            --query "n=50&gap=10&stall_after=$STALL_AFTER&stall=forever" --tokens 50 --idle-ms 1000 \
            --background "$bg" --bg-query "$BG_QUERY" --bg-tokens "$BG_TOKENS" \
            --fm-port "$FM_PORT" | sed "s/^/$label stall: /"
        stop
    fi
}

[ "$N_H1" -eq 0 ] || run http1 "http://127.0.0.1:$FM_PORT" "$N_H1"
[ "$N_H2" -eq 0 ] || run h2-tls "https://localhost:$FM_PORT" "$N_H2" --cacert "$DIR/ca.pem"
