#!/usr/bin/env bash
# Many clients at once: 1,000 concurrent HTTP/1.1 connections, 1,000
# concurrent HTTP/2 streams on one connection (h2load), and slow readers that
# must neither block others nor grow the server's memory.
#   fakemodel_concurrency.sh SERVER CLIENT [H2LOAD]
# "A && B || fail ..." is meant: fail unless both hold.
# shellcheck disable=SC2015
SERVER=$1
CLIENT=$2
H2LOAD=${3:-}
. "$(dirname "$0")/fakemodel_lib.sh"

fm_start "$SERVER"
U=http://127.0.0.1:$FM_PORT

# Each stream lasts >= 300 ms, so all 1,000 are open at the same time.
"$CLIENT" conc "$FM_PORT" 1000 '/stream?n=4&gap=100' || fail "1000 connections"
pass conc_h1

if [ -n "$H2LOAD" ] && [ -x "$H2LOAD" ]; then
    OUT=$("$H2LOAD" -n 1000 -c 1 -m 1000 "$U/stream?n=4&gap=100" 2>&1)
    echo "$OUT" | grep -E '^(finished|requests|status codes)'
    echo "$OUT" | grep -q '1000 succeeded' || fail "h2load h2c 1000 streams"
    OUT=$("$H2LOAD" -n 1000 -c 10 -m 100 "https://127.0.0.1:$FM_PORT/stream?n=2&gap=10" 2>&1)
    echo "$OUT" | grep -E '^(finished|requests)'
    echo "$OUT" | grep -q '1000 succeeded' || fail "h2load TLS"
    # Many streams writing at once with no pacing: the server must keep
    # serialising frames after a write that emptied its buffer.
    OUT=$(timeout 30 "$H2LOAD" -n 1000 -c 1 -m 1000 "$U/v1/chat/completions?n=100&gap=0" 2>&1)
    echo "$OUT" | grep -E '^(finished|requests)'
    echo "$OUT" | grep -q '1000 succeeded' || fail "h2load 1000 unpaced streams"
    pass conc_h2
else
    echo "h2load not found: HTTP/2 concurrency skipped"
fi

# ---- slow readers: 20 runaway streams nobody reads
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$FM_PID/status"; }
R0=$(rss)
"$CLIENT" hold "$FM_PORT" 20 '/stream?runaway=1&gap=0' 2000 >/dev/null &
HOLD=$!
sleep 0.5
T=$(curl -sS -m 5 -o "$FM_DIR/b" -w '%{time_total}' "$U/stream?n=5&gap=10")
grep -q '\[DONE\]' "$FM_DIR/b" || fail "a normal stream beside slow readers did not finish"
ge 0.5 "$T" || fail "a normal stream took $T s beside slow readers"
sleep 0.5
R1=$(rss)
wait "$HOLD"
GROWTH=$(((R1 - R0) / 1024))
echo "RSS before ${R0} kB, with 20 stuck runaway streams ${R1} kB (+${GROWTH} MB)"
[ "$GROWTH" -lt 64 ] || fail "memory grew by $GROWTH MB with 20 slow readers"
for _ in $(seq 1 60); do
    GONE=$(fm_log "event=client_gone" | grep -c '"event":"client_gone"')
    [ "$GONE" -ge 20 ] && break
    sleep 0.05
done
[ "$GONE" -ge 20 ] || fail "slow readers' client_gone: $GONE"
pass slow_readers

# Everything went away again (the _stats request itself is the one left).
for _ in $(seq 1 60); do
    curl -sS "$U/_stats" | grep -q '"exchanges":1,' && break
    sleep 0.05
done
curl -sS "$U/_stats" | grep -q '"exchanges":1,' || fail "exchanges left: $(curl -sS "$U/_stats")"
fm_finish
