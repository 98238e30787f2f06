#!/usr/bin/env bash
# sg-proxy's endpoint health, one per process (docs/sg-proxy.md, "ENDPOINT
# HEALTH"), against sg-fakemodel: an upstream's 429 with Retry-After, and
# a success whose rate-limit headers say nothing remains, make the next
# request be answered at once by the proxy - 429, Retry-After,
# retry-after-ms, X-SG-Outcome: refused, X-SG-Reason, x-should-retry: true,
# the provider's body - with nothing sent (sg-fakemodel's /_stats); the
# breaker opens after --breaker-failures (503 circuit_open) and its probe
# closes it after --breaker-cooldown; --max-inflight 1 makes a second
# request wait in its budget, or 503 endpoint_busy when it cannot; a
# cooling upstream is skipped for its fallback; /metrics shows each
# upstream's state and counts; SIGHUP keeps what was learned and applies
# the new settings; --health off turns it off.
# Usage: sg_proxy_health_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_upstream
CC=/v1/chat/completions

# ---- a 429 with Retry-After cools the upstream for every request -------------
px_start ra --upstream "$UP" --profile openai --budget 2s --attempts 1
P=http://127.0.0.1:$PX_PORT
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' "$P$CC?status=429&retry_after=30&_t=h_ra1")
[ "$code" = 429 ] && pass "the upstream's 429 passes through" || fail "first request: $code"
# OpenAI's rate-limit error
px_refused "$P$CC?n=2&_t=h_ra2" h_ra2 429 rate_limited 30 '"type":"requests","code":"rate_limit_exceeded"'
# report lines come as operations end: the refused one is the last
tail -n 1 "$FM_DIR/ra.out" | grep -qF '"outcome":"refused","phase":null,"decision":"stop","reason":"rate_limited"' &&
    tail -n 1 "$FM_DIR/ra.out" | grep -qE '"endpoint_free_in_ms":(29|30)[0-9]{3}' &&
    pass "the report line says refused, rate_limited, and when the upstream frees" ||
    fail "report: $(tail -n 1 "$FM_DIR/ra.out")"
curl -s "$P/metrics" >"$FM_DIR/ra.metrics"
lbl="upstream=\"$UP$CC\""
has "$FM_DIR/ra.metrics" "sg_proxy_upstream_state{$lbl" "/metrics names the upstream by its endpoint"
grep -F "sg_proxy_upstream_state{$lbl" "$FM_DIR/ra.metrics" | grep -qF 'state="cooling"} 1' &&
    pass "/metrics: the upstream is cooling" || fail "/metrics: $(grep -F upstream_state "$FM_DIR/ra.metrics")"
grep -F "sg_proxy_upstream_state{$lbl" "$FM_DIR/ra.metrics" | grep -qF 'state="closed"} 0' &&
    pass "/metrics: ... and not closed" || fail "/metrics: not closed 0"
free_in=$(grep -F "sg_proxy_upstream_free_in_seconds{$lbl" "$FM_DIR/ra.metrics" | awk '{print $2}')
ge "$free_in" 25 && ! ge "$free_in" 30.001 && pass "/metrics: it frees in $free_in s" ||
    fail "/metrics: free_in_seconds '$free_in'"
grep -F "sg_proxy_upstream_refused_total{$lbl" "$FM_DIR/ra.metrics" | grep -qF 'reason="rate_limited"} 1' &&
    pass "/metrics: one request refused rate_limited" ||
    fail "/metrics: $(grep -F refused_total "$FM_DIR/ra.metrics")"
grep -qF SDKSECRET "$FM_DIR/ra.metrics" && fail "a credential in /metrics" || true

# the Anthropic shape, from an anthropic route
px_start raa --upstream "$UP" --profile anthropic --budget 2s --attempts 1
A=http://127.0.0.1:$PX_PORT
curl -s -o /dev/null -X POST -d '{}' "$A/v1/messages?status=429&retry_after=20&_t=h_raa1"
px_refused "$A/v1/messages?n=2&_t=h_raa2" h_raa2 429 rate_limited 20 \
    '{"type":"error","error":{"type":"rate_limit_error","message":"sg-proxy: refused'

