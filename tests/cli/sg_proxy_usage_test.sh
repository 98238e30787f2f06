#!/usr/bin/env bash
# sg-proxy's usage and cost options, against sg-fakemodel: include-usage
# adds "stream_options":{"include_usage":true} to a Chat Completions body
# that streams without it - checked at an upstream that records every
# request byte for byte (sg-fakemodel --record): that field and nothing
# else, its Content-Length recomputed, every other request as the client
# wrote it - and the client then gets the usage chunk; the price options,
# per route and per fallback, and their errors.
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

# the proxy ends clean: under the sanitizer build, exit 0 means no leak
kill -TERM "${PX_PIDS[0]}"
rc=0
wait "${PX_PIDS[0]}" || rc=$?
check "SIGTERM: sg-proxy exits 0" '[ "$rc" -eq 0 ]' "exit $rc: $(tail -c 600 "$FM_DIR/U.err")"

px_stop_all
fm_finish
