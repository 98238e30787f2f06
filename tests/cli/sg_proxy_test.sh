#!/usr/bin/env bash
# sg-proxy end to end, with the curl command as the client and a real
# sg-fakemodel as the upstream, every socket on loopback: a stream passes
# through byte for byte; retries before the first token are invisible; a
# stall, a drop or a cut after it ends in the provider's in-band error;
# failures before it are an HTTP status with the provider's error body;
# the inbound deadline shrinks the upstream's; garbage and slowloris
# clients, oversized heads and bodies and a full connection table leave it
# serving the rest; SIGTERM drains; the report lines never carry secrets.
# Timing is measured (bash's EPOCHREALTIME, stamped as each line arrives)
# and held to bounds, never proven by a sleep.
# Usage: sg_proxy_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_upstream
SECRET=sk-proxytest-SECRET-4af1
ANT_SECRET=sk-ant-SECRET-77c2
BODY='{"model":"sg-fakemodel","stream":true,"messages":[{"role":"user","content":"hi"}]}'

# now_ms: wall-clock milliseconds with microsecond resolution, no fork.
now_ms() {
    local t=${EPOCHREALTIME/./}
    echo "$((t / 1000))"
}

# nrep NAME: how many report lines proxy NAME has written.
nrep() {
    local n
    n=$(wc -l <"$FM_DIR/$1.out")
    echo $((n - 1))
}

# report NAME N: report line N of proxy NAME, waiting up to 5 s for it.
report() {
    for _ in $(seq 1 100); do
        [ "$(nrep "$1")" -ge "$2" ] && break
        sleep 0.05
    done
    sed -n "$(($2 + 1))p" "$FM_DIR/$1.out"
}

# stamp: each line of stdin prefixed with its arrival time in ms (3 decimals).
stamp() {
    local line t
    while IFS= read -r line || [ -n "$line" ]; do
        t=${EPOCHREALTIME/./}
        printf '%d.%03d %s\n' "$((t / 1000))" "$((t % 1000))" "$line"
    done
}

# preq PORT TAG KEY URLPATH [curl options...]: a POST through the proxy
# as an SDK sends it (JSON body, credentials, Idempotency-Key KEY unless
# KEY is -); headers to TAG.hdr, body to TAG.body, status in $CODE, its
# duration in ms in $EL.
preq() {
    local port=$1 tag=$2 key=$3 path=$4 t0
    shift 4
    local kh=()
    [ "$key" != - ] && kh=(-H "Idempotency-Key: $key")
    t0=$(now_ms)
    CODE=$(curl -sN -m 15 -o "$FM_DIR/$tag.body" -D "$FM_DIR/$tag.hdr" -w '%{http_code}' \
        -H 'Content-Type: application/json' -H "Authorization: Bearer $SECRET" \
        -H "x-api-key: $ANT_SECRET" "${kh[@]}" "$@" \
        -d "$BODY" \
        "http://127.0.0.1:$port$path")
    EL=$(($(now_ms) - t0))
}

