#!/usr/bin/env bash
# Every sg-fakemodel scenario over one protocol, with the curl command, and
# the server's log checked for each.
#   fakemodel_scenarios.sh SERVER PROTO CLIENT    PROTO: h1 | h2c | h1tls | h2tls
# "A && B || fail ..." is meant: fail unless both hold.
# shellcheck disable=SC2015
SERVER=$1
PROTO=$2
CLIENT=$3
. "$(dirname "$0")/fakemodel_lib.sh"

fm_start "$SERVER"
case "$PROTO" in
h1) BASE=http://127.0.0.1:$FM_PORT; OPTS=(--http1.1); VER=1.1; LP=h1; TLS=false ;;
h2c) BASE=http://127.0.0.1:$FM_PORT; OPTS=(--http2-prior-knowledge); VER=2; LP=h2; TLS=false ;;
h1tls) BASE=https://localhost:$FM_PORT; OPTS=(--http1.1 --cacert "$FM_CA"); VER=1.1; LP=h1; TLS=true ;;
h2tls) BASE=https://localhost:$FM_PORT; OPTS=(--http2 --cacert "$FM_CA"); VER=2; LP=h2; TLS=true ;;
*) echo "unknown protocol $PROTO" >&2; exit 2 ;;
esac
# localhost may resolve to ::1 first; the server listens on 127.0.0.1.
OPTS+=(--resolve "localhost:$FM_PORT:127.0.0.1")
B=$FM_DIR/body
H=$FM_DIR/headers

# req KEY PATH [curl options...]: body to $B, headers to $H, sets RC and W
# (http_version time_starttransfer time_total http_code).
req() {
    local key=$1 path=$2
    shift 2
    RC=0
    rm -f "$B" "$H"
    W=$(curl -sS --no-buffer "${OPTS[@]}" -H "Idempotency-Key: $PROTO-$key" -D "$H" -o "$B" \
        -w '%{http_version} %{time_starttransfer} %{time_total} %{http_code}' "$@" \
        "$BASE$path" 2>"$FM_DIR/curl.err") || RC=$?
    # shellcheck disable=SC2086 # split on purpose
    set -- $W
    V=$1 TSTART=$2 TTOTAL=$3 CODE=$4
}
K() { echo "$PROTO-$1"; }
items() { grep -c "tok[0-9]" "$B" 2>/dev/null || true; }

# ---- normal stream, with deadline headers and a POST body
req normal '/v1/chat/completions?n=3&gap=10' -X POST -H 'Content-Type: application/json' \
    -H 'X-Deadline-Ms: 4213' -H 'grpc-timeout: 4213m' -d '{"messages":[]}'
[ "$RC" = 0 ] && [ "$CODE" = 200 ] || fail "normal: rc=$RC code=$CODE"
[ "$V" = "$VER" ] || fail "normal: http_version $V, want $VER"
[ "$(items)" = 3 ] || fail "normal: $(items) items"
grep -q '"content":"tok2"' "$B" || fail "normal: no tok2"
[ "$(tail -n 2 "$B" | head -n 1)" = "data: [DONE]" ] || fail "normal: no [DONE] at the end"
grep -qi '^content-type: text/event-stream' "$H" || fail "normal: content-type"
L=$(fm_log "key=$(K normal)&event=received")
echo "$L" | grep -q "\"proto\":\"$LP\",\"tls\":$TLS" || fail "normal: received proto/tls: $L"
echo "$L" | grep -q '"method":"POST","path":"/v1/chat/completions","query":"n=3&gap=10"' ||
    fail "normal: received method/path/query"
echo "$L" | grep -q '"x_deadline_ms":"4213","grpc_timeout":"4213m","body_bytes":15' ||
    fail "normal: deadline headers / body bytes: $L"
[ "$(fm_field "$(K normal)" finished reason)" = "done" ] || fail "normal: finished reason"
[ "$(fm_field "$(K normal)" finished items)" = 3 ] || fail "normal: finished items"
[ "$(fm_count "$(K normal)" headers_sent)" = 1 ] || fail "normal: headers_sent"
[ "$(fm_count "$(K normal)" first_item_sent)" = 1 ] || fail "normal: first_item_sent"
if [ "$LP" = h2 ]; then
    echo "$L" | grep -q '"stream_id":1' || fail "normal: h2 stream id"
fi
pass normal

# ---- slow headers
req hdelay '/stream?n=1&headers_delay=300'
[ "$RC" = 0 ] && ge "$TSTART" 0.3 || fail "headers_delay: rc=$RC starttransfer=$TSTART"
ge "$(fm_field "$(K hdelay)" headers_sent since_received_ms)" 300 || fail "headers_delay: log"
pass headers_delay

