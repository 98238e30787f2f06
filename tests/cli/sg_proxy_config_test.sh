#!/usr/bin/env bash
# sg-proxy --config: routes by path prefix, each with its profile, its
# upstream and its clocks; a path no route has is 404, never forwarded;
# SIGHUP reads the file again - new requests take the new routes, a stream
# in flight keeps its own, and a file that does not load changes nothing;
# /metrics is labelled by route.  Against sg-fakemodel.
# Usage: sg_proxy_config_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_upstream
CFG=$FM_DIR/proxy.conf

# config IDLE: two routes, the openai one with that idle clock
config() {
    cat >"$CFG" <<CONF
# sg-proxy routes (the test's)
header-timeout = 5s

[route openai]
prefix = /openai
upstream = $UP
profile = openai
idle = $1
attempts = 1

[route claude]
prefix = /anthropic/
upstream = $UP/v1
profile = anthropic
first-item = 2s

[route tls]
prefix = /tls
upstream = https://localhost:$FM_PORT
cacert = $FM_CA
profile = openai
CONF
}

now_ms() { date +%s%3N; }

config 2s
px_start cfg --config "$CFG"
B=http://127.0.0.1:$PX_PORT

# a dot segment would leave the route's prefix and the upstream's path
# behind (libcurl or the upstream resolves it): 400, never forwarded
for path in "/anthropic/../../admin" "/anthropic/%2e%2E/x" "/openai/./v1/../../y"; do
    code=$(curl -s --path-as-is -o /dev/null -w '%{http_code}' -X POST -d '{}' "$B$path?_t=c_dot")
    [ "$code" = 400 ] && pass "$path: 400" || fail "$path: $code"
done
[ "$(fm_log "event=received" | grep -c '_t=c_dot')" -eq 0 ] &&
    pass "no dot-segment path reached the upstream" || fail "a dot-segment path was forwarded"
curl -sN -X POST -d '{}' "$B/tls/v1/chat/completions?n=1&_v=1.2..3&_t=c_dotq" >"$FM_DIR/dotq"
has "$FM_DIR/dotq" 'data: [DONE]' "dots in the query are no dot segment"