# clean TAG N: TAG's answer is a 200 with N items and the [DONE] end.
clean() {
    [ "$CODE" = 200 ] && [ "$(grep -c '"content":"tok' "$FM_DIR/$1.body")" -eq "$2" ] && ends_done "$FM_DIR/$1.body"
}

# hdr TAG NAME: the value of response header NAME (case-insensitive).
hdr() {
    grep -i "^$2:" "$FM_DIR/$1.hdr" | head -n 1 | sed 's/^[^:]*: *//' | tr -d '\r'
}

# upstream_ids KEY: the sg-fakemodel request ids of the requests with KEY.
upstream_ids() {
    fm_log "key=$1&event=received" | grep -o '"id":[0-9]*' | cut -d: -f2
}

# check DESCRIPTION CONDITION [DETAIL]: CONDITION (shell, eval'd) holds.
check() {
    if eval "$2"; then pass "$1"; else fail "$1${3:+: $3}"; fi
}

# jqcheck DESCRIPTION JSON FILTER [jq options]: FILTER is true of JSON.
jqcheck() {
    if jq -e "${@:4}" "$3" <<<"$2" >/dev/null 2>&1; then pass "$1"; else fail "$1: $(head -c 600 <<<"$2")"; fi
}

# inband TAG N WHAT TYPE...: TAG.body holds N items, then, as its last
# event (ended by a blank line, no [DONE] after it), an OpenAI in-band error
# whose type and code are one of TYPE... and whose message begins
# "sg-proxy: <type>".
inband() {
    local body=$FM_DIR/$1.body n=$2 what=$3 err types names
    shift 3
    types=$(printf '"%s",' "$@")
    names="$*"
    err=$(grep '^data: {"error":' "$body")
    check "$what: $n items, then the in-band error" \
        '[ "$(grep -c "\"content\":\"tok" "$body")" -eq "$n" ] && [ -n "$err" ]' "$(head -c 600 "$body")"
    jqcheck "$what: the error names ${names// / or } in type, code and message" "${err#data: }" \
        ".error.type as \$t | ([${types%,}] | any(.[]; . == \$t)) and .error.code == \$t and (.error.message | startswith(\"sg-proxy: \" + \$t))"
    check "$what: the error is the last event, ended by a blank line, no [DONE]" \
        '[ "$(grep -v "^$" "$body" | tail -n 1)" = "$err" ] && [ -z "$(tail -n 1 "$body")" ] && ! grep -q "\[DONE\]" "$body"'
}

# ends_done FILE: the body ends with data: [DONE] and its blank line.
ends_done() {
    [ "$(tail -n 2 "$1" | head -n 1)" = "data: [DONE]" ] && [ -z "$(tail -n 1 "$1")" ]
}

# ---- usage ------------------------------------------------------------------
rc=0
timeout 5 "$PX" --upstream "$UP" --profile openai --listen 0.0.0.0:0 \
    >"$FM_DIR/remote.out" 2>"$FM_DIR/remote.err" || rc=$?
check "a non-loopback --listen without --allow-remote is a usage error (exit 2)" '[ "$rc" -eq 2 ]' \
    "exit $rc, stderr: $(head -c 300 "$FM_DIR/remote.err")"
check "... and it listens on nothing (no port printed)" '[ ! -s "$FM_DIR/remote.out" ]'
# settings that cannot work are said at start, one line each, not served
for bad in "--profile nosuch" "--cacert /nonexistent/ca.pem" "--floor 2s --budget 1s" \
    "--max-hedges 2" "--budget 0" "--idempotent --hedge-after 100ms --max-hedges 0"; do
    rc=0
    # shellcheck disable=SC2086
    timeout 5 "$PX" --listen 127.0.0.1:0 --upstream "$UP" --profile openai $bad \
        >"$FM_DIR/bad.out" 2>"$FM_DIR/bad.err" || rc=$?
    check "sg-proxy $bad: a usage error, one line (exit 2)" \
        '[ "$rc" -eq 2 ] && [ "$(wc -l <"$FM_DIR/bad.err")" -eq 1 ] && ! grep -q -- "--no " "$FM_DIR/bad.err"' \
        "exit $rc: $(cat "$FM_DIR/bad.err")"
done

# one end of the backoff given, the other is the library's (10 s cap, 100 ms
# base) or the given one where that would not fit: served, not refused - it
# prints its port, and SIGTERM ends it (exit 0).  Not under timeout(1): its
# SIGCONT after the SIGTERM can land while LeakSanitizer stops the exiting
# proxy and hang it (sg_proxy_lib.sh, px_stop_all).
for one in "--backoff-base 5s" "--backoff-base 20s" "--backoff-max 50ms"; do
    # shellcheck disable=SC2086
    px_start one --upstream "$UP" --profile openai $one
    kill -TERM "$PX_PID"
    rc=0
    wait "$PX_PID" || rc=$?
    check "sg-proxy $one alone: serves (its port printed; SIGTERM, exit 0)" '[ "$rc" -eq 0 ]' \
        "exit $rc: $(cat "$FM_DIR/one.err")"
done

# a client header of 8 KiB or more reaches the upstream whole (it was once
# dropped without a word): the upstream counts 12,000 bytes of it
px_start big --upstream "$UP" --profile openai
big=$(head -c 12000 /dev/zero | tr '\0' a)
curl -sN -X POST -d '{}' -H "Idempotency-Key: px-big" -H "X-Big: $big" \
    "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=1&_t=px_big" >"$FM_DIR/big.body"
hb=$(fm_field px-big received header_bytes)
check "a 12,000-byte header reaches the upstream whole" '[ "${hb:-0}" -gt 12000 ]' \
    "the upstream counted ${hb:-no} header bytes"
check "... and the stream came back" 'ends_done "$FM_DIR/big.body"' "$(tail -c 300 "$FM_DIR/big.body")"

# ---- B: the main proxy, no --idempotent --------------------------------------
# Each request here stands alone: what one teaches the proxy about the
# upstream (a 429's Retry-After, failures in a row) would hold the next
# back - endpoint health, which sg_proxy_health_test.sh checks - so it is
# off for this proxy and the next.
px_start B --upstream "$UP" --profile openai --first-item 300ms --idle 300ms --attempts 3 \
    --backoff-base 5ms --backoff-max 20ms --budget 10s --health off
PB=$PX_PORT

PB_PID=$PX_PID
nb=0

# A normal stream, byte for byte as sg-fakemodel sends it.  sg-fakemodel's
# body is deterministic for a scenario except the request id it writes into
# every chunk ("chatcmpl-<id>", the id of the request in its log): the
# direct body is compared after putting the proxied request's upstream id
# in place of the direct request's own.
Q='/v1/chat/completions?n=6&gap=10&_t=px_whole'
curl -sN -m 15 -o "$FM_DIR/direct.body" -H 'Content-Type: application/json' \
    -H 'Idempotency-Key: px-whole-direct' -d '{"model":"sg-fakemodel","stream":true}' "$UP$Q"
preq "$PB" whole px-whole "$Q"
nb=$((nb + 1))
did=$(upstream_ids px-whole-direct)
pid_=$(upstream_ids px-whole)
check "normal stream: 200" '[ "$CODE" = 200 ]' "got $CODE"
check "normal stream: one upstream request" '[ "$(echo "$pid_" | wc -w)" -eq 1 ]' "ids: $pid_"
sed "s/\"chatcmpl-$did\"/\"chatcmpl-$pid_\"/g" "$FM_DIR/direct.body" >"$FM_DIR/direct.masked"
check "normal stream: the body is byte for byte the upstream's (request id aside)" \
    'cmp -s "$FM_DIR/direct.masked" "$FM_DIR/whole.body"' \
    "$(diff "$FM_DIR/direct.masked" "$FM_DIR/whole.body" | head -c 400)"
check "normal stream: it ends with [DONE]" 'ends_done "$FM_DIR/whole.body"'
check "normal stream: Content-Type text/event-stream" '[[ "$(hdr whole Content-Type)" == text/event-stream* ]]' \
    "$(hdr whole Content-Type)"
check "normal stream: Connection: close" '[ "$(hdr whole Connection | tr A-Z a-z)" = close ]'
check "normal stream: no Content-Length, no chunked framing" \
    '[ -z "$(hdr whole Content-Length)" ] && [ -z "$(hdr whole Transfer-Encoding)" ]'
check "route: the client's path and query are appended to the upstream's" \
    '[ "$(fm_field px-whole received path)" = /v1/chat/completions ] &&
     [ "$(fm_field px-whole received query)" = "n=6&gap=10&_t=px_whole" ]' \
    "$(fm_log 'key=px-whole&event=received')"
check "route: the client's method reaches the upstream" '[ "$(fm_field px-whole received method)" = POST ]'
check "the request body reaches the upstream whole (body_bytes ${#BODY})" \
    '[ "$(fm_field px-whole received body_bytes)" = "${#BODY}" ]' "$(fm_field px-whole received body_bytes)"
r=$(report B "$nb")
jqcheck "report line: route default, the client's address, the library's report" "$r" \
    '.route == "default" and (.client | test("^127[.]0[.]0[.]1:[0-9]+$")) and .report.outcome == "ok" and (.report.attempts | length == 1)'

# paced WHAT KEY SCENARIO: four items 150 ms apart through proxy B reach
# the client spread over about 450 ms - as they arrive, not at the end.
# The scenario's lines may end with a bare CR: stamped line by line either way.
paced() {
    curl -sN -m 15 -H 'Content-Type: application/json' -H "Idempotency-Key: $2" -d '{"stream":true}' \
        "http://127.0.0.1:$PB/v1/chat/completions?n=4&gap=150&$3&_t=$2" |
        stdbuf -o0 tr '\r' '\n' | stamp >"$FM_DIR/$2.t"
    nb=$((nb + 1))
    local t_first t_last spread
    t_first=$(grep '"content":"tok0"' "$FM_DIR/$2.t" | cut -d' ' -f1)
    t_last=$(grep '"content":"tok3"' "$FM_DIR/$2.t" | cut -d' ' -f1)
    spread=$(awk -v a="$t_first" -v b="$t_last" 'BEGIN { printf "%.1f", b - a }')
    check "$1: tok0 to tok3 (upstream 450 ms apart) took ${spread} ms at the client (bound >= 400)" \
        '[ -n "$t_first" ] && [ -n "$t_last" ] && ge "$spread" 400'
}
paced "items stream through as they arrive" px-paced "_x=1"
# the standard allows lines that end with a bare CR: each event still goes
# when it is whole
paced "CR-ended events stream through too" px-paced-cr "eol=cr"

# A mid-stream stall: the in-band OpenAI error naming idle_timeout, within
# the idle clock (300 ms) plus slack of the last item, then the end.
curl -sN -m 15 -D "$FM_DIR/stall.hdr" -H 'Content-Type: application/json' \
    -H 'Idempotency-Key: px-stall' -H "Authorization: Bearer $SECRET" -d '{"stream":true}' \
    "http://127.0.0.1:$PB/v1/chat/completions?n=9&gap=10&stall_after=3&stall=forever&_t=px_stall" |
    stamp >"$FM_DIR/stall.t"
nb=$((nb + 1))
cut -d' ' -f2- "$FM_DIR/stall.t" >"$FM_DIR/stall.body"
inband stall 3 stall idle_timeout
t_last=$(grep '"content":"tok2"' "$FM_DIR/stall.t" | cut -d' ' -f1)
t_err=$(grep ' data: {"error":' "$FM_DIR/stall.t" | cut -d' ' -f1)
gap=$(awk -v a="$t_last" -v b="$t_err" 'BEGIN { printf "%.1f", b - a }')
check "stall: the error came ${gap} ms after the last item (idle 300 ms; bound 250..450)" \
    'ge "$gap" 250 && ge 450 "$gap"'
r=$(report B "$nb")
jqcheck "stall: the report says idle_timeout, partial, one attempt (never retried)" "$r" \
    '.report.outcome == "idle_timeout" and .report.partial == true and (.report.attempts | length == 1)'
check "stall: the upstream saw one request" '[ "$(fm_count px-stall received)" -eq 1 ]'

# A mid-stream drop: the in-band error names truncated or transport_error.
preq "$PB" drop px-drop '/v1/chat/completions?n=9&gap=10&drop_after=3&_t=px_drop'
nb=$((nb + 1))
check "drop: 200" '[ "$CODE" = 200 ]' "got $CODE"
inband drop 3 drop truncated transport_error
check "drop: never retried (one upstream request)" '[ "$(fm_count px-drop received)" -eq 1 ]'

# A cut in the middle of an event: the error must be an event of its own
# (preceded by a blank line), so no SSE parser joins it to the half event.
# The contract lets the proxy end the half event with a blank line; it may
# instead drop it (end on the last whole event): both are accepted, and
# the check says which it saw.
preq "$PB" cut px-cut '/v1/chat/completions?n=9&gap=10&cut_at=3&cut=drop&_t=px_cut'
nb=$((nb + 1))
if [ "$(grep -c '^data: {"id"' "$FM_DIR/cut.body")" -gt 3 ]; then
    half="the half event ended by a blank line"
else
    half="the half event dropped"
fi
check "cut mid-event: 3 whole items, then the in-band error as an event of its own ($half)" \
    '[ "$(grep -c "\"content\":\"tok[0-2]\"" "$FM_DIR/cut.body")" -eq 3 ] && grep -q "^data: {\"error\":" "$FM_DIR/cut.body" &&
     awk "/^data: \\{\"error\":/ { exit !(prev == \"\") } { prev = \$0 }" "$FM_DIR/cut.body"' \
    "$(tail -c 600 "$FM_DIR/cut.body")"
err=$(grep '^data: {"error":' "$FM_DIR/cut.body")
jqcheck "cut mid-event: the error names truncated or transport_error" "${err#data: }" \
    '.error.type == "truncated" or .error.type == "transport_error"'

# 429, then success, with an Idempotency-Key: invisible.
preq "$PB" r429 px-429 '/v1/chat/completions?n=4&gap=5&status=429&fail_first=1&_t=px_429'
nb=$((nb + 1))
check "429 then success: the client sees 200 and the whole stream" \
    'clean r429 4' \
    "$CODE $(head -c 300 "$FM_DIR/r429.body")"
check "429 then success: nothing of the 429 reaches the client" '! grep -q "scripted status" "$FM_DIR/r429.body"'
check "429 then success: the upstream saw 2 requests with the same key" '[ "$(fm_count px-429 received)" -eq 2 ]'
r=$(report B "$nb")
jqcheck "429 then success: the report shows 2 attempts, ok" "$r" '.report.outcome == "ok" and (.report.attempts | length == 2)'

# A persistent 429: passed through with its Retry-After.
preq "$PB" p429 px-p429 '/v1/chat/completions?status=429&retry_after=1&_t=px_p429'
nb=$((nb + 1))
check "persistent 429: status 429" '[ "$CODE" = 429 ]' "got $CODE"
check "persistent 429: Retry-After passed through" '[ "$(hdr p429 Retry-After)" = 1 ]' "$(cat "$FM_DIR/p429.hdr")"
check "persistent 429: X-SG-Outcome: http_error" '[ "$(hdr p429 X-SG-Outcome)" = http_error ]' "$(hdr p429 X-SG-Outcome)"
jqcheck "persistent 429: the upstream's own error body" "$(cat "$FM_DIR/p429.body")" \
    '.error.message == "sg-fakemodel scripted status 429" and .error.code == 429'

preq "$PB" p503 px-p503 '/v1/chat/completions?status=503&retry_after=0&_t=px_p503'
nb=$((nb + 1))
check "persistent 503: status 503, Retry-After passed through, X-SG-Outcome: http_error" \
    '[ "$CODE" = 503 ] && [ "$(hdr p503 Retry-After)" = 0 ] && [ "$(hdr p503 X-SG-Outcome)" = http_error ]' \
    "$CODE $(tr '\r\n' '  ' <"$FM_DIR/p503.hdr")"

# Anthropic's overloaded 529 is the upstream's 503: passed through with when
# to come back, in seconds and (retry-after-ms, read first by the SDKs) ms.
preq "$PB" p529 px-p529 '/v1/chat/completions?status=529&retry_after_ms=1500&_t=px_p529'
nb=$((nb + 1))
check "persistent 529: status 529, Retry-After 2 and retry-after-ms 1500 passed through" \
    '[ "$CODE" = 529 ] && [ "$(hdr p529 Retry-After)" = 2 ] && [ "$(hdr p529 retry-after-ms)" = 1500 ]' \
    "$CODE $(tr '\r\n' '  ' <"$FM_DIR/p529.hdr")"
check "persistent 503: retry-after-ms beside Retry-After" '[ "$(hdr p503 retry-after-ms)" = 0 ]' \
    "$(tr '\r\n' '  ' <"$FM_DIR/p503.hdr")"

# The upstream refused the request as the client's own error (4xx): the
# client gets that status, not a 502 it would read as the proxy's failure
# (and that its SDK would retry).
preq "$PB" s401 px-401 '/v1/chat/completions?status=401&_t=px_401'
nb=$((nb + 1))
check "upstream 401: 401 with X-SG-Outcome http_error" \
    '[ "$CODE" = 401 ] && [ "$(hdr s401 X-SG-Outcome)" = http_error ]' "$CODE $(hdr s401 X-SG-Outcome)"
check "upstream 401: sent once" '[ "$(fm_count px-401 received)" -eq 1 ]' "$(fm_count px-401 received)"
jqcheck "upstream 401: the upstream's own error body, what it said" "$(cat "$FM_DIR/s401.body")" \
    '.error.message == "sg-fakemodel scripted status 401" and .error.code == 401'
check "upstream 401: the upstream's Content-Type" '[ "$(hdr s401 Content-Type)" = application/json ]' "$(hdr s401 Content-Type)"
preq "$PB" s404 px-404 '/v1/chat/completions?status=404&error_pad=5000&_t=px_404'
nb=$((nb + 1))
check "upstream 404: 404" '[ "$CODE" = 404 ]' "$CODE"
jqcheck "upstream 404 with a body longer than the library keeps: the proxy's own, not a cut one" \
    "$(cat "$FM_DIR/s404.body")" '.error.type == "http_error"'

# Any other upstream failure before the first token: 502.
preq "$PB" s500 px-500 '/v1/chat/completions?status=500&_t=px_500'
nb=$((nb + 1))
check "upstream 500: 502 with X-SG-Outcome http_error" \
    '[ "$CODE" = 502 ] && [ "$(hdr s500 X-SG-Outcome)" = http_error ]' "$CODE $(hdr s500 X-SG-Outcome)"
jqcheck "upstream 500: the 502 is the proxy's, its body says so" "$(cat "$FM_DIR/s500.body")" \
    '.error.type == "http_error"'

# A slow first token on every attempt: 504 first_item_timeout, long before
# the upstream's 3 s.
preq "$PB" slow px-slow '/v1/chat/completions?first_delay=3000&_t=px_slow'
nb=$((nb + 1))
check "slow first token every time: 504" '[ "$CODE" = 504 ]' "got $CODE"
check "slow first token every time: X-SG-Outcome: first_item_timeout" \
    '[ "$(hdr slow X-SG-Outcome)" = first_item_timeout ]' "$(hdr slow X-SG-Outcome)"
jqcheck "slow first token every time: an OpenAI error body naming it" "$(cat "$FM_DIR/slow.body")" \
    '.error.type == "first_item_timeout" and .error.code == "first_item_timeout"'
check "slow first token every time: retried with the key (3 upstream requests)" \
    '[ "$(fm_count px-slow received)" -eq 3 ]' "$(fm_count px-slow received)"
check "slow first token every time: answered in ${EL} ms (3 x 300 ms first-item clocks; bound 2500)" \
    '[ "$EL" -lt 2500 ]'

# Many attempts that each got bytes (keepalives) but no first token: each
# one's held bytes go when it ends, so the eighth is as free as the first.
px_start many --upstream "$UP" --profile openai --first-item 150ms --attempts 8 \
    --backoff-base 5ms --backoff-max 20ms --budget 10s --health off
preq "$PX_PORT" many px-many '/v1/chat/completions?first_delay=3000&keepalive=40&_t=px_many'
check "eight attempts with bytes and no token: 504" '[ "$CODE" = 504 ]' "got $CODE, $(hdr many X-SG-Outcome)"
check "eight attempts with bytes and no token: all 8 sent" \
    '[ "$(fm_count px-many received)" -eq 8 ]' "$(fm_count px-many received)"

# A key longer than the library keeps (127) is still the upstream's: sent
# as the client sent it.
LONGKEY=$(printf 'k%.0s' $(seq 1 128))
preq "$PX_PORT" longkey "$LONGKEY" '/v1/chat/completions?n=2&_t=px_longkey'
check "a 128-character Idempotency-Key: answered" 'clean longkey 2' "got $CODE"
check "a 128-character Idempotency-Key reaches the upstream" \
    '[ "$(fm_count "$LONGKEY" received)" -eq 1 ]' "$(fm_count "$LONGKEY" received)"

# The same without a key on a proxy without --idempotent: a POST that was
# sent and timed out is not safe to repeat.
preq "$PB" unsafe - '/v1/chat/completions?first_delay=3000&_t=px_unsafe'
nb=$((nb + 1))
check "unsafe POST (no key) that timed out: 504, not retried (1 upstream request)" \
    '[ "$CODE" = 504 ] && [ "$(fm_log event=received | grep -c "_t=px_unsafe")" -eq 1 ]' \
    "$CODE, $(fm_log event=received | grep -c "_t=px_unsafe") requests"

# The inbound deadline shrinks the upstream's; request headers are
# forwarded (X-SG-Scenario here), and the upstream always gets a deadline.
preq "$PB" dl px-deadline '/v1/chat/completions?_t=px_deadline' -H 'X-Deadline-Ms: 1500' \
    -H 'X-SG-Scenario: n=2&gap=5'
nb=$((nb + 1))
xd=$(fm_field px-deadline received x_deadline_ms)
check "X-Deadline-Ms 1500: the upstream saw x_deadline_ms=$xd (0 < it <= 1500)" \
    '[[ "$xd" =~ ^[0-9]+$ ]] && [ "$xd" -gt 0 ] && [ "$xd" -le 1500 ]'
check "request headers are forwarded (X-SG-Scenario)" \
    '[ "$(grep -c "\"content\":\"tok" "$FM_DIR/dl.body")" -eq 2 ]' "$(head -c 300 "$FM_DIR/dl.body")"
r=$(report B "$nb")
jqcheck "X-Deadline-Ms 1500: the report's budget is the tighter one (<= 1500 ms)" "$r" '.report.budget_ms <= 1500'
preq "$PB" grpc px-grpc '/v1/chat/completions?n=1&_t=px_grpc' -H 'grpc-timeout: 1200m'
nb=$((nb + 1))
xd=$(fm_field px-grpc received x_deadline_ms)
check "grpc-timeout 1200m: the upstream saw x_deadline_ms=$xd (0 < it <= 1200)" \
    '[[ "$xd" =~ ^[0-9]+$ ]] && [ "$xd" -gt 0 ] && [ "$xd" -le 1200 ]'
# An inbound deadline too short to lease anything: the operation ends inside
# its own start (budget_exhausted, nothing sent) - a 504, and the proxy
# serves on (the connection was once freed under the caller's feet).
preq "$PB" dl3 - '/v1/chat/completions?n=1&_t=px_dl3' -H 'X-Deadline-Ms: 3'
nb=$((nb + 1))
check "X-Deadline-Ms: 3 leaves nothing: 504, never sent" \
    '[ "$CODE" = 504 ] && [ "$(fm_log event=received | grep -c "_t=px_dl3")" -eq 0 ]' "$CODE"
preq "$PB" dl3b - '/v1/chat/completions?n=1&_t=px_dl3b' -H 'grpc-timeout: 1m'
nb=$((nb + 1))
check "grpc-timeout: 1m leaves nothing: 504" '[ "$CODE" = 504 ]' "$CODE"
preq "$PB" dl3c - '/v1/chat/completions?n=2&_t=px_dl3c'
check "and the proxy serves on: 200" '[ "$CODE" = 200 ] && kill -0 "$PB_PID" 2>/dev/null' "$CODE"
nb=$((nb + 1))
xd=$(fm_field px-whole received x_deadline_ms)
check "no inbound deadline: the upstream still gets X-Deadline-Ms ($xd <= --budget 10s)" \
    '[[ "$xd" =~ ^[0-9]+$ ]] && [ "$xd" -gt 0 ] && [ "$xd" -le 10000 ]'

# ---- A: --idempotent, a slow first token on the first attempt only -----------
px_start A --upstream "$UP" --profile openai --first-item 300ms --attempts 3 --idempotent \
    --backoff-base 5ms --backoff-max 20ms --budget 10s
PA=$PX_PORT
preq "$PA" tail px-tail '/v1/chat/completions?n=5&gap=5&tail_first=1&tail_delay=3000&_t=px_tail'
ids=$(upstream_ids px-tail)
second=$(echo "$ids" | sed -n 2p)
check "slow first token once: 200, one clean stream" \
    '[ "$CODE" = 200 ] && [ "$(grep -c "\"content\":\"tok" "$FM_DIR/tail.body")" -eq 5 ] &&
     grep -q "^data: \[DONE\]" "$FM_DIR/tail.body" && ! grep -q "\"error\"" "$FM_DIR/tail.body"' \
    "$CODE $(head -c 400 "$FM_DIR/tail.body")"
check "slow first token once: every byte from the second attempt (request $second)" \
    '[ -n "$second" ] && [ "$(grep -o "chatcmpl-[0-9]*" "$FM_DIR/tail.body" | sort -u)" = "chatcmpl-$second" ]' \
    "ids $ids; $(grep -o "chatcmpl-[0-9]*" "$FM_DIR/tail.body" | sort -u | tr '\n' ' ')"
check "slow first token once: in ${EL} ms, not the upstream's 3 s (bound 1500)" '[ "$EL" -lt 1500 ]'
r=$(report A 1)
jqcheck "slow first token once: the report shows 2 attempts, the first first_item_timeout" "$r" \
    '.report.outcome == "ok" and (.report.attempts | length == 2) and .report.attempts[0].outcome == "first_item_timeout"'

# ---- the default listen address, 127.0.0.1:8787 (skipped if it is taken) -----
if (exec 3<>/dev/tcp/127.0.0.1/8787) 2>/dev/null; then
    echo "skip: 127.0.0.1:8787 is in use, the default --listen is not checked"
else
    "$PX" --upstream "$UP" --profile openai >"$FM_DIR/default.out" 2>"$FM_DIR/default.err" &
    PX_PIDS+=($!)
    CODE=000
    for _ in $(seq 1 100); do
        CODE=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:8787/v1/chat/completions?n=1&_t=px_8787")
        [ "$CODE" = 200 ] && break
        sleep 0.05
    done
    check "without --listen it serves on 127.0.0.1:8787" '[ "$CODE" = 200 ]' "$CODE $(head -c 300 "$FM_DIR/default.err")"
    kill -TERM "${PX_PIDS[-1]}"
    wait "${PX_PIDS[-1]}"
fi

# ---- H..M: the other flags ---------------------------------------------------
# an upstream URL with a path: the client's path goes after it; --log
px_start H --upstream "$UP/v1" --profile openai --log "$FM_DIR/H.log" --attempt-timeout 300ms
preq "$PX_PORT" hpath px-hpath '/chat/completions?n=2&_t=px_hpath'
check "--upstream URL/v1 + /chat/completions: the upstream got /v1/chat/completions" \
    '[ "$CODE" = 200 ] && [ "$(fm_field px-hpath received path)" = /v1/chat/completions ]' \
    "$CODE $(fm_log 'key=px-hpath&event=received')"
for _ in $(seq 1 100); do
    [ -s "$FM_DIR/H.log" ] && break
    sleep 0.05
done
check "--log FILE: the report line goes there, stdout keeps only the port" \
    '[ "$(wc -l <"$FM_DIR/H.out")" -eq 1 ] && jq -e ".route == \"default\" and .report.outcome == \"ok\"" "$FM_DIR/H.log" >/dev/null' \
    "stdout: $(head -c 300 "$FM_DIR/H.out"); log: $(head -c 300 "$FM_DIR/H.log")"

# --attempt-timeout: an upstream that never answers (a POST without a key:
# sent, not safe to repeat, one attempt)
preq "$PX_PORT" hang - '/chat/completions?hang=1&_t=px_hang'
check "--attempt-timeout 300ms: a hanging upstream is a 504 attempt_timeout in ${EL} ms (bound 1000)" \
    '[ "$CODE" = 504 ] && [ "$(hdr hang X-SG-Outcome)" = attempt_timeout ] && [ "$EL" -lt 1000 ]' \
    "$CODE $(hdr hang X-SG-Outcome)"

# --fallback: the first upstream refuses the connection (always safe)
px_start I --upstream http://127.0.0.1:1 --fallback "$UP" --profile openai --attempts 3 \
    --backoff-base 5ms --backoff-max 20ms
preq "$PX_PORT" fb px-fb '/v1/chat/completions?n=3&_t=px_fb'
check "--fallback: a refused first upstream is invisible, the fallback streams" \
    'clean fb 3' \
    "$CODE $(head -c 300 "$FM_DIR/fb.body")"
r=$(report I 1)
jqcheck "--fallback: the report shows the refused attempt, then the fallback's" "$r" \
    '.report.outcome == "ok" and (.report.attempts | length >= 2) and .report.attempts[0].outcome != "ok"'

# --hedge-after: a second attempt beside a slow first one wins; the
# first is cancelled
px_start J --upstream "$UP" --profile openai --hedge-after 100ms --max-hedges 1 --idempotent \
    --attempts 3 --budget 10s
preq "$PX_PORT" hedge px-hedge '/v1/chat/completions?n=4&gap=5&tail_first=1&tail_delay=3000&_t=px_hedge'
check "--hedge-after 100ms: one clean stream in ${EL} ms (the first attempt's token is 3 s away; bound 1000)" \
    'clean hedge 4 && [ "$EL" -lt 1000 ]' \
    "$CODE $(head -c 300 "$FM_DIR/hedge.body")"
check "--hedge-after: the upstream saw the slow attempt and the hedge" '[ "$(fm_count px-hedge received)" -eq 2 ]'
check "--hedge-after: the losing attempt is cancelled (client_gone at the upstream)" 'fm_wait_event px-hedge client_gone'
r=$(report J 1)
jqcheck "--hedge-after: the report shows a hedge" "$r" '.report.outcome == "ok" and any(.report.attempts[]; .hedge == true)'

# --max-items, --max-bytes: a runaway stream is capped in-band; as
# sg-stream --max-items prints exactly N items, the item past the cap must
# not reach the client: it receives the items the report counts
px_start K --upstream "$UP" --profile openai --max-items 3
preq "$PX_PORT" cap px-cap '/v1/chat/completions?runaway=1&gap=5&_t=px_cap'
check "--max-items 3: 200" '[ "$CODE" = 200 ]' "got $CODE"
inband cap 3 "--max-items 3" cap_exceeded
jqcheck "--max-items 3: the report counts 3 items" "$(report K 1)" '.report.attempts[0].items == 3'
px_start N --upstream "$UP" --profile openai --max-bytes 1000
preq "$PX_PORT" mbytes px-mbytes '/v1/chat/completions?runaway=1&gap=5&_t=px_mbytes'
items=$(jq '.report.attempts[0].items' <<<"$(report N 1)")
inband mbytes "$items" "--max-bytes 1000 (the report counts $items items)" cap_exceeded

# --stream-total and --transit-allowance
px_start L --upstream "$UP" --profile openai --stream-total 400ms --transit-allowance 200ms
preq "$PX_PORT" total px-total '/v1/chat/completions?runaway=1&gap=20&_t=px_total'
err=$(grep '^data: {"error":' "$FM_DIR/total.body")
jqcheck "--stream-total 400ms: a runaway stream ends in-band with stream_timeout" "${err#data: }" \
    '.error.type == "stream_timeout"'
check "--stream-total 400ms: after ${EL} ms (bound 380..900)" '[ "$EL" -ge 380 ] && [ "$EL" -le 900 ]'
preq "$PX_PORT" transit px-transit '/v1/chat/completions?n=1&_t=px_transit' -H 'X-Deadline-Ms: 1500'
xd=$(fm_field px-transit received x_deadline_ms)
check "--transit-allowance 200ms: X-Deadline-Ms 1500 reaches the upstream as $xd (<= 1300)" \
    '[[ "$xd" =~ ^[0-9]+$ ]] && [ "$xd" -gt 0 ] && [ "$xd" -le 1300 ]'

# the ollama profile: NDJSON, byte for byte (its lines carry no request id;
# the usage is pinned, not the bodies' lengths: the two bodies differ)
px_start M --upstream "$UP" --profile ollama
Q='/api/chat?format=ollama&n=4&gap=5&prompt_tokens=9&_t=px_ollama'
curl -sN -m 15 -o "$FM_DIR/odirect.body" -d '{"model":"m"}' "$UP$Q"
preq "$PX_PORT" ollama px-ollama "$Q"
check "ollama: Content-Type application/x-ndjson" '[[ "$(hdr ollama Content-Type)" == application/x-ndjson* ]]' \
    "$(hdr ollama Content-Type)"
check "ollama: the body is byte for byte the upstream's" 'cmp -s "$FM_DIR/odirect.body" "$FM_DIR/ollama.body"' \
    "$(diff "$FM_DIR/odirect.body" "$FM_DIR/ollama.body" | head -c 400)"

# ---- G: the Anthropic profile's in-band error ---------------------------------
px_start G --upstream "$UP" --profile anthropic --idle 300ms --budget 10s
# byte for byte, the request id in "msg_<id>" aside (as for openai above;
# the usage pinned, as for ollama)
Q='/v1/messages?n=3&gap=5&prompt_tokens=9&_t=px_awhole'
curl -sN -m 15 -o "$FM_DIR/adirect.body" -H 'Idempotency-Key: px-awhole-direct' -d '{}' "$UP$Q"
preq "$PX_PORT" awhole px-awhole "$Q"
did=$(upstream_ids px-awhole-direct)
pid_=$(upstream_ids px-awhole)
sed "s/\"msg_$did\"/\"msg_$pid_\"/g" "$FM_DIR/adirect.body" >"$FM_DIR/adirect.masked"
check "anthropic normal stream: byte for byte the upstream's (request id aside), text/event-stream" \
    '[ "$CODE" = 200 ] && cmp -s "$FM_DIR/adirect.masked" "$FM_DIR/awhole.body" && [[ "$(hdr awhole Content-Type)" == text/event-stream* ]]' \
    "$(diff "$FM_DIR/adirect.masked" "$FM_DIR/awhole.body" | head -c 400)"
preq "$PX_PORT" astall px-astall '/v1/messages?n=9&gap=10&stall_after=2&stall=forever&_t=px_astall'
check "anthropic stall: two deltas, then event: error with its data, then the end" \
    'grep -A1 -x "event: error" "$FM_DIR/astall.body" | grep -q "^data: " &&
     [ "$(grep -c "^event: content_block_delta" "$FM_DIR/astall.body")" -eq 2 ] &&
     [ "$(grep -v "^$" "$FM_DIR/astall.body" | tail -n 1 | cut -c1-6)" = "data: " ]' \
    "$(tail -c 500 "$FM_DIR/astall.body")"
aerr=$(grep -A1 -x "event: error" "$FM_DIR/astall.body" | sed -n 's/^data: //p')
jqcheck "anthropic stall: {type:error, error:{type:idle_timeout, message:sg-proxy: idle_timeout ...}}" "$aerr" \
    '.type == "error" and .error.type == "idle_timeout" and (.error.message | startswith("sg-proxy: idle_timeout"))'
preq "$PX_PORT" aslow px-aslow '/v1/messages?first_delay=3000&_t=px_aslow' --max-time 5 -H 'X-Deadline-Ms: 400'
check "anthropic before commit (X-Deadline-Ms 400, first token at 3 s): 504" '[ "$CODE" = 504 ]' "got $CODE"
jqcheck "anthropic before commit: an Anthropic error body naming budget_exhausted" "$(cat "$FM_DIR/aslow.body")" \
    '.type == "error" and .error.type == "budget_exhausted" and (.error.message | type == "string")'

# ---- C: hostile clients --------------------------------------------------------
px_start C --upstream "$UP" --profile openai --header-timeout 1s --max-body 4096 --budget 10s
PC=$PX_PORT
garbage=()
for _ in $(seq 1 200); do
    exec {fd}<>"/dev/tcp/127.0.0.1/$PC"
    head -c 300 /dev/urandom 1>&"$fd" 2>/dev/null
    garbage+=("$fd")
done
slow=()
readers=()
for i in $(seq 1 20); do
    exec {fd}<>"/dev/tcp/127.0.0.1/$PC"
    printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' >&"$fd"
    t=$(now_ms)
    slow+=("$fd")
    # stamp the answer when it comes, then whether the proxy closed
    (
        line=
        IFS= read -r -t 5 line <&"$fd"
        echo "$t $(now_ms) ${line%$'\r'}"
        if timeout 3 cat <&"$fd" >/dev/null; then echo closed; else echo open; fi
    ) >"$FM_DIR/slow.$i" &
    readers+=($!)
done
preq "$PC" busy px-busy '/v1/chat/completions?n=5&gap=10&_t=px_busy'
check "200 garbage and 20 slowloris clients: a normal request still streams whole (${EL} ms)" \
    'clean busy 5' \
    "$CODE $(head -c 300 "$FM_DIR/busy.body")"
wait "${readers[@]}"
bad=0
for i in $(seq 1 20); do
    read -r ts te status code _ <"$FM_DIR/slow.$i"
    d=$((te - ts))
    if [ "$status $code" != "HTTP/1.1 408" ] || [ "$d" -lt 950 ] || [ "$d" -gt 1700 ] ||
        [ "$(sed -n 2p "$FM_DIR/slow.$i")" != closed ]; then
        bad=$((bad + 1))
        [ "$bad" -eq 1 ] && fail "slowloris $i: $(tr '\n' ' ' <"$FM_DIR/slow.$i") (408 after ${d} ms)"
    fi
done
read -r ts te _ <"$FM_DIR/slow.1"
d=$((te - ts))
check "slowloris: all 20 got 408 after --header-timeout 1s (bound 950..1700 ms; the first after ${d} ms) and were closed" \
    '[ "$bad" -eq 0 ]'
for fd in "${garbage[@]}" "${slow[@]}"; do
    exec {fd}>&-
done
preq "$PC" after px-after '/v1/chat/completions?n=2&_t=px_after'
check "after the hostile clients: still serving" '[ "$CODE" = 200 ]' "got $CODE"

big=$(head -c 40000 /dev/zero | tr '\0' a)
CODE=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H "X-Big: $big" "http://127.0.0.1:$PC/v1/chat/completions")
check "a head over 32 KiB: 431" '[ "$CODE" = 431 ]' "got $CODE"
many=()
for i in $(seq 1 70); do many+=(-H "X-H$i: v"); done
CODE=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "${many[@]}" "http://127.0.0.1:$PC/v1/chat/completions")
check "a head with 70 header fields: 431" '[ "$CODE" = 431 ]' "got $CODE"
head -c 8000 /dev/zero | tr '\0' x >"$FM_DIR/big.body"
CODE=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H 'Expect:' --data-binary @"$FM_DIR/big.body" \
    "http://127.0.0.1:$PC/v1/chat/completions?_t=px_413")
