#!/usr/bin/env bash
# sg-proxy's usage and cost options, against sg-fakemodel: include-usage
# adds "stream_options":{"include_usage":true} to a Chat Completions body
# that streams without it - checked at an upstream that records every
# request byte for byte (sg-fakemodel --record): that field and nothing
# else, its Content-Length recomputed, every other request as the client
# wrote it - and the client then gets the usage chunk; the price options,
# per route and per fallback, and their errors; the report line's usage
# and cost, and /metrics' tokens, cost and gen_ai_client_token_usage, for
# a clean stream, a retried first-token timeout, stalls after tokens
# (OpenAI's estimate, Gemini's own figures) and a fallback priced apart.
# Usage: sg_proxy_usage_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_recording_upstream # REC, recorded TAG, masked FILE
printf '[route %s]\nprefix = /%s\nupstream = %s\nprofile = openai\nattempts = 1\n%s\n' \
    iu iu "$UP" 'include-usage = true' plain plain "$UP" '' >"$FM_DIR/proxy.conf"
px_start U --config "$FM_DIR/proxy.conf"
B=http://127.0.0.1:$PX_PORT

# check DESCRIPTION CONDITION [DETAIL]: CONDITION (shell, eval'd) holds.
check() {
    if eval "$2"; then pass "$1"; else fail "$1${3:+: $3}"; fi
}

# body_of TAG: the body the upstream received for TAG (after the head).
body_of() {
    local f
    f=$(recorded "$1") && [ -n "$f" ] && sed -e '1,/^\r$/d' "$f"
}

# length_of TAG: the Content-Length the upstream received for TAG.
length_of() {
    local f
    f=$(recorded "$1") && [ -n "$f" ] && grep -i '^content-length:' "$f" | tr -dc 0-9
}

# post ROUTE TAG BODY [curl options...]: BODY to ROUTE's Chat Completions
# path; the answer in TAG.resp.
post() {
    local route=$1 tag=$2 body=$3
    shift 3
    curl -sN -m 10 -o "$FM_DIR/$tag.resp" -H 'Content-Type: application/json' "$@" \
        --data-binary "$body" "$B/$route/v1/chat/completions?n=3&_t=$tag"
}

# gains ROUTE TAG BODY WANT [curl options...]: the upstream receives WANT
# for BODY, with WANT's length as its Content-Length.
gains() {
    local route=$1 tag=$2 body=$3 want=$4
    shift 4
    post "$route" "$tag" "$body" "$@"
    local got len
    got=$(body_of "$tag")
    len=$(length_of "$tag")
    check "$tag: the upstream receives $want (Content-Length ${#want})" \
        '[ "$got" = "$want" ] && [ "$len" = "${#want}" ]' "got $got (Content-Length $len)"
}

# ---- include-usage: the field, and nothing else -------------------------------
BODY='{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'
WANT='{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}'
curl -sN -m 10 -o "$FM_DIR/iu_exact.resp" -H 'Content-Type: application/json' \
    -H 'Authorization: Bearer sk-iu-SECRET' -H 'User-Agent: iu/1' \
    --data-binary "$BODY" "$B/iu/v1/chat/completions?n=3&_t=iu_exact"
want_req="POST /v1/chat/completions?n=3&_t=iu_exact HTTP/1.1"$'\r\nHost: 127.0.0.1:N\r\nAccept: */*\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-iu-SECRET\r\nUser-Agent: iu/1\r\nX-Deadline-Ms: N\r\nContent-Length: '"${#WANT}"$'\r\n\r\n'"$WANT"
got_req=$(recorded iu_exact)
printf '%s' "$want_req" >"$FM_DIR/iu_exact.want"
[ -n "$got_req" ] && masked "$got_req" >"$FM_DIR/iu_exact.got"
if cmp -s "$FM_DIR/iu_exact.want" "$FM_DIR/iu_exact.got"; then
    pass "a streaming Chat Completions body gains the field, byte for byte: the rest of the request as the client sent it, Content-Length ${#WANT}"
else
    fail "iu_exact: $(diff <(cat -A "$FM_DIR/iu_exact.want") <(cat -A "$FM_DIR/iu_exact.got") | head -c 900)"
fi
# what the client then receives: the usage chunk, choices [], before [DONE]
resp=$FM_DIR/iu_exact.resp
check "... and the client receives the usage chunk (choices: []) right before [DONE]" \
    '[ "$(grep "^data: " "$resp" | tail -n 2 | head -n 1 | cut -c 7- | jq -c "[.choices, .usage.completion_tokens]" 2>/dev/null)" = "[[],3]" ] &&
     [ "$(grep "^data: " "$resp" | tail -n 1)" = "data: [DONE]" ]' "$(tail -c 500 "$resp")"
