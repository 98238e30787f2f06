#!/usr/bin/env bash
# sg-stream as an operator drives it by hand: Ctrl-C (SIGINT/SIGTERM) that
# cancels and still reports, a second signal that exits at once, `| head`
# that ends the run quietly, and a stdout that does not read - which must
# neither stall the clocks nor grow memory without bound.
# Usage: sg_stream_signals_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
FM=$2
. "$(dirname "$0")/../integration/fakemodel_lib.sh"

fm_start "$FM"
CHAT=http://127.0.0.1:$FM_PORT/v1/chat/completions
OUT=$FM_DIR/stdout
ERR=$FM_DIR/stderr
REP=$FM_DIR/report.json

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# signal_after SECONDS PID: SIGINT to PID after SECONDS; then sets RC (its
# exit status) and TOOK (ms from the signal to its exit).
signal_after() {
    sleep "$1"
    local t0
    t0=$(now_ms)
    kill -INT "$2"
    wait "$2"
    RC=$?
    TOOK=$(($(now_ms) - t0))
}

# interrupt SIGNAL DESCRIPTION -- ARGS: start sg-stream, send SIGNAL once
# it streams, and check it ends cancelled within 200 ms, having reported.
interrupt() {
    local sig=$1 what=$2
    shift 3
    rm -f "$REP"
    # emptied here, not by the child's redirection: until the child gets
    # that far, the last run's output would say "streaming" too early
    : >"$OUT"
    "$SG" --report "$REP" -w '%{outcome} %{phase}\n' "$@" >"$OUT" 2>"$ERR" &
    local pid=$!
    for _ in $(seq 1 100); do
        [ -s "$OUT" ] && break
        sleep 0.02
    done
    local t0
    t0=$(now_ms)
    kill -"$sig" "$pid"
    wait "$pid"
    local rc=$? took=$(($(now_ms) - t0))
    if [ "$rc" -eq 5 ]; then pass "$what: exit 5 (cancelled)"; else fail "$what: exit $rc; $(head -c 300 "$ERR")"; fi
    if [ "$took" -lt 200 ]; then pass "$what: ended ${took} ms after SIG$sig"; else fail "$what: took ${took} ms"; fi
    if grep -q '"outcome":"cancelled"' "$REP" 2>/dev/null; then pass "$what: report says cancelled"; else fail "$what: report: $(head -c 300 "$REP" 2>/dev/null)"; fi
    if grep -q '"phase":"streaming"' "$REP" 2>/dev/null; then pass "$what: in phase streaming"; else fail "$what: phase"; fi
    if grep -q '^cancelled streaming$' "$OUT"; then pass "$what: -w line printed"; else fail "$what: no -w line: $(tail -c 200 "$OUT")"; fi
}

interrupt INT "SIGINT over HTTP/1.1" -- --idempotency-key sig-h1 "$CHAT?runaway=1&gap=20&_t=sig_h1"
interrupt TERM "SIGTERM over HTTP/1.1" -- --idempotency-key sig-h1t "$CHAT?runaway=1&gap=20&_t=sig_h1t"
interrupt INT "SIGINT over HTTP/2" -- --http2 --idempotency-key sig-h2 "$CHAT?runaway=1&gap=20&_t=sig_h2"
if fm_wait_event sig-h2 client_gone &&
    fm_log "key=sig-h2&event=client_gone" | grep -q '"h2_error":"CANCEL"'; then
    pass "Ctrl-C on HTTP/2: the server saw RST_STREAM(CANCEL)"
else
    fail "Ctrl-C on HTTP/2: no RST_STREAM(CANCEL) in the server log"
fi

