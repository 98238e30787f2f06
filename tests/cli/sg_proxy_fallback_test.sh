#!/usr/bin/env bash
# sg-proxy's fallbacks to another deployment of the same API, each with its
# own credential and model (docs/sg-proxy.md, "FALLBACKS"): an
# OpenAI-shaped primary (one sg-fakemodel, failing with a 503) falls back
# to another host (a second sg-fakemodel) with another key and another
# model.  Both record every request byte for byte (--record): the primary
# saw the client's key and model, the fallback its own key and model, the
# rest of the body as the client wrote it; the client got the fallback's
# stream; the report line names the model each attempt asked for and no
# key.  A body that is not JSON on such a route is refused with a 400 and
# nothing goes upstream; misplaced or bad keys are usage errors.  A
# fallback with its own profile (another provider's stream shape) is
# judged by it, and a stream of it cut by a clock ends in its format.
# Usage: sg_proxy_fallback_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_recording_upstream

check() {
    if eval "$2"; then pass "$1"; else fail "$1${3:+: $3}"; fi
}

px_recording_upstream # the primary: UP, REC, recorded TAG
# the fallback: another sg-fakemodel, on "localhost" (another host name)
REC2=$FM_DIR/rec2
mkdir -p "$REC2"
"$FM" --port 0 --quiet --record "$REC2" >"$FM_DIR/fm2.out" 2>"$FM_DIR/fm2.err" &
FM2_PID=$!
PX_PIDS+=("$FM2_PID")
FM2_PORT=$(read_port "$FM2_PID" "$FM_DIR/fm2.out" "$FM_DIR/fm2.err" "sg-fakemodel 2") || exit 1
UP2=http://localhost:$FM2_PORT

# recorded2 TAG: the fallback's file for the request with _t=TAG.
recorded2() {
    local id
    id=$(curl -sS -m 5 "http://127.0.0.1:$FM2_PORT/_log?event=received" |
        grep "_t=$1[&\"]" | grep -o '"id":[0-9]*' | head -n 1 | cut -d: -f2)
    [ -n "$id" ] && [ -f "$REC2/$id.req" ] && echo "$REC2/$id.req"
}
body_in() { sed -e '1,/^\r$/d' "$1"; }
auth_in() { grep -i '^authorization:' "$1" | tr -d '\r'; }

cat >"$FM_DIR/proxy.conf" <<CONF
[route oa]
prefix = /oa
upstream = $UP/v1
profile = openai
attempts = 2
backoff-base = 1ms
fallback = $UP2/v1
header = Authorization: Bearer sk-FALLBACK-secret
model = gpt-4o-mini
CONF
px_start F --config "$FM_DIR/proxy.conf"
B=http://127.0.0.1:$PX_PORT

# fail_first counts per Idempotency-Key in each server: the fallback's
# first request with the key is spent here, so that the primary (its
# first) fails and the fallback (its second) streams.
Q='n=3&status=503&fail_first=1'
curl -s -o /dev/null -m 5 -H 'Idempotency-Key: fb-1' -d '{}' \
    "$UP2/v1/chat/completions?$Q&_t=warm"
BODY='{"model":"gpt-4o","messages":[{"role":"user","content":"say \"model\": x"}],"meta":{"model":"keep"},"stream":true}'
WANT2='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"say \"model\": x"}],"meta":{"model":"keep"},"stream":true}'
curl -sN -m 10 -o "$FM_DIR/fb.resp" -D "$FM_DIR/fb.head" -H 'Content-Type: application/json' \
    -H 'Authorization: Bearer sk-PRIMARY-secret' -H 'x-api-key: sk-PRIMARY-secret2' \
    -H 'X-Trace: t-1' -H 'Idempotency-Key: fb-1' \
    --data-binary "$BODY" "$B/oa/chat/completions?$Q&_t=fb"

p=$(recorded fb)
f=$(recorded2 fb)
check "the primary received the request" '[ -n "$p" ]'
check "the fallback received the request" '[ -n "$f" ]'
if [ -n "$p" ] && [ -n "$f" ]; then
    check "the primary saw the client's key" \
        '[ "$(auth_in "$p")" = "Authorization: Bearer sk-PRIMARY-secret" ]' "$(auth_in "$p")"
    check "the primary saw the client's body, its model gpt-4o" \
        '[ "$(body_in "$p")" = "$BODY" ]' "$(body_in "$p")"
    check "the fallback saw its own key, once, not the client's" \
        '[ "$(auth_in "$f")" = "Authorization: Bearer sk-FALLBACK-secret" ]' "$(auth_in "$f")"
    check "... and none of the client's credentials under another name" \
        '! grep -qi "^x-api-key:" "$f" && ! grep -q PRIMARY "$f"'
    check "... and the client's other headers" 'grep -q "^X-Trace: t-1" "$f"'
    check "the primary saw the client's x-api-key too" 'grep -q "^x-api-key: sk-PRIMARY-secret2" "$p"'
    check "the fallback saw model gpt-4o-mini, the rest of the body as written" \
        '[ "$(body_in "$f")" = "$WANT2" ]' "$(body_in "$f")"
    check "... with that body's Content-Length" \
        '[ "$(grep -i "^content-length:" "$f" | tr -dc 0-9)" = "${#WANT2}" ]'
