#!/usr/bin/env bash
# sg-proxy's own endpoint, against sg-fakemodel: GET /metrics counts what
# the operations did (outcomes, partial streams, attempts, retries, the
# histograms' counts) and is never forwarded upstream.  (SIGTERM's drain
# is sg_proxy_test.sh's.)
# Usage: sg_proxy_metrics_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_upstream

# ---- /metrics ---------------------------------------------------------------
px_start m --upstream "$UP" --profile openai --idle 300ms --attempts 3 --idempotent --first-item 300ms --backoff-base 10ms
P=http://127.0.0.1:$PX_PORT/v1/chat/completions
curl -sN -X POST -d '{}' "$P?n=3&_t=m_ok" >/dev/null
curl -sN -X POST -d '{}' "$P?n=5&stall_after=2&stall=forever&_t=m_stall" >/dev/null
curl -sN -X POST -H 'Idempotency-Key: m-slow' -d '{}' \
    "$P?n=3&tail_first=1&tail_delay=2000&_t=m_slow" >/dev/null
curl -s "http://127.0.0.1:$PX_PORT/metrics" >"$FM_DIR/metrics"
has "$FM_DIR/metrics" 'sg_proxy_requests_total{route="default",outcome="ok"} 2' "two ok"
has "$FM_DIR/metrics" 'sg_proxy_requests_total{route="default",outcome="idle_timeout"} 1' \
    "one idle_timeout"
has "$FM_DIR/metrics" 'sg_proxy_partial_streams_total{route="default"} 1' "one partial stream"
has "$FM_DIR/metrics" 'sg_proxy_attempts_total{route="default"} 4' "four attempts"
has "$FM_DIR/metrics" 'sg_proxy_retries_total{route="default"} 1' "one retry"
has "$FM_DIR/metrics" 'gen_ai_client_operation_duration_seconds_count{route="default"} 3' \
    "three durations observed"
has "$FM_DIR/metrics" '# TYPE gen_ai_client_operation_time_to_first_chunk_seconds histogram' \
    "time to first chunk is a histogram"
curl -s "http://127.0.0.1:$PX_PORT/metrics?x=1" >"$FM_DIR/metrics2"
has "$FM_DIR/metrics2" 'sg_proxy_requests_total{route="default",outcome="ok"} 2' \
    "/metrics with a query is the proxy's own too"
[ "$(fm_log "event=received" | grep -c '"path":"/metrics"')" -eq 0 ] &&
    pass "/metrics is never forwarded" || fail "/metrics reached the upstream"
# a path is case-sensitive: /METRICS is the upstream's
curl -s -o /dev/null "http://127.0.0.1:$PX_PORT/METRICS"
[ "$(fm_log "event=received" | grep -c '"path":"/METRICS"')" -eq 1 ] &&
    pass "/METRICS is forwarded: not the proxy's path" || fail "/METRICS was served locally"
# a header the client's Connection header names is hop-by-hop: not forwarded
# (here one the upstream would obey: a scripted 500)
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' -H 'Connection: keep-alive, X-SG-Scenario' \
    -H 'X-SG-Scenario: status=500' "$P?n=1&_t=m_conn")
[ "$code" = 200 ] && pass "a header named by Connection stays with the proxy" ||
    fail "Connection-named header forwarded: $code"
kill -TERM "$PX_PID"
wait "$PX_PID"

# ---- a route's retry budget ---------------------------------------------------------
# --retry-budget 4: a retry only while more than 2 tokens remain, each
# retryable failure taking one.  Three requests whose every attempt is a
# 503: the first is retried once (4 -> 3 -> 2), the next two not at all -
# 4 upstream requests where the route's --attempts 3 alone allows 9, and
# three retries the budget refused, counted.
px_start rb --upstream "$UP" --profile openai --attempts 3 --retry-budget 4 \
    --backoff-base 5ms --backoff-max 10ms
for i in 1 2 3; do
    curl -s -o /dev/null -X POST -H "Idempotency-Key: rb-$i" -d '{}' \
        "http://127.0.0.1:$PX_PORT/v1/chat/completions?status=503&retry_after=0&_t=m_rb"