# routes by prefix, the prefix taken off, the upstream's path put on
curl -sN -X POST -d '{}' "$B/openai/v1/chat/completions?n=2&_t=c_oa" >"$FM_DIR/oa"
has "$FM_DIR/oa" 'data: [DONE]' "the openai route streams"
curl -sN -X POST -d '{}' "$B/anthropic/messages?n=2&_t=c_an" >"$FM_DIR/an"
has "$FM_DIR/an" 'event: message_stop' "the anthropic route streams"
[ "$(fm_log "event=received" | grep -c '"path":"/v1/chat/completions"')" -ge 1 ] &&
    [ "$(fm_log "event=received" | grep -c '"path":"/v1/messages"')" -ge 1 ] &&
    pass "each route's upstream path: /v1/chat/completions and /v1/messages" ||
    fail "paths: $(fm_log "event=received" | grep -o '"path":"[^"]*"')"

# an https:// upstream that offers HTTP/2: concurrent streams share one
# connection (libcurl's multiplexing on the proxy's one multi)
pids=()
for i in 1 2 3; do
    curl -sN -X POST -d '{}' "$B/tls/v1/chat/completions?n=10&gap=20&_t=c_h2_$i" \
        >"$FM_DIR/h2.$i" &
    pids+=($!)
done
wait "${pids[@]}"
[ "$(cat "$FM_DIR"/h2.* | grep -c 'data: \[DONE\]')" -eq 3 ] &&
    pass "three concurrent streams over the https:// route" || fail "tls route streams"
conns=$(fm_log "event=received" | grep 'c_h2_' | grep -o '"proto":"h2","tls":true,"conn":[0-9]*' |
    sort -u | wc -l)
[ "$conns" -eq 1 ] && pass "... as HTTP/2 streams of one connection" ||
    fail "h2 connections: $conns ($(fm_log "event=received" | grep -o '"proto":"[^"]*","tls":[a-z]*,"conn":[0-9]*' | sort | uniq -c))"

# no route: 404, and nothing reaches the upstream
code=$(curl -s -o "$FM_DIR/nf" -w '%{http_code}' -X POST -d '{}' "$B/gemini/x?_t=c_nf")
[ "$code" = 404 ] && pass "a path no route has: 404" || fail "no route: $code"
[ "$(fm_log "event=received" | grep -c 'c_nf')" -eq 0 ] && pass "... never forwarded" ||
    fail "an unrouted request reached the upstream"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' "$B/openaix/v1/chat/completions?_t=c_px")
[ "$code" = 404 ] && pass "/openaix is not under /openai" || fail "/openaix: $code"

# a stream in flight across a reload keeps its route's clock (idle 2s):
# its stall of 1 s passes; the reloaded route (idle 300ms) cuts a new one
curl -sN -X POST -d '{}' \
    "$B/openai/v1/chat/completions?n=4&stall_after=2&stall=1000&_t=c_fly" >"$FM_DIR/fly" &
fly=$!
for _ in $(seq 1 100); do grep -q tok1 "$FM_DIR/fly" 2>/dev/null && break; sleep 0.02; done
config 300ms
kill -HUP "$PX_PID"
for _ in $(seq 1 100); do grep -q reloaded "$FM_DIR/cfg.err" && break; sleep 0.02; done
has "$FM_DIR/cfg.err" "reloaded 3 route(s)" "SIGHUP reloads the file"
t0=$(now_ms)
curl -sN -X POST -d '{}' "$B/openai/v1/chat/completions?n=4&stall_after=2&stall=forever&_t=c_new" \
    >"$FM_DIR/new"
el=$(($(now_ms) - t0))
has "$FM_DIR/new" '"code":"idle_timeout"' "a new request takes the new route: idle_timeout"
[ "$el" -lt 1500 ] && pass "... after the new idle clock ($el ms)" || fail "took $el ms"
wait "$fly"
has "$FM_DIR/fly" 'data: [DONE]' "the stream in flight kept its route (idle 2s): whole"

# a file that does not load changes nothing
echo "[route broken" >"$CFG"
kill -HUP "$PX_PID"
for _ in $(seq 1 100); do grep -q "reload failed" "$FM_DIR/cfg.err" && break; sleep 0.02; done
has "$FM_DIR/cfg.err" "reload failed, the routes in force stay" "a bad file is refused on SIGHUP"
curl -sN -X POST -d '{}' "$B/openai/v1/chat/completions?n=2&_t=c_after" >"$FM_DIR/after"
has "$FM_DIR/after" 'data: [DONE]' "... and the routes in force still serve"
# ... nor does a key without its value, which once crashed the reload
cp "$CFG" "$FM_DIR/good.conf"
printf '[route a]\nprefix = /a\nupstream\nprofile = openai\n' >"$CFG"
kill -HUP "$PX_PID"
for _ in $(seq 1 50); do [ "$(grep -c "reload failed" "$FM_DIR/cfg.err")" -ge 2 ] && break; sleep 0.02; done
if kill -0 "$PX_PID" 2>/dev/null && [ "$(grep -c "reload failed" "$FM_DIR/cfg.err")" -ge 2 ]; then
    pass "a key without a value on SIGHUP: refused, the proxy runs on"
else fail "bare key on SIGHUP: $(tail -n 2 "$FM_DIR/cfg.err")"; fi
has "$FM_DIR/cfg.err" "proxy.conf:3: 'upstream' takes a value" "... naming the key and the line"
curl -sN -X POST -d '{}' "$B/openai/v1/chat/completions?n=1&_t=c_after2" >"$FM_DIR/after2"
has "$FM_DIR/after2" 'data: [DONE]' "... and the routes in force still serve"
cp "$FM_DIR/good.conf" "$CFG"

# metrics by route
curl -s "$B/metrics" >"$FM_DIR/metrics"
has "$FM_DIR/metrics" 'sg_proxy_requests_total{route="openai",outcome="ok"} 4' "openai's ok count"
has "$FM_DIR/metrics" 'sg_proxy_requests_total{route="claude",outcome="ok"} 1' "claude's ok count"
has "$FM_DIR/metrics" 'sg_proxy_requests_total{route="openai",outcome="idle_timeout"} 1' \
    "openai's idle_timeout"

# a route's retry budget is in the file, and a reload that keeps the
# route (its name, the budget's settings) keeps its bucket: drained by
# two failing requests (4 -> 2 -> 1 tokens), the one after the reload is
# throttled at once (1 upstream request, not the full bucket's 2); with
# other settings the route starts with a full one
budget() {
    printf '[route rb]\nprefix = /rb\nupstream = %s\nprofile = openai\nattempts = 3\n%s\n' \
        "$UP" "$1" >"$FM_DIR/rb.conf"
}
budget 'retry-budget = 4'
px_start rbc --config "$FM_DIR/rb.conf"
RB=http://127.0.0.1:$PX_PORT/rb/v1/chat/completions
rbreq() {
    curl -s -o /dev/null -X POST -H "Idempotency-Key: $1" -d '{}' \
        "$RB?status=503&retry_after=0&_t=c_$1"
    fm_log "event=received" | grep -c "_t=c_$1"
}
rbreq rb1 >/dev/null
rbreq rb2 >/dev/null
kill -HUP "$PX_PID"
for _ in $(seq 1 100); do grep -q reloaded "$FM_DIR/rbc.err" && break; sleep 0.02; done
n=$(rbreq rb3)
[ "$n" -eq 1 ] && pass "SIGHUP keeps a kept route's retry budget: throttled at once after it" ||
    fail "after SIGHUP: $n upstream requests (a fresh bucket)"
budget $'retry-budget = 4\nretry-budget-ratio = 0.2'
kill -HUP "$PX_PID"
for _ in $(seq 1 100); do [ "$(grep -c reloaded "$FM_DIR/rbc.err")" -ge 2 ] && break; sleep 0.02; done
n=$(rbreq rb4)
[ "$n" -eq 2 ] && pass "... and other settings start a full bucket: retried once (2 upstream requests)" ||
    fail "new settings: $n upstream requests"
budget 'retry-budget = none'
"$PX" --config "$FM_DIR/rb.conf" --listen 127.0.0.1:0 >/dev/null 2>"$FM_DIR/rbbad.err"
[ $? -eq 2 ] && grep -q "rb.conf:6: retry-budget takes 1 to 1000 tokens or off" "$FM_DIR/rbbad.err" &&
    pass "retry-budget = none: exit 2 naming the line" || fail "bad retry-budget: $(cat "$FM_DIR/rbbad.err")"

# a bad file at start is a usage error naming the line
printf '[route a]\nprefix = /a\nupstream = ftp://x\nprofile = openai\n' >"$CFG"
"$PX" --config "$CFG" --listen 127.0.0.1:0 >"$FM_DIR/bad.out" 2>"$FM_DIR/bad.err"
rc=$?
[ "$rc" -eq 2 ] && pass "a bad file at start: exit 2" || fail "bad file: exit $rc"
has "$FM_DIR/bad.err" "proxy.conf:3: upstream takes http(s)://" "the error names file and line"
# blank lines count; a bare key, or one the proxy does not have, is named
for bad in 'listen' 'bogus = 1' '[route a]\n\n\nprefix' '[route a]\nprefix = /a\n\n\nupstream'; do
    printf "$bad\n" >"$CFG"
    want=$(printf "$bad\n" | wc -l | tr -d ' ')
    "$PX" --config "$CFG" --listen 127.0.0.1:0 >"$FM_DIR/bad.out" 2>"$FM_DIR/bad.err"
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q "proxy.conf:$want: '[a-z]*' \(takes a value\|is not an option\)" "$FM_DIR/bad.err"; then
        pass "config '$bad': exit 2 naming line $want"
    else fail "config '$bad': exit $rc: $(cat "$FM_DIR/bad.err")"; fi
done
"$PX" --config "$CFG" --upstream "$UP" --profile openai >/dev/null 2>"$FM_DIR/both.err"
[ $? -eq 2 ] && pass "--config with a route's flags: a usage error" || fail "--config and --upstream"

px_stop_all
fm_finish