check "... every other chunk carrying \"usage\":null" \
    '[ "$(grep "^data: {" "$resp" | grep -vc "\"choices\":\[\]")" -eq "$(grep "^data: {" "$resp" | grep -c "\"usage\":null")" ]' \
    "$(head -c 500 "$resp")"

gains iu iu_empty '{"stream":true,"stream_options":{}}' \
    '{"stream":true,"stream_options":{"include_usage":true}}'
gains iu iu_other '{"stream_options":{"include_obfuscation":false},"stream":true}' \
    '{"stream_options":{"include_obfuscation":false,"include_usage":true},"stream":true}'
gains iu iu_null '{"stream":true,"stream_options":null}' \
    '{"stream":true,"stream_options":{"include_usage":true}}'
# a chunked body is decoded, then gains the field, with its new length
gains iu iu_chunked '{"stream":true}' '{"stream":true,"stream_options":{"include_usage":true}}' \
    -H 'Transfer-Encoding: chunked'

# ---- every other request goes as the client wrote it ---------------------------
for case in \
    'iu iu_false {"stream":true,"stream_options":{"include_usage":false}}' \
    'iu iu_true {"stream":true,"stream_options":{"include_usage":true}}' \
    'iu iu_nostream {"model":"m","stream":false}' \
    'iu iu_nokey {"model":"m"}' \
    'iu iu_bad {"stream":true,' \
    'iu iu_trail {"stream":true}x' \
    'iu iu_array [{"stream":true}]' \
    'iu iu_options_str {"stream":true,"stream_options":"x"}' \
    'plain iu_plain {"model":"m","stream":true}'; do
    read -r route tag body <<<"$case"
    gains "$route" "$tag" "$body" "$body"
done
check "a client that asked for no usage gets none" \
    '! grep -q "\"choices\":\[\]" "$FM_DIR/iu_false.resp"' "$(tail -c 300 "$FM_DIR/iu_false.resp")"
# another path of the route (the Responses API would refuse the field), and
# a method other than POST, go as written
curl -s -m 10 -o /dev/null --data-binary '{"stream":true}' "$B/iu/v1/responses?n=1&_t=iu_responses"
check "a path that is not /chat/completions: its body as written" \
    '[ "$(body_of iu_responses)" = "{\"stream\":true}" ]' "$(body_of iu_responses)"
curl -s -m 10 -o /dev/null -X PUT --data-binary '{"stream":true}' \
    "$B/iu/v1/chat/completions?n=1&_t=iu_put"
check "a PUT: its body as written" '[ "$(body_of iu_put)" = "{\"stream\":true}" ]' "$(body_of iu_put)"

# ---- the options' errors --------------------------------------------------------
# bad ARGS... / WANT: sg-proxy with ARGS is a usage error saying WANT.
bad() {
    local want=${*: -1}
    "$PX" --listen 127.0.0.1:0 "${@:1:$#-1}" >"$FM_DIR/bad.out" 2>"$FM_DIR/bad.err"
    local rc=$?
    check "sg-proxy ${*:1:$#-1}: exit 2, '$want'" '[ "$rc" -eq 2 ] && grep -qF -- "$want" "$FM_DIR/bad.err"' \
        "exit $rc: $(cat "$FM_DIR/bad.err")"
}
bad --upstream "$UP" --profile anthropic --include-usage \
    "include-usage asks OpenAI Chat Completions for its usage chunk: it needs profile openai, not anthropic"
bad --price-in 1 --upstream "$UP" --profile openai \
    "--price-in is the price of the upstream or fallback named before it"
bad --upstream "$UP" --profile openai --price-in 1 "upstream $UP: price-in needs price-out"
bad --upstream "$UP" --profile openai --price-cached 1 \
    "upstream $UP: price-cached needs price-in and price-out"
bad --upstream "$UP" --profile openai --price-in 1 --price-out 2 --fallback "$UP/b" --price-out 3 \
    "fallback $UP/b: price-out needs price-in"
for v in -1 1e3 abc 1,5 '' 1000000001 0x10 inf; do
    bad --upstream "$UP" --profile openai --price-in "$v" --price-out 1 \
        "--price-in takes a price per million tokens, a decimal number from 0 to 1000000000"
