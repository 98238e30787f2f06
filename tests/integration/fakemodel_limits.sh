#!/usr/bin/env bash
# sg-fakemodel's limits over real sockets, with the curl command: the rate
# limiter (its windows shared by every connection and protocol, its
# headers true to its state - checked against the server's own monotonic
# log -, its 429s in each provider's shape, /_stats counting them) and the
# upstream that fails N times then recovers (fail_first with each failure,
# counted process-wide under fail_key).
#   fakemodel_limits.sh SERVER PROTO    PROTO: h1 | h2c | h2tls
# "A && B || fail ..." is meant: fail unless both hold.
# shellcheck disable=SC2015
SERVER=$1
PROTO=$2
. "$(dirname "$0")/fakemodel_lib.sh"

fm_start "$SERVER"
case "$PROTO" in
h1) BASE=http://127.0.0.1:$FM_PORT; OPTS=(--http1.1) ;;
h2c) BASE=http://127.0.0.1:$FM_PORT; OPTS=(--http2-prior-knowledge) ;;
h2tls) BASE=https://localhost:$FM_PORT; OPTS=(--http2 --cacert "$FM_CA") ;;
*) echo "unknown protocol $PROTO" >&2; exit 2 ;;
esac
OPTS+=(--resolve "localhost:$FM_PORT:127.0.0.1")
B=$FM_DIR/body
H=$FM_DIR/headers
CHAT=/v1/chat/completions
MSGS=/v1/messages

