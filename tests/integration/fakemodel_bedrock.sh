#!/usr/bin/env bash
# sg-fakemodel's Bedrock streams over one protocol: curl saves each binary
# body, and eventstream_decode.py - an independent reader (Python's struct
# and zlib.crc32, nothing shared with the server) - checks the AWS
# event-stream framing, every CRC, the events and their JSON; the damaged
# variants must be damaged exactly where scripted, and the server's log must
# agree.
#   fakemodel_bedrock.sh SERVER PROTO PYTHON    PROTO: h1 | h2c | h1tls | h2tls
# shellcheck disable=SC2015
SERVER=$1
PROTO=$2
PY=$3
. "$(dirname "$0")/fakemodel_lib.sh"
DECODE="$(dirname "$0")/eventstream_decode.py"

fm_start "$SERVER"
case "$PROTO" in
h1) BASE=http://127.0.0.1:$FM_PORT; OPTS=(--http1.1) ;;
h2c) BASE=http://127.0.0.1:$FM_PORT; OPTS=(--http2-prior-knowledge) ;;
h1tls) BASE=https://localhost:$FM_PORT; OPTS=(--http1.1 --cacert "$FM_CA") ;;
h2tls) BASE=https://localhost:$FM_PORT; OPTS=(--http2 --cacert "$FM_CA") ;;
*) echo "unknown protocol $PROTO" >&2; exit 2 ;;
esac
OPTS+=(--resolve "localhost:$FM_PORT:127.0.0.1")
B=$FM_DIR/body
H=$FM_DIR/headers
D=$FM_DIR/decoded
CONVERSE=/model/sg-fake/converse-stream
INVOKE=/model/anthropic.claude-sg/invoke-with-response-stream

# req KEY PATH [curl options...]: POSTs a Converse-style body, saves the
# binary body to $B and the decoded messages to $D; sets RC and CODE (a body
# that never ends fails after 20 s instead of hanging the test).
req() {
    local key=$1 path=$2
    shift 2
    RC=0
    rm -f "$B" "$H" "$D"
    CODE=$(curl -sS -m 20 "${OPTS[@]}" -H "Idempotency-Key: $PROTO-$key" -D "$H" -o "$B" \
        -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        -d '{"messages":[{"role":"user","content":[{"text":"hi"}]}]}' "$@" \
        "$BASE$path" 2>"$FM_DIR/curl.err") || RC=$?
    # curl writes no file when nothing of the body reached it
    if [ -f "$B" ]; then
        "$PY" "$DECODE" "$B" >"$D" || fail "$key: the decoder failed"
    else
        : >"$D"
    fi
}
K() { echo "$PROTO-$1"; }
# line N: the Nth decoded message
line() { sed -n "${1}p" "$D"; }
# types: each message's :event-type (or exception:<type>, or the error)
types() {
    "$PY" -c '
import json, sys
out = []
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "end" in r:
        out.append("end:" + r["end"])
    elif not r.get("ok"):
        out.append("bad:" + r["error"])
    elif r["headers"][":message-type"] == "exception":
        out.append("exception:" + r["headers"][":exception-type"])
    else:
        out.append(r["headers"][":event-type"])
print(" ".join(out))' "$D"
}
# model_types: the "type" of each chunk's decoded model JSON (invoke)
model_types() {
    "$PY" -c '
import json, sys
print(" ".join(json.loads(json.loads(l)["model"])["type"] for l in open(sys.argv[1])
               if "model" in json.loads(l)))' "$D"
}
payload() { line "$1" | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read())["payload"])'; }
# model N: the model JSON inside the Nth message (invoke)
model() { line "$1" | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read())["model"])'; }

# ---- ConverseStream, normal
req normal "$CONVERSE?n=3&gap=5"
[ "$RC" = 0 ] && [ "$CODE" = 200 ] || fail "normal: rc=$RC code=$CODE"
grep -qi '^content-type: application/vnd.amazon.eventstream' "$H" || fail "normal: content-type"
T=$(types)
[ "$T" = "messageStart contentBlockDelta contentBlockDelta contentBlockDelta contentBlockStop messageStop metadata end:clean" ] ||
    fail "normal: events $T"
[ "$(grep -c '"ok":true' "$D")" = 7 ] || fail "normal: not every CRC holds"
line 1 | grep -qF '":content-type":"application/json",":message-type":"event"' || fail "normal: headers $(line 1)"
payload 1 | grep -qE '^\{"role":"assistant","p":"[a-zA-Z0-9]+"\}$' || fail "normal: messageStart $(payload 1)"
payload 3 | grep -qE '^\{"contentBlockIndex":0,"delta":\{"text":"tok1"\},"p":"[a-zA-Z0-9]+"\}$' ||
    fail "normal: contentBlockDelta $(payload 3)"