# Ctrl-C while the probe of an https:// URL is still in its TLS handshake
# (a server stopped with SIGSTOP: the kernel accepts, nobody answers): heard
# at once, the operation cancelled in phase connect, never sent.
"$FM" --port 0 --quiet >"$FM_DIR/stopped.port" 2>/dev/null &
stopped=$!
for _ in $(seq 1 100); do [ -s "$FM_DIR/stopped.port" ] && break; sleep 0.02; done
kill -STOP "$stopped"
rm -f "$REP"
"$SG" --report "$REP" -w '%{outcome} %{phase}\n' --cacert "$FM_CA" \
    "https://127.0.0.1:$(head -n 1 "$FM_DIR/stopped.port")/v1/chat/completions" >"$OUT" 2>"$ERR" &
signal_after 0.4 $!
{ kill -KILL "$stopped" && wait "$stopped"; } 2>/dev/null
if [ "$RC" -eq 5 ] && [ "$TOOK" -lt 200 ]; then pass "SIGINT during the https probe: exit 5 after ${TOOK} ms"; else fail "SIGINT during the probe: exit $RC after ${TOOK} ms; $(head -c 300 "$ERR")"; fi
if grep -q '^cancelled connect$' "$OUT"; then pass "the probe's run: cancelled in phase connect"; else fail "probe -w: $(head -c 200 "$OUT")"; fi

# Ctrl-C during a backoff sleep: the operation ends there, reported.
rm -f "$REP"
# (Retry-After: 5 fixes the sleep: a jittered backoff may be too short to
# be still asleep when the signal comes)
"$SG" --report "$REP" --attempts 3 --idempotency-key sig-sleep \
    "$CHAT?status=503&retry_after=5&_t=sig_sleep" >"$OUT" 2>"$ERR" &
pid=$!
fm_wait_event sig-sleep received # sent: the handlers are in place
signal_after 0.3 "$pid"
if [ "$RC" -eq 5 ] && [ "$TOOK" -lt 200 ]; then pass "SIGINT while sleeping: exit 5 after ${TOOK} ms"; else fail "SIGINT while sleeping: exit $RC after ${TOOK} ms"; fi
if grep -q '"reason":"cancelled"' "$REP"; then pass "the report says why: cancelled"; else fail "sleep report: $(head -c 300 "$REP")"; fi
if grep -q "cancelled while waiting to retry after 1 attempt (cancelled); it ended http_error in wait_headers" "$ERR"; then
    pass "the diagnostic says the run was between attempts"
else fail "sleep diagnostic: $(cat "$ERR")"; fi

# A second signal exits at once: here the first one cancels, and the run
# then blocks opening its report, a FIFO nobody opens for reading.
mkfifo "$FM_DIR/fifo" "$FM_DIR/report.fifo"
"$SG" --budget 60s --report "$FM_DIR/report.fifo" --idempotency-key sig-twice \
    "$CHAT?runaway=1&gap=5&_t=sig_twice" >/dev/null 2>"$ERR" &
pid=$!
fm_wait_event sig-twice received # sent: the handlers are in place
sleep 0.2
kill -INT "$pid"
signal_after 0.2 "$pid"
if [ "$RC" -eq 130 ] && [ "$TOOK" -lt 100 ]; then pass "a second SIGINT exits at once (130, ${TOOK} ms)"; else fail "second SIGINT: exit $RC after ${TOOK} ms"; fi

# `| head -3`: the reader goes away; the run ends cancelled, quietly.
rm -f "$REP"
"$SG" --report "$REP" "$CHAT?runaway=1&gap=1&_t=sig_head" 2>"$ERR" | head -3 >"$OUT"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 5 ]; then pass "| head -3: exit 5 (cancelled)"; else fail "| head -3: exit $rc"; fi
if [ "$(wc -l <"$OUT")" -eq 3 ]; then pass "| head -3: three items"; else fail "| head -3: $(wc -l <"$OUT") lines"; fi
if [ ! -s "$ERR" ]; then pass "| head -3: nothing on stderr"; else fail "| head -3 said: $(head -c 300 "$ERR")"; fi
if grep -q '"outcome":"cancelled"' "$REP"; then pass "| head -3: report says cancelled"; else fail "| head report"; fi