done
# in the file: per route, the line named
printf '[route a]\nprefix = /a\nupstream = %s\nprofile = openai\nprice-out = 2.x\n' "$UP" >"$FM_DIR/p.conf"
bad --config "$FM_DIR/p.conf" "p.conf:5: price-out takes a price per million tokens"
printf '[route a]\nprefix = /a\nprice-in = 1\nupstream = %s\nprofile = openai\n' "$UP" >"$FM_DIR/p.conf"
bad --config "$FM_DIR/p.conf" "p.conf:3: price-in is the price of the upstream or fallback named before it"
printf '[route a]\nprefix = /a\nupstream = %s\nprofile = openai\nfallback = %s/f\nprice-in = 1\n' \
    "$UP" "$UP" >"$FM_DIR/p.conf"
bad --config "$FM_DIR/p.conf" "route a: fallback $UP/f: price-in needs price-out"
printf '[route a]\nprefix = /a\nupstream = %s\nprofile = gemini\ninclude-usage\n' "$UP" >"$FM_DIR/p.conf"
bad --config "$FM_DIR/p.conf" "route a: include-usage asks OpenAI Chat Completions"
# prices that are whole start, in the file and as flags
printf '[route a]\nprefix = /a\nupstream = %s\nprice-in = 2.5\nprice-out = 10\nprice-cached = 1.25\nprofile = openai\nfallback = %s/f\nprice-in = 0\nprice-out = 0.075\n' \
    "$UP" "$UP" >"$FM_DIR/p.conf"
px_start pok --config "$FM_DIR/p.conf"
check "prices for the upstream and a fallback in the file: sg-proxy starts" 'kill -0 "$PX_PID"'
px_start pflags --upstream "$UP" --profile openai --price-in 3 --price-out 15 \
    --fallback "$UP/f" --price-in .5 --price-out 1.
check "prices as flags, each after its endpoint: sg-proxy starts" 'kill -0 "$PX_PID"'

# ---- usage and cost: the report line and /metrics ------------------------------
# The fake upstream's figures (docs/sg-fakemodel.md, USAGE): prompt_tokens
# input, cached_tokens of it cached, output the items plus
# reasoning_tokens.  Route m: OpenAI with include-usage and prices 2, 10
# and 0.5 a million; g: Gemini at 1 and 4; f: a fallback priced apart
# from its upstream; n: neither usage asked nor prices.
# route NAME PROFILE [KEY=VALUE...]: a route of the file, at /NAME, its
# upstream the fake one; each KEY=VALUE a line, in order (a price after
# the upstream or fallback it is for).
route() {
    printf '[route %s]\nprefix = /%s\nupstream = %s\nprofile = %s\n' "$1" "$1" "$UP" "$2"
    shift 2
    local kv
    for kv in "$@"; do
        printf '%s = %s\n' "${kv%%=*}" "${kv#*=}"
    done
}
RETRY=(include-usage=true first-item=300ms attempts=2 idempotent=true backoff-base=5ms)
{
    route m openai price-in=2 price-out=10 price-cached=0.5 "${RETRY[@]}" idle=200ms
    route g gemini price-in=1 price-out=4 idle=200ms
    route f openai price-in=1 price-out=1 "fallback=$UP" price-in=2 price-out=10 \
        price-cached=0.5 "${RETRY[@]}"
    route n openai
} >"$FM_DIR/usage.conf"
px_start M --config "$FM_DIR/usage.conf"
BM=http://127.0.0.1:$PX_PORT
FIG='prompt_tokens=100&cached_tokens=40&reasoning_tokens=7'
# run ROUTE KEY QUERY: one streaming request, the answer read whole; its
# report line (the last one) in $LINE
run() {
    local before
    before=$(wc -l <"$FM_DIR/M.out")
    curl -sN -m 10 -o /dev/null -H "Idempotency-Key: $2" -d '{"model":"m","stream":true}' \
        "$BM/$1/v1/chat/completions?$3&_t=$2"
    for _ in $(seq 1 100); do
        [ "$(wc -l <"$FM_DIR/M.out")" -gt "$before" ] && break
        sleep 0.02
    done
    LINE=$(tail -n 1 "$FM_DIR/M.out")
}
# says DESCRIPTION FILTER [COST]: the report of the last line ($LINE)
# passes the jq FILTER and, given COST, has exactly that cost (its text:
# the report writes a cost to 9 places, no exponent).
says() {
    if jq -e ".report | $2" <<<"$LINE" >/dev/null &&
        { [ -z "${3:-}" ] || grep -qF "\"cost\":$3" <<<"$LINE"; }; then
        pass "$1"
    else
        fail "$1: $(head -c 900 <<<"$LINE")"
    fi
}
U='"input_tokens":100,"output_tokens":12,"cached_input_tokens":40,"reasoning_tokens":7'
# a clean stream: the provider's figures, kept;
# cost (60 x 2 + 40 x 0.5 + 12 x 10) / 1e6 = 0.00026
run m u_clean "n=5&$FIG"
says "the report line: the provider's usage, kept, and its cost 0.00026" \
    ".usage.kept == {$U,\"estimated\":false} and .attempts[0].usage.source == \"provider\"" \
    '{"kept":0.00026,"discarded":0}'
