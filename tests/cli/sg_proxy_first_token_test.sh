#!/usr/bin/env bash
# sg-proxy's first-token options, per route (docs/sg-proxy.md, FIRST
# TOKENS): --hedge-after auto[:Q][,F] and --order, the flags and the config
# keys of the same names - a bad value is a usage error (a bad file is
# refused with its line); a route with auto hedges after its fallback F
# until it has learned enough, then after what the process's endpoint
# health learned of its upstream's first tokens, and the report line says
# which; with --health off it never learns; a route with order =
# first_token says what it ordered.  Against sg-fakemodel.
# Usage: sg_proxy_first_token_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_upstream
CFG=$FM_DIR/proxy.conf

# report NAME N: report line N of proxy NAME (its stdout after the port),
# waiting up to 5 s for it.
report() {
    for _ in $(seq 1 100); do
        [ "$(($(wc -l <"$FM_DIR/$1.out") - 1))" -ge "$2" ] && break
        sleep 0.05
    done
    sed -n "$(($2 + 1))p" "$FM_DIR/$1.out"
}

# hedged TAG PATH BOUND WHAT: a request to PATH (with its query) whose
# first attempt is 3 s late - the first of its counter TAG, the hedge the
# second - streams within BOUND ms.
hedged() {
    local t0 el
    t0=${EPOCHREALTIME/./}
    curl -sN -X POST -d '{}' "$B$2&tail_first=1&tail_delay=3000&fail_key=$1&_t=$1" \
        >"$FM_DIR/$1.body"
    el=$(((${EPOCHREALTIME/./} - t0) / 1000))
    has "$FM_DIR/$1.body" 'data: [DONE]' "$4 streams"
    [ "$el" -lt "$3" ] && pass "... hedged: ${el} ms (the first attempt's token was 3 s away)" ||
        fail "$4 took ${el} ms (bound $3)"
}

# jqcheck DESCRIPTION JSON FILTER: FILTER is true of JSON.
jqcheck() {
    if jq -e "$3" <<<"$2" >/dev/null 2>&1; then pass "$1"; else fail "$1: $(head -c 600 <<<"$2")"; fi
}

# ---- flags: a bad value is a usage error, one line -----------------------------
for bad in "--idempotent --hedge-after auto:2" "--idempotent --hedge-after auto:0.9,x" \
    "--order quickest" "--hedge-after auto"; do
    rc=0
    # shellcheck disable=SC2086
    timeout 5 "$PX" --listen 127.0.0.1:0 --upstream "$UP" --profile openai $bad \
        >"$FM_DIR/bad.out" 2>"$FM_DIR/bad.err" || rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$FM_DIR/bad.err")" -eq 1 ] &&
        pass "sg-proxy $bad: a usage error, one line (exit 2)" ||
        fail "sg-proxy $bad: exit $rc: $(cat "$FM_DIR/bad.err")"
done
grep -q "hedge-after repeats requests: it needs idempotent" "$FM_DIR/bad.err" &&
    pass "auto hedging, as any, needs idempotent" || fail "$(cat "$FM_DIR/bad.err")"

# ---- a config file: the keys, per route ------------------------------------------
cat >"$CFG" <<CONF
[route learned]
prefix = /learned
upstream = $UP
profile = openai
idempotent = true
hedge-after = auto:0.9,150ms
attempts = 3

[route median]
prefix = /median
upstream = $UP
profile = openai
idempotent = true
hedge-after = auto:0.5,2s
attempts = 3

[route ordered]
prefix = /ordered
upstream = $UP/v1
fallback = $UP/v1
profile = openai
order = first_token
CONF
px_start cfg --config "$CFG"
B=http://127.0.0.1:$PX_PORT

# hedged after the fallback, 150 ms (nothing learned yet)
hedged pft_l "/learned/v1/chat/completions?n=2" 1500 "the learned route"
r=$(report cfg 1)
jqcheck "the report line: the fallback 150 ms, auto_fallback, quantile 0.9" "$r" \
    '.report.hedge_auto.quantile == 0.9 and .report.attempts[0].hedge_after_ms == 150 and .report.attempts[0].hedge_after_source == "auto_fallback" and .report.attempts[1].hedge == true'

curl -sN -X POST -d '{}' "$B/ordered/chat/completions?n=2&_t=pft_o" >"$FM_DIR/o.body"
has "$FM_DIR/o.body" 'data: [DONE]' "the ordered route streams"
r=$(report cfg 2)
jqcheck "the report line: ordered by first token, its upstream first" "$r" \
    '.report.endpoint_order.by == "first_token" and (.report.endpoint_order.first | endswith("/v1/chat/completions")) and .report.outcome == "ok"'

# learned: 12 streams that start after 100 ms (the median's 10 and more),
# then one whose first attempt is 3 s late - hedged after the learned
# median (about 100 ms), not the fallback's 2 s
for i in $(seq 1 12); do
    curl -sN -X POST -d '{}' "$B/median/v1/chat/completions?n=1&first_delay=100&_t=pft_m" \
        >/dev/null
done
hedged pft_mt "/median/v1/chat/completions?n=2&first_delay=100" 1000 \
    "the median route (its fallback 2 s)"
r=$(report cfg 15)
jqcheck "the report line: auto, after the upstream's median first token" "$r" \
    '.report.attempts[0].hedge_after_source == "auto" and .report.attempts[0].hedge_after_ms >= 100 and .report.attempts[0].hedge_after_ms < 200 and .report.attempts[0].hedge_samples >= 12 and .report.attempts[1].hedge == true'

# a bad value in the file: the reload is refused, with its line
cp "$CFG" "$FM_DIR/good.conf"
sed -i 's/^order = first_token$/order = fastest/' "$CFG"
kill -HUP "$PX_PID"
for _ in $(seq 1 100); do grep -q "reload failed" "$FM_DIR/cfg.err" && break; sleep 0.02; done
has "$FM_DIR/cfg.err" "order takes configured or first_token, not 'fastest'" \
    "a bad order in the file is named on SIGHUP"
curl -sN -X POST -d '{}' "$B/ordered/chat/completions?n=2&_t=pft_o2" >"$FM_DIR/o2.body"
has "$FM_DIR/o2.body" 'data: [DONE]' "... and the routes in force still serve"

px_stop_all

# --health off: nothing shared, nothing learned - the fallback every time
px_start off --health off --upstream "$UP" --profile openai --idempotent \
    --hedge-after auto:0.5,150ms
for i in $(seq 1 12); do
    curl -sN -X POST -d '{}' "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=1&first_delay=20&_t=pft_off" \
        >/dev/null
done
r=$(report off 12)
jqcheck "--health off: the 12th still waits the fallback (auto_fallback, 150 ms)" "$r" \
    '.report.attempts[0].hedge_after_source == "auto_fallback" and .report.attempts[0].hedge_after_ms == 150'
px_stop_all
fm_finish
