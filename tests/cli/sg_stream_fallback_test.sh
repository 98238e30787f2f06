#!/usr/bin/env bash
# sg-stream --fallback and --hedge-after against three sg-fakemodel
# instances.  Fallback: a retryable
# failure moves the next attempt to the next endpoint, all from one budget;
# a Retry-After beyond the budget sends the fallback at once; the retry
# rules still hold (no fallback for an unsafe request that may have taken
# effect, none after a partial stream); the report names each attempt's
# endpoint, never its credentials or query.  Hedging: a hedge that
# delivers first wins and the slow original is cancelled at once (the
# server's log shows it gone within a few ms of the winner's first item),
# the consumer sees one stream; an original that delivers first cancels
# the hedge; an unsafe request is not hedged.  Each server's own log says
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

# ev_ns S TAG EVENT: the t_ns of EVENT for server S's request tagged TAG
ev_ns() {
    local id
    id=$(curl -sS -m 5 "http://127.0.0.1:${PORT[$1]}/_log?event=received" |
        grep -o "\"id\":[0-9]*,\"event\":\"received\"[^}]*_t=$2\"" | head -n 1 |
        sed 's/"id":\([0-9]*\).*/\1/')
    [ -n "$id" ] || return 1
    curl -sS -m 5 "http://127.0.0.1:${PORT[$1]}/_log?id=$id&event=$3" |
        grep -o '"t_ns":[0-9]*' | head -n 1 | cut -d: -f2
}

# ---- hedging: the hedge wins, the slow original is cancelled ------------------
"$SG" --budget 10s --hedge-after 200ms --report "$REP" -w '%{outcome} %{attempts} %{items}\n' \
    "$(url A 'n=3&first_delay=5000&_t=hd1')" --fallback "$(url B 'n=3&_t=hd1')" >"$OUT" 2>"$ERR"
rc=$?
[ "$rc" -eq 0 ] && pass "the hedge's stream ends ok" || fail "hedge: exit $rc $(head -c 300 "$ERR")"
[ "$(tail -n 1 "$OUT")" = "ok 2 3" ] && pass "two attempts, one stream of three items" ||
    fail "hedge write-out: $(tail -n 1 "$OUT")"