check "a body over --max-body 4096: 413" '[ "$CODE" = 413 ]' "got $CODE"
check "... and it never reached the upstream" '[ "$(fm_log event=received | grep -c "_t=px_413")" -eq 0 ]'
# ... and one still being sent when the 413 goes: the proxy half-closes
# and reads on, so the answer is not lost to a reset (five tries: a reset
# is a race the client often wins on loopback)
head -c 8000000 /dev/zero | tr '\0' x >"$FM_DIR/huge.body"
got413=0
for _ in 1 2 3 4 5; do
    CODE=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H 'Expect:' --data-binary @"$FM_DIR/huge.body" \
        "http://127.0.0.1:$PC/v1/chat/completions?_t=px_413big")
    rc=$?
    [ "$CODE" = 413 ] && [ "$rc" -eq 0 ] && got413=$((got413 + 1))
done
check "an 8 MB body still uploading: 413 every time, no reset" '[ "$got413" -eq 5 ]' "$got413 of 5 (last: $CODE, curl exit $rc)"

# ---- D: a full connection table ------------------------------------------------
px_start D --upstream "$UP" --profile openai --max-connections 4 --header-timeout 10s
PD=$PX_PORT
held=()
for _ in 1 2 3 4; do
    exec {fd}<>"/dev/tcp/127.0.0.1/$PD"
    printf 'GET /v1/chat/completions HTTP/1.1\r\n' >&"$fd"
    held+=("$fd")