# a first attempt cut before its first token, retried: its prefill is
# discarded, its input the kept attempt's (an estimate), at the cached
# split: (60 x 2 + 40 x 0.5) / 1e6 = 0.00014 thrown away
run m u_retried "n=5&$FIG&tail_first=1&tail_delay=2000"
says "a retried first-token timeout: the report's discarded input 100 (estimated), output 0, cost 0.00014" \
    '.usage.discarded == {"input_tokens":100,"output_tokens":0,"cached_input_tokens":40,"reasoning_tokens":null,"estimated":true} and (.attempts | length) == 2' \
    '{"kept":0.00026,"discarded":0.00014}'
# a stall after 3 tokens: nothing kept, its output estimated (3 x 10 / 1e6)
run m u_stall "n=9&stall_after=3&stall=forever"
says "a stall after 3 tokens: nothing kept, 3 output tokens discarded (estimated), cost 0.00003" \
    '.usage.kept == null and .usage.discarded.output_tokens == 3' '{"kept":0,"discarded":0.00003}'
# Gemini's running figures on every chunk: a stall after 3 is the
# provider's own count, 50 in, 3 + 2 out: (50 x 1 + 5 x 4) / 1e6
curl -sN -m 10 -o /dev/null -d '{}' \
    "$BM/g/v1beta/models/m:streamGenerateContent?alt=sse&n=9&stall_after=3&stall=forever&prompt_tokens=50&reasoning_tokens=2&_t=u_gem"
for _ in $(seq 1 100); do grep -q '"route":"g"' "$FM_DIR/M.out" && break; sleep 0.02; done
LINE=$(grep '"route":"g"' "$FM_DIR/M.out" | tail -n 1)
says "gemini, a stall after 3: the provider's 50 in and 5 out discarded, cost 0.00007" \
    '.usage.discarded == {"input_tokens":50,"output_tokens":5,"cached_input_tokens":null,"reasoning_tokens":2,"estimated":false}' \
    '{"kept":0,"discarded":0.00007}'
# a fallback priced apart: the upstream's attempt times out before its
# first token (nothing known of it on its endpoint: unaccounted, no cost),
# the fallback's is kept at the fallback's prices, 0.00026 (at the
# upstream's it would be (60 + 40 + 12) / 1e6 = 0.000112)
run f u_fallback "n=5&$FIG&tail_first=1&tail_delay=2000"
says "a fallback kept at its own prices: cost 0.00026, the upstream's attempt unaccounted" \
    ".usage.attempts_unaccounted == 1 and .attempts[1].endpoint != null and .usage.kept == {$U,\"estimated\":false}" \
    '{"kept":0.00026,"discarded":0}'
# no usage asked, no price: the kept output estimated, no cost
run n u_plain "n=3"
says "a route without prices: no cost in the report, the kept output estimated (3)" \
    '(has("cost") | not) and .usage.kept.output_tokens == 3 and .usage.kept.estimated'

curl -s "$BM/metrics" >"$FM_DIR/usage.metrics"
M=$FM_DIR/usage.metrics
for want in \
    'sg_proxy_tokens_total{route="m",kind="input",fate="kept"} 200' \
    'sg_proxy_tokens_total{route="m",kind="input",fate="discarded"} 100' \
    'sg_proxy_tokens_total{route="m",kind="output",fate="kept"} 24' \
    'sg_proxy_tokens_total{route="m",kind="output",fate="discarded"} 3' \
    'sg_proxy_tokens_total{route="g",kind="input",fate="discarded"} 50' \
    'sg_proxy_tokens_total{route="g",kind="output",fate="discarded"} 5' \
    'sg_proxy_tokens_total{route="n",kind="output",fate="kept"} 3' \
    'sg_proxy_cost_total{route="m",fate="kept"} 0.00052' \
    'sg_proxy_cost_total{route="m",fate="discarded"} 0.00017' \
    'sg_proxy_cost_total{route="g",fate="kept"} 0' \
    'sg_proxy_cost_total{route="g",fate="discarded"} 0.00007' \
    'sg_proxy_cost_total{route="f",fate="kept"} 0.00026' \
    'sg_proxy_attempts_unaccounted_total{route="f"} 1' \
    'sg_proxy_attempts_unaccounted_total{route="m"} 0' \
    '# TYPE gen_ai_client_token_usage histogram'; do
    has "$M" "$want" "/metrics: $want"
