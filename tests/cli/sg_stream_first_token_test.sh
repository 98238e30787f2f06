#!/usr/bin/env bash
# sg-stream --hedge-after auto[:Q][,D] and --order against sg-fakemodel:
# the values each takes (a bad one is a usage error, nothing sent), and
# what one operation makes of them - it shares no endpoint health, so it
# learns nothing: the hedge goes after D and the report says auto_fallback
# with the quantile asked; the order stays as given and the report says
# nothing was ordered.  docs/sg-stream.md, docs/design.md "First-token
# sketch".
# Usage: sg_stream_first_token_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
FM=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

fm_start "$FM"
B=http://127.0.0.1:$FM_PORT
REP=$FM_DIR/report.json
OUT=$FM_DIR/stdout
ERR=$FM_DIR/stderr

# ---- values: usage errors (exit 2), nothing sent ----------------------------
for bad in "--hedge-after auto:1" "--hedge-after auto:0.4" "--hedge-after auto:x" \
    "--hedge-after auto,0" "--hedge-after auto:0.9,soon" "--hedge-after automatic" \
    "--hedge-after auto:0.9:2s" "--order fastest" "--order"; do
    rc=0
    # shellcheck disable=SC2086
    "$SG" $bad "$B/v1/chat/completions?n=1&_t=ft_bad" >"$OUT" 2>"$ERR" || rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$ERR")" -eq 1 ] &&
        pass "sg-stream $bad: a usage error, one line (exit 2)" ||
        fail "sg-stream $bad: exit $rc: $(head -c 300 "$ERR")"
done
sent=$(fm_log "event=received" | grep -c '_t=ft_bad')
[ "$sent" -eq 0 ] && pass "no bad value sent a request" || fail "a bad value sent $sent requests"
rc=0
"$SG" --hedge-after auto -X POST -d '{}' "$B/v1/chat/completions?n=1&_t=ft_unsafe" \
    >"$OUT" 2>"$ERR" || rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--hedge-after repeats the request" "$ERR" &&
    pass "--hedge-after auto: a POST without a key is a usage error, as with a duration" ||
    fail "unsafe auto: exit $rc: $(head -c 300 "$ERR")"

# ---- one operation: nothing learned, the fallback D, and the report says so --
# the first request of its counter starts 3 s late, the second (the hedge)
# at once: hedged after D = 200ms
"$SG" --hedge-after auto:0.9,200ms --report "$REP" -w '%{outcome} %{attempts}\n' \
    "$B/v1/chat/completions?n=2&tail_first=1&tail_delay=3000&fail_key=ft_one&_t=ft_one" \
    >"$OUT" 2>"$ERR"
rc=$?
[ "$rc" -eq 0 ] && grep -q '^ok 2$' "$OUT" && pass "auto: hedged, the hedge won (ok, 2 attempts)" ||
    fail "exit $rc: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
jq -e '.hedge_after_ms == 200 and .hedge_auto == {"quantile": 0.9, "floor_ms": 10, "min_samples": 50}' \
    "$REP" >/dev/null && pass "the report: the fallback 200 ms, quantile 0.9 (50 observations needed)" ||
    fail "report top level: $(jq -c '{hedge_after_ms, hedge_auto}' "$REP")"
jq -e '.attempts[0].hedge_after_ms == 200 and .attempts[0].hedge_after_source == "auto_fallback" and .attempts[0].hedge_samples == 0 and .attempts[1].hedge == true' \
    "$REP" >/dev/null && pass "the first attempt waited 200 ms: auto_fallback, no samples" ||
    fail "attempts: $(jq -c '[.attempts[] | {hedge, hedge_after_ms, hedge_after_source, hedge_samples}]' "$REP")"
start=$(jq '.attempts[1].start_ms' "$REP")
[ "$start" -ge 200 ] && [ "$start" -lt 1000 ] && pass "the hedge started at ${start} ms" ||
    fail "the hedge started at ${start} ms"

# auto alone: the fallback is 1s, the quantile 0.95
"$SG" --hedge-after auto --report "$REP" "$B/v1/chat/completions?n=1&_t=ft_def" >"$OUT" 2>"$ERR"
jq -e '.hedge_after_ms == 1000 and .hedge_auto.quantile == 0.95 and .hedge_auto.min_samples == 100' \
    "$REP" >/dev/null && pass "--hedge-after auto: 1 s fallback, quantile 0.95" ||
    fail "defaults: $(jq -c '{hedge_after_ms, hedge_auto}' "$REP")"
# a duration: fixed, no hedge_auto
"$SG" --hedge-after 300ms --report "$REP" "$B/v1/chat/completions?n=1&_t=ft_fix" >"$OUT" 2>"$ERR"
jq -e '.attempts[0].hedge_after_source == "fixed" and .attempts[0].hedge_after_ms == 300 and (has("hedge_auto") | not)' \
    "$REP" >/dev/null && pass "--hedge-after 300ms: fixed" ||
    fail "fixed: $(jq -c '.attempts[0]' "$REP")"

# ---- --order first_token: one operation has nothing to order by ---------------
"$SG" --order first_token --attempts 2 --report "$REP" \
    "$B/v1/chat/completions?n=1&_t=ft_o1" --fallback "$B/stream?n=1&_t=ft_o2" >"$OUT" 2>"$ERR"
rc=$?
[ "$rc" -eq 0 ] && jq -e '.endpoint_order == {"by": "first_token", "first": null, "median_ms": null} and .attempts[0].endpoint == "'"$B"'/v1/chat/completions"' \
    "$REP" >/dev/null && pass "--order first_token: the order given, and the report says nothing was ordered" ||
    fail "order: exit $rc $(jq -c '{endpoint_order, e: .attempts[0].endpoint}' "$REP")"
"$SG" --order configured --report "$REP" "$B/v1/chat/completions?n=1&_t=ft_o3" >"$OUT" 2>"$ERR"
jq -e 'has("endpoint_order") | not' "$REP" >/dev/null &&
    pass "--order configured: no endpoint_order in the report" || fail "configured: $(head -c 300 "$REP")"

fm_finish