# ---- slow first item
req fdelay '/stream?n=2&gap=0&first_delay=300'
[ "$RC" = 0 ] && ge "$TTOTAL" 0.3 || fail "first_delay: rc=$RC total=$TTOTAL"
ge 100 "$(fm_field "$(K fdelay)" headers_sent since_received_ms)" || fail "first_delay: headers late"
ge "$(fm_field "$(K fdelay)" first_item_sent since_received_ms)" 300 || fail "first_delay: log"
pass first_delay

# ---- first items spread: first_jitter draws 0 .. MS more per request.
# The draw (first_due_ms) is checked, and that no item went before it: how
# late a loaded machine ran the timer is not the scenario's to bound.
lo=100000 hi=0
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    req "fjit$i" '/stream?n=1&gap=0&first_delay=50&first_jitter=100'
    [ "$RC" = 0 ] || fail "first_jitter: rc=$RC"
    due=$(fm_field "$(K "fjit$i")" first_item_sent first_due_ms)
    t=$(fm_field "$(K "fjit$i")" first_item_sent since_received_ms)
    ge "$t" "$due" || fail "first_jitter: first item at $t ms, due at $due"
    [ "$due" -lt "$lo" ] && lo=$due
    [ "$due" -gt "$hi" ] && hi=$due
done
[ "$lo" -ge 50 ] && [ "$hi" -le 150 ] && [ $((hi - lo)) -ge 20 ] ||
    fail "first_jitter: first items due from $lo to $hi ms (want 50 .. 150, spread)"
pass first_jitter

# ---- stall for a time
req stall '/stream?n=3&gap=0&stall_after=1&stall=300'
[ "$RC" = 0 ] && [ "$(items)" = 3 ] && ge "$TTOTAL" 0.3 || fail "stall: rc=$RC items=$(items)"
[ "$(fm_field "$(K stall)" stall_started items)" = 1 ] || fail "stall: stall_started"
pass stall

# ---- stall forever: the client gives up, the server logs it
req stallf '/stream?n=3&gap=0&stall_after=1&stall=forever' -m 0.5
[ "$RC" = 28 ] && [ "$(items)" = 1 ] || fail "stall forever: rc=$RC items=$(items)"
fm_wait_event "$(K stallf)" client_gone || fail "stall forever: no client_gone"
[ "$(fm_count "$(K stallf)" finished)" = 0 ] || fail "stall forever: finished?"
pass stall_forever

# ---- keepalive comments during a stall
req ka '/stream?n=2&gap=0&stall_after=1&stall=300&keepalive=50'
KA=$(grep -c '^: keepalive' "$B")
[ "$RC" = 0 ] && [ "$(items)" = 2 ] && [ "$KA" -ge 3 ] || fail "keepalive: rc=$RC ka=$KA"
pass keepalive

# ---- keepalive comments only
req kaonly '/stream?keepalive_only=1&keepalive=50' -m 0.5
KA=$(grep -c '^: keepalive' "$B")
[ "$RC" = 28 ] && [ "$KA" -ge 4 ] && [ "$(items)" = 0 ] || fail "keepalive_only: rc=$RC ka=$KA"
fm_wait_event "$(K kaonly)" client_gone || fail "keepalive_only: no client_gone"
pass keepalive_only

# ---- K items then keepalive forever
req katrickle '/stream?n=10&gap=0&stall_after=2&stall=forever&keepalive=50' -m 0.5
KA=$(grep -c '^: keepalive' "$B")
[ "$RC" = 28 ] && [ "$(items)" = 2 ] && [ "$KA" -ge 4 ] || fail "trickle: rc=$RC items=$(items) ka=$KA"
pass items_then_keepalive

# ---- runaway
req runaway '/stream?runaway=1&gap=1' -m 0.5
N=$(items)
[ "$RC" = 28 ] && [ "$N" -ge 50 ] || fail "runaway: rc=$RC items=$N"
fm_wait_event "$(K runaway)" client_gone || fail "runaway: no client_gone"
ge "$(fm_field "$(K runaway)" client_gone items)" "$N" || fail "runaway: gone items < seen"
pass runaway

