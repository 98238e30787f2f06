#!/usr/bin/env bash
# sg-proxy's tracing, end to end (docs/sg-proxy.md, "Tracing"): with
# --otlp, each request's operation and attempts reach a test collector
# that keeps what it receives (otlp_collector.py), read back with protoc
# --decode against the pinned OTLP definitions (otlp_spans.py).  Checked:
# the client's traceparent is the operation span's parent, in the
# client's trace; each attempt - a retried 503, a hedge won and lost - is
# the operation's child, and sent upstream the traceparent of its own span
# in place of the client's, with the client's tracestate; a request
# without a context begins a trace of its own; a fallback asked for a
# model of its own names it on its attempt's span, the client's on the
# operation's; every attempt says who set its lease, the retry's backoff
# is an event of the operation; a proxy that does not trace passes the
# client's context through untouched.
# Usage: sg_proxy_trace_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream
. "$(dirname "$0")/otlp_lib.sh"
trap 'otlp_cleanup; px_cleanup' EXIT

px_upstream
otlp_start
SPANS=$FM_DIR/spans.jsonl
TRACE=4bf92f3577b34da6a3ce929d0e0e4736
CLIENT_SPAN=00f067aa0ba902b7
TP=00-$TRACE-$CLIENT_SPAN-01
TS=rojo=00f067aa0ba902b7

# the exporter's batches go every 20 ms, so a test need not wait 5 s
OTEL_BSP_SCHEDULE_DELAY=20 px_start T --otlp "$OTLP_URL" --upstream "$UP" \
    --profile openai --attempts 3 --backoff-base 1ms --hedge-after 300ms --idempotent
B=http://127.0.0.1:$PX_PORT

# spans_wait N: until the collector holds N spans (5 s at most), into SPANS.
spans_wait() {
    for _ in $(seq 1 100); do
        spans_of "$SPANS"
        [ "$(wc -l <"$SPANS")" -ge "$1" ] && return 0
        sleep 0.05
    done
    return 1
}

# wire KEY: what the upstream received with KEY: "traceparent tracestate"
# per request, in order.
wire() {
    fm_log "event=received&key=$1" |
        sed -n 's/.*"traceparent":"\([^"]*\)"\(,"tracestate":"\([^"]*\)"\)\{0,1\}.*/\1 \3/p'
}

# attempts_sent: each attempt's own traceparent, by attempt, from SPANS.
attempts_sent() {
    jq -r -s 'map(select(.attributes["streamguard.attempt"] != null)) |
              sort_by(.attributes["streamguard.attempt"]) | .[] |
              "00-\(.trace_id)-\(.span_id)-01"' "$SPANS"
}

# ---- a retried 503, the client's context continued ---------------------------
px_ask "$B/v1/chat/completions?status=503&fail_first=1&n=3&_t=pt1" pt1 \
    -H "traceparent: $TP" -H "tracestate: $TS" -H 'Idempotency-Key: pt-1'
grep -q '\[DONE\]' "$FM_DIR/pt1.body" && pass "pt1: the client got the stream" ||
    fail "pt1: $(head -c 300 "$FM_DIR/pt1.body")"
spans_wait 3 || fail "pt1: the collector did not receive three spans"
check "pt1: three spans of sg-proxy, in the client's trace" \
    "length == 3 and all(.service == \"sg-proxy\" and .trace_id == \"$TRACE\" and
     .trace_state == \"$TS\")" "$SPANS"
