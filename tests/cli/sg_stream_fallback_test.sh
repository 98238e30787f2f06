#!/usr/bin/env bash
# sg-stream --fallback against three sg-fakemodel instances: a retryable
# failure moves the next attempt to the next endpoint, all from one budget;
# a Retry-After beyond the budget sends the fallback at once; the retry
# rules still hold (no fallback for an unsafe request that may have taken
# effect, none after a partial stream); the report names each attempt's
# endpoint, never its credentials or query.  Each server's own log says
# what it was asked.
# Usage: sg_stream_fallback_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
FM=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

# Three servers: A, B and C, each on its own port with its own log.
declare -A PORT PID
for s in A B C; do
    "$FM" --port 0 --quiet >"$FM_DIR/$s.out" 2>"$FM_DIR/$s.err" &
    PID[$s]=$!
    for _ in $(seq 1 200); do [ -s "$FM_DIR/$s.out" ] && break; sleep 0.05; done
    PORT[$s]=$(head -n 1 "$FM_DIR/$s.out")
    case "${PORT[$s]}" in '' | *[!0-9]*) echo "server $s did not start" >&2; exit 1 ;; esac
done
stop_all() {
    for s in A B C; do kill -TERM "${PID[$s]}" 2>/dev/null; done
    for s in A B C; do
        if ! wait "${PID[$s]}"; then fail "server $s did not exit cleanly"; fi
    done
}
url() { echo "http://127.0.0.1:${PORT[$1]}/v1/chat/completions?$2"; }
# received S TAG: how many requests server S received whose query has _t=TAG
received() {
    curl -sS -m 5 "http://127.0.0.1:${PORT[$1]}/_log?event=received" |
        grep -o '"query":"[^"]*"' | grep -c "_t=$2\(&\|\"\)"
}
REP=$FM_DIR/report.json
OUT=$FM_DIR/stdout
ERR=$FM_DIR/stderr

# ---- 503, 503, then a stream: three endpoints, one budget -------------------
"$SG" --budget 5s --attempts 4 --backoff-base 10ms --report "$REP" \
    -w '%{outcome} %{attempts} %{items}\n' \
    "$(url A 'status=503&_t=fb1')" --fallback "$(url B 'status=503&_t=fb1')" \
    --fallback "$(url C 'n=3&_t=fb1')" >"$OUT" 2>"$ERR"
rc=$?
[ "$rc" -eq 0 ] && pass "fallback to the third endpoint ends ok" || fail "exit $rc: $(head -c 300 "$ERR")"
grep -q '^ok 3 3$' "$OUT" && pass "three attempts, three items" || fail "write-out: $(tail -1 "$OUT")"
for s in A B C; do
    n=$(received $s fb1)
    [ "$n" -eq 1 ] && pass "server $s was asked once" || fail "server $s was asked $n times"
done
endpoints=$(grep -o '"endpoint":"[^"]*"' "$REP" | tr '\n' ' ')
want="\"endpoint\":\"http://127.0.0.1:${PORT[A]}/v1/chat/completions\" \"endpoint\":\"http://127.0.0.1:${PORT[B]}/v1/chat/completions\" \"endpoint\":\"http://127.0.0.1:${PORT[C]}/v1/chat/completions\" "
[ "$endpoints" = "$want" ] && pass "the report names each attempt's endpoint, without the query" ||
    fail "endpoints: $endpoints"
# one budget across endpoints: each attempt's remaining_ms plus its
# start_ms is the same (the one deadline, to the ms), and never grows
rem=$(grep -o '"remaining_ms":[0-9]*' "$REP" | sed 1d | cut -d: -f2 | tr '\n' ' ')
st=$(grep -o '"start_ms":[0-9]*' "$REP" | cut -d: -f2 | tr '\n' ' ')
if awk -v r="$rem" -v s="$st" 'BEGIN { n = split(r, a, " "); split(s, b, " "); if (n != 3) exit 1;
        t1 = a[1] + b[1]; if (t1 > 5000 || t1 < 4900) exit 1;
        for (i = 2; i <= n; i++) { t = a[i] + b[i]; if (t < t1 - 1 || t > t1 + 1) exit 1;
            if (a[i] > a[i - 1]) exit 1 } }'; then
    pass "one budget: remaining $rem ms at start $st ms across the three endpoints"