# ---- rate-limit headers on a success: nothing remains until the reset ---------
px_start rl --upstream "$UP" --profile openai --budget 1s --attempts 1
R=http://127.0.0.1:$PX_PORT
curl -sN -o "$FM_DIR/rl1" -X POST -d '{}' "$R$CC?n=2&rl_requests=1&rl_window=20000&rl_key=h_rl&_t=h_rl1"
has "$FM_DIR/rl1" 'data: [DONE]' "a stream whose headers say 0 requests remain"
px_refused "$R$CC?n=2&rl_requests=1&rl_window=20000&rl_key=h_rl&_t=h_rl2" h_rl2 429 rate_limited 20 \
    '"code":"rate_limit_exceeded"'
[ "$(fm_stat rate_limited)" -eq 0 ] && pass "no 429 upstream: the limit was kept by the proxy" ||
    fail "upstream: $(fm_stat rate_limited) rate limited"

# the requests an answer says remain are counted: "2 remain" lets two
# more go - here still streaming, their answers not yet read - and the
# third is the proxy's own 429, never the upstream's
px_start rw --upstream "$UP" --profile openai --budget 1s --attempts 1
W="http://127.0.0.1:$PX_PORT$CC?rl_requests=3&rl_window=20000&rl_key=h_rw"
curl -sN -o /dev/null -X POST -d '{}' "$W&n=1&_t=h_rw1"
curl -sN -o "$FM_DIR/rw2" -X POST -d '{}' "$W&n=4&gap=300&_t=h_rw2" &
rw2=$!
curl -sN -o "$FM_DIR/rw3" -X POST -d '{}' "$W&n=4&gap=300&_t=h_rw3" &
rw3=$!
fm_wait_received '_t=h_rw[23]' 2
px_refused "$W&n=1&_t=h_rw4" h_rw4 429 rate_limited 20 '"code":"rate_limit_exceeded"'
wait "$rw2" "$rw3"
has "$FM_DIR/rw3" 'data: [DONE]' "the two that remained streamed"
[ "$(fm_stat rate_limited)" -eq 0 ] && pass "the window counted: no 429 upstream" ||
    fail "upstream: $(fm_stat rate_limited) rate limited"

# a reset counts from the answer's head, not from the end of its stream:
# "1.5s" at the head of a stream of 1.2 s leaves 0.3 s to wait, which a
# budget of 1 s holds
px_start rh --upstream "$UP" --profile openai --budget 1s --attempts 1
H1="http://127.0.0.1:$PX_PORT$CC?rl_requests=1&rl_window=1500&rl_key=h_rh"
curl -sN -o /dev/null -X POST -d '{}' "$H1&n=5&gap=300&_t=h_rh1"
px_ask "$H1&n=1&_t=h_rh2" h_rh2
has "$FM_DIR/h_rh2.body" 'data: [DONE]' "the next request waited for the reset, then streamed"
waited=$(tail -n 1 "$FM_DIR/rh.out" | grep -o '"action":"waited","reason":"rate_limited"[^}]*"waited_ms":[0-9]*' |
    grep -o '[0-9]*$')
[ -n "$waited" ] && [ "$waited" -lt 700 ] && pass "... it waited $waited ms (the head's reset)" ||
    fail "waited '$waited' ms: $(tail -n 1 "$FM_DIR/rh.out")"
[ "$(fm_stat rate_limited)" -eq 0 ] && pass "... and drew no 429" ||
    fail "upstream: $(fm_stat rate_limited) rate limited"

# ---- a cooling upstream is skipped for its fallback ------------------------------
px_start sk --upstream "$UP" --fallback "http://localhost:$FM_PORT" --profile openai \
    --budget 2s --attempts 2 --idempotent --backoff-base 5ms --backoff-max 10ms
S=http://127.0.0.1:$PX_PORT
curl -s -o /dev/null -X POST -H 'X-SG-Scenario: status=429&retry_after=30&fail_first=1&fail_key=h_sk' \
    -d '{}' "$S$CC?n=2&_t=h_sk1"
curl -sN -o "$FM_DIR/sk2" -D "$FM_DIR/sk2.head" -X POST -d '{}' "$S$CC?n=2&_t=h_sk2"
has "$FM_DIR/sk2" 'data: [DONE]' "the next request streams from the fallback"
tail -n 1 "$FM_DIR/sk.out" | grep -qF '"action":"skipped","reason":"rate_limited"' &&
    tail -n 1 "$FM_DIR/sk.out" | grep -qF '"endpoint":"http://localhost:' &&
    [ "$(tail -n 1 "$FM_DIR/sk.out" | grep -o '"n":[0-9]*' | wc -l)" -eq 1 ] &&
    pass "... its one attempt to the fallback, the upstream skipped" ||
    fail "report: $(tail -n 1 "$FM_DIR/sk.out")"
