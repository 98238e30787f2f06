#!/usr/bin/env bash
# sg-proxy's upstream connections to an HTTP/2 upstream on TLS (ALPN h2).
# A burst of 300 streams at once, every one answered 200 and whole:
# - to a server that takes 10,000 streams a connection (sg-fakemodel's
#   default SETTINGS_MAX_CONCURRENT_STREAMS) they share one connection,
#   at most ceil(300 / 10,000) + 1 - not one TLS connection (handshake,
#   OpenSSL buffers, nghttp2 session) per few streams: with libcurl's own
#   cap of 100 streams a connection the burst opened 30-201, each waiting
#   transfer past the first 100 opening one of its own;
# - to a server that takes 40 a connection, what libcurl 7.88 does: past
#   the first connection's 40 each waiting transfer may open one, since a
#   connection being made is not yet offered for reuse - at most one per
#   stream past the first 40 (docs/sg-proxy.md, "Upstream connections");
# - and no connection carries more than a shard's 500 streams
#   (tools/sg-proxy/pool.h, POOL_H2_SHARD_STREAMS): libcurl 7.88 runs every
#   transfer of a connection at each of its reads, so 10,000 streams on one
#   held the loop 10-20 ms a read.  600 streams at once to the server that
#   takes 10,000 open a second connection beside the first (before: all
#   600 on one).
# Usage: sg_proxy_h2_pool_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

BURST=300
SHARD=500 # POOL_H2_SHARD_STREAMS
BIG=$((SHARD + 100))
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge $((2 * BIG + 256)) ] ||
    { echo "skip: the hard limit on open files is $hard"; exit 77; }
ulimit -n "$hard"

# burst TAG MOST [LEAST [N]]: N (default BURST) streams at once through a
# fresh proxy, each about a second long: all 200 and whole, on at most
# MOST upstream connections and at least LEAST (default 1).
# One request goes first and ends: until a connection has read the
# server's SETTINGS, libcurl 7.88 takes it for 100 streams, so a burst on
# a cold proxy may still open more (docs/sg-proxy.md, "Upstream
# connections"); this checks the steady state, the connection warm.
burst() {
    local tag=$1 most=$2 least=${3:-1} n=${4:-$BURST} args=() i ok whole before opened
    px_start "$tag" --upstream "https://localhost:$FM_PORT" --cacert "$FM_CA" \
        --profile openai --log /dev/null --max-connections $((n + 64))
    local url="http://127.0.0.1:$PX_PORT/v1/chat/completions"
    for i in $(seq 1 "$n"); do
        args+=(-o "$FM_DIR/$tag$i.burst" "$url?n=5&gap=200")
    done
    before=$(fm_stat connections_total)
    curl -sN -m 10 -o "$FM_DIR/$tag.warm" -X POST -d '{}' "$url?n=1" ||
        fail "$tag: the first request failed"
    # curl runs 300 at most in parallel: one curl per 300 (-o FILE URL: 3 words a stream)
    local pids=()
    for ((i = 0; i < n; i += 300)); do
        curl -sN -m 60 -Z --parallel-max 300 --parallel-immediate -X POST -d '{}' \
            -w "%{http_code}\\n" "${args[@]:3*i:900}" >"$FM_DIR/$tag.codes.$i" 2>/dev/null &
        pids+=($!)
    done
    wait "${pids[@]}"
    cat "$FM_DIR/$tag.codes."* >"$FM_DIR/$tag.codes"
    # each /_stats read opens a connection of its own: not counted
    opened=$(($(fm_stat connections_total) - before - 1))
    ok=$(grep -c '^200$' "$FM_DIR/$tag.codes")
    whole=$(grep -l '\[DONE\]' "$FM_DIR/$tag"*.burst | wc -l)
    [ "$ok" -eq "$n" ] && [ "$whole" -eq "$n" ] &&
        pass "$tag: $n streams at once, all 200 and whole" ||
        fail "$tag: $n streams at once: $ok answered 200, $whole whole"
    [ "$opened" -ge "$least" ] && [ "$opened" -le "$most" ] &&
        pass "$tag: $n h2 streams on $opened upstream connection(s) ($least-$most)" ||
        fail "$tag: $n h2 streams opened $opened upstream connections (not $least-$most)"
    kill -KILL "$PX_PID"
    wait "$PX_PID" 2>/dev/null
}

px_upstream # SETTINGS_MAX_CONCURRENT_STREAMS 10000
burst h2 $(((BURST + 9999) / 10000 + 1))
# past a shard: its own connection (the warm one is shard 0's)
burst h2-shards $(((BIG + SHARD - 1) / SHARD + 1)) $(((BIG + SHARD - 1) / SHARD)) "$BIG"
fm_stop
px_upstream --h2-max-streams 40
burst h2-40 $((BURST - 40 + 1))

px_stop_all
fm_finish