check "pt1: the operation is the client's span's child" \
    "map(select(.attributes[\"streamguard.attempt\"] == null)) | length == 1 and
     .[0].parent_span_id == \"$CLIENT_SPAN\" and .[0].name == \"chat\" and
     .[0].attributes[\"gen_ai.provider.name\"] == \"openai\" and
     .[0].attributes[\"streamguard.outcome\"] == \"ok\" and
     .[0].attributes[\"streamguard.attempts\"] == 2 and
     .[0].events == [\"streamguard.backoff\"]" "$SPANS"
check "pt1: both attempts are the operation's children, the 503 an error" \
    '(map(select(.attributes["streamguard.attempt"] == null))[0]) as $op |
     map(select(.attributes["streamguard.attempt"] != null)) |
     length == 2 and all(.parent_span_id == $op.span_id and .start >= $op.start and
                         .end <= $op.end) and
     (map(select(.attributes["streamguard.attempt"] == 1))[0] |
      .status == "STATUS_CODE_ERROR" and .attributes["http.response.status_code"] == 503) and
     (map(select(.attributes["streamguard.attempt"] == 2))[0] |
      .attributes["http.request.resend_count"] == 1 and
      (.attributes["url.full"] | endswith("/v1/chat/completions"))) and
     all(.attributes["streamguard.lease_by"] == "budget")' "$SPANS"
want=$(attempts_sent | sed "s/\$/ $TS/")
got=$(wire pt-1)
if [ -n "$want" ] && [ "$got" = "$want" ]; then
    pass "pt1: upstream, each attempt sent its own span's traceparent and the tracestate"
else
    fail "pt1: upstream got '$(echo "$got" | tr '\n' '|')', spans say '$(echo "$want" | tr '\n' '|')'"
fi
n=$(fm_log "event=received&key=pt-1" | grep -c "\"traceparent\":\"[^\"]*$CLIENT_SPAN")
[ "$n" -eq 0 ] && pass "pt1: the client's own traceparent did not go upstream" ||
    fail "pt1: the client's span id went upstream $n times"

# ---- a hedge won and lost -----------------------------------------------------
otlp_reset
px_ask "$B/v1/chat/completions?n=3&tail_first=1&tail_delay=5000&_t=pt2" pt2 \
    -H "traceparent: $TP" -H 'Idempotency-Key: pt-2'
spans_wait 3 || fail "pt2: the collector did not receive three spans"
check "pt2: the hedge and the attempt it beat, both children of the operation" \
    '(map(select(.attributes["streamguard.attempt"] == null))[0]) as $op |
     map(select(.attributes["streamguard.attempt"] != null)) | length == 2 and
     all(.parent_span_id == $op.span_id) and
     (map(select(.attributes["streamguard.hedge"] == true))[0] |
      .attributes["streamguard.outcome"] == "ok") and
     (map(select(.attributes["streamguard.hedge"] == false))[0] |
      .attributes["streamguard.reason"] == "hedge_lost" and .status == "STATUS_CODE_UNSET" and
      .attributes["streamguard.lease_by"] == "budget" and
      .attributes["streamguard.limit"] == null)' \
    "$SPANS"
want=$(attempts_sent | sort)
got=$(wire pt-2 | cut -d' ' -f1 | sort)
[ -n "$want" ] && [ "$got" = "$want" ] &&
    pass "pt2: each of the two sent its own span's traceparent" ||
    fail "pt2: upstream got '$(echo "$got" | tr '\n' '|')', spans say '$(echo "$want" | tr '\n' '|')'"

# ---- no context: a trace of its own; a malformed one is none -------------------
for h in "" "traceparent: 00-zz-not-a-context"; do
    otlp_reset
    px_ask "$B/v1/chat/completions?n=2&_t=pt3" pt3 ${h:+-H "$h"} -H 'Idempotency-Key: pt-3'
    spans_wait 2 || fail "pt3: the collector did not receive two spans"
    check "pt3 (${h:-no context}): the operation is the root of a trace of its own" \
        "(map(.trace_id) | unique | length == 1) and .[0].trace_id != \"$TRACE\" and
         (map(select(.attributes[\"streamguard.attempt\"] == null))[0].parent_span_id == \"\")" \
        "$SPANS"
    fm_log "event=received&key=pt-3" | tail -n 1 | grep -q 'zz-not' &&
        fail "pt3: a malformed traceparent went upstream" ||
        pass "pt3 (${h:-no context}): upstream got the attempt's own traceparent only"
done

# ---- a fallback asked for another model: each span names the model asked ------
# the primary answers 503 (fail_first counts per key in the one server:
# the fallback, asked second, streams), the fallback is asked for its own
# model; the operation's span names the model the client asked for
OTEL_BSP_SCHEDULE_DELAY=20 px_start M --otlp "$OTLP_URL" --upstream "$UP" \
    --profile openai --attempts 2 --backoff-base 1ms \
    --fallback "$UP" --model 'gpt-4o-mini "m\u00e9"'
otlp_reset
curl -sN -m 20 -o "$FM_DIR/pt5.body" -H 'Idempotency-Key: pt-5' \
    -H 'Content-Type: application/json' \
    --data-binary '{"model":"gpt-4o\u002dlarge","stream":true}' \
    "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=2&status=503&fail_first=1&_t=pt5"
grep -q '\[DONE\]' "$FM_DIR/pt5.body" && pass "pt5: the client got the fallback's stream" ||
    fail "pt5: $(head -c 300 "$FM_DIR/pt5.body")"
spans_wait 3 || fail "pt5: the collector did not receive three spans"
check "pt5: the operation names the client's model, each attempt the model it asked" \
    '(map(select(.attributes["streamguard.attempt"] == null))[0] |
      .name == "chat gpt-4o-large" and
      .attributes["gen_ai.request.model"] == "gpt-4o-large") and
     (map(select(.attributes["streamguard.attempt"] == 1))[0] |
      .attributes["streamguard.endpoint"] == 0 and
      .attributes["http.response.status_code"] == 503 and
      .attributes["gen_ai.request.model"] == "gpt-4o-large") and
     (map(select(.attributes["streamguard.attempt"] == 2))[0] |
      .attributes["streamguard.endpoint"] == 1 and
      .attributes["streamguard.outcome"] == "ok" and
      .attributes["gen_ai.request.model"] == "gpt-4o-mini \"m\\u00e9\"")' "$SPANS"
models=$(grep -o '"models":\[[^]]*\]' "$FM_DIR/M.out" | tail -n 1)
[ "$models" = '"models":["gpt-4o\u002dlarge","gpt-4o-mini \"m\\u00e9\""]' ] &&
    pass "pt5: the report line names the same models" || fail "pt5: report line $models"

# ---- a proxy that does not trace passes the client's context through ------------
px_start P --upstream "$UP" --profile openai
px_ask "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=2&_t=pt4" pt4 \
    -H "traceparent: $TP" -H "tracestate: $TS" -H 'Idempotency-Key: pt-4'
[ "$(wire pt-4)" = "$TP $TS" ] && pass "pt4: untraced, the client's context goes as sent" ||
    fail "pt4: upstream got '$(wire pt-4)'"

px_stop_all
otlp_cleanup
fm_finish