# A stdout nobody reads does not stall the clocks: the idle clock fires on
# time although the last items never left the process.
exec 7<>"$FM_DIR/fifo"
t0=$(now_ms)
"$SG" --budget 2s --idle 300ms -w '%{outcome}\n' --report "$REP" \
    "$CHAT?n=100&gap=0&line_bytes=20000&stall_after=90&_t=sig_stuck" >"$FM_DIR/fifo" 2>"$ERR"
rc=$? took=$(($(now_ms) - t0))
exec 7>&-
if [ "$rc" -eq 3 ]; then pass "stdout stuck: exit 3 (idle_timeout), ${took} ms"; else fail "stdout stuck: exit $rc"; fi
if grep -q '"outcome":"idle_timeout"' "$REP"; then pass "stdout stuck: the idle clock still fired"; else fail "stdout stuck: $(head -c 300 "$REP")"; fi
if grep -q "stdout did not take" "$ERR"; then pass "stdout stuck: the dropped bytes are named"; else fail "stdout stuck: stderr: $(head -c 300 "$ERR")"; fi

# Ctrl-C while an ended run waits for a stdout that does not read to take
# its last items: the wait ends at once, the rest is dropped (said unless
# -q), and the run ends as an ok one whose output was lost (exit 1).
for q in "" -q; do
    exec 7<>"$FM_DIR/fifo"
    rm -f "$REP"
    "$SG" $q --budget 20s --report "$REP" --idempotency-key "sig-drain$q" \
        "$CHAT?n=200&gap=0&line_bytes=10000&_t=sig_drain" >"$FM_DIR/fifo" 2>"$ERR" &
    pid=$!
    fm_wait_event "sig-drain$q" finished # the stream has ended: only stdout waits
    signal_after 0.3 "$pid"
    exec 7>&-
    if [ "$RC" -eq 1 ] && [ "$TOOK" -lt 200 ]; then pass "SIGINT while stdout drains ($q): exit 1 after ${TOOK} ms"; else fail "SIGINT while stdout drains ($q): exit $RC after ${TOOK} ms"; fi
    if grep -q '"outcome":"ok"' "$REP"; then pass "drain ($q): the report says ok"; else fail "drain ($q): report: $(head -c 300 "$REP")"; fi
    if [ -z "$q" ]; then
        if grep -q "bytes of items by the signal: dropped" "$ERR"; then pass "drain: the dropped bytes are named"; else fail "drain: stderr: $(head -c 300 "$ERR")"; fi
    elif [ ! -s "$ERR" ]; then pass "drain -q: nothing on stderr"; else fail "drain -q said: $(head -c 300 "$ERR")"; fi
done

# ... and a reader that falls 8 MiB behind a fast stream cancels the run:
# memory stays bounded.
exec 7<>"$FM_DIR/fifo"
"$SG" --budget 3s --report "$REP" "$CHAT?runaway=1&gap=0&line_bytes=4000&_t=sig_behind" >"$FM_DIR/fifo" 2>"$ERR" &
pid=$!
wait "$pid"
rc=$?
exec 7>&-
if [ "$rc" -eq 5 ]; then pass "a reader 8 MiB behind: exit 5 (cancelled)"; else fail "reader behind: exit $rc; $(head -c 300 "$ERR")"; fi
if grep -q "stdout fell" "$ERR"; then pass "a reader 8 MiB behind: said so"; else fail "reader behind: stderr: $(head -c 300 "$ERR")"; fi
exec 7<>"$FM_DIR/fifo"
"$SG" -q --budget 3s "$CHAT?runaway=1&gap=0&line_bytes=4000&_t=sig_behind_q" >"$FM_DIR/fifo" 2>"$ERR"
rc=$?
exec 7>&-
if [ "$rc" -eq 5 ] && [ ! -s "$ERR" ]; then pass "a reader 8 MiB behind, -q: exit 5, nothing on stderr"; else fail "reader behind -q: exit $rc; $(head -c 300 "$ERR")"; fi

fm_finish