curl -s "$S/metrics" >"$FM_DIR/sk.metrics"
grep -F "sg_proxy_upstream_skipped_total{upstream=\"$UP$CC\"" "$FM_DIR/sk.metrics" |
    grep -qF 'reason="rate_limited"} 1' && pass "/metrics: the cooling upstream skipped once" ||
    fail "/metrics: $(grep -F skipped_total "$FM_DIR/sk.metrics")"

# ---- the breaker: open after N failures, a probe after the cooldown --------------
px_start br --upstream "$UP" --profile openai --budget 1s --attempts 1 \
    --breaker-failures 3 --breaker-cooldown 1500ms
B=http://127.0.0.1:$PX_PORT
for i in 1 2 3; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST \
        -H 'X-SG-Scenario: status=500&fail_first=3&fail_key=h_br' -d '{}' "$B$CC?n=2&_t=h_br$i")
    [ "$code" = 502 ] || fail "failure $i: $code"
done
# OpenAI's server error, its code circuit_open
px_refused "$B$CC?n=2&_t=h_br4" h_br4 503 circuit_open 2 '"type":"server_error","code":"circuit_open"'
curl -s "$B/metrics" >"$FM_DIR/br.metrics"
grep -F "sg_proxy_upstream_state{upstream=\"$UP$CC\"" "$FM_DIR/br.metrics" | grep -qF 'state="open"} 1' &&
    pass "/metrics: the breaker is open" || fail "/metrics: $(grep -F upstream_state "$FM_DIR/br.metrics")"
# the cooldown passes: half-open, and the next request is its probe
if px_wait_state "$B" "$UP$CC" half_open 5; then
    pass "/metrics: half-open once the cooldown passed"
else
    fail "never half-open: $(grep -F upstream_state "$FM_DIR/state.metrics")"
fi
curl -sN -o "$FM_DIR/br5" -X POST -H 'X-SG-Scenario: status=500&fail_first=3&fail_key=h_br' -d '{}' \
    "$B$CC?n=2&_t=h_br5"
has "$FM_DIR/br5" 'data: [DONE]' "the probe reached the recovered upstream and streamed"
px_wait_state "$B" "$UP$CC" closed 2 && pass "its success closed the breaker" ||
    fail "not closed: $(grep -F upstream_state "$FM_DIR/state.metrics")"

# ---- --max-inflight 1: the second request waits, or is refused endpoint_busy -----
px_start mi --upstream "$UP" --profile openai --budget 5s --attempts 1 --max-inflight 1
M=http://127.0.0.1:$PX_PORT
curl -sN -o "$FM_DIR/mi1" -X POST -d '{}' "$M$CC?n=8&gap=200&_t=h_mi1" &
mi1=$!
fm_wait_received '_t=h_mi1' 1
curl -sN -o "$FM_DIR/mi2" -X POST -d '{}' "$M$CC?n=2&_t=h_mi2" &
mi2=$!
# a request whose own deadline cannot outlast the first stream
px_ask "$M$CC?n=2&_t=h_mi3" h_mi3 -H 'X-Deadline-Ms: 300'
px_is_refused h_mi3 503 endpoint_busy 1
ms=$(px_header h_mi3 retry-after-ms)
[ -n "$ms" ] && [ "$ms" -ge 1 ] && [ "$ms" -le 1000 ] && pass "endpoint_busy: retry-after-ms $ms" ||
    fail "endpoint_busy: retry-after-ms '$ms'"
wait "$mi1" "$mi2"
has "$FM_DIR/mi1" 'data: [DONE]' "the first stream ran whole"
has "$FM_DIR/mi2" 'data: [DONE]' "the second waited for it, then streamed"
grep -F '"outcome":"ok"' "$FM_DIR/mi.out" | grep -qF '"action":"waited","reason":"endpoint_busy"' &&
    pass "its report says it waited, endpoint_busy" || fail "reports: $(cat "$FM_DIR/mi.out")"
[ "$(fm_log "event=received" | grep -c '_t=h_mi3')" -eq 0 ] && pass "the refused one sent nothing" ||
    fail "the refused one reached the upstream"