# req PATH [curl options...]: body to $B, headers to $H; sets RC, CODE and
# ID (the server's request id).
req() {
    local path=$1
    shift
    RC=0
    rm -f "$B" "$H"
    CODE=$(curl -sS --no-buffer "${OPTS[@]}" -D "$H" -o "$B" -w '%{http_code}' "$@" \
        "$BASE$path" 2>"$FM_DIR/curl.err") || RC=$?
    ID=$(hdr x-sg-request-id)
}
# hdr NAME: the value of response header NAME (any case), or nothing.
hdr() {
    tr -d '\r' <"$H" 2>/dev/null | grep -i "^$1:" | head -n 1 | sed 's/^[^:]*: *//'
}
# t_received ID: the server's CLOCK_MONOTONIC ns when request ID was whole.
t_received() {
    fm_log "id=$1&event=received" | grep '"event":"received"' |
        sed -n 's/.*"t_ns":\([0-9]*\).*/\1/p'
}
# go_ms DURATION: a Go duration ("1.178s", "735ms", "1m0.5s") in ms.
go_ms() {
    awk -v d="$1" 'BEGIN {
        ms = 0
        while (match(d, /^[0-9.]+(h|ms|m|s)/)) {
            t = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1)
            if (t ~ /ms$/) ms += t + 0
            else if (t ~ /h$/) ms += (t + 0) * 3600000
            else if (t ~ /m$/) ms += (t + 0) * 60000
            else ms += (t + 0) * 1000
        }
        if (d != "") ms = -1
        printf "%d\n", ms + 0.5
    }'
}
# stat NAME: a number of /_stats; stat_status CODE: answers with CODE.
stat() {
    curl -sS -m 5 "http://127.0.0.1:$FM_PORT/_stats" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
stat_status() {
    curl -sS -m 5 "http://127.0.0.1:$FM_PORT/_stats" |
        sed -n "s/.*\"statuses\":{[^}]*\"$1\":\([0-9]*\).*/\1/p"
}
MS=1000000

# ---- a window of 3 requests: each answer's remaining and reset say the
# limiter's state - every reset ends at the same instant, the one the
# first request opened the window at plus its length - and the 4th gets a
# 429 whose retry-after-ms names that instant too
Q="$CHAT?n=2&gap=0&rl_requests=3&rl_window=1200&rl_key=win"
END=
for i in 1 2 3 4; do
    req "$Q"
    t=$(t_received "$ID")
    [ -n "$END" ] || END=$((t + 1200 * MS))
    reset=$(go_ms "$(hdr x-ratelimit-reset-requests)")
    end=$((t + reset * MS))
    # reset is in ms rounded up: within 1 ms above the true end
    [ "$end" -ge "$END" ] && [ "$end" -le $((END + MS)) ] ||
        fail "window: request $i says the window ends $(((end - END) / 1000)) us off"
    [ "$(hdr x-ratelimit-limit-requests)" = 3 ] || fail "window: request $i limit"
    left=$((3 - i))
    [ "$left" -ge 0 ] || left=0
    [ "$(hdr x-ratelimit-remaining-requests)" = "$left" ] ||
        fail "window: request $i remaining $(hdr x-ratelimit-remaining-requests), want $left"
    [ -z "$(hdr x-ratelimit-limit-tokens)" ] || fail "window: a tokens header without rl_tokens"
    if [ "$i" -le 3 ]; then
        [ "$CODE" = 200 ] && grep -q 'data: \[DONE\]' "$B" || fail "window: request $i code $CODE"
        [ -z "$(hdr retry-after)" ] || fail "window: retry-after on a 200"
    fi
done
RA_MS=$(hdr retry-after-ms)
[ "$CODE" = 429 ] || fail "window: 4th code $CODE"
[ "$((t + RA_MS * MS))" -ge "$END" ] && [ "$((t + RA_MS * MS))" -le $((END + MS)) ] ||
    fail "window: retry-after-ms $RA_MS does not name the window's end"
[ "$(hdr retry-after)" = $(((RA_MS + 999) / 1000)) ] ||
    fail "window: retry-after $(hdr retry-after) for retry-after-ms $RA_MS"
grep -q '^{"error":{"message":"Rate limit reached for sg-fakemodel on requests per 1200 ms: Limit 3, Used 3, Requested 1. Please try again in [0-9.]*m\{0,1\}s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}$' "$B" ||
    fail "window: 429 body $(head -c 300 "$B")"
[ "$(fm_log "id=$ID&event=finished" | grep -c '"reason":"rate_limited","status":429')" = 1 ] ||
    fail "window: the 429 is not logged rate_limited"
# whatever the time now, the answer agrees with the server's clock: before
# the end a 429 naming the end, after it a new window
req "$Q"
t=$(t_received "$ID")
if [ "$t" -lt "$END" ]; then
    [ "$CODE" = 429 ] && [ $((t + $(hdr retry-after-ms) * MS)) -ge "$END" ] ||
        fail "window: before the end, code $CODE retry-after-ms $(hdr retry-after-ms)"
else
    [ "$CODE" = 200 ] || fail "window: after the end, code $CODE"
fi
# a client that waits retry-after-ms after its 429 is served, in a new
# window that its request opened
sleep "$(awk -v ms="$RA_MS" 'BEGIN { printf "%.3f", ms / 1000 }')"
req "$Q"
t=$(t_received "$ID")
[ "$t" -ge "$END" ] && [ "$CODE" = 200 ] || fail "window: after retry-after-ms, code $CODE"
[ "$(hdr x-ratelimit-remaining-requests)" = 2 ] || fail "window: the new window's remaining"
[ "$(go_ms "$(hdr x-ratelimit-reset-requests)")" = 1200 ] ||
    fail "window: the new window's reset $(hdr x-ratelimit-reset-requests)"
pass "requests_window: headers true to the state, 429 then served after retry-after-ms"

# ---- tokens: the input (the POST body's bytes / 4, or prompt_tokens) and
# the scripted output (n + reasoning_tokens) of each answer
Q="$CHAT?gap=0&rl_tokens=100&rl_window=60000&rl_key=tok"
for left in 70 40 10; do
    req "$Q&n=20&prompt_tokens=10"
    [ "$CODE" = 200 ] && [ "$(hdr x-ratelimit-remaining-tokens)" = "$left" ] ||
        fail "tokens: code $CODE remaining $(hdr x-ratelimit-remaining-tokens), want $left"
done
req "$Q&n=20&prompt_tokens=10"
[ "$CODE" = 429 ] && [ "$(hdr x-ratelimit-remaining-tokens)" = 10 ] ||
    fail "tokens: over the limit, code $CODE"
grep -q '"type":"tokens","param":null,"code":"rate_limit_exceeded"' "$B" &&
    grep -q 'Limit 100, Used 90, Requested 30' "$B" || fail "tokens: 429 body $(head -c 300 "$B")"
# 8 tokens of input from a 29-byte body, 2 of output: exactly what is left
req "$Q&n=2" -X POST -d '{"messages":[{"c":"abcdefgh"}]}'
[ "$CODE" = 200 ] && [ "$(hdr x-ratelimit-remaining-tokens)" = 0 ] ||
    fail "tokens: the body's tokens, code $CODE remaining $(hdr x-ratelimit-remaining-tokens)"
pass "tokens_window: input and scripted output spent, 429 with type tokens"

# ---- Anthropic's style: its header names, resets as RFC 3339 instants on
# the server's wall clock (date_offset skews it as it skews Date), its
# error shape, retry-after alone
Q="$MSGS?n=3&gap=0&prompt_tokens=5&rl_requests=2&rl_tokens=50&rl_input_tokens=40&rl_output_tokens=20&rl_window=30000&rl_key=ant"
before=$(date +%s)
req "$Q"
after=$(date +%s)
[ "$CODE" = 200 ] || fail "anthropic: code $CODE"
for h in requests-limit:2 requests-remaining:1 tokens-limit:50 tokens-remaining:42 \
    input-tokens-limit:40 input-tokens-remaining:35 output-tokens-limit:20 \
    output-tokens-remaining:17; do
    [ "$(hdr "anthropic-ratelimit-${h%%:*}")" = "${h#*:}" ] ||
        fail "anthropic: ${h%%:*} is $(hdr "anthropic-ratelimit-${h%%:*}"), want ${h#*:}"
done
for d in requests tokens input-tokens output-tokens; do
    r=$(hdr "anthropic-ratelimit-$d-reset")
    [[ "$r" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]] ||
        fail "anthropic: $d-reset '$r' is not RFC 3339 UTC to the second"
    s=$(date -d "$r" +%s)
    [ "$s" -ge $((before + 30)) ] && [ "$s" -le $((after + 31)) ] ||
        fail "anthropic: $d-reset $r is not 30 s on"
done
[ -z "$(hdr x-ratelimit-limit-requests)" ] || fail "anthropic: OpenAI's headers too"
req "$Q"
req "$Q"
[ "$CODE" = 429 ] && [ "$(hdr retry-after)" -ge 29 ] && [ "$(hdr retry-after)" -le 30 ] &&
    [ -z "$(hdr retry-after-ms)" ] || fail "anthropic: 429 code $CODE retry-after '$(hdr retry-after)' retry-after-ms '$(hdr retry-after-ms)'"
grep -q '^{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached for sg-fakemodel on requests per 30000 ms: Limit 2, Used 2, Requested 1. Please try again in [0-9.]*s."}}$' "$B" ||
    fail "anthropic: 429 body $(head -c 300 "$B")"
req "$MSGS?n=1&rl_requests=5&rl_key=skew&date_offset=3600"
s=$(date -d "$(hdr anthropic-ratelimit-requests-reset)" +%s)
now=$(date +%s)
[ "$s" -ge $((now + 3600 + 59)) ] && [ "$s" -le $((now + 3600 + 61)) ] ||
    fail "anthropic: date_offset=3600 reset $(hdr anthropic-ratelimit-requests-reset)"
# rl_style picks the other style on either path
req "$CHAT?n=1&rl_requests=5&rl_key=style&rl_style=anthropic"
[ -n "$(hdr anthropic-ratelimit-requests-reset)" ] && [ -z "$(hdr x-ratelimit-reset-requests)" ] ||
    fail "rl_style=anthropic on the OpenAI path"
req "$MSGS?n=1&rl_requests=5&rl_key=style2&rl_style=openai"
[ -n "$(hdr x-ratelimit-reset-requests)" ] && [ -z "$(hdr anthropic-ratelimit-requests-reset)" ] ||
    fail "rl_style=openai on the Anthropic path"
pass "anthropic_style: header names, RFC 3339 resets, error shape, retry-after alone"

# ---- every answer carries the headers: a scripted failure too
req "$CHAT?status=503&rl_requests=9&rl_key=every"
[ "$CODE" = 503 ] && [ "$(hdr x-ratelimit-remaining-requests)" = 8 ] ||
    fail "every answer: scripted 503 without the limiter's headers"
# each provider's shape for the limiter's 429 on the other formats
req "/v1beta/models/m:streamGenerateContent?alt=sse&rl_requests=1&rl_key=gem"
req "/v1beta/models/m:streamGenerateContent?alt=sse&rl_requests=1&rl_key=gem"
[ "$CODE" = 429 ] && grep -q '"status":"RESOURCE_EXHAUSTED"' "$B" || fail "gemini 429 shape"
req "/model/m/converse-stream?rl_requests=1&rl_key=bed"
req "/model/m/converse-stream?rl_requests=1&rl_key=bed"
[ "$CODE" = 429 ] && [ "$(hdr x-amzn-errortype)" = ThrottlingException ] || fail "bedrock 429 shape"
pass "every_answer: scripted failures carry the headers; Gemini's and Bedrock's 429s"

# ---- one limiter for every connection and protocol: 20 requests at once,
# each its own connection, half HTTP/1.1 and half HTTP/2; 8 pass
rl0=$(stat rate_limited)
args=()
for i in $(seq 1 20); do
    if [ $((i % 2)) = 0 ]; then v=--http2-prior-knowledge; else v=--http1.1; fi
    args+=(--next "$v" -s -o /dev/null -w '%{http_code}\n'
        "http://127.0.0.1:$FM_PORT$CHAT?n=1&gap=0&rl_requests=8&rl_window=60000&rl_key=par&_i=$i")
done
curl --parallel --parallel-immediate --parallel-max 20 "${args[@]:1}" >"$FM_DIR/codes" \
    2>"$FM_DIR/parallel.err"
[ "$(grep -c '^200$' "$FM_DIR/codes")" = 8 ] && [ "$(grep -c '^429$' "$FM_DIR/codes")" = 12 ] ||
    fail "shared: $(sort "$FM_DIR/codes" | uniq -c | tr '\n' ' ')"
[ "$(($(stat rate_limited) - rl0))" = 12 ] || fail "shared: /_stats rate_limited"
pass "shared_limiter: 20 concurrent requests over h1 and h2, 8 served, 12 refused"

# ---- /_stats counts what the model paths received and answered, and
# POST /_log/reset restarts it with the windows and counters
curl -sS -m 5 -X POST "http://127.0.0.1:$FM_PORT/_log/reset" >/dev/null
[ "$(stat received)" = 0 ] && [ "$(stat rate_limited)" = 0 ] &&
    curl -sS "http://127.0.0.1:$FM_PORT/_stats" | grep -q '"statuses":{}' || fail "stats: not reset"
for i in 1 2 3; do
    req "$CHAT?n=1&rl_requests=1&rl_window=60000&rl_key=win" # reset: a fresh window
    [ "$i" = 1 ] && [ "$CODE" != 200 ] && fail "stats: the window was not reset"
done
req "$CHAT?status=500"
req "$CHAT?bogus=1"
[ "$(stat received)" = 5 ] && [ "$(stat rate_limited)" = 2 ] && [ "$(stat_status 200)" = 1 ] &&
    [ "$(stat_status 429)" = 2 ] && [ "$(stat_status 500)" = 1 ] && [ "$(stat_status 400)" = 1 ] ||
    fail "stats: $(curl -sS "http://127.0.0.1:$FM_PORT/_stats")"
pass "stats: received, rate_limited, statuses; reset with the log"

# ---- fail_first=N with each failure: N requests of the counter fail, the
# next ones stream, whatever connection or protocol they come on
for f in status=500 status=503 status=529 reset=1 stall_after=0; do
    K=ff-${f%%=*}-${f#*=}
    for i in 1 2 3 4; do
        # the 3rd comes over the other protocol: the count is the process's
        o=()
        [ "$i" = 3 ] && o=(--http1.1)
        [ "$i" = 3 ] && [ "$PROTO" = h1 ] && o=(--http2-prior-knowledge)
        req "$MSGS?n=2&gap=0&$f&fail_first=2&fail_key=$K" -m 1 "${o[@]}"
        if [ "$i" -le 2 ]; then
            case $f in
            status=*)
                [ "$CODE" = "${f#*=}" ] || fail "$f: request $i code $CODE"
                [ "$f" != status=529 ] || grep -q '"type":"overloaded_error"' "$B" ||
                    fail "$f: body $(head -c 200 "$B")"
                ;;
            reset=1)
                grep -q 'reset by peer' "$FM_DIR/curl.err" ||
                    fail "$f: request $i rc $RC $(head -c 200 "$FM_DIR/curl.err")"
                ;;
            stall_after=0)
                [ "$RC" = 28 ] && [ "$CODE" = 200 ] && ! grep -q text_delta "$B" ||
                    fail "$f: request $i rc $RC code $CODE"
                ;;
            esac
        else
            [ "$RC" = 0 ] && [ "$CODE" = 200 ] && [ "$(grep -c text_delta "$B")" = 2 ] ||
                fail "$f: request $i after the failures: rc $RC code $CODE"
        fi
    done
done
# without fail_key, requests without an Idempotency-Key share one counter
# (reset with the log), and keys count apart
curl -sS -m 5 -X POST "http://127.0.0.1:$FM_PORT/_log/reset" >/dev/null
req "$CHAT?n=1&status=503&fail_first=1"
[ "$CODE" = 503 ] || fail "keyless: first code $CODE"
req "$CHAT?n=1&status=503&fail_first=1" -H 'Idempotency-Key: k1'
[ "$CODE" = 503 ] || fail "keyed: first code $CODE"
req "$CHAT?n=1&status=503&fail_first=1"
[ "$CODE" = 200 ] || fail "keyless: second code $CODE"
pass "fail_first: 500, 503, 529, reset, a stall before the first token; then served"

fm_finish
