#!/usr/bin/env bash
# An HTTP/2 stream that sg-proxy stops mid-way ends upstream at once, even
# while another stream on its connection stays quiet.
#
# libcurl 7.88 keeps the RST_STREAM of a removed HTTP/2 transfer in its
# connection's output buffer until the connection's next read or write.
# Here one stream (L) holds the connection open and quiet: its first token
# comes only after QUIET_S seconds.  Three streams (S1-S3) then go on the
# same connection, each stalling after one token under --idle 1s.  Once
# every S client holds its idle_timeout, sg-fakemodel must see every S
# stream end (client_gone) within 3 s - long before L's first token, the
# connection's next I/O - and L must still be open.
# Usage: sg_proxy_rst_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream
px_upstream
QUIET_S=20

px_start rst --upstream "https://localhost:$FM_PORT" --cacert "$FM_CA" --profile openai \
    --idle 1s --log /dev/null
URL=http://127.0.0.1:$PX_PORT/v1/chat/completions
curl -sN -m 60 -X POST -d '{"model":"m","stream":true}' -o "$FM_DIR/L.body" \
    "$URL?n=2&gap=10&first_delay=$((QUIET_S * 1000))&_t=L" &
L_PID=$!
# L's connection is up and its request went: the others share it
for _ in $(seq 1 200); do
    [ -n "$(rid L)" ] && break
    sleep 0.05
done
[ -n "$(rid L)" ] || fail "the quiet stream never reached sg-fakemodel"
S_PIDS=()
for i in 1 2 3; do
    curl -sN -m 30 -X POST -d '{"model":"m","stream":true}' -o "$FM_DIR/S$i.body" \
        "$URL?n=5&gap=10&stall_after=1&stall=forever&_t=S$i" &
    S_PIDS+=($!)
done
for p in "${S_PIDS[@]}"; do
    wait "$p"
done
told=$(cat "$FM_DIR"/S?.body | grep -c '"code":"idle_timeout"')
[ "$told" -eq 3 ] && pass "3 stalled clients told idle_timeout" ||
    fail "$told of 3 stalled clients told idle_timeout"

# every stalled stream's end seen upstream within 3 s of the last client
# being told; the quiet stream is still open (no I/O on the connection)
gone=0
for _ in $(seq 1 60); do
    gone=0
    for i in 1 2 3; do
        id=$(rid "S$i")
        [ -n "$id" ] && fm_log "event=client_gone" | grep -q "\"id\":$id[,}]" && gone=$((gone + 1))
    done
    [ "$gone" -eq 3 ] && break
    sleep 0.05
done
[ "$gone" -eq 3 ] && pass "sg-fakemodel saw the 3 stalled streams end at once" ||
    fail "sg-fakemodel saw $gone of 3 stalled streams end within 3 s (the RST_STREAM waits for the connection's next I/O)"
l_id=$(rid L)
if fm_log "event=client_gone" | grep -q "\"id\":$l_id[,}]" || ! kill -0 "$L_PID" 2>/dev/null; then
    fail "the quiet stream ended meanwhile: the check proved nothing"
else
    pass "the quiet stream on the same connection is still open"
fi
kill "$L_PID" 2>/dev/null
wait "$L_PID" 2>/dev/null
fm_finish