# ---- abrupt close after K items
# A wide gap: curl drops DATA that arrives in the same read as RST_STREAM.
req drop '/stream?n=5&gap=100&drop_after=2'
[ "$RC" != 0 ] && [ "$(items)" = 2 ] || fail "drop: rc=$RC items=$(items)"
grep -q DONE "$B" && fail "drop: [DONE] present"
[ "$(fm_field "$(K drop)" finished reason)" = dropped ] || fail "drop: reason"
[ "$(fm_field "$(K drop)" finished items)" = 2 ] || fail "drop: items"
if [ "$LP" = h2 ]; then
    grep -q 'INTERNAL_ERROR' "$FM_DIR/curl.err" || fail "drop: h2 default should be RST_STREAM"
    req dropc '/stream?n=5&gap=100&drop_after=2&drop=close'
    [ "$RC" != 0 ] && [ "$(items)" = 2 ] || fail "drop=close: rc=$RC items=$(items)"
    [ "$(fm_field "$(K dropc)" finished reason)" = dropped ] || fail "drop=close: reason"
    req droprc '/stream?n=5&gap=100&drop_after=1&rst_code=11'
    [ "$(items)" = 1 ] && grep -q 'ENHANCE_YOUR_CALM' "$FM_DIR/curl.err" || fail "rst_code"
fi
pass drop_after

# ---- refused at once (h2: RST_STREAM(REFUSED_STREAM), which curl retries)
req refuse '/stream?refuse=1'
[ "$RC" != 0 ] && [ ! -s "$B" ] || fail "refuse: rc=$RC"
[ "$(fm_field "$(K refuse)" finished reason)" = refused ] || fail "refuse: reason"
[ "$(fm_count "$(K refuse)" headers_sent)" = 0 ] || fail "refuse: headers sent"
pass refuse

# ---- sent away at once (h2: GOAWAY below this stream, which curl 7.88
# does not retry: "(16) Error in the HTTP2 framing layer")
req goaway '/stream?goaway=1'
[ "$RC" != 0 ] && [ ! -s "$B" ] || fail "goaway: rc=$RC"
[ "$(fm_field "$(K goaway)" finished reason)" = goaway ] || fail "goaway: reason"
[ "$(fm_count "$(K goaway)" headers_sent)" = 0 ] || fail "goaway: headers sent"
if [ "$LP" = h2 ]; then
    [ "$RC" = 16 ] || fail "goaway: curl exit $RC, want 16"
fi
# with fail_first, only the first request of a key is refused or sent away
for k in refuse goaway; do
    req "${k}ff" "/stream?n=1&$k=1&fail_first=1"
    req "${k}ff" "/stream?n=1&$k=1&fail_first=1"
    [ "$RC" = 0 ] && [ "$(items)" = 1 ] || fail "$k fail_first: rc=$RC items=$(items)"
    [ "$(fm_log "key=$(K "${k}ff")&event=finished" | grep -c "\"reason\":\"done\"")" -ge 1 ] ||
        fail "$k fail_first: no request served"
done
pass goaway

# ---- clean end without [DONE]
req nodone '/stream?n=3&gap=0&no_done=1'
[ "$RC" = 0 ] && [ "$(items)" = 3 ] || fail "no_done: rc=$RC"
grep -q DONE "$B" && fail "no_done: [DONE] present"
[ "$(fm_field "$(K nodone)" finished reason)" = no_done ] || fail "no_done: reason"
pass no_done

# ---- 429 with Retry-After for the first 2 requests of a key, then success
for i in 1 2 3; do
    req retry '/v1/chat/completions?n=1&status=429&retry_after=1&fail_first=2' -X POST -d '{}'
    if [ "$i" -lt 3 ]; then
        [ "$CODE" = 429 ] || fail "status: attempt $i code $CODE"
        grep -qi '^retry-after: 1' "$H" || fail "status: attempt $i Retry-After"
        grep -q '"code":429' "$B" || fail "status: error body"
    else
        [ "$CODE" = 200 ] && [ "$(items)" = 1 ] || fail "status: attempt 3 code $CODE"
    fi
done
[ "$(fm_log "key=$(K retry)&event=finished" | grep -c '"reason":"status"')" = 2 ] ||
    fail "status: log"
req s503 '/stream?status=503&retry_after=Wed,%2021%20Oct%202015%2007:28:00%20GMT'
[ "$CODE" = 503 ] && grep -qi '^retry-after: Wed, 21 Oct 2015 07:28:00 GMT' "$H" ||
    fail "status 503 with HTTP-date"
pass status_retry_after

# ---- pass_first: the first request of a key streams, the next one gets
# the status (with retry-after-ms beside Retry-After), then streams again
Q='/v1/chat/completions?n=1&status=429&retry_after=30&retry_after_ms=1500&pass_first=1&fail_first=1'
req pass "$Q"
[ "$CODE" = 200 ] && [ "$(items)" = 1 ] || fail "pass_first: first code $CODE"
req pass "$Q"
[ "$CODE" = 429 ] && grep -qi '^retry-after: 30' "$H" && grep -qi '^retry-after-ms: 1500' "$H" ||
    fail "pass_first: second code $CODE, $(tr -d '\r' <"$H" | tr '\n' ' ')"