payload 5 | grep -qE '^\{"contentBlockIndex":0,"p":"' || fail "normal: contentBlockStop $(payload 5)"
payload 6 | grep -qE '^\{"stopReason":"end_turn","p":"' || fail "normal: messageStop $(payload 6)"
# usage: the input by default the body's 56 bytes / 4
payload 7 | grep -qE '^\{"usage":\{"inputTokens":14,"outputTokens":3,"totalTokens":17\},"metrics":\{"latencyMs":[0-9]+\},"p":"' ||
    fail "normal: metadata $(payload 7)"
[ "$(fm_field "$(K normal)" finished reason)" = done ] || fail "normal: finished reason"
[ "$(fm_field "$(K normal)" finished items)" = 3 ] || fail "normal: finished items"
[ "$(fm_field "$(K normal)" received body_bytes)" = 56 ] || fail "normal: body bytes"
pass "converse normal"

# ---- InvokeModelWithResponseStream, normal: the model's own JSON in base64
req invoke "$INVOKE?n=2&gap=5"
[ "$RC" = 0 ] && [ "$CODE" = 200 ] || fail "invoke: rc=$RC code=$CODE"
[ "$(types)" = "chunk chunk chunk chunk chunk chunk chunk end:clean" ] || fail "invoke: events $(types)"
MT=$(model_types)
[ "$MT" = "message_start content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop" ] ||
    fail "invoke: model events $MT"
grep -qF '\"delta\":{\"type\":\"text_delta\",\"text\":\"tok1\"}' "$D" || fail "invoke: tok1 delta"
grep -qF 'amazon-bedrock-invocationMetrics' "$D" || fail "invoke: message_stop metrics"
payload 3 | grep -qE '^\{"bytes":"[A-Za-z0-9+/=]+","p":"[a-zA-Z0-9]+"\}$' || fail "invoke: chunk payload $(payload 3)"
pass "invoke normal"

# ---- the format by query on another path, and by X-SG-Scenario
req byquery "/v1/messages?format=bedrock-invoke&n=1"
[ "$(types)" = "chunk chunk chunk chunk chunk chunk end:clean" ] || fail "format=bedrock-invoke: $(types)"
req byheader "$INVOKE" -H 'X-SG-Scenario: format=bedrock-converse&n=1'
[ "$(types)" = "messageStart contentBlockDelta contentBlockStop messageStop metadata end:clean" ] ||
    fail "X-SG-Scenario format: $(types)"
pass "format by query and header"

# ---- slow first token: messageStart with the headers, the first delta later
req slow "$CONVERSE?n=2&first_delay=300"
[ "$(types)" = "messageStart contentBlockDelta contentBlockDelta contentBlockStop messageStop metadata end:clean" ] ||
    fail "slow: $(types)"
ge "$(fm_field "$(K slow)" first_item_sent since_received_ms)" 300 || fail "slow: first token before 300 ms"
ge 300 "$(fm_field "$(K slow)" headers_sent since_received_ms)" || fail "slow: headers late"
pass "slow first token"

# ---- stall after the first token
req stall "$CONVERSE?n=2&stall_after=1&stall=200"
[ "$(fm_field "$(K stall)" stall_started items)" = 1 ] || fail "stall: stall_started"
ge "$(fm_field "$(K stall)" finished since_received_ms)" 200 || fail "stall: finished before the stall ended"
[ "$(types)" = "messageStart contentBlockDelta contentBlockDelta contentBlockStop messageStop metadata end:clean" ] ||
    fail "stall: $(types)"
pass "stall"

# ---- throttling before, and after, the first token
req throttle0 "$CONVERSE?n=3&error_at=0&error_type=throttlingException"
[ "$RC" = 0 ] && [ "$CODE" = 200 ] || fail "throttle0: rc=$RC code=$CODE"
[ "$(types)" = "messageStart exception:throttlingException end:clean" ] || fail "throttle0: $(types)"
line 2 | grep -qF '":content-type":"application/json",":message-type":"exception"' || fail "throttle0: headers"
[ "$(payload 2)" = '{"message":"sg-fakemodel scripted failure"}' ] || fail "throttle0: payload $(payload 2)"
[ "$(fm_field "$(K throttle0)" finished reason)" = in_band_error ] || fail "throttle0: reason"
[ "$(fm_field "$(K throttle0)" finished items)" = 0 ] || fail "throttle0: items"
req throttle1 "$CONVERSE?n=3&error_at=1&error_type=throttlingException"
[ "$(types)" = "messageStart contentBlockDelta exception:throttlingException end:clean" ] ||
    fail "throttle1: $(types)"
