#!/usr/bin/env bash
# sg-proxy's first-token options, per route (docs/sg-proxy.md, FIRST
# TOKENS): --hedge-after auto[:Q][,F] and --order, the flags and the config
# keys of the same names - a bad value is a usage error (a bad file is
# refused with its line); a route with auto hedges after its fallback F
# until it has learned enough, and the report line says so; a route with
# order = first_token says what it ordered.  Against sg-fakemodel.
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

[route ordered]
prefix = /ordered
upstream = $UP/v1
fallback = $UP/v1
profile = openai
order = first_token
CONF
px_start cfg --config "$CFG"
B=http://127.0.0.1:$PX_PORT

# the first request of its counter starts 3 s late, the second at once:
# hedged after the fallback, 150 ms (nothing learned yet)
t0=${EPOCHREALTIME/./}
curl -sN -X POST -d '{}' \
    "$B/learned/v1/chat/completions?n=2&tail_first=1&tail_delay=3000&fail_key=pft_l&_t=pft_l" \
    >"$FM_DIR/l.body"
el=$(((${EPOCHREALTIME/./} - t0) / 1000))
has "$FM_DIR/l.body" 'data: [DONE]' "the learned route streams"
[ "$el" -lt 1500 ] && pass "... hedged, in ${el} ms (the first attempt's token was 3 s away)" ||
    fail "the learned route took ${el} ms"
r=$(report cfg 1)
jqcheck "the report line: the fallback 150 ms, auto_fallback, quantile 0.9" "$r" \
    '.report.hedge_auto.quantile == 0.9 and .report.attempts[0].hedge_after_ms == 150 and .report.attempts[0].hedge_after_source == "auto_fallback" and .report.attempts[1].hedge == true'

curl -sN -X POST -d '{}' "$B/ordered/chat/completions?n=2&_t=pft_o" >"$FM_DIR/o.body"
has "$FM_DIR/o.body" 'data: [DONE]' "the ordered route streams"
r=$(report cfg 2)
jqcheck "the report line: ordered by first token" "$r" \
    '.report.endpoint_order.by == "first_token" and .report.outcome == "ok"'

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
fm_finish