done
# the accept of the fifth: the proxy must close it at once
exec {fd}<>"/dev/tcp/127.0.0.1/$PD"
t0=$(now_ms)
rs=0
timeout 3 cat <&"$fd" >/dev/null || rs=$?
EL=$(($(now_ms) - t0))
exec {fd}>&-
check "--max-connections 4: a fifth connection is closed at once (${EL} ms)" \
    '[ "$rs" -eq 0 ] && [ "$EL" -lt 1000 ]' "not closed within 3 s"
for fd in "${held[@]}"; do
    exec {fd}>&-
done
ok=0
for _ in $(seq 1 40); do
    CODE=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PD/v1/chat/completions?n=1&_t=px_freed")
    [ "$CODE" = 200 ] && ok=1 && break
    sleep 0.05
done
check "--max-connections: once they close, requests are served again" '[ "$ok" -eq 1 ]' "last $CODE"

# A request read whole and answered at once (no route for its path: the
# one-route proxy has one, so a dot segment's 400) frees its connection
# when the answer is out, even while the client keeps its socket open:
# only an answer sent before the request was read whole lingers.
px_start D1 --upstream "$UP" --profile openai --max-connections 1 --header-timeout 10s
exec {fd}<>"/dev/tcp/127.0.0.1/$PX_PORT"
printf 'GET /v1/../x HTTP/1.1\r\nHost: x\r\n\r\n' >&"$fd"
head -c 12 <&"$fd" >"$FM_DIR/d1.status"
ok=0
for _ in $(seq 1 20); do
    CODE=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=1&_t=px_d1")
    [ "$CODE" = 200 ] && ok=1 && break
    sleep 0.05
