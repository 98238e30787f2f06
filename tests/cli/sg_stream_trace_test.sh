#!/usr/bin/env bash
# sg-stream's tracing, end to end: --otlp (and the OTEL_EXPORTER_OTLP_*
# variables) sends the run's spans to a test collector that keeps what it
# receives (otlp_collector.py), read back with protoc --decode against the
# pinned OTLP definitions (otlp_spans.py).  Checked: the operation's span
# and each attempt's - a retried 503 on HTTP/1.1 and on streamguard's
# HTTP/2 transport, a retried first-token timeout, a fallback, a partial
# stream, a clean stream - their parent links, times and attributes, the
# model the request body names, the HTTP/2 probe's span; the
# traceparent each attempt sent, as sg-fakemodel logged it, names that
# attempt's span in the caller's trace (TRACEPARENT, TRACESTATE); a
# collector that is down costs the run nothing; bad settings are usage
# errors.
# Usage: sg_stream_trace_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
FM=$2
. "$(dirname "$0")/../integration/fakemodel_lib.sh"
. "$(dirname "$0")/otlp_lib.sh"
trap 'otlp_cleanup; fm_cleanup' EXIT

OUT=$FM_DIR/stdout
ERR=$FM_DIR/stderr
SPANS=$FM_DIR/spans.jsonl
fm_start "$FM"
otlp_start
CHAT=http://127.0.0.1:$FM_PORT/v1/chat/completions
PARENT_TRACE=0af7651916cd43dd8448eb211c80319c
PARENT_SPAN=b7ad6b7169203331
export TRACEPARENT=00-$PARENT_TRACE-$PARENT_SPAN-01
export TRACESTATE=congo=t61rcWkgMzE

# wire KEY: the traceparents the requests with KEY carried, in order.
wire() {
    fm_log "event=received&key=$1" | grep -o '"traceparent":"[^"]*"' | cut -d'"' -f4
}