req pass "$Q"
[ "$CODE" = 200 ] || fail "pass_first: third code $CODE"
req msonly '/stream?status=503&retry_after_ms=250'
[ "$CODE" = 503 ] && grep -qi '^retry-after-ms: 250' "$H" && ! grep -qi '^retry-after:' "$H" ||
    fail "retry_after_ms alone"
pass pass_first_retry_after_ms

# ---- Anthropic's spend limit: error.details.error_code in the error body
req spend '/v1/messages?status=429&error_code=enforced_spend_limit_reached'
[ "$CODE" = 429 ] &&
    grep -q '"type":"rate_limit_error".*"details":{"error_code":"enforced_spend_limit_reached"}}}' "$B" ||
    fail "error_code: $CODE $(head -c 300 "$B")"
req spendbad '/stream?status=429&error_code=enforced_spend_limit_reached'
[ "$CODE" = 400 ] && grep -q 'format=anthropic' "$B" || fail "error_code on openai: $CODE"
pass error_code

# ---- accept and never answer
req hang '/stream?hang=1' -m 0.3
[ "$RC" = 28 ] && [ ! -s "$B" ] || fail "hang: rc=$RC"
fm_wait_event "$(K hang)" client_gone || fail "hang: no client_gone"
[ "$(fm_count "$(K hang)" headers_sent)" = 0 ] || fail "hang: headers were sent"
[ "$(fm_count "$(K hang)" received)" = 1 ] || fail "hang: not received"
pass hang

# ---- NDJSON
req nd '/ndjson?n=3&gap=0'
[ "$RC" = 0 ] && [ "$(items)" = 3 ] && [ "$(wc -l <"$B")" = 4 ] || fail "ndjson: rc=$RC"
[ "$(tail -n 1 "$B")" = "{\"id\":\"gen-$(fm_field "$(K nd)" received id)\",\"done\":true}" ] ||
    fail "ndjson: last line $(tail -n 1 "$B")"
grep -qi '^content-type: application/x-ndjson' "$H" || fail "ndjson: content-type"
req nd2 '/stream?format=ndjson&n=2&gap=0'
[ "$(items)" = 2 ] && ! grep -q '^data:' "$B" || fail "format=ndjson"
pass ndjson

# ---- Anthropic named events
req an '/v1/messages?n=2&gap=0'
EV=$(grep '^event:' "$B" | tr '\n' ' ')
[ "$EV" = "event: message_start event: content_block_start event: content_block_delta event: content_block_delta event: content_block_stop event: message_delta event: message_stop " ] ||
    fail "anthropic: events $EV"
req an2 '/stream?format=anthropic&n=1&no_done=1'
grep -q message_stop "$B" && fail "anthropic no_done"
req an3 '/v1/messages?n=1&first_delay=120&keepalive=40'
[ "$(grep -c '^event: ping$' "$B")" -ge 1 ] && grep -q '^data: {"type": "ping"}$' "$B" &&
    ! grep -q '^: keepalive' "$B" || fail "anthropic keepalive is event: ping"
pass anthropic

# ---- Gemini streamGenerateContent?alt=sse (the path @google/genai asks for)
GEM='/v1beta/models/sg-fakemodel:streamGenerateContent?alt=sse'
req gem "$GEM&n=2&gap=0" -X POST -H 'Content-Type: application/json' -d '{"contents":[]}'
[ "$CODE" = 200 ] && [ "$(grep -c '^data: {"candidates": \[{"content": {"parts": \[{"text": "tok[01]"}\],"role": "model"},"index": 0}\],"usageMetadata": {' "$B")" = 2 ] &&
    [ "$(grep -c '^data: ' "$B")" = 3 ] && ! grep -q 'DONE' "$B" ||
    fail "gemini: $(head -c 400 "$B")"
# the prompt: the body's 15 bytes / 4, rounded up
tail -n 2 "$B" | head -n 1 | grep -q '^data: {"candidates": \[{"content": {"parts": \[{"text": ""}\],"role": "model"},"finishReason": "STOP","index": 0}\],"usageMetadata": {"promptTokenCount": 4,"candidatesTokenCount": 2,"totalTokenCount": 6},"modelVersion": "sg-fakemodel","responseId": "gemini-[0-9]*"}$' ||
    fail "gemini: last chunk $(tail -n 2 "$B")"
grep -qi '^content-type: text/event-stream' "$H" || fail "gemini: content-type"
fm_log "key=$(K gem)&event=received" | grep -q '"method":"POST","path":"/v1beta/models/sg-fakemodel:streamGenerateContent","query":"alt=sse&n=2&gap=0"' ||
    fail "gemini: received path"
