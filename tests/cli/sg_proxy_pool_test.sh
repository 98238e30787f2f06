#!/usr/bin/env bash
# sg-proxy's plain HTTP/1.1 upstream connections (tools/sg-proxy/pool.h):
# sequential requests reuse one upstream connection (keep-alive works
# through the shards); a burst of 300 streams at once, spread over shards
# of 64, all end whole; once it is over the proxy keeps the idle
# connections of shard 0 alone (at most 64, not most of the burst's: with
# one cache libcurl kept ~3/4 of them open, and every later request walked
# them), and the next requests reuse one of those.
# Usage: sg_proxy_pool_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

BURST=300
SHARD=64
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge $((3 * BURST + 256)) ] ||
    { echo "skip: the hard limit on open files is $hard"; exit 77; }
ulimit -n "$hard"
px_upstream
px_start pool --upstream "$UP" --profile openai --log /dev/null \
    --max-connections $((BURST + 64))
URL="http://127.0.0.1:$PX_PORT/v1/chat/completions"

# opened_by CMD...: the upstream connections opened while CMD ran (each
# /_stats read opens one of its own: not counted).
opened_by() {
    local before after
    before=$(fm_stat connections_total)
    "$@"
    after=$(fm_stat connections_total)
    echo $((after - before - 1))
}

sequential() {
    local i
    for i in $(seq 1 20); do
        px_ask "$URL?n=2" "seq$i" || fail "request $i: curl failed"
        grep -q '\[DONE\]' "$FM_DIR/seq$i.body" || fail "request $i not whole"
    done
}
n=$(opened_by sequential)
[ "$n" -eq 1 ] && pass "20 sequential requests, 1 upstream connection" ||
    fail "20 sequential requests opened $n upstream connections, not 1"

# BURST streams at once, each about a second long
args=()
for i in $(seq 1 "$BURST"); do
    args+=(-o "$FM_DIR/b$i.burst" "$URL?n=5&gap=200")
done
curl -sN -m 60 -Z --parallel-max "$BURST" --parallel-immediate -X POST -d '{}' \
    -w "%{http_code}\\n" "${args[@]}" >"$FM_DIR/burst.codes" 2>/dev/null
ok=$(grep -c '^200$' "$FM_DIR/burst.codes")
[ "$ok" -eq "$BURST" ] && pass "$BURST streams at once: all 200" ||
    fail "$BURST streams at once: $ok answered 200"
whole=$(grep -l '\[DONE\]' "$FM_DIR"/*.burst | wc -l)
[ "$whole" -eq "$BURST" ] && pass "all $BURST whole" || fail "$whole of $BURST whole"

# the burst over: the open upstream connections come down to shard 0's
open=0
for _ in $(seq 1 50); do
    open=$(($(fm_stat connections) - 1))
    [ "$open" -le "$SHARD" ] && break
    sleep 0.1
done
[ "$open" -le "$SHARD" ] && pass "after the burst $open idle upstream connections kept (<= $SHARD)" ||
    fail "after the burst $open upstream connections still open (> $SHARD)"

n=$(opened_by sequential)
[ "$n" -le 0 ] && pass "after the burst, 20 sequential requests reuse a kept connection" ||
    fail "after the burst, 20 sequential requests opened $n upstream connections"

px_stop_all
fm_finish