done
exec {fd}>&-
check "a whole request answered 400: its connection is free while the client holds it" \
    '[ "$(cat "$FM_DIR/d1.status")" = "HTTP/1.1 400" ] && [ "$ok" -eq 1 ]' "$(cat "$FM_DIR/d1.status"), last $CODE"

# ---- E, F: SIGTERM drains -------------------------------------------------------
# sigterm NAME QUERY [proxy options...]: a proxy, a stream through it to
# $FM_DIR/NAME.body, SIGTERM once its first item has arrived; then
# REFUSED=1 if a new request failed while it drained, TERM_RC its exit
# status and TERM_MS the time from the SIGTERM to its exit.
sigterm() {
    local name=$1 query=$2 cpid
    shift 2
    px_start "$name" --upstream "$UP" --profile openai "$@"
    curl -sN -m 15 "http://127.0.0.1:$PX_PORT/v1/chat/completions?$query" >"$FM_DIR/$name.body" &
    cpid=$!
    for _ in $(seq 1 100); do
        grep -qs tok0 "$FM_DIR/$name.body" && break
        sleep 0.02
    done
    local t0
    t0=$(now_ms)
    kill -TERM "$PX_PID"
    REFUSED=0
    for _ in $(seq 1 50); do
        if ! curl -s -m 1 -o /dev/null "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=1&_t=px_late"; then
            REFUSED=1
            break
        fi
        sleep 0.02
    done
    TERM_RC=0
    wait "$PX_PID" || TERM_RC=$?
    TERM_MS=$(($(now_ms) - t0))
    wait "$cpid"
}