# ---- a retried 503, on each transport --------------------------------------
for transport in http1.1 http2; do
    otlp_reset
    key=tr-$transport
    expect 0 "$transport: a 503 then a stream, traced" -- --otlp "$OTLP_URL" \
        --"$transport" --profile openai --idempotency-key "$key" --attempts 3 \
        --backoff-base 10ms -w '%{attempts}\n' "$CHAT?status=503&fail_first=1&n=3&_t=$key"
    has "$OUT" 2 "$transport: two attempts"
    spans_of "$SPANS"
    check "$transport: three spans, one service" \
        'length == 3 and all(.service == "sg-stream")' "$SPANS"
    check "$transport: all in the caller's trace, with its tracestate" \
        "all(.trace_id == \"$PARENT_TRACE\" and .trace_state == \"$TRACESTATE\")" "$SPANS"
    check "$transport: the operation's span is the caller's span's child" \
        "map(select(.attributes[\"streamguard.attempt\"] == null)) | length == 1 and
         .[0].parent_span_id == \"$PARENT_SPAN\" and .[0].name == \"chat\" and
         .[0].kind == \"SPAN_KIND_CLIENT\" and .[0].status == \"STATUS_CODE_UNSET\" and
         .[0].attributes[\"gen_ai.provider.name\"] == \"openai\" and
         .[0].attributes[\"gen_ai.operation.name\"] == \"chat\" and
         .[0].attributes[\"streamguard.outcome\"] == \"ok\" and
         .[0].attributes[\"streamguard.attempts\"] == 2 and
         .[0].events == [\"streamguard.backoff\"]" "$SPANS"
    check "$transport: each attempt's span is the operation's child, inside it" \
        '(map(select(.attributes["streamguard.attempt"] == null))[0]) as $op |
         map(select(.attributes["streamguard.attempt"] != null)) | length == 2 and
         all(.parent_span_id == $op.span_id and .start >= $op.start and
             .end <= $op.end and .start < .end and .name == "GET")' "$SPANS"
    check "$transport: the 503 is an error of attempt 1, the retry a resend" \
        'map(select(.attributes["streamguard.attempt"] == 1))[0] as $a1 |
         map(select(.attributes["streamguard.attempt"] == 2))[0] as $a2 |
         $a1.status == "STATUS_CODE_ERROR" and
         $a1.attributes["http.response.status_code"] == 503 and
         $a1.attributes["error.type"] == "503" and
         $a1.attributes["streamguard.discarded"] == true and
         $a1.attributes["server.address"] == "127.0.0.1" and
         $a2.attributes["http.request.resend_count"] == 1 and
         $a2.attributes["http.response.status_code"] == 200 and
         ($a2.attributes["gen_ai.response.time_to_first_chunk"] | . > 0) and
         $a2.attributes["streamguard.discarded"] == false and
         ($a2.attributes["url.full"] | test("^http://127.0.0.1:[0-9]+/v1/chat/completions$"))' \
        "$SPANS"
    # what went on the wire: each request named its own attempt's span
    want=$(jq -r -s "sort_by(.attributes[\"streamguard.attempt\"] // 0) | .[1:] |
                     .[] | \"00-\(.trace_id)-\(.span_id)-01\"" "$SPANS")
    if [ -n "$want" ] && [ "$(wire "$key")" = "$want" ]; then
        pass "$transport: each attempt sent its own span's traceparent"
    else
        fail "$transport: sent $(wire "$key" | tr '\n' ' '), spans say $(echo "$want" | tr '\n' ' ')"
    fi
    n=$(fm_log "event=received&key=$key" | grep -c "\"tracestate\":\"$TRACESTATE\"")
    [ "$n" -eq 2 ] && pass "$transport: the tracestate went on both" ||
        fail "$transport: the tracestate went on $n requests"
done

# ---- a first-token timeout retried, a fallback, a partial stream --------------
otlp_reset
expect 0 "a first token that does not come in time, retried" -- --otlp "$OTLP_URL" \
    --idempotency-key tr-ftt --attempts 3 --first-item 300ms --backoff-base 10ms \
    "$CHAT?hang=1&fail_first=1&n=2&_t=tr-ftt"
spans_of "$SPANS"
check "first token: attempt 1 timed out waiting for it, its clock named" \
    'map(select(.attributes["streamguard.attempt"] == 1))[0] |
     .attributes["error.type"] == "first_item_timeout" and
     .attributes["streamguard.limit"] == "first_item" and
     .attributes["streamguard.granted.first_item_ms"] == 300 and
     .attributes["streamguard.decision"] == "retry" and
     .end - .start >= 300000000' "$SPANS"
check "first token: the operation's time to first chunk counts the wait" \
    'map(select(.attributes["streamguard.attempt"] == null))[0] |
     .attributes["gen_ai.response.time_to_first_chunk"] >= 0.3 and
     .attributes["streamguard.outcome"] == "ok" and .events == ["streamguard.backoff"]' "$SPANS"

otlp_reset
FALLBACK=http://localhost:$FM_PORT/v1/chat/completions
expect 0 "a 503, then the fallback" -- --otlp "$OTLP_URL" --idempotency-key tr-fb --attempts 3 \
    --fallback "$FALLBACK?n=2&_t=tr-fb2" "$CHAT?status=503&_t=tr-fb1"
spans_of "$SPANS"
check "fallback: each attempt names its own endpoint" \
    'map(select(.attributes["streamguard.attempt"] == 1))[0] as $a1 |
     map(select(.attributes["streamguard.attempt"] == 2))[0] as $a2 |
     $a1.attributes["server.address"] == "127.0.0.1" and
     $a1.attributes["streamguard.endpoint"] == 0 and $a1.attributes["error.type"] == "503" and
     $a2.attributes["server.address"] == "localhost" and
     $a2.attributes["streamguard.endpoint"] == 1 and
     $a2.attributes["http.request.resend_count"] == 1 and
     ($a2.attributes["url.full"] | test("^http://localhost:[0-9]+/v1/chat/completions$")) and
     $a2.attributes["streamguard.outcome"] == "ok"' "$SPANS"

otlp_reset
expect 3 "a stall after two items: a partial stream" -- --otlp "$OTLP_URL" \
    --idempotency-key tr-part --idle 300ms "$CHAT?n=5&stall_after=2&stall=forever&_t=tr-part"
spans_of "$SPANS"
check "partial: the attempt and the operation say so, its items discarded" \
    'length == 2 and all(.status == "STATUS_CODE_ERROR") and
     (map(select(.attributes["streamguard.attempt"] == 1))[0] |
      .attributes["streamguard.partial"] == true and
      .attributes["streamguard.discarded"] == true and
      .attributes["streamguard.limit"] == "idle" and .attributes["streamguard.items"] == 2 and
      .events == ["streamguard.first_chunk"]) and
     (map(select(.attributes["streamguard.attempt"] == null))[0] |
      .attributes["streamguard.reason"] == "partial_stream" and
      .attributes["error.type"] == "idle_timeout" and
      .attributes["streamguard.partial"] == true)' "$SPANS"

# ---- the model the body asks for -------------------------------------------------
otlp_reset
expect 0 "a body naming its model" -- --otlp "$OTLP_URL" --profile openai \
    --idempotency-key tr-model -d '{"messages":[{"model":"inner"}],"model":"gpt-\u00e9x","stream":true}' \
    "$CHAT?n=2&_t=tr-model"
spans_of "$SPANS"
check "model: both spans name the body's top-level model, decoded" \
    'length == 2 and all(.attributes["gen_ai.request.model"] == "gpt-éx") and
     (map(select(.attributes["streamguard.attempt"] == null))[0].name == "chat gpt-éx")' \
    "$SPANS"
otlp_reset
expect 0 "a body that is not JSON" -- --otlp "$OTLP_URL" --idempotency-key tr-nomodel \
    -d 'model=gpt' "$CHAT?n=2&_t=tr-nomodel"
spans_of "$SPANS"
check "model: none from a body that is not JSON" \
    'length == 2 and all(.attributes["gen_ai.request.model"] == null)' "$SPANS"

# ---- the HTTP/2 probe of an https:// URL that refuses ------------------------
otlp_reset
expect 8 "an https:// URL that refuses: the probe, then two attempts" -- --otlp "$OTLP_URL" \
    --idempotency-key tr-probe --attempts 2 --backoff-base 10ms https://127.0.0.1:1/v1/chat
spans_of "$SPANS"
check "probe: attempt 1 is the probe, the first send is no resend, the second one is" \
    'length == 4 and
     (map(select(.attributes["streamguard.attempt"] == 1))[0].attributes |
      .["streamguard.probe"] == true and .["streamguard.sent"] == false and
      .["http.request.resend_count"] == null) and
     (map(select(.attributes["streamguard.attempt"] == 2))[0].attributes |
      .["streamguard.probe"] == null and .["http.request.resend_count"] == null) and
     (map(select(.attributes["streamguard.attempt"] == 3))[0].attributes |
      .["http.request.resend_count"] == 1)' "$SPANS"

# ---- without a parent, from the environment's endpoint ----------------------
otlp_reset
(
    unset TRACEPARENT TRACESTATE
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$OTLP_PORT OTEL_SERVICE_NAME=nightly \
        "$SG" --idempotency-key tr-env "$CHAT?n=2&_t=tr-env" >"$OUT" 2>"$ERR"
) && pass "OTEL_EXPORTER_OTLP_ENDPOINT alone traces" ||
    fail "a run traced by the environment failed: $(cat "$ERR")"
spans_of "$SPANS"
check "a run of its own is the root of a trace of its own" \
    'length == 2 and all(.service == "nightly") and (map(.trace_id) | unique | length == 1) and
     (map(select(.attributes["streamguard.attempt"] == null))[0] |
      .parent_span_id == "" and .name == "streamguard.operation") and
     .[0].trace_id != "'"$PARENT_TRACE"'"' "$SPANS"

# ---- the environment's off switches --------------------------------------------
# OTEL_SDK_DISABLED=true (any case) and OTEL_TRACES_EXPORTER=none turn
# tracing off, from the environment's endpoint and from --otlp alike
for off in OTEL_SDK_DISABLED=TRUE OTEL_TRACES_EXPORTER=none; do
    otlp_reset
    (
        export "$off"
        OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$OTLP_PORT \
            "$SG" --idempotency-key "tr-off-${off%%=*}" \
            "$CHAT?n=2&_t=tr-off-${off%%=*}" >"$OUT" 2>"$ERR"
    ) && pass "$off: the run goes" || fail "$off: the run failed: $(cat "$ERR")"
    ( export "$off"; "$SG" --otlp "$OTLP_URL" "$CHAT?n=1&_t=tr-offflag" >"$OUT" 2>"$ERR" ) ||
        fail "$off with --otlp: the run failed: $(cat "$ERR")"
    has "$ERR" "tracing off: ${off%%=*} says so (--otlp not used)" "$off: --otlp is not used, and says so"
    [ -z "$(ls "$OTLP_DIR")" ] && pass "$off: no span is sent" ||
        fail "$off: spans reached the collector"
    [ -z "$(wire "tr-off-${off%%=*}")" ] && pass "$off: no traceparent on the wire" ||
        fail "$off: a traceparent went on the wire"
done
otlp_reset
OTEL_SDK_DISABLED=false expect 0 "OTEL_SDK_DISABLED=false traces" -- \
    --otlp "$OTLP_URL" --idempotency-key tr-on "$CHAT?n=1&_t=tr-on"
[ -n "$(ls "$OTLP_DIR")" ] && pass "... and the spans are sent" || fail "no span with OTEL_SDK_DISABLED=false"
OTEL_SDK_DISABLED=1 expect 2 "an OTEL_SDK_DISABLED that is neither true nor false" -- \
    --otlp "$OTLP_URL" "$CHAT?n=1&_t=tr-bad"
has "$ERR" "OTEL_SDK_DISABLED: true or false" "... is a usage error that says so"
OTEL_TRACES_EXPORTER=zipkin,otlp expect 2 "an exporter sg-stream does not have" -- \
    --otlp "$OTLP_URL" "$CHAT?n=1&_t=tr-bad"
has "$ERR" "OTEL_TRACES_EXPORTER: zipkin is not an exporter here (otlp or none)" "... is a usage error that says so"

# ---- a collector that is down, bad settings -----------------------------------
otlp_reset
start=$(date +%s%N)
expect 0 "a collector that refuses connections changes nothing" -- \
    --otlp http://127.0.0.1:1/v1/traces --idempotency-key tr-down "$CHAT?n=2&_t=tr-down"
ms=$((($(date +%s%N) - start) / 1000000))
[ "$ms" -lt 2500 ] && pass "... and the run ends at once ($ms ms)" ||
    fail "a dead collector held the run $ms ms"
expect 2 "--otlp takes an http(s) URL" -- --otlp ftp://x/v1/traces "$CHAT?n=1&_t=tr-bad"
has "$ERR" "--otlp: not an http:// or https:// URL" "... and says so"
OTEL_EXPORTER_OTLP_PROTOCOL=grpc expect 2 "a protocol the exporter does not speak" -- \
    --otlp "$OTLP_URL" "$CHAT?n=1&_t=tr-bad"
[ "$(fm_log "event=received" | grep -c '_t=tr-bad')" -eq 0 ] &&
    pass "bad tracing settings dial nothing" || fail "a request went with bad settings"
TRACEPARENT=00-nothex expect 0 "a malformed TRACEPARENT is no parent" -- \
    --otlp "$OTLP_URL" "$CHAT?n=1&_t=tr-badparent"
has "$ERR" "TRACEPARENT is not a W3C traceparent: ignored" "... and says so"

otlp_cleanup
fm_finish