[ "$(fm_field "$(K throttle1)" finished items)" = 1 ] || fail "throttle1: items"
for t in serviceUnavailableException modelStreamErrorException internalServerException \
    validationException modelTimeoutException; do
    req "ex-$t" "$INVOKE?n=2&error_at=1&error_type=$t"
    [ "$(types)" = "chunk chunk chunk exception:$t end:clean" ] || fail "$t: $(types)"
done
req exdefault "$CONVERSE?error_at=0"
[ "$(types)" = "messageStart exception:throttlingException end:clean" ] || fail "default exception: $(types)"
pass "exceptions in-band"

# ---- a corrupted message CRC: that message only, everything else intact
req badmsg "$CONVERSE?n=3&bad_crc_at=1"
[ "$(types)" = "messageStart contentBlockDelta bad:message_crc contentBlockDelta contentBlockStop messageStop metadata end:clean" ] ||
    fail "bad message crc: $(types)"
# the damaged message is otherwise the scripted one: its headers and payload read
payload 3 | grep -qF '"delta":{"text":"tok1"}' || fail "bad message crc: not tok1"
pass "corrupted message CRC"

# ---- a corrupted prelude CRC: the decoder cannot trust that message
req badprelude "$CONVERSE?n=2&bad_crc_at=0&bad_crc=prelude"
[ "$(types)" = "messageStart bad:prelude_crc contentBlockDelta contentBlockStop messageStop metadata end:clean" ] ||
    fail "bad prelude crc: $(types)"
req badinvoke "$INVOKE?n=2&bad_crc_at=1"
[ "$(types)" = "chunk chunk chunk bad:message_crc chunk chunk chunk end:clean" ] || fail "bad invoke crc: $(types)"
pass "corrupted prelude CRC"

# ---- a message cut in the middle: the body ends cleanly, or abruptly
req cut "$CONVERSE?n=3&cut_at=1"
[ "$RC" = 0 ] && [ "$CODE" = 200 ] || fail "cut: rc=$RC code=$CODE (a clean HTTP end)"
T=$(types)
case "$T" in
"messageStart contentBlockDelta end:truncated") ;;
*) fail "cut: $T" ;;
esac
LEFT=$(line 3 | sed -n 's/.*"left":\([0-9]*\).*/\1/p')
[ "${LEFT:-0}" -gt 0 ] || fail "cut: no partial message"
[ "$(fm_field "$(K cut)" finished reason)" = cut ] || fail "cut: reason"
# cut_at is any format's: half an SSE event, then a clean end
req cutsse "/v1/chat/completions?cut_at=1&n=3"
[ "$RC" = 0 ] && [ "$(grep -c '^data: ' "$B")" = 2 ] && ! grep -q 'tok1' "$B" &&
    [ "$(tail -c 1 "$B" | od -An -c | tr -d ' ')" != '\n' ] || fail "cut SSE: rc=$RC $(cat "$B")"
req cutsplit "$CONVERSE?bytes_per_write=50&cut_at=1&n=3&write_gap=1"
[ "$RC" = 0 ] && [ "$(types)" = "messageStart contentBlockDelta end:truncated" ] ||
    fail "cut in pieces: rc=$RC $(types)"
[ "$(fm_field "$(K cutsplit)" finished reason)" = cut ] || fail "cut in pieces: reason"
req cutdrop "$CONVERSE?n=3&cut_at=1&cut=drop"
[ "$RC" != 0 ] || fail "cut=drop: curl saw a clean end"
[ "$(fm_field "$(K cutdrop)" finished reason)" = dropped ] || fail "cut=drop: reason"
# HTTP/1.1: the connection closes after half a message.  HTTP/2: the
# stream is reset behind its DATA, and curl drops what arrived with the
# reset, so it keeps whole messages at most - never a message after tok0.
case "$PROTO:$(types)" in
h1*:"messageStart contentBlockDelta end:truncated") ;;
h2*:"" | h2*:"messageStart "*end:*) ;;
*) fail "cut=drop: $(types)" ;;
esac
grep -q tok1 "$B" 2>/dev/null && fail "cut=drop: the cut message arrived whole"
pass "truncated message"

# ---- split across reads: the same messages, every CRC intact
req split "$CONVERSE?n=3&bytes_per_write=7&write_gap=1"
[ "$(grep -c '"ok":true' "$D")" = 7 ] && [ "$(line 8)" = '{"end":"clean"}' ] || fail "split: $(types)"
pass "split across reads"

# ---- event_bytes: each token message that many bytes; tool use
req padded "$CONVERSE?n=2&event_bytes=1000"
[ "$(line 2 | sed -n 's/.*"total":\([0-9]*\).*/\1/p')" = 1000 ] &&
    [ "$(line 3 | sed -n 's/.*"total":\([0-9]*\).*/\1/p')" = 1000 ] || fail "event_bytes: $(line 2)"