fi
check "the client got the fallback's stream whole" \
    'grep -q "^HTTP/1.1 200" "$FM_DIR/fb.head" && [ "$(tail -n 2 "$FM_DIR/fb.resp" | head -n 1)" = "data: [DONE]" ]' \
    "$(head -c 400 "$FM_DIR/fb.resp")"
# the report line is written as the operation ends: wait up to 2 s for it
for _ in $(seq 1 100); do
    line=$(grep '"route":"oa"' "$FM_DIR/F.out" | head -n 1)
    [ -n "$line" ] && break
    sleep 0.02
done
check "the report line names the model each attempt asked for" \
    '[ "$(jq -c .models <<<"$line")" = "[\"gpt-4o\",\"gpt-4o-mini\"]" ] &&
     [ "$(jq -r ".report.attempts[1].endpoint" <<<"$line")" = "http://localhost:$FM2_PORT/v1/chat/completions" ] &&
     [ "$(jq -r .report.outcome <<<"$line")" = ok ]' "$line"
check "no key in the report line" '! grep -q "secret" "$FM_DIR/F.out"'

# a body that is not JSON cannot take the fallback's model: 400, nothing sent
before=$(px_received)
code=$(curl -s -m 10 -o "$FM_DIR/bad.resp" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary '{"model":"gpt-4o",' "$B/oa/chat/completions?n=3&_t=bad")
check "a body that is not JSON: 400, saying why" \
    '[ "$code" = 400 ] && grep -q "not JSON" "$FM_DIR/bad.resp"' "$code $(cat "$FM_DIR/bad.resp")"
check "... and nothing went upstream" '[ "$(px_received)" = "$before" ] && [ -z "$(recorded2 bad)" ]'

# a body without a top-level model goes as written to both
curl -s -o /dev/null -m 5 -H 'Idempotency-Key: fb-2' -d '{}' "$UP2/v1/chat/completions?$Q&_t=warm2"
NOM='{"messages":[],"meta":{"model":"nested"},"stream":true}'
curl -sN -m 10 -o /dev/null -H 'Idempotency-Key: fb-2' --data-binary "$NOM" \
    "$B/oa/chat/completions?$Q&_t=nom"
f=$(recorded2 nom)
check "a body without a top-level model reaches the fallback as written" \
    '[ -n "$f" ] && [ "$(body_in "$f")" = "$NOM" ]'

# A fallback with its own profile (docs/sg-proxy.md, "FALLBACKS"): an
# OpenAI primary's 503, then another provider's stream (sg-fakemodel's
# Anthropic shape), judged by the fallback's profile - its message_stop
# the clean end, no [DONE] - where the route's profile alone calls it
# truncated; a stream of it cut by a clock ends in its own error format.
cat >"$FM_DIR/profile.conf" <<CONF
[route an]
prefix = /an
upstream = $UP/v1
profile = openai
attempts = 2
backoff-base = 1ms
idle = 300ms
fallback = $UP2/v1
profile = anthropic
[route cut]
prefix = /cut
upstream = http://127.0.0.1:1/v1
profile = openai
attempts = 2
backoff-base = 1ms
idle = 300ms
fallback = $UP2/v1
profile = anthropic
[route one]
prefix = /one
upstream = $UP/v1
profile = openai
attempts = 2
backoff-base = 1ms
fallback = $UP2/v1
CONF
px_start P --config "$FM_DIR/profile.conf"
PB=http://127.0.0.1:$PX_PORT
# report_of ROUTE: the first report line of ROUTE (2 s at most)
report_of() {
    local line=
    for _ in $(seq 1 100); do
        line=$(grep "\"route\":\"$1\"" "$FM_DIR/P.out" | head -n 1)
        [ -n "$line" ] && break
        sleep 0.02
    done
    echo "$line"
}
QA='format=anthropic&n=3&gap=1&status=503&fail_first=1'
for k in an one; do
    curl -s -o /dev/null -m 5 -H "Idempotency-Key: pf-$k" -d '{}' \
        "$UP2/v1/chat/completions?$QA&_t=warm-$k"
    curl -sN -m 10 -o "$FM_DIR/pf-$k.resp" -D "$FM_DIR/pf-$k.head" -H "Idempotency-Key: pf-$k" \
        -H 'Content-Type: application/json' --data-binary '{"model":"m","stream":true}' \
        "$PB/$k/chat/completions?$QA&_t=pf-$k"