r2=$(fm_log "event=received" | grep '_t=h_mi2' | grep -o '"t_ns":[0-9]*' | cut -d: -f2)
f1=$(fm_log "event=finished" | grep "\"id\":$(rid h_mi1)," | grep -o '"t_ns":[0-9]*' | cut -d: -f2)
[ -n "$r2" ] && [ -n "$f1" ] && ge "$r2" "$f1" && pass "never two in flight upstream" ||
    fail "second received at '$r2', first finished at '$f1'"
curl -s "$M/metrics" >"$FM_DIR/mi.metrics"
grep -F "sg_proxy_upstream_waited_total{upstream=\"$UP$CC\"" "$FM_DIR/mi.metrics" |
    grep -qF 'reason="endpoint_busy"} 2' && pass "/metrics: two waits, endpoint_busy" ||
    fail "/metrics: $(grep -F waited_total "$FM_DIR/mi.metrics")"

# ---- SIGHUP keeps what was learned, and applies the new settings -----------------
CFG=$FM_DIR/health.conf
config() { # FAILURES COOLDOWN
    cat >"$CFG" <<CONF
breaker-failures = $1
breaker-cooldown = $2

[route default]
upstream = $UP
profile = openai
budget = 1s
attempts = 1
CONF
}
config 2 30s
px_start hup --config "$CFG"
H=http://127.0.0.1:$PX_PORT
for i in 1 2; do
    curl -s -o /dev/null -X POST -H 'X-SG-Scenario: status=500' -d '{}' "$H$CC?n=2&_t=h_hup$i"
done
px_ask "$H$CC?n=2&_t=h_hup3" h_hup3
px_is_refused h_hup3 503 circuit_open 30
config 1 20s
kill -HUP "$PX_PID"
for _ in $(seq 1 100); do
    grep -q 'reloaded' "$FM_DIR/hup.err" && break
    sleep 0.02
done
px_ask "$H$CC?n=2&_t=h_hup4" h_hup4
px_is_refused h_hup4 503 circuit_open 30
ra=$(px_header h_hup4 Retry-After)
[ -n "$ra" ] && [ "$ra" -gt 20 ] && pass "after SIGHUP the breaker is still the one opened for 30 s (Retry-After $ra)" ||
    fail "after SIGHUP: Retry-After '$ra'"
# the new settings: one failure opens another upstream now
curl -s -o /dev/null -X POST -H 'X-SG-Scenario: status=500' -d '{}' "$H/v1/responses?_t=h_hup5"
px_ask "$H/v1/responses?_t=h_hup6" h_hup6
px_is_refused h_hup6 503 circuit_open 20
# it drains and exits 0 (under the sanitizers: nothing leaked)
kill -TERM "$PX_PID"
rc=0
wait "$PX_PID" || rc=$?
[ "$rc" -eq 0 ] && pass "after the reloads, SIGTERM: exit 0" ||
    fail "exit $rc: $(tail -n 20 "$FM_DIR/hup.err")"

# ---- --health off: every request goes upstream ----------------------------------
px_start off --upstream "$UP" --profile openai --budget 2s --attempts 1 --health off
O=http://127.0.0.1:$PX_PORT
curl -s -o /dev/null -X POST -d '{}' "$O$CC?status=429&retry_after=30&_t=h_off1"
curl -sN -o "$FM_DIR/off2" -X POST -d '{}' "$O$CC?n=2&_t=h_off2"
has "$FM_DIR/off2" 'data: [DONE]' "--health off: the next request goes upstream"
curl -s "$O/metrics" >"$FM_DIR/off.metrics"
grep -q '^sg_proxy_upstream_state{' "$FM_DIR/off.metrics" && fail "--health off: upstream states in /metrics" ||
    pass "--health off: no upstream state in /metrics"

# ---- the options' values ----------------------------------------------------------
for bad in "--breaker-failures x" "--breaker-cooldown 0" "--max-inflight -1" "--health maybe"; do
    # shellcheck disable=SC2086 # the option and its value, split
    "$PX" --upstream "$UP" --profile openai $bad >"$FM_DIR/bad.out" 2>"$FM_DIR/bad.err"
    rc=$?
    [ "$rc" -eq 2 ] && grep -qF -- "${bad%% *}" "$FM_DIR/bad.err" && pass "$bad: a usage error naming it" ||
        fail "$bad: exit $rc, $(cat "$FM_DIR/bad.err")"
done

px_stop_all
fm_finish