[ "$(grep -c '"content":"tok' "$OUT")" -eq 3 ] && pass "the consumer saw exactly one stream" ||
    fail "hedge output: $(grep -c tok "$OUT") items"
if grep -q '"n":1,[^}]*"outcome":"cancelled"' "$REP" &&
    grep -q '"reason":"hedge_lost"' "$REP" && grep -q '"hedge":true' "$REP"; then
    pass "the report: the original cancelled (hedge_lost), the hedge marked"
else
    fail "hedge report: $(head -c 600 "$REP")"
fi
won=$(ev_ns B hd1 first_item_sent)
gone=$(ev_ns A hd1 client_gone)
if [ -n "$won" ] && [ -n "$gone" ] && [ $((gone - won)) -lt 50000000 ] && [ $((gone - won)) -gt -5000000 ]; then
    pass "the original's server saw it gone $(((gone - won) / 1000)) us after the winner's first item"
else
    fail "cancel timing: winner ${won:-?} gone ${gone:-?}"
fi

# ---- hedging: the original delivers first, the hedge is the loser ------------
"$SG" --budget 10s --hedge-after 100ms --report "$REP" -w '%{outcome} %{attempts} %{items}\n' \
    "$(url A 'n=2&first_delay=300&_t=hd2')" --fallback "$(url B 'n=2&first_delay=5000&_t=hd2')" \
    >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok 2 2" ] && pass "the original won over its hedge" ||
    fail "original wins: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
grep -q '"n":2,[^}]*"outcome":"cancelled"' "$REP" && pass "the hedge was cancelled" ||
    fail "hedge loser report: $(head -c 600 "$REP")"
gone=$(ev_ns B hd2 client_gone)
[ -n "$gone" ] && pass "the hedge's server saw it gone" || fail "the hedge was not cancelled on the wire"

# ---- a near tie: the original and its hedge deliver at the same instant; the
# consumer still sees exactly one stream (one response id on every line) ----
tie_ok=0
for i in 1 2 3 4 5 6 7 8 9 10; do
    "$SG" --budget 10s --hedge-after 100ms "$(url A "n=20&gap=1&first_delay=300&_t=tie$i")" \
        --fallback "$(url A "n=20&gap=1&first_delay=200&_t=tie$i")" >"$OUT" 2>"$ERR"
    ids=$(grep -o '"id":"chatcmpl-[0-9]*"' "$OUT" | sort -u | wc -l)
    lines=$(grep -c '"content":"tok' "$OUT")
    [ "$ids" -eq 1 ] && [ "$lines" -eq 20 ] && tie_ok=$((tie_ok + 1))
done
[ "$tie_ok" -eq 10 ] && pass "near ties: one stream every time" || fail "near ties: $tie_ok of 10 gave one stream"
# the same with whole responses in one read: the winner may end the
# operation before the loser's cancel ran - the loser is still recorded
rec_ok=0
for i in 1 2 3 4 5 6 7 8 9 10; do
    "$SG" --budget 10s --hedge-after 100ms --report "$REP" \
        "$(url A "n=2&gap=0&first_delay=300&_t=tie2$i")" \
        --fallback "$(url A "n=2&gap=0&first_delay=200&_t=tie2$i")" >"$OUT" 2>"$ERR"
    if ! grep -q '"running":true' "$REP" && [ "$(grep -c '"content":"tok' "$OUT")" -eq 2 ] &&
        grep -q '"reason":"hedge_lost"' "$REP"; then
        rec_ok=$((rec_ok + 1))
    fi
done
[ "$rec_ok" -eq 10 ] && pass "fast near ties: every loser recorded" ||
    fail "fast near ties: $rec_ok of 10 recorded every attempt; $(head -c 400 "$REP")"

# ---- two hedges, one on each fallback: the third attempt wins ----------------
"$SG" --budget 10s --hedge-after 100ms --max-hedges 2 --report "$REP" \
    -w '%{outcome} %{attempts} %{items}\n' "$(url A 'n=2&first_delay=5000&_t=hd5')" \
    --fallback "$(url B 'n=2&first_delay=5000&_t=hd5')" --fallback "$(url C 'n=2&_t=hd5')" \
    >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok 3 2" ] && pass "the second hedge, on the third server, won" ||
    fail "two hedges: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
[ "$(grep -o '"reason":"hedge_lost"' "$REP" | wc -l)" -eq 2 ] &&
    pass "both slower attempts recorded hedge_lost" || fail "two hedges report: $(head -c 600 "$REP")"
starts=$(grep -o '"start_ms":[0-9]*' "$REP" | cut -d: -f2 | tr '\n' ' ')
if awk -v s="$starts" 'BEGIN { split(s, a, " "); exit !(a[2] >= 100 && a[2] < 180 && a[3] >= 200 && a[3] < 280) }'; then
    pass "each hedge 100 ms after the one before (start_ms $starts)"
else
    fail "hedge starts: $starts"
fi

# ---- hedging on streamguard's own HTTP/2 transport (h2c): a new stream,
# the slow one reset with RST_STREAM(CANCEL) -----------------------------------
"$SG" --http2 --budget 10s --hedge-after 100ms --idempotency-key hd6-key --report "$REP" \
    -w '%{outcome} %{attempts} %{items}\n' \
    "$(url C 'n=3&tail_first=1&tail_delay=5000&_t=hd6')" >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok 2 3" ] && pass "--http2: the hedge stream won" ||
    fail "--http2 hedge: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
if curl -sS -m 5 "http://127.0.0.1:${PORT[C]}/_log?key=hd6-key&event=client_gone" |
    grep -q '"h2_error":"CANCEL"'; then
    pass "--http2: the slow stream was reset with CANCEL"
else
    fail "--http2: no RST_STREAM(CANCEL) in the log"
fi

# ---- a hedge never goes into a Retry-After (design.md, retry rule 8) ------------
# One endpoint: the original is slow (its first item at 1.5 s), the first
# hedge is answered 429 Retry-After: 30; the second hedge, due at 400 ms,
# would go into that Retry-After - it is not sent, and the report says why.
"$SG" --budget 5s --hedge-after 200ms --max-hedges 2 --idempotency-key hr1-key --report "$REP" \
    -w '%{outcome} %{attempts}\n' \
    "$(url C 'n=2&tail_first=1&tail_delay=1500&status=429&retry_after=30&pass_first=1&_t=hr1')" \
    >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok 2" ] && pass "one endpoint: the original answered, one hedge sent" ||
    fail "hedge into a Retry-After: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
n=$(curl -sS -m 5 "http://127.0.0.1:${PORT[C]}/_log?key=hr1-key&event=received" | grep -c '"event":"received"')
[ "$n" -eq 2 ] && pass "the server was not asked again inside its Retry-After" ||
    fail "the server was asked $n times (a hedge went into its Retry-After: 30)"
grep -q '"hedges_no_free_endpoint":1' "$REP" && pass "the report counts the hedge not sent" ||
    fail "hedge not sent, report: $(head -c 500 "$REP")"
# With a fallback: A is slow, B says Retry-After: 30; three hedges go A, B,
# then A twice - never B again.
"$SG" --budget 5s --hedge-after 200ms --max-hedges 3 --report "$REP" \
    -w '%{outcome} %{attempts}\n' "$(url A 'n=2&first_delay=1500&_t=hr2')" \
    --fallback "$(url B 'status=429&retry_after=30&_t=hr2')" >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok 4" ] && pass "fallback: the original answered beside three hedges" ||
    fail "fallback hedges: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
nb=$(received B hr2)
na=$(received A hr2)
[ "$nb" -eq 1 ] && [ "$na" -eq 3 ] && pass "B asked once (its Retry-After), A three times" ||
    fail "asked: A $na times, B $nb times"

# ---- hedging refused for an unsafe request -------------------------------------
"$SG" --hedge-after 100ms -d '{"charge":1}' "$(url A 'n=1&_t=hd3')" >"$OUT" 2>"$ERR"
[ $? -eq 2 ] && grep -q 'idempotency-key' "$ERR" && pass "an unsafe POST is not hedged (usage error)" ||
    fail "unsafe hedge: $(head -c 200 "$ERR")"
n=$(received A hd3)
[ "$n" -eq 0 ] && pass "nothing was sent" || fail "the unsafe request was sent $n times"
"$SG" --budget 5s --hedge-after 100ms --idempotency-key hd4-key -d '{"q":1}' \
    -w '%{outcome}\n' "$(url A 'n=1&_t=hd4')" >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok" ] && pass "a keyed POST may be hedged" || fail "keyed hedge: $(tail -n 1 "$OUT")"

# ---- usage -------------------------------------------------------------------
"$SG" --http2 --fallback "$(url B n=1)" "$(url A n=1)" >"$OUT" 2>"$ERR"
[ $? -eq 2 ] && grep -q 'fallback' "$ERR" && pass "--fallback with --http2 is a usage error" ||
    fail "--http2 --fallback: $(head -c 200 "$ERR")"
"$SG" --fallback ftp://x "$(url A n=1)" >"$OUT" 2>"$ERR"
[ $? -eq 2 ] && pass "--fallback takes an http(s) URL" || fail "--fallback ftp://"
"$SG" --max-hedges 2 "$(url A n=1)" >"$OUT" 2>"$ERR"
[ $? -eq 2 ] && pass "--max-hedges needs --hedge-after" || fail "--max-hedges alone"
"$SG" --hedge-after 100ms --max-hedges 9 "$(url A n=1)" >"$OUT" 2>"$ERR"
[ $? -eq 2 ] && pass "--max-hedges takes 1..4" || fail "--max-hedges 9"

stop_all
if [ "$FM_FAILS" -ne 0 ]; then
    echo "$FM_FAILS failure(s)" >&2
    exit 1
fi
echo "all passed"