[ "$(grep -c '"ok":true' "$D")" = 6 ] || fail "event_bytes: CRCs"
req tool "$CONVERSE?n=1&tool_use=1"
[ "$(types)" = "messageStart contentBlockStart contentBlockDelta contentBlockStop messageStop metadata end:clean" ] ||
    fail "tool_use: $(types)"
payload 2 | grep -qE '^\{"contentBlockIndex":0,"start":\{"toolUse":\{"name":"sg_tool","toolUseId":"tooluse_[0-9]+"\}\},"p":"' ||
    fail "tool_use: contentBlockStart $(payload 2)"
payload 3 | grep -qF '"delta":{"toolUse":{"input":"tok0"}}' || fail "tool_use: delta"
payload 5 | grep -qF '"stopReason":"tool_use"' || fail "tool_use: messageStop"
pass "event_bytes and tool_use"

# ---- usage: the figures scripted, where each API puts them; none on a
# stream that never reached its end
req usage "$CONVERSE?cached_tokens=4&n=3&prompt_tokens=11"
payload 7 | grep -qE '^\{"usage":\{"inputTokens":7,"outputTokens":3,"totalTokens":14,"cacheReadInputTokens":4,"cacheWriteInputTokens":0\},"metrics":\{"latencyMs":[0-9]+\},"p":"' ||
    fail "usage: converse metadata $(payload 7)"
req iusage "$INVOKE?cached_tokens=4&n=2&prompt_tokens=11&reasoning_tokens=2"
U='"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":4'
model 1 | grep -qF "\"usage\":{$U,\"output_tokens\":1}}}" || fail "usage: message_start $(model 1)"
[ "$(model 6)" = "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{$U,\"output_tokens\":4,\"output_tokens_details\":{\"thinking_tokens\":2}}}" ] ||
    fail "usage: message_delta $(model 6)"
model 7 | grep -qE '^\{"type":"message_stop","amazon-bedrock-invocationMetrics":\{"inputTokenCount":7,"outputTokenCount":4,"invocationLatency":[0-9]+,"firstByteLatency":[0-9]+,"cacheReadInputTokenCount":4,"cacheWriteInputTokenCount":0\}\}$' ||
    fail "usage: invocation metrics $(model 7)"
req udrop "$CONVERSE?drop_after=1&gap=100&n=3&prompt_tokens=11"
[ "$RC" != 0 ] && ! grep -q 'metadata\|inputTokens' "$D" || fail "usage: a dropped stream: $(types)"
req uidrop "$INVOKE?drop_after=1&gap=100&n=3&prompt_tokens=11"
[ "$RC" != 0 ] && ! grep -q 'invocationMetrics\|message_delta' "$D" || fail "usage: a dropped invoke: $(model_types)"
req unodone "$CONVERSE?n=2&no_done=1&prompt_tokens=11"
[ "$(types)" = "messageStart contentBlockDelta contentBlockDelta end:clean" ] || fail "usage: no_done $(types)"
req ureason "$CONVERSE?reasoning_tokens=1"
[ "$CODE" = 400 ] && grep -q 'bedrock-converse reports no reasoning tokens' "$B" ||
    fail "usage: reasoning_tokens on converse: $CODE"
pass "usage"

# ---- a scripted status: Bedrock's error shape and x-amzn-ErrorType
req status "$CONVERSE?status=429&retry_after=1"
[ "$CODE" = 429 ] || fail "status: code $CODE"
grep -qi '^x-amzn-errortype: ThrottlingException' "$H" || fail "status: x-amzn-ErrorType"
grep -qx '{"message":"sg-fakemodel scripted status 429"}' "$B" || fail "status: body $(cat "$B")"
req status503 "$INVOKE?status=503"
grep -qi '^x-amzn-errortype: ServiceUnavailableException' "$H" || fail "status 503: x-amzn-ErrorType"
pass "scripted status"

# ---- knobs that make no sense are refused
req nokeepalive "$CONVERSE?keepalive=100"
[ "$CODE" = 400 ] && grep -q 'no keepalive' "$B" || fail "keepalive on an event stream: $CODE"
req nocrc "/v1/chat/completions?bad_crc_at=1"
[ "$CODE" = 400 ] && grep -q 'bad_crc_at needs an event-stream format' "$B" || fail "bad_crc_at on SSE: $CODE"
req nobadcrc "$CONVERSE?bad_crc=both"
[ "$CODE" = 400 ] || fail "bad_crc=both: $CODE"
pass "bad scenarios"

fm_finish