[ "$(fm_field "$(K gem)" finished reason)" = "done" ] || fail "gemini: finished reason"
req gem2 "$GEM&n=2&gap=0&no_done=1"
[ "$(grep -c '^data: ' "$B")" = 2 ] && ! grep -q finishReason "$B" || fail "gemini no_done"
[ "$(fm_field "$(K gem2)" finished reason)" = "no_done" ] || fail "gemini no_done: finished reason"
req gem3 '/stream?format=gemini&n=1&gap=0' # format= on any path
grep -q '"finishReason": "STOP"' "$B" || fail "format=gemini"
req gem4 "/v1beta/models/m:streamGenerateContent?alt=json"
[ "$CODE" = 400 ] && grep -q "'alt'" "$B" || fail "gemini alt=json is not played: $CODE"
pass gemini

# ---- OpenAI Responses API named events
req rs '/v1/responses?n=2&gap=0' -X POST -H 'Content-Type: application/json' -d '{"input":"hi"}'
EV=$(grep '^event:' "$B" | sed 's/^event: //' | tr '\n' ' ')
[ "$EV" = "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed " ] ||
    fail "responses: events $EV"
[ "$(grep -o '"sequence_number":[0-9]*}$' "$B" | tr -d '}' | cut -d: -f2 | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 8 9 " ] ||
    fail "responses: sequence numbers"
RID=$(fm_field "$(K rs)" received id)
grep -q "^data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_$RID\",\"output_index\":0,\"content_index\":0,\"delta\":\"tok1\",\"logprobs\":\[\],\"sequence_number\":5}$" "$B" &&
    grep -q '"text":"tok0tok1"' "$B" && grep -q '"status":"completed"' "$B" ||
    fail "responses: delta or final text"
grep -qi '^content-type: text/event-stream' "$H" || fail "responses: content-type"
req rs2 '/v1/responses?n=2&gap=0&no_done=1'
EV=$(grep '^event:' "$B" | tail -n 3 | sed 's/^event: //' | tr '\n' ' ')
[ "$EV" = "response.output_text.done response.content_part.done response.output_item.done " ] &&
    ! grep -q response.completed "$B" || fail "responses no_done: $EV"
req rs3 '/v1/responses?n=2&gap=0&first_delay=100'
ge "$(fm_field "$(K rs3)" first_item_sent since_received_ms)" 100 ||
    fail "responses: the first delta is the first item, after first_delay"
pass responses

# ---- usage: the scripted figures, in each format's own place
req uan '/v1/messages?cached_tokens=4&gap=0&n=2&prompt_tokens=11&reasoning_tokens=2'
U='"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":4'
grep -q "^data: {\"type\":\"message_start\",.*\"usage\":{$U,\"output_tokens\":1}}}\$" "$B" &&
    grep -q "^data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{$U,\"output_tokens\":4,\"output_tokens_details\":{\"thinking_tokens\":2}}}\$" "$B" ||
    fail "usage: anthropic $(grep usage "$B")"
req urs '/v1/responses?cached_tokens=4&gap=0&n=2&prompt_tokens=11&reasoning_tokens=2'
[ "$(grep -c '"usage":null' "$B")" = 2 ] &&
    grep '^data: {"type":"response.completed"' "$B" | grep -q '"usage":{"input_tokens":11,"input_tokens_details":{"cached_tokens":4},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":15}},"sequence_number":9}$' ||
    fail "usage: responses $(grep -o '"usage":[^]]*' "$B")"
req ugem "$GEM&cached_tokens=4&gap=0&n=2&prompt_tokens=11&reasoning_tokens=2"
[ "$(grep -o '"usageMetadata": {[^}]*}' "$B" | tr '\n' '|')" = '"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": 1,"totalTokenCount": 14,"cachedContentTokenCount": 4,"thoughtsTokenCount": 2}|"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": 2,"totalTokenCount": 15,"cachedContentTokenCount": 4,"thoughtsTokenCount": 2}|"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": 2,"totalTokenCount": 15,"cachedContentTokenCount": 4,"thoughtsTokenCount": 2}|' ] ||
    fail "usage: gemini running totals $(grep -o '"usageMetadata": {[^}]*}' "$B")"
req ugem0 "$GEM&n=0&prompt_tokens=0" # zeros are left out (proto3 JSON)
grep -q '"usageMetadata": {},"modelVersion"' "$B" || fail "usage: gemini zeros $(cat "$B")"
req uol '/api/chat?format=ollama&gap=0&n=2' -d '{"model":"m","messages":[]}'
[ "$(tail -n 1 "$B")" = '{"model":"sg-fakemodel","created_at":"2023-11-14T22:13:20Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":7,"eval_count":2}' ] ||
    fail "usage: ollama done line $(tail -n 1 "$B")"
