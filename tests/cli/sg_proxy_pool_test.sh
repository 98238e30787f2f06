#!/usr/bin/env bash
# sg-proxy's HTTP/1.x upstream connections (tools/sg-proxy/pool.h), to a
# plain http:// upstream and to a TLS one that speaks HTTP/1.1 only
# (sg-fakemodel --no-h2; its first answer goes through libcurl's one
# cache, and says HTTP/1.1): sequential requests reuse one upstream
# connection (keep-alive works through the shards); a burst of 300 streams
# at once, spread over shards of 64, all end whole; once it is over the
# proxy keeps the idle connections of shard 0 alone (at most 64, not most
# of the burst's: with one cache libcurl kept ~3/4 of them open, and every
# later request walked them), and the next requests reuse one of those.
# Usage: sg_proxy_pool_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

BURST=300
SHARD=64
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge $((4 * BURST + 256)) ] ||
    { echo "skip: the hard limit on open files is $hard"; exit 77; }
ulimit -n "$hard"
px_upstream --no-h2

# opened_by CMD...: the connections sg-fakemodel saw opened while CMD ran
# (each /_stats read opens one of its own: not counted).
opened_by() {
    local before after
    before=$(fm_stat connections_total)
    "$@" >&2
    after=$(fm_stat connections_total)
    echo $((after - before - 1))
}

# sequential URL TAG: 20 requests one after the other, each whole.
sequential() {
    local i
    for i in $(seq 1 20); do
        px_ask "$1?n=2" "$2$i" || fail "$2: request $i: curl failed"
        grep -q '\[DONE\]' "$FM_DIR/$2$i.body" || fail "$2: request $i not whole"
    done
}

# burst URL TAG: BURST streams at once, each about a second long, all
# answered 200 and whole.
burst() {
    local url=$1 tag=$2 args=() i ok whole
    for i in $(seq 1 "$BURST"); do
        args+=(-o "$FM_DIR/$tag$i.burst" "$url?n=5&gap=200")
    done
    curl -sN -m 60 -Z --parallel-max "$BURST" --parallel-immediate -X POST -d '{}' \
        -w "%{http_code}\\n" "${args[@]}" >"$FM_DIR/$tag.codes" 2>/dev/null
    ok=$(grep -c '^200$' "$FM_DIR/$tag.codes")
    whole=$(grep -l '\[DONE\]' "$FM_DIR/$tag"*.burst | wc -l)
    [ "$ok" -eq "$BURST" ] && [ "$whole" -eq "$BURST" ] &&
        pass "$tag: $BURST streams at once, all 200 and whole" ||
        fail "$tag: $BURST streams at once: $ok answered 200, $whole whole"
}

# h1 TAG FIRST [sg-proxy options...]: the checks through a fresh proxy;
# FIRST: 1 when the route's first answer goes through the multi's cache
# (a TLS route, HTTP/1.1 learned from it), with a connection of its own.
h1() {
    local tag=$1 first=$2 n open
    shift 2
    px_start "$tag" "$@" --profile openai --log /dev/null --max-connections $((BURST + 64))
    local url="http://127.0.0.1:$PX_PORT/v1/chat/completions"
    n=$(opened_by sequential "$url" "$tag-seq")
    [ "$n" -eq $((1 + first)) ] &&
        pass "$tag: 20 sequential requests, $n upstream connection(s)" ||
        fail "$tag: 20 sequential requests opened $n upstream connections, not $((1 + first))"
    burst "$url" "$tag-b"
    # the burst over: the open upstream connections come down to shard 0's
    for _ in $(seq 1 50); do
        open=$(($(fm_stat connections) - 1))
        [ "$open" -le $((SHARD + first)) ] && break
        sleep 0.1
    done
    [ "$open" -le $((SHARD + first)) ] &&
        pass "$tag: after the burst $open idle upstream connections kept (<= $SHARD + $first)" ||
        fail "$tag: after the burst $open upstream connections still open (> $SHARD + $first)"
    n=$(opened_by sequential "$url" "$tag-after")
    [ "$n" -le 0 ] && pass "$tag: then 20 sequential requests reuse a kept connection" ||
        fail "$tag: then 20 sequential requests opened $n upstream connections"
    kill -KILL "$PX_PID"
    wait "$PX_PID" 2>/dev/null
}

h1 plain 0 --upstream "$UP"
h1 tls 1 --upstream "https://localhost:$FM_PORT" --cacert "$FM_CA"

px_stop_all
fm_finish