sigterm E 'n=10&gap=100&_t=px_drain' --drain 5s
check "SIGTERM: new connections are not accepted" '[ "$REFUSED" -eq 1 ]'
check "SIGTERM: the in-flight stream finishes whole within --drain" \
    '[ "$(grep -c "\"content\":\"tok" "$FM_DIR/E.body")" -eq 10 ] && ends_done "$FM_DIR/E.body"' \
    "$(tail -c 300 "$FM_DIR/E.body")"
check "SIGTERM: exit 0 once drained (${TERM_MS} ms)" '[ "$TERM_RC" -eq 0 ] && [ "$TERM_MS" -lt 5000 ]' "exit $TERM_RC"
jqcheck "SIGTERM: the drained stream's report line is written, ok" "$(tail -n +2 "$FM_DIR/E.out")" \
    'any(.[]; .report.outcome == "ok")' -s

# --drain bounds the exit whatever the clients do: one connected before the
# SIGTERM that sends its request after it gets a 503 (no new work while
# draining), and one that never sends anything does not hold the exit
px_start drainidle --upstream "$UP" --profile openai --drain 500ms
read -r late g_ms < <(python3 - "$PX_PORT" "$PX_PID" <<'PY'
import os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
idle = socket.create_connection(("127.0.0.1", port))  # held open throughout
s = socket.create_connection(("127.0.0.1", port))
time.sleep(0.2)
t0 = time.time()
os.kill(pid, signal.SIGTERM)
time.sleep(0.3)
s.sendall(b"POST /v1/chat/completions?n=50&gap=100 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
code = s.recv(64).split(b" ")[1].decode()
def gone():  # exited: a zombie until the shell reaps it
    try:
        return open("/proc/%d/stat" % pid).read().split(")")[-1].split()[0] in ("Z", "X")
    except OSError:
        return True
while not gone() and time.time() - t0 < 10:
    time.sleep(0.01)
print(code, int((time.time() - t0) * 1000))
PY
)
wait "$PX_PID"
g_rc=$?
check "a request after SIGTERM on an older connection: 503" '[ "$late" = 503 ]' "$late"
check "--drain 500ms with an idle client held open: exit 0 ${g_ms} ms after SIGTERM (bound 500..2000)" \
    '[ "$g_rc" -eq 0 ] && [ "$g_ms" -ge 450 ] && [ "$g_ms" -lt 2000 ]' "exit $g_rc"

sigterm F 'n=100&gap=100&_t=px_cancel' --drain 300ms
check "SIGTERM with --drain 300ms: new connections are not accepted" '[ "$REFUSED" -eq 1 ]'
check "SIGTERM with --drain 300ms: exit 0 in ${TERM_MS} ms (bound 250..1500)" \
    '[ "$TERM_RC" -eq 0 ] && [ "$TERM_MS" -ge 250 ] && [ "$TERM_MS" -lt 1500 ]' "exit $TERM_RC"
check "SIGTERM with --drain 300ms: the stream is cut, not finished" '! grep -q "\[DONE\]" "$FM_DIR/F.body"'
# beyond the letter of the first slice's contract (which names clocks,
# caps and upstream breaks): a stream cut by the drain must not look like
# a shorter answer to an SDK either
err=$(grep '^data: {"error":' "$FM_DIR/F.body")
jqcheck "SIGTERM with --drain 300ms: the client gets the in-band error naming cancelled" "${err#data: }" \
    '.error.type == "cancelled"'
jqcheck "SIGTERM with --drain 300ms: its report line is written, cancelled" "$(tail -n +2 "$FM_DIR/F.out")" \
    'any(.[]; .report.outcome == "cancelled")' -s

# ---- Bedrock: a stream cut inside a message -------------------------------------
# the client gets whole messages only, then the exception naming the outcome:
# read by an independent decoder (tests/integration/eventstream_decode.py)
px_start bedrock --upstream "$UP" --profile bedrock-converse --attempts 1
for cut in drop end; do
    curl -sN -m 10 -X POST -d '{"messages":[]}' -o "$FM_DIR/br_$cut.body" \
        "http://127.0.0.1:$PX_PORT/model/m/converse-stream?n=5&cut_at=2&cut=$cut&_t=px_br_$cut"
    python3 "$(dirname "$0")/../integration/eventstream_decode.py" "$FM_DIR/br_$cut.body" \
        >"$FM_DIR/br_$cut.json" 2>&1
    check "Bedrock cut=$cut inside a message: whole messages, each CRC good, ending on a boundary" \
        '! grep -q "\"ok\": *false" "$FM_DIR/br_$cut.json" && tail -n 1 "$FM_DIR/br_$cut.json" | grep -q "\"end\": *\"clean\""' \
        "$(tail -n 3 "$FM_DIR/br_$cut.json")"
    check "Bedrock cut=$cut: the last message is the exception naming truncated" \
        'tail -n 2 "$FM_DIR/br_$cut.json" | head -n 1 | grep -q "exception" && tail -n 2 "$FM_DIR/br_$cut.json" | head -n 1 | grep -q "truncated"' \
        "$(tail -n 2 "$FM_DIR/br_$cut.json" | head -n 1)"
done

# ---- the report lines ------------------------------------------------------------
for p in A B C D E F G H I J K L M N; do
    lines=$(tail -n +2 "$FM_DIR/$p.out")
    [ "$p" = H ] && lines=$(cat "$FM_DIR/H.log")
    jqcheck "proxy $p: every report line is one JSON object {route, client, report}" "$lines" \
        'length > 0 and all(.[]; (.route | type) == "string" and (.client | startswith("127.0.0.1:")) and .report.version == 1)' -s
done
check "the Authorization and x-api-key values never appear in any report line or log" \
    '! grep -qF -e "$SECRET" -e "$ANT_SECRET" "$FM_DIR"/[A-N].out "$FM_DIR"/[A-N].err "$FM_DIR/H.log"' \
    "$(grep -lF -e "$SECRET" -e "$ANT_SECRET" "$FM_DIR"/[A-N].out "$FM_DIR"/[A-N].err "$FM_DIR/H.log")"
check "proxy B wrote one report line per request ($nb)" '[ "$(nrep B)" -eq "$nb" ]' "$(nrep B)"

px_stop_all
fm_finish