else
    fail "remaining_ms per attempt: $rem; start_ms: $st"
fi

# ---- a Retry-After beyond the budget on A: B at once ---------------------------
"$SG" --budget 3s --attempts 2 --report "$REP" -w '%{outcome} %{attempts}\n' \
    "$(url A 'status=503&retry_after=3600&_t=fb2')" --fallback "$(url B 'n=2&_t=fb2')" \
    >"$OUT" 2>"$ERR"
rc=$?
[ "$rc" -eq 0 ] && grep -q '^ok 2$' "$OUT" && pass "A's Retry-After did not hold back B" ||
    fail "exit $rc: $(tail -1 "$OUT") $(head -c 300 "$ERR")"
start2=$(grep -o '"start_ms":[0-9]*' "$REP" | sed -n 2p | cut -d: -f2)
[ -n "$start2" ] && [ "$start2" -lt 500 ] && pass "the fallback went at once (start_ms $start2)" ||
    fail "second attempt started at ${start2:-?} ms"

# ---- an unsafe POST that may have taken effect: no fallback -------------------
"$SG" --budget 3s --attempts 3 --first-item 200ms -d '{"charge":1}' \
    -w '%{outcome} %{attempts} %{outcome_unknown}\n' \
    "$(url A 'hang=1&_t=fb3')" --fallback "$(url B 'n=2&_t=fb3')" >"$OUT" 2>"$ERR"
grep -q '^first_item_timeout 1 true$' "$OUT" && pass "outcome unknown: not sent elsewhere" ||
    fail "unsafe POST: $(tail -1 "$OUT")"
n=$(received B fb3)
[ "$n" -eq 0 ] && pass "server B never saw the unsafe request" || fail "server B saw it $n times"

# ---- a partial stream: never resumed elsewhere ------------------------------------
"$SG" --budget 3s --attempts 3 -w '%{outcome} %{attempts} %{partial}\n' \
    "$(url A 'n=5&drop_after=2&_t=fb4')" --fallback "$(url B 'n=2&_t=fb4')" >"$OUT" 2>"$ERR"
grep -q '^truncated 1 true$' "$OUT" && pass "a partial stream is not retried on the fallback" ||
    fail "partial: $(tail -1 "$OUT")"
n=$(received B fb4)
[ "$n" -eq 0 ] && pass "server B was not asked after the partial stream" || fail "server B asked $n times"

# ---- credentials and query never in the report --------------------------------
"$SG" --budget 3s --attempts 2 --report "$REP" \
    "http://user:pw@127.0.0.1:${PORT[A]}/v1/chat/completions?status=503&key=s3cret&_t=fb5" \
    --fallback "$(url B 'n=1&token=s3cret&_t=fb5')" >"$OUT" 2>"$ERR"
if grep -q 's3cret' "$REP" || grep -q 'user:pw' "$REP"; then
    fail "the report shows credentials or the query"
else
    pass "no credentials and no query in the report"
fi

# ---- usage -------------------------------------------------------------------
"$SG" --http2 --fallback "$(url B n=1)" "$(url A n=1)" >"$OUT" 2>"$ERR"
[ $? -eq 2 ] && grep -q 'fallback' "$ERR" && pass "--fallback with --http2 is a usage error" ||
    fail "--http2 --fallback: $(head -c 200 "$ERR")"
"$SG" --fallback ftp://x "$(url A n=1)" >"$OUT" 2>"$ERR"
[ $? -eq 2 ] && pass "--fallback takes an http(s) URL" || fail "--fallback ftp://"

stop_all
if [ "$FM_FAILS" -ne 0 ]; then
    echo "$FM_FAILS failure(s)" >&2
    exit 1
fi
echo "all passed"
