#!/usr/bin/env bash
# sg-proxy's shutdown and its own endpoint, against sg-fakemodel:
#  - SIGTERM while a stream is in flight: no new connection is accepted,
#    the stream finishes whole within --drain, its report is written, and
#    sg-proxy exits 0;
#  - SIGTERM with a stream longer than --drain: at the drain's end it is
#    cancelled - the client gets the in-band error naming `cancelled`, the
#    report says cancelled - and sg-proxy exits 0 soon after;
#  - GET /metrics counts what the operations did (outcomes, partial
#    streams, attempts, retries) and is never forwarded upstream.
# Times are measured, with bounds; nothing sleeps to prove one.
# Usage: sg_proxy_drain_test.sh SG_PROXY SG_FAKEMODEL
set -u
PX=$1
FM=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

fm_start "$FM"
UP=http://127.0.0.1:$FM_PORT
PX_PID=
trap 'kill -KILL $PX_PID 2>/dev/null; fm_cleanup' EXIT

# px_start ARGS...: sets PX_PID, PX_PORT; report lines in $FM_DIR/px.out
px_start() {
    "$PX" --listen 127.0.0.1:0 --upstream "$UP" --profile openai "$@" \
        >"$FM_DIR/px.out" 2>"$FM_DIR/px.err" &
    PX_PID=$!
    for _ in $(seq 1 200); do
        [ -s "$FM_DIR/px.out" ] && break
        sleep 0.02
    done
    PX_PORT=$(head -n 1 "$FM_DIR/px.out")
}

now_ms() { date +%s%3N; }

# ---- drain: the stream in flight finishes ---------------------------------
px_start --drain 5s
curl -sN -X POST -d '{}' "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=10&gap=100" \
    >"$FM_DIR/s1" 2>/dev/null &
c1=$!
for _ in $(seq 1 100); do grep -q tok0 "$FM_DIR/s1" 2>/dev/null && break; sleep 0.02; done
kill -TERM "$PX_PID"
t0=$(now_ms)
grep -q 'DONE' "$FM_DIR/s1" && fail "the stream had ended before SIGTERM: not a drain" ||
    pass "SIGTERM while the stream is in flight"
# a new connection is refused once the listener is closed
for _ in $(seq 1 100); do
    curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PX_PORT/metrics" || break
    sleep 0.02
done
curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PX_PORT/metrics" &&
    fail "a new connection was served while draining" || pass "no new connection while draining"
wait "$c1"
wait "$PX_PID"
rc=$?
t1=$(now_ms)
[ "$rc" -eq 0 ] && pass "exit 0 after the drain" || fail "exit $rc after SIGTERM"
grep -q 'data: \[DONE\]' "$FM_DIR/s1" && [ "$(grep -c '"content":"tok' "$FM_DIR/s1")" -eq 10 ] &&
    pass "the stream in flight finished whole" || fail "stream: $(tail -c 300 "$FM_DIR/s1")"
# the rest of the stream (about 900 ms of its 1 s) came after SIGTERM
[ $((t1 - t0)) -ge 500 ] && [ $((t1 - t0)) -lt 3000 ] &&
    pass "exited $((t1 - t0)) ms after SIGTERM, once the stream ended" ||
    fail "exited $((t1 - t0)) ms after SIGTERM"
grep -q '"outcome":"ok"' "$FM_DIR/px.out" && pass "its report written" ||
    fail "no report: $(cat "$FM_DIR/px.out")"

# ---- drain runs out: the stream is cancelled, in-band -----------------------
px_start --drain 300ms
curl -sN -X POST -d '{}' "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=50&gap=100" \
    >"$FM_DIR/s2" 2>/dev/null &
c2=$!
for _ in $(seq 1 100); do grep -q tok0 "$FM_DIR/s2" 2>/dev/null && break; sleep 0.02; done
t0=$(now_ms)
kill -TERM "$PX_PID"
wait "$c2"
wait "$PX_PID"
rc=$?
t1=$(now_ms)
[ "$rc" -eq 0 ] && pass "exit 0 after the drain ran out" || fail "exit $rc"
grep -q '"code":"cancelled"' "$FM_DIR/s2" && pass "the client got the in-band error: cancelled" ||
    fail "client got: $(tail -c 300 "$FM_DIR/s2")"
grep -q 'data: \[DONE\]' "$FM_DIR/s2" && fail "a cancelled stream ended with [DONE]" ||
    pass "no [DONE] after it"
el=$((t1 - t0))
[ "$el" -ge 250 ] && [ "$el" -lt 2000 ] && pass "cancelled after the 300 ms drain ($el ms)" ||
    fail "ended $el ms after SIGTERM"
grep -q '"outcome":"cancelled"' "$FM_DIR/px.out" && pass "the report says cancelled" ||
    fail "report: $(cat "$FM_DIR/px.out")"

# ---- /metrics ---------------------------------------------------------------
px_start --idle 300ms --attempts 3 --idempotent --first-item 300ms --backoff-base 10ms
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
[ "$(fm_log "event=received" | grep -c '"path":"/metrics"')" -eq 0 ] &&
    pass "/metrics is never forwarded" || fail "/metrics reached the upstream"
kill -TERM "$PX_PID"
wait "$PX_PID"

fm_finish