done
line=$(report_of an)
check "a fallback's own profile judges its stream: ok, its message_stop the end" \
    '[ "$(jq -r .report.outcome <<<"$line")" = ok ] &&
     [ "$(jq -c "[.report.attempts[].profile]" <<<"$line")" = "[\"openai\",\"anthropic\"]" ] &&
     [ "$(jq -r ".report.attempts[1].usage.source" <<<"$line")" = provider ]' "$line"
check "... and the client got that stream whole" \
    'grep -q "^HTTP/1.1 200" "$FM_DIR/pf-an.head" && grep -q "^event: message_stop" "$FM_DIR/pf-an.resp"' \
    "$(head -c 300 "$FM_DIR/pf-an.resp")"
# /metrics labels each attempt's tokens with its own provider: the
# fallback's usage is Anthropic's, not the route's OpenAI
curl -s "$PB/metrics" >"$FM_DIR/pf.metrics"
an='route="an",gen_ai_operation_name="chat",gen_ai_provider_name='
check "/metrics counts a fallback's tokens under its own profile's provider" \
    'grep -q "^gen_ai_client_token_usage_count{${an}\"anthropic\",gen_ai_token_type=\"input\",streamguard_usage_fate=\"kept\"} 1$" "$FM_DIR/pf.metrics" &&
     ! grep -q "^gen_ai_client_token_usage_count{${an}\"openai\"" "$FM_DIR/pf.metrics"' \
    "$(grep "^gen_ai_client_token_usage_count{route=\"an\"" "$FM_DIR/pf.metrics")"
line=$(report_of one)
check "without it the route's profile misjudges the fallback: truncated" \
    '[ "$(jq -r .report.outcome <<<"$line")" = truncated ] &&
     [ "$(jq -c "[.report.attempts[].profile]" <<<"$line")" = "[\"openai\",\"openai\"]" ]' "$line"
# the primary refuses the connection, the fallback stalls after its first
# token: the idle clock cuts it, and the client reads the cut in the
# fallback's format (Anthropic's event: error), not the route's
curl -sN -m 10 -o "$FM_DIR/pf-cut.resp" -H 'Idempotency-Key: pf-cut' \
    --data-binary '{"model":"m","stream":true}' \
    "$PB/cut/chat/completions?format=anthropic&n=3&stall_after=2&stall=forever&_t=pf-cut"
line=$(report_of cut)
check "a cut fallback stream ends in its own profile's error format" \
    'grep -q "^event: error" "$FM_DIR/pf-cut.resp" && grep -q "\"type\":\"error\"" "$FM_DIR/pf-cut.resp" &&
     ! grep -q "^data: {\"error\"" "$FM_DIR/pf-cut.resp" &&
     [ "$(jq -r .report.outcome <<<"$line")" = idle_timeout ] &&
     [ "$(jq -c "[.report.attempts[].profile]" <<<"$line")" = "[\"openai\",\"anthropic\"]" ]' \
    "$(tail -c 300 "$FM_DIR/pf-cut.resp") $line"

# the keys' errors
usage_err() {
    local want=$1
    shift
    local err
    err=$("$PX" --listen 127.0.0.1:0 "$@" 2>&1 >/dev/null)
    check "usage error: $want" '[ $? -ne 0 ] && grep -qF "$want" <<<"$err"' "$err"
}
usage_err "model is the fallback's named before it" --upstream "$UP" --model m
usage_err "header is the fallback's named before it" --upstream "$UP" --header 'A: b'
usage_err 'header takes "Name: value"' --upstream "$UP" --fallback "$UP2" --header 'no colon'
usage_err 'header takes "Name: value"' --upstream "$UP" --fallback "$UP2" --header 'Host: x'
usage_err "model takes 1 to 256 bytes" --upstream "$UP" --fallback "$UP2" --model ''
usage_err "profile takes openai" --upstream "$UP" --profile openai --fallback "$UP2" --profile nope
usage_err "fallback 1 needs profile openai" --upstream "$UP" --profile openai --include-usage \
    --fallback "$UP2" --profile anthropic
# (a route's profile given after its fallbacks is still the route's:
# cli.sg_proxy starts one so)

px_stop_all
fm_finish