req uol0 '/api/chat?format=ollama&n=0'
[ "$(tail -n 1 "$B")" = '{"model":"sg-fakemodel","created_at":"2023-11-14T22:13:20Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}' ] ||
    fail "usage: ollama zeros omitted $(tail -n 1 "$B")"
req und '/ndjson?n=1' -d '{"stream_options":{"include_usage":true}}'
! grep -q 'usage\|_count' "$B" || fail "usage: plain NDJSON has none"
# no final usage from a stream dropped before its end
for f in anthropic:message_delta gemini:finishReason openai-responses:response.completed \
    ollama:done_reason; do
    req "udrop-${f%%:*}" "/stream?drop_after=1&format=${f%%:*}&gap=100&n=3&prompt_tokens=11"
    [ "$RC" != 0 ] && [ "$(items)" = 1 ] && ! grep -q "${f#*:}" "$B" || fail "usage: dropped ${f%%:*}"
done
pass "usage in each format"

# ---- usage knobs that contradict each other or the format are refused
for q in 'cached_tokens=5&prompt_tokens=4:is more than prompt_tokens=4' \
    'cached_tokens=1:prompt_tokens=0 (the request body' \
    'format=ollama&cached_tokens=1:Ollama reports no cached tokens' \
    'format=ollama&reasoning_tokens=1:Ollama reports no reasoning tokens' \
    'format=ndjson&prompt_tokens=3:format=ndjson reports no usage' \
    'prompt_tokens=-1:bad value for' 'reasoning_tokens=x:bad value for'; do
    req ubad "/stream?${q%%:*}"
    [ "$CODE" = 400 ] && grep -qF "${q#*:}" "$B" || fail "usage refused (${q%%:*}): $CODE $(cat "$B")"
done
pass "usage knobs refused"

# ---- usage: OpenAI's usage chunk only when the body asks for it
ASK='{"model":"m","stream":true,"stream_options":{"include_usage":true}}'
data() { grep '^data: ' "$B" | sed 's/^data: //'; }
req usage '/v1/chat/completions?cached_tokens=4&gap=0&n=2&prompt_tokens=11&reasoning_tokens=2' \
    -H 'Content-Type: application/json' -d "$ASK"
UID_=$(fm_field "$(K usage)" received id)
[ "$(data | sed -n 1p | grep -o '"finish_reason":[a-z"]*}\],"usage":null}$')" = '"finish_reason":null}],"usage":null}' ] &&
    [ "$(data | sed -n 2p | grep -o '"finish_reason":[a-z"]*}\],"usage":null}$')" = '"finish_reason":"stop"}],"usage":null}' ] ||
    fail "usage: token chunks $(data | head -n 2)"
[ "$(data | sed -n 3p)" = "{\"id\":\"chatcmpl-$UID_\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"sg-fakemodel\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":4,\"total_tokens\":15,\"prompt_tokens_details\":{\"cached_tokens\":4,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":2,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}" ] &&
    [ "$(data | sed -n 4p)" = '[DONE]' ] && [ "$(data | wc -l)" = 4 ] || fail "usage: the usage chunk $(data | tail -n 2)"
# not asked for: no usage at all (nor "usage": null), whatever the knobs
for body in '{"model":"m","stream":true}' \
    '{"stream_options":{"include_usage":false}}' \
    '{"stream_options":{"include_usage":"true"}}' \
    '{"messages":[{"role":"user","content":"\"stream_options\":{\"include_usage\":true}"}]}' \
    '{"metadata":{"stream_options":{"include_usage":true}}}' \
    '{"stream_options":{"include_usage":true}'; do
    req unasked '/v1/chat/completions?gap=0&n=2&prompt_tokens=11' -H 'Content-Type: application/json' -d "$body"
    [ "$CODE" = 200 ] && [ "$(items)" = 2 ] && ! grep -q usage "$B" && [ "$(data | tail -n 1)" = '[DONE]' ] ||
        fail "usage not asked for ($body): $(tail -c 300 "$B")"