done
check "/metrics: no cost for a route without prices" '! grep -q "sg_proxy_cost_total{route=\"n\"" "$M"'
# gen_ai.client.token.usage: the provider's figures per attempt, by its
# fate; the estimates (the retried attempt's copied input, the stalls
# of route m) are not observed, as OpenTelemetry asks
L='route="m",gen_ai_operation_name="chat",gen_ai_provider_name="openai"'
G='route="g",gen_ai_operation_name="generate_content",gen_ai_provider_name="gcp.gemini"'
for want in \
    "gen_ai_client_token_usage_count{$L,gen_ai_token_type=\"input\",streamguard_usage_fate=\"kept\"} 2" \
    "gen_ai_client_token_usage_sum{$L,gen_ai_token_type=\"input\",streamguard_usage_fate=\"kept\"} 200" \
    "gen_ai_client_token_usage_bucket{$L,gen_ai_token_type=\"input\",streamguard_usage_fate=\"kept\",le=\"64\"} 0" \
    "gen_ai_client_token_usage_bucket{$L,gen_ai_token_type=\"input\",streamguard_usage_fate=\"kept\",le=\"256\"} 2" \
    "gen_ai_client_token_usage_sum{$L,gen_ai_token_type=\"output\",streamguard_usage_fate=\"kept\"} 24" \
    "gen_ai_client_token_usage_bucket{$L,gen_ai_token_type=\"output\",streamguard_usage_fate=\"kept\",le=\"4\"} 0" \
    "gen_ai_client_token_usage_bucket{$L,gen_ai_token_type=\"output\",streamguard_usage_fate=\"kept\",le=\"16\"} 2" \
    "gen_ai_client_token_usage_count{$L,gen_ai_token_type=\"input\",streamguard_usage_fate=\"discarded\"} 0" \
    "gen_ai_client_token_usage_count{$G,gen_ai_token_type=\"input\",streamguard_usage_fate=\"discarded\"} 1" \
    "gen_ai_client_token_usage_sum{$G,gen_ai_token_type=\"output\",streamguard_usage_fate=\"discarded\"} 5" \
    "gen_ai_client_token_usage_bucket{$G,gen_ai_token_type=\"output\",streamguard_usage_fate=\"discarded\",le=\"4\"} 0" \
    "gen_ai_client_token_usage_bucket{$G,gen_ai_token_type=\"output\",streamguard_usage_fate=\"discarded\",le=\"16\"} 1"; do
    has "$M" "$want" "/metrics: $want"
done
les=$(grep "^gen_ai_client_token_usage_bucket{$L,gen_ai_token_type=\"input\",streamguard_usage_fate=\"kept\"" "$M" |
    sed 's/.*le="\([^"]*\)".*/\1/' | tr '\n' ' ')
check "gen_ai_client_token_usage's buckets are OpenTelemetry's: 1, 4, 16, ... 67108864, +Inf" \
    '[ "$les" = "1 4 16 64 256 1024 4096 16384 65536 262144 1048576 4194304 16777216 67108864 +Inf " ]' "$les"
check "no token histogram for a route whose figures are all estimates" \
    '! grep -q "^gen_ai_client_token_usage.*route=\"n\"" "$M"'
bad=$(grep -cvE '^(# (HELP|TYPE) .*|[a-z_]+(\{[^}]*\})? [0-9.e+-]+)$' "$M")
check "/metrics: every line in the text format" '[ "$bad" -eq 0 ]' "$(grep -vE '^(# (HELP|TYPE) .*|[a-z_]+(\{[^}]*\})? [0-9.e+-]+)$' "$M" | head -3)"

# the proxy ends clean: under the sanitizer build, exit 0 means no leak
kill -TERM "${PX_PIDS[0]}"
rc=0
wait "${PX_PIDS[0]}" || rc=$?
check "SIGTERM: sg-proxy exits 0" '[ "$rc" -eq 0 ]' "exit $rc: $(tail -c 600 "$FM_DIR/U.err")"

px_stop_all
fm_finish
