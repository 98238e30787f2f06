#!/usr/bin/env bash
# sg-proxy passes exactly the events the library accepted, however the
# upstream's reads fall: sg-fakemodel writes each item in two pieces
# (split_at), 60 ms apart, so that the blank line ending an event is the
# first byte of a read, or one byte per write; the client must get every
# accepted item whole as it comes, nothing the caps refused, and the
# in-band error after the last accepted one.  (Every split offset of each
# provider's recorded stream is tests/unit/proxy_relay_test.c's.)
# Usage: sg_proxy_events_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_upstream

# get PORT PATH TAG: the answer's body into TAG.body.
get() {
    curl -sN -m 15 -X POST -d '{}' -o "$FM_DIR/$3.body" "http://127.0.0.1:$1$2"
}

# toks TAG: the tokens TAG's body holds, in order, on one line.
toks() {
    grep -oE 'tok[0-9]+' "$FM_DIR/$1.body" | tr '\n' ' ' | sed 's/ $//'
}

# errtype TAG: the type of the in-band error that ends TAG's body ("" none).
errtype() {
    grep '^data: {"error":\|^data: {"type":"error"' "$FM_DIR/$1.body" | head -n 1 |
        sed 's/^data: //' | jq -r '.error.type // empty' 2>/dev/null
}

SPLIT='split_at=-1&write_gap=60'

# ---- each event's blank line 60 ms after the rest of it ------------------------
px_start cap --upstream "$UP" --profile openai --max-items 2
PCAP=$PX_PORT
get "$PCAP" "/v1/chat/completions?runaway=1&gap=150&$SPLIT&_t=ev_cap" cap
[ "$(toks cap)" = "tok0 tok1" ] && [ "$(errtype cap)" = cap_exceeded ] &&
    pass "--max-items 2, each blank line a read of its own: tok0 tok1, then cap_exceeded" ||
    fail "--max-items 2, split blank lines: tokens '$(toks cap)', error '$(errtype cap)'"

px_start idle --upstream "$UP" --profile openai --idle 400ms
get "$PX_PORT" "/v1/chat/completions?n=5&gap=150&stall_after=2&stall=forever&$SPLIT&_t=ev_idle" idle
[ "$(toks idle)" = "tok0 tok1" ] && [ "$(errtype idle)" = idle_timeout ] &&
    pass "a stall after two items split so: tok0 tok1, then idle_timeout" ||
    fail "stall after split items: tokens '$(toks idle)', error '$(errtype idle)'"

# a whole stream so split is the upstream's, byte for byte (the request id
# in each chunk aside)
px_start whole --upstream "$UP" --profile openai
curl -sN -m 15 -H 'Idempotency-Key: ev-direct' -d '{}' -o "$FM_DIR/direct.body" \
    "$UP/v1/chat/completions?n=4&gap=100&$SPLIT&_t=ev_direct"
curl -sN -m 15 -H 'Idempotency-Key: ev-whole' -d '{}' -o "$FM_DIR/whole.body" \
    "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=4&gap=100&$SPLIT&_t=ev_whole"
did=$(fm_log "key=ev-direct&event=received" | grep -o '"id":[0-9]*' | cut -d: -f2)
wid=$(fm_log "key=ev-whole&event=received" | grep -o '"id":[0-9]*' | cut -d: -f2)
sed "s/\"chatcmpl-$did\"/\"chatcmpl-$wid\"/g" "$FM_DIR/direct.body" >"$FM_DIR/direct.masked"
cmp -s "$FM_DIR/direct.masked" "$FM_DIR/whole.body" &&
    pass "a whole stream with split blank lines: byte for byte the upstream's" ||
    fail "split blank lines, whole stream: $(diff "$FM_DIR/direct.masked" "$FM_DIR/whole.body" | head -c 400)"

# each token reaches the client when its event is whole, not one item late
curl -sN -m 15 -d '{}' "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=3&gap=400&$SPLIT&_t=ev_paced" |
    while IFS= read -r line; do
        t=${EPOCHREALTIME/./}
        case $line in *tok[0-9]*) echo "$((t / 1000)) $(grep -o 'tok[0-9]' <<<"$line")" ;; esac
    done >"$FM_DIR/paced.t"
read -r t0 _ < <(sed -n 1p "$FM_DIR/paced.t")
read -r t1 _ < <(sed -n 2p "$FM_DIR/paced.t")
read -r t2 _ < <(sed -n 3p "$FM_DIR/paced.t")
gap1=$((t1 - t0))
gap2=$((t2 - t1))
[ "$gap1" -ge 300 ] && [ "$gap1" -le 500 ] && [ "$gap2" -ge 300 ] && [ "$gap2" -le 500 ] &&
    pass "items 400 ms apart, split so, reach the client ${gap1} and ${gap2} ms apart (bound 300..500)" ||
    fail "paced split items: ${gap1} and ${gap2} ms apart: $(cat "$FM_DIR/paced.t")"

# the Anthropic shape: named events, metadata held until the first token
px_start acap --upstream "$UP" --profile anthropic --max-items 2
get "$PX_PORT" "/v1/messages?runaway=1&gap=150&$SPLIT&_t=ev_acap" acap
[ "$(toks acap)" = "tok0 tok1" ] && [ "$(errtype acap)" = cap_exceeded ] &&
    grep -q '^event: message_start' "$FM_DIR/acap.body" &&
    pass "anthropic, --max-items 2, split blank lines: message_start, tok0 tok1, cap_exceeded" ||
    fail "anthropic split: tokens '$(toks acap)', error '$(errtype acap)': $(head -c 300 "$FM_DIR/acap.body")"

# ---- one byte per read -----------------------------------------------------------
ONE='bytes_per_write=1&write_gap=1'
get "$PCAP" "/v1/chat/completions?n=4&gap=5&$ONE&_t=ev_one" one
[ "$(toks one)" = "tok0 tok1" ] && [ "$(errtype one)" = cap_exceeded ] &&
    pass "--max-items 2, one byte per read: tok0 tok1, then cap_exceeded" ||
    fail "one byte per read: tokens '$(toks one)', error '$(errtype one)'"
get "$PX_PORT" "/v1/messages?n=3&gap=5&$ONE&_t=ev_aone" aone
[ "$(toks aone)" = "tok0 tok1" ] && [ "$(errtype aone)" = cap_exceeded ] &&
    pass "anthropic, --max-items 2, one byte per read: tok0 tok1, then cap_exceeded" ||
    fail "anthropic one byte per read: tokens '$(toks aone)', error '$(errtype aone)'"
px_start ollama --upstream "$UP" --profile ollama
curl -sN -m 15 -d '{}' -o "$FM_DIR/odirect.body" "$UP/api/chat?format=ollama&n=3&$ONE&_t=ev_od"
get "$PX_PORT" "/api/chat?format=ollama&n=3&$ONE&_t=ev_oone" oone
cmp -s "$FM_DIR/odirect.body" "$FM_DIR/oone.body" &&
    pass "ollama, one byte per read: byte for byte the upstream's" ||
    fail "ollama one byte per read: $(diff "$FM_DIR/odirect.body" "$FM_DIR/oone.body" | head -c 400)"

px_stop_all
fm_finish