done
req unasked '/v1/chat/completions?gap=0&n=2' # a GET has no body
! grep -q usage "$B" || fail "usage: a GET"
# the prompt by default: the body's bytes / 4, rounded up; an empty answer
# (n=0) still has its finish, then the usage
req udefault '/v1/chat/completions?n=0' -H 'Content-Type: application/json' -d "$ASK"
P=$(((${#ASK} + 3) / 4))
data | sed -n 1p | grep -q '"choices":\[{"index":0,"delta":{},"finish_reason":"stop"}\],"usage":null}$' &&
    data | sed -n 2p | grep -q "\"usage\":{\"prompt_tokens\":$P,\"completion_tokens\":0,\"total_tokens\":$P," ||
    fail "usage: the default prompt ($P): $(data)"
# the body as HTTP/1.1 chunks: read across their framing
if [ "$LP" = h1 ]; then
    req uchunked '/v1/chat/completions?gap=0&n=1&prompt_tokens=3' -H 'Transfer-Encoding: chunked' \
        -H 'Content-Type: application/json' -d "$ASK"
    grep -q '"choices":\[\],"usage":{"prompt_tokens":3,' "$B" || fail "usage: chunked body $(data)"
fi
# no final usage from a stream that never reached its end: dropped, cut,
# stalled, slower than the client, or ended by an in-band error
req udrop '/v1/chat/completions?drop_after=2&gap=100&n=5&prompt_tokens=11' -d "$ASK"
[ "$RC" != 0 ] && [ "$(items)" = 2 ] && ! grep -q '"choices":\[\]' "$B" && ! grep -q DONE "$B" ||
    fail "usage: dropped stream rc=$RC $(tail -c 300 "$B")"
req ucut '/v1/chat/completions?cut_at=1&gap=0&n=3' -d "$ASK"
[ "$RC" = 0 ] && ! grep -q '"choices":\[\]' "$B" || fail "usage: cut stream"
req ustall '/v1/chat/completions?gap=0&n=3&stall=forever&stall_after=1' -d "$ASK" -m 0.5
[ "$RC" = 28 ] && [ "$(items)" = 1 ] && ! grep -q '"choices":\[\]' "$B" || fail "usage: stalled stream rc=$RC"
req uslow '/v1/chat/completions?first_delay=2000&n=1' -d "$ASK" -m 0.3
[ "$RC" = 28 ] && ! grep -q usage "$B" 2>/dev/null || fail "usage: first token past the client's clock rc=$RC"
req uerr '/v1/chat/completions?error_at=1&error_then_done=1&gap=0&n=3' -d "$ASK"
[ "$(data | tail -n 1)" = '[DONE]' ] && ! grep -q '"choices":\[\]' "$B" || fail "usage: after an in-band error"
pass "usage: OpenAI's usage chunk, only when asked, never after a break"

# ---- in-band errors inside a 200 stream, in each format's own shape
req err1 '/v1/chat/completions?n=5&gap=0&error_at=2'
[ "$CODE" = 200 ] && [ "$(items)" = 2 ] &&
    [ "$(tail -n 2 "$B" | head -n 1)" = 'data: {"error":{"message":"scripted failure","type":"server_error","param":null,"code":null}}' ] &&
    ! grep -q '\[DONE\]' "$B" || fail "openai in-band error: $(tail -c 200 "$B")"
req err2 '/v1/chat/completions?n=5&gap=0&error_at=0&error_then_done=1&error_type=rate_limit_error'
[ "$(items)" = 0 ] && grep -q '"type":"rate_limit_error"' "$B" &&
    [ "$(tail -n 2 "$B" | head -n 1)" = 'data: [DONE]' ] || fail "openai error then [DONE]: $(tail -c 200 "$B")"
req err3 '/v1/messages?n=5&gap=0&error_at=1'
EV=$(grep '^event:' "$B" | tr '\n' ' ')
[ "$EV" = "event: message_start event: content_block_start event: content_block_delta event: error " ] &&
    grep -q '^data: {"type":"error","error":{"type":"overloaded_error","message":"scripted failure"}}$' "$B" ||
    fail "anthropic event: error: $EV"
req err4 '/api/chat?n=3&gap=0&error_at=1'
[ "$(tail -n 1 "$B")" = '{"error":"server_error: scripted failure"}' ] && [ "$(items)" = 1 ] ||
    fail "ndjson error line: $(tail -n 1 "$B")"
req err5 "$GEM&n=3&gap=0&error_at=1&error_type=RESOURCE_EXHAUSTED"
[ "$(tail -n 2 "$B" | head -n 1)" = 'data: {"error": {"code": 429,"message": "scripted failure","status": "RESOURCE_EXHAUSTED"}}' ] &&
    [ "$(items)" = 1 ] || fail "gemini error data line: $(tail -c 200 "$B")"
req err6 "$GEM&n=3&gap=0&error_at=0&error_event=bare"
[ "$(cat "$B")" = "$(printf '{\n  "error": {\n    "code": 503,\n    "message": "scripted failure",\n    "status": "UNAVAILABLE"\n  }\n}')" ] ||
    fail "gemini bare error: $(cat "$B")"
req err7 '/v1/responses?n=3&gap=0&error_at=1'
tail -n 3 "$B" | grep -q '^event: error$' &&
    [ "$(tail -n 2 "$B" | head -n 1)" = 'data: {"type":"error","code":"server_error","message":"scripted failure","param":null,"sequence_number":5}' ] ||
    fail "responses event: error: $(tail -c 200 "$B")"
req err8 '/v1/responses?n=3&gap=0&error_at=1&error_event=response.failed&error_type=rate_limit_exceeded'
tail -n 3 "$B" | grep -q '^event: response.failed$' &&
    tail -n 2 "$B" | grep -q '"status":"failed","error":{"code":"rate_limit_exceeded","message":"scripted failure"}' ||
    fail "responses response.failed: $(tail -c 300 "$B")"
[ "$(fm_field "$(K err8)" finished reason)" = "in_band_error" ] || fail "response.failed: finished reason"
pass "in-band errors"

# ---- OpenAI's role-only first chunk, then a slow first token
req role '/v1/chat/completions?n=2&gap=0&role_chunk=1&first_delay=100'
head -n 1 "$B" | grep -q '"choices":\[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}\]}$' ||
    fail "role chunk: $(head -c 300 "$B")"
[ "$(items)" = 2 ] || fail "role chunk: $(items) token items"
pass "role chunk"

# ---- very large events and lines
req big '/stream?n=2&gap=0&event_bytes=200000'
SZ=$(wc -c <"$B")
[ "$RC" = 0 ] && [ "$SZ" -ge 400000 ] && [ "$(grep -c '^data: }' "$B")" = 2 ] || fail "event_bytes: size $SZ"
req long '/stream?n=2&gap=0&line_bytes=100000'
LONGEST=$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$B")
[ "$RC" = 0 ] && [ "$LONGEST" = 100000 ] || fail "line_bytes: longest $LONGEST"
req ndlong '/ndjson?n=1&line_bytes=70000'
LONGEST=$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$B")
[ "$LONGEST" = 70000 ] || fail "ndjson line_bytes: longest $LONGEST"
pass large_events

# ---- events split across writes
req split '/stream?n=2&gap=0&bytes_per_write=7&write_gap=1'
[ "$RC" = 0 ] && [ "$(items)" = 2 ] && grep -q '^data: \[DONE\]' "$B" || fail "split: rc=$RC"
ge "$TTOTAL" 0.05 || fail "split: too fast ($TTOTAL s) to have been split"
pass bytes_per_write
# each item in two writes, its last byte (the blank line) 60 ms after the rest
req splitat '/stream?n=2&gap=0&split_at=-1&write_gap=60'
[ "$RC" = 0 ] && [ "$(items)" = 2 ] && grep -q '^data: \[DONE\]' "$B" || fail "split_at: rc=$RC"
ge "$TTOTAL" 0.12 || fail "split_at: too fast ($TTOTAL s) for two items' rests 60 ms late"
req splitboth '/stream?split_at=3&bytes_per_write=2'
[ "$CODE" = 400 ] || fail "split_at with bytes_per_write: $CODE, not 400"
pass split_at

# ---- scenario in a header, unknown knobs, unknown paths
req hdr '/v1/chat/completions' -H 'X-SG-Scenario: n=4&gap=0'
[ "$(items)" = 4 ] || fail "X-SG-Scenario header"
req typo '/stream?stal_after=1'
[ "$CODE" = 400 ] && grep -q stal_after "$B" || fail "typo: code $CODE"
req nope '/nope'
[ "$CODE" = 404 ] || fail "404: $CODE"
pass routing

# ---- RST_STREAM from the client is logged with its error code (h2c only)
if [ "$PROTO" = h2c ]; then
    "$CLIENT" rst "$FM_PORT" '/stream?n=100&gap=20' "$(K rst)" >/dev/null || fail "rst client"
    fm_wait_event "$(K rst)" client_gone || fail "rst: no client_gone"
    L=$(fm_log "key=$(K rst)&event=client_gone")
    echo "$L" | grep -q '"reason":"rst_stream"' && echo "$L" | grep -q '"h2_error_code":8,"h2_error":"CANCEL"' ||
        fail "rst: $L"
    pass rst_stream
fi

# ---- the log itself: filters, no self-logging, reset
L=$(fm_log "key=$(K normal)")
[ "$(echo "$L" | grep -c '"event":')" = 4 ] || fail "log: key filter"
fm_log "" | grep -q '"path":"/_log' && fail "log: /_log logged itself"
SEQ=$(fm_log "limit=1" | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p')
[ "$(fm_log "since=$SEQ&limit=1" | grep -c '"event":')" = 1 ] || fail "log: since"
curl -sS "${OPTS[@]}" -X POST "$BASE/_log/reset" | grep -q '"ok":true' || fail "log reset"
[ "$(fm_log "" | sed -n 's/.*"count":\([0-9]*\).*/\1/p')" = 0 ] || fail "log: not empty after reset"
fm_log "bogus=1" >/dev/null
pass log

fm_finish