done
curl -s "http://127.0.0.1:$PX_PORT/metrics" >"$FM_DIR/rb.metrics"
sent=$(fm_log "event=received" | grep -c '_t=m_rb')
[ "$sent" -eq 4 ] && pass "--retry-budget 4: three failing requests, 4 upstream requests (not 9)" ||
    fail "--retry-budget 4: $sent upstream requests"
has "$FM_DIR/rb.metrics" 'sg_proxy_retries_throttled_total{route="default"} 3' \
    "the retries the budget refused, counted: 3"
[ "$(grep -c '"reason":"retry_throttled"' "$FM_DIR/rb.out")" -eq 3 ] &&
    pass "... and each operation's report says retry_throttled" ||
    fail "reports: $(grep -o '"reason":"[a-z_]*"' "$FM_DIR/rb.out" | tr '\n' ' ')"
# successes give tokens back (0.5 each here, 3 at most): after a drained
# bucket throttled a retry, six successes fill it, and a retry goes again
px_start rb2 --upstream "$UP" --profile openai --attempts 2 --retry-budget 3 \
    --retry-budget-ratio 0.5 --backoff-base 5ms --backoff-max 10ms
R2=http://127.0.0.1:$PX_PORT/v1/chat/completions
rb2() {
    curl -s -o /dev/null -X POST -H "Idempotency-Key: $1" -d '{}' "$R2?status=503&retry_after=0&_t=m_$1"
    fm_log "event=received" | grep -c "_t=m_$1"
}
a=$(rb2 rb2a) # 3 -> 2, retried -> 1
b=$(rb2 rb2b) # -> 0: throttled
for _ in 1 2 3 4 5 6; do
    curl -s -o /dev/null -X POST -d '{}' "$R2?n=1&_t=m_rb2ok"
done
c=$(rb2 rb2c) # full again: 3 -> 2, retried
[ "$a $b $c" = "2 1 2" ] &&
    pass "--retry-budget 3 --retry-budget-ratio 0.5: retried, throttled, retried again after six successes" ||
    fail "ratio: $a, $b, $c upstream requests (2 1 2 wanted)"
for bad in "--retry-budget 0" "--retry-budget 1001" "--retry-budget-ratio 0" "--retry-budget-ratio 2"; do
    # shellcheck disable=SC2086
    "$PX" --listen 127.0.0.1:0 --upstream "$UP" --profile openai $bad >/dev/null 2>"$FM_DIR/rbbad.err"
    rc=$?
    [ "$rc" -eq 2 ] && pass "$bad: a usage error" || fail "$bad: exit $rc"
done

# ---- many routes: /metrics is whole however long it is -------------------------
CFG=$FM_DIR/many.conf
: >"$CFG"
for r in $(seq 1 16); do
    printf '[route r%d]\nprefix = /r%d/\nupstream = %s\nprofile = openai\n\n' "$r" "$r" "$UP" >>"$CFG"
done
px_start many --config "$CFG"
for r in $(seq 1 16); do
    curl -sN -X POST -d '{}' "http://127.0.0.1:$PX_PORT/r$r/v1/chat/completions?n=2&_t=m_r$r" >/dev/null
done
curl -s -D "$FM_DIR/many.hdr" "http://127.0.0.1:$PX_PORT/metrics" >"$FM_DIR/many.metrics"
len=$(grep -i '^content-length:' "$FM_DIR/many.hdr" | tr -dc 0-9)
[ "$len" = "$(wc -c <"$FM_DIR/many.metrics")" ] && [ "$len" -gt 65536 ] &&
    pass "16 routes: /metrics is $len bytes, as its Content-Length says" ||
    fail "16 routes: Content-Length $len, body $(wc -c <"$FM_DIR/many.metrics")"
has "$FM_DIR/many.metrics" 'gen_ai_client_operation_time_per_output_chunk_seconds_count{route="r16"} 1' \
    "16 routes: the last route's last line is there"
bad=$(grep -cvE '^(# (HELP|TYPE) .*|[a-z_]+(\{[^}]*\})? [0-9.e+-]+)$' "$FM_DIR/many.metrics")
[ "$bad" -eq 0 ] && [ "$(tail -c 1 "$FM_DIR/many.metrics" | od -An -c | tr -d ' ')" = '\n' ] &&
    pass "16 routes: every line whole" || fail "16 routes: $bad lines not in the text format"
kill -TERM "$PX_PID"
wait "$PX_PID"

fm_finish
