#!/usr/bin/env bash
# sg-stream against a real sg-fakemodel: every flag, every exit code.
# Usage: sg_stream_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
FM=$2
. "$(dirname "$0")/../integration/fakemodel_lib.sh"

fm_start "$FM"
BASE=http://127.0.0.1:$FM_PORT
TLS=https://localhost:$FM_PORT
CHAT=$BASE/v1/chat/completions
OUT=$FM_DIR/stdout
ERR=$FM_DIR/stderr

lines() { wc -l <"$1" | tr -d ' '; }

# ---- usage and help --------------------------------------------------------
expect 0 "--help" -- --help
has "$OUT" "Usage: sg-stream" "--help prints the usage"
has "$OUT" "Exit status" "--help documents the exit codes"
expect 0 "--version" -- --version
has "$OUT" "sg-stream" "--version names the program"

for bad in "--idle 3x $CHAT" "--budget 0 $CHAT" "--budget -1s $CHAT" "--attempts 0 $CHAT" \
    "--attempts 1001 $CHAT" "--format xml $CHAT" "--output html $CHAT" "-H nocolon $CHAT" \
    "--max-event-bytes 3 $CHAT" "--bogus $CHAT" "" "$CHAT extra" "--idle" \
    "--first-item 400d $CHAT" "--budget 999999h $CHAT" "--idempotency-key $(printf 'a%.0s' $(seq 1 200)) $CHAT" \
    "--budget 0x10 $CHAT" "--budget 1e3ms $CHAT" "--idle inf $CHAT" "--idle nan $CHAT" \
    "--idle .s $CHAT" "--idle 2.5.1s $CHAT"; do
    # shellcheck disable=SC2086
    expect 2 "usage error: '${bad:0:40}'" -- $bad
    if [ "$(lines "$ERR")" -eq 1 ]; then pass "one-line error"; else fail "error is not one line: $(cat "$ERR")"; fi
done

expect 2 "usage error: empty --skip-event" -- --skip-event "" "$CHAT"
for bad in "$(printf 'X-A: b\r\nX-Evil: 1')" "$(printf 'ab\ncd')"; do
    expect 2 "usage error: a header with CR/LF" -- -H "$bad" --idempotency-key "$bad" "$CHAT"
    if [ "$(lines "$ERR")" -eq 1 ]; then pass "one-line error for control bytes"; else fail "not one line: $(od -c "$ERR" | head -3)"; fi
done

# A URL that is not an http(s) one libcurl can parse is the operator's
# error, said before anything is dialled: never a retried network failure.
for bad in "file:///etc/hostname" "ftp://127.0.0.1:$FM_PORT/x" "http://" "http://[::1/x" \
    "http://127.0.0.1:99999/x" "127.0.0.1:$FM_PORT/v1/chat/completions"; do
    expect 2 "usage error: URL '$bad'" -- --attempts 3 "$bad"
    if [ "$(lines "$ERR")" -eq 1 ]; then pass "one-line error"; else fail "error is not one line: $(cat "$ERR")"; fi
    expect 2 "usage error: --fallback '$bad'" -- --fallback "$bad" "$CHAT?n=1"
done

# ---- what an operator typed is not echoed with its secrets ---------------------
# A header value, a URL's password or its query (an API key may be in
# either) never reaches stderr: a usage error names what is wrong without
# them.
nosecret() {
    if grep -q SECRET "$ERR"; then fail "$1: the secret is on stderr: $(cat "$ERR")"; else pass "$1: no secret on stderr"; fi
}
expect 2 "a header without a colon" -- -H 'Authorization Bearer sk-SECRET' "$CHAT"
nosecret "a header without a colon"
has "$ERR" "Authorization" "the header is named"
expect 2 "a header that is a key alone" -- -H 'sk-proj-SECRETSECRET' "$CHAT"
nosecret "a header that is a key alone"
expect 2 "a header value ending in CR (a key file with CRLF)" -- -H "$(printf 'Authorization: Bearer sk-SECRET\r')" "$CHAT"
nosecret "a header with a CR"
has "$ERR" "'Authorization'" "the header with the CR is named"
for bad in "http://u:SECRET@[::1/x" "http://127.0.0.1:99999/x?key=SECRET" "ftp://u:SECRET@127.0.0.1/x" \
    "u:SECRET@127.0.0.1:99999/x" "http://u:pa?SECRET@[::1/x" "http://127.0.0.1:99999/x?sk-SECRET"; do
    expect 2 "usage error: a bad URL with a secret" -- "$bad"
    nosecret "a bad URL with a secret"
done
expect 2 "an unknown long option with a value" -- --bogus=SECRET "$CHAT"
nosecret "an unknown long option with a value"
has "$ERR" "'--bogus'" "the unknown option is named"
expect 2 "an unknown short option in a group" -- -zq "$CHAT"
has "$ERR" "unknown option '-z'" "the unknown letter is named, not another argument"
expect 2 "a short option without its value" -- "$CHAT" -H
has "$ERR" "'-H' needs a value" "the option without a value is named"
expect 2 "-d @ a directory" -- -d @/ "$CHAT?n=1&_t=cli_dir"
has "$ERR" "cannot read '/'" "a body that cannot be read is a usage error"
if [ "$(fm_log "event=received" | grep -c "_t=cli_dir")" -eq 0 ]; then pass "no request sent without its body"; else fail "an empty body was sent"; fi

# ---- ok and the output formats -----------------------------------------------
expect 0 "ok stream" -- --idle 2s "$CHAT?n=4&gap=5&_t=cli_ok"
if [ "$(lines "$OUT")" -eq 4 ]; then pass "4 data lines"; else fail "got $(lines "$OUT") lines"; fi
has "$OUT" '"choices"' "data lines carry the event data"

expect 0 "jsonl output" -- --output jsonl "$CHAT?n=2&_t=cli_jsonl"
has "$OUT" '{"event":"message","data":"{' "jsonl has event and escaped data"
has "$OUT" '"id":' "jsonl has the last event id"

expect 0 "no output" -- --output none -w '%{items}\n' "$CHAT?n=3&_t=cli_none"
if [ "$(cat "$OUT")" = "3" ]; then pass "--output none prints only -w"; else fail "none: $(cat "$OUT")"; fi

expect 0 "write-out variables" -- -q --output none \
    -w '%{outcome} %{phase} %{attempts} %{items} %{http_status} %{partial} %{outcome_unknown} %{reason}\n' \
    "$CHAT?n=2&_t=cli_w"
has "$OUT" "ok streaming 1 2 200 false false ok" "-w prints outcome, phase, attempts, items, status, flags, reason"
expect 0 "write-out %% and what it does not know" -- -q --output none -w '100%% %{items} %{nosuch}\n' \
    "$CHAT?n=1&_t=cli_w2"
has "$OUT" "100% 1 %{nosuch}" "-w: %% is %, an unknown variable is printed as written"

expect 0 "report to a file" -- --report "$FM_DIR/report.json" "$CHAT?n=2&_t=cli_report"
has "$FM_DIR/report.json" '"outcome":"ok"' "the report has the outcome"
has "$FM_DIR/report.json" '"attempts":[{' "the report lists the attempts"
if command -v python3 >/dev/null && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$FM_DIR/report.json"; then
    pass "the report is valid JSON"
fi
expect 0 "report to stderr" -- --report - "$CHAT?n=1&_t=cli_report2"
has "$ERR" '"outcome":"ok"' "--report - writes to stderr"

# ---- exit 3: the clocks ------------------------------------------------------
expect 3 "slow first item" -- --first-item 200ms "$CHAT?first_delay=3000&_t=cli_slow"
has "$ERR" "first_item_timeout" "says first_item_timeout"
expect 3 "stall" -- --idle 150ms "$CHAT?n=9&stall_after=2&stall=forever&_t=cli_stall"
has "$ERR" "discard its output" "a partial attempt is flagged for discard"
if [ "$(lines "$OUT")" -eq 2 ]; then pass "2 items before the stall"; else fail "stall lines $(lines "$OUT")"; fi
expect 3 "keepalive trickle" -- --idle 150ms \
    "$CHAT?n=9&stall_after=2&stall=forever&keepalive=20&_t=cli_trickle"
has "$ERR" "idle_timeout" "keepalives do not reset the idle clock"
expect 3 "stream total" -- --stream-total 250ms "$CHAT?runaway=1&gap=5&_t=cli_total"
has "$ERR" "stream_timeout" "says stream_timeout"
expect 3 "attempt timeout" -- --attempt-timeout 200ms --budget 10s "$CHAT?hang=1&_t=cli_att"
has "$ERR" "timeout" "a hanging server ends in a timeout"
expect 3 "connect timeout clock" -- --connect-timeout 5s --first-item 200ms "$CHAT?hang=1&_t=cli_conn"

# ---- exit 4: budget and refused ---------------------------------------------
expect 4 "budget exhausted" -- --budget 250ms "$CHAT?hang=1&_t=cli_budget"
has "$ERR" "budget_exhausted" "says budget_exhausted"
expect 4 "refused by the floor" -- --budget 100ms --floor 200ms "$CHAT?n=1&_t=cli_refused"
has "$ERR" "refused" "says refused"
if [ "$(fm_log "event=received" | grep -c "_t=cli_refused")" -eq 0 ]; then
    pass "a refused operation never dials out"
else
    fail "a refused operation reached the server"
fi

# ---- exit 5: caps ------------------------------------------------------------
expect 5 "item cap" -- --max-items 5 "$CHAT?runaway=1&gap=1&_t=cli_cap"
if [ "$(lines "$OUT")" -eq 5 ]; then pass "exactly 5 items before the cap"; else fail "cap lines $(lines "$OUT")"; fi
expect 5 "byte cap" -- --max-bytes 1000 "$CHAT?runaway=1&gap=1&_t=cli_bytes"

# ---- exit 6: truncated -------------------------------------------------------
expect 6 "abrupt close" -- "$CHAT?n=9&gap=5&drop_after=2&_t=cli_drop"
expect 6 "no [DONE]" -- "$CHAT?n=2&no_done=1&_t=cli_nodone"
expect 0 "--no-done accepts a clean end" -- --no-done "$CHAT?n=2&no_done=1&_t=cli_nodone2"
expect 6 "--done with a custom sentinel" -- --done '[END]' "$CHAT?n=2&_t=cli_customdone"
has "$OUT" "[DONE]" "with another sentinel, [DONE] is an ordinary item"

# ---- exit 7: HTTP errors, retries, Retry-After --------------------------------
expect 7 "http error" -- "$CHAT?status=500&_t=cli_500"
# What the server said with its error is the operator's answer to "why".
expect 7 "http error: the status and the server's words on stderr" -- "$CHAT?status=401&_t=cli_401"
has "$ERR" "http_error (HTTP 401) in wait_headers" "the diagnostic names the status"
has "$ERR" 'the server said: {"error":{"message":"sg-fakemodel scripted status 401"' \
    "the diagnostic quotes the error body"
if [ -s "$OUT" ]; then fail "an error body is no item: stdout $(head -c 200 "$OUT")"; else pass "stdout holds no item"; fi
expect 7 "http error, a long body: cut, on one line" -- "$CHAT?status=400&error_pad=3000&_t=cli_400"
if [ "$(lines "$ERR")" -eq 2 ] && [ "$(wc -c <"$ERR")" -lt 900 ] && grep -q 'xxx\.\.\.$' "$ERR"; then
    pass "a long error body is cut, marked, on its own line"
else
    fail "long error body: $(wc -c <"$ERR") bytes, $(lines "$ERR") lines: $(tail -c 100 "$ERR")"
fi
expect 7 "http error with -q: nothing on stderr" -- -q "$CHAT?status=401&_t=cli_401q"
if [ -s "$ERR" ]; then fail "-q: $(cat "$ERR")"; else pass "-q keeps the server's words off stderr too"; fi
expect 0 "429 then success with a key" -- --attempts 3 --idempotency-key cli-429 \
    --deadline-header X-Deadline-Ms -d '{"q":1}' -w '%{attempts}\n' \
    "$CHAT?status=429&retry_after=0&fail_first=2&n=1&_t=cli_429"
has "$OUT" "3" "three attempts"
if [ "$(fm_count cli-429 received)" -eq 3 ]; then pass "the server saw 3 requests with one key"; else fail "429 count"; fi
if [ -n "$(fm_field cli-429 received x_deadline_ms)" ]; then pass "--deadline-header stamps X-Deadline-Ms"; else fail "no deadline header"; fi
if [ "$(fm_field cli-429 received method)" = "POST" ]; then pass "-d makes a POST"; else fail "method"; fi
expect 7 "retry-after beyond the budget stops at once" -- --attempts 3 --idempotency-key cli-ra \
    --budget 2s "$CHAT?status=503&retry_after=30&fail_first=9&_t=cli_ra"
if [ "$(fm_count cli-ra received)" -eq 1 ]; then pass "one request, no sleep into the deadline"; else fail "ra count"; fi
# retry-after-ms (OpenAI's and Azure's milliseconds) is read beside
# Retry-After and wins when valid: the retry goes after 1.5 s, not 30 s
# (which the budget could not hold); alone it replaces the backoff.
# gap KEY: ms between the server's first two receipts of KEY
gap() {
    fm_log "key=$1&event=received" | grep -o '"t_ns":[0-9]*' | cut -d: -f2 |
        awk 'NR == 1 { a = $1 } NR == 2 { printf "%d", ($1 - a) / 1000000 }'
}
expect 0 "retry-after-ms wins over Retry-After" -- --attempts 2 --idempotency-key cli-rams \
    --budget 10s --report "$FM_DIR/rams.json" -w '%{outcome} %{attempts}\n' \
    "$CHAT?status=503&retry_after=30&retry_after_ms=1500&fail_first=1&n=1&_t=cli_rams"
has "$OUT" "ok 2" "retried after the milliseconds"
if [ "$(jq -c '.attempts[0] | [.retry_after, .retry_after_ms, .retry_after_source, .backoff_ms]' "$FM_DIR/rams.json")" = '["30",1500,"retry-after-ms",1500]' ]; then
    pass "the report: both headers, the delay from retry-after-ms"
else fail "rams report: $(jq -c '.attempts[0]' "$FM_DIR/rams.json")"; fi
g=$(gap cli-rams)
if [ "${g:-0}" -ge 1500 ] && [ "${g:-0}" -lt 2500 ]; then pass "the server was asked again ${g} ms later"; else fail "retry-after-ms gap: ${g:-?} ms"; fi
expect 0 "retry-after-ms alone replaces the backoff" -- --attempts 2 --idempotency-key cli-rams2 \
    --backoff-base 1ms --backoff-max 2ms --report "$FM_DIR/rams2.json" \
    "$CHAT?status=429&retry_after_ms=300&fail_first=1&n=1&_t=cli_rams2"
if [ "$(jq -c '.attempts[0] | [.retry_after, .retry_after_ms, .retry_after_source, .backoff_ms]' "$FM_DIR/rams2.json")" = '[null,300,"retry-after-ms",300]' ]; then
    pass "the report: 300 ms from retry-after-ms"
else fail "rams2 report: $(jq -c '.attempts[0]' "$FM_DIR/rams2.json")"; fi
g=$(gap cli-rams2)
if [ "${g:-0}" -ge 300 ]; then pass "the server was asked again ${g} ms later"; else fail "retry-after-ms alone: gap ${g:-?} ms"; fi
expect 0 "--http2: retry-after-ms read from the HEADERS too" -- --http2 --attempts 2 \
    --idempotency-key cli-rams4 --report "$FM_DIR/rams4.json" \
    "$CHAT?status=429&retry_after=30&retry_after_ms=200&fail_first=1&n=1&_t=cli_rams4"
if [ "$(jq -c '.attempts[0] | [.retry_after_ms, .retry_after_source, .backoff_ms]' "$FM_DIR/rams4.json")" = '[200,"retry-after-ms",200]' ]; then
    pass "--http2: 200 ms from retry-after-ms"
else fail "rams4 report: $(jq -c '.attempts[0]' "$FM_DIR/rams4.json")"; fi
expect 0 "a malformed retry-after-ms leaves Retry-After" -- --attempts 2 --idempotency-key cli-rams3 \
    --report "$FM_DIR/rams3.json" "$CHAT?status=503&retry_after=1&retry_after_ms=soon&fail_first=1&n=1&_t=cli_rams3"
if [ "$(jq -c '.attempts[0] | [.retry_after_ms, .retry_after_source, .backoff_ms]' "$FM_DIR/rams3.json")" = '[1000,"retry-after",1000]' ]; then
    pass "the report: Retry-After's second"
else fail "rams3 report: $(jq -c '.attempts[0]' "$FM_DIR/rams3.json")"; fi
expect 0 "backoff flags" -- --attempts 3 --idempotent --backoff-base 5ms --backoff-max 20ms \
    -X GET "$CHAT?status=503&fail_first=1&n=1&_t=cli_backoff"
# one end alone: the other is the default (100 ms base, 10 s cap) where it fits
expect 0 "--backoff-max below the default base, alone" -- --attempts 2 --idempotent \
    --backoff-max 30ms --report "$FM_DIR/bmax.json" -X GET "$CHAT?status=503&fail_first=1&n=1&_t=cli_bmax"
if [ "$(jq '.attempts[0].backoff_ms <= 30' "$FM_DIR/bmax.json")" = true ]; then
    pass "--backoff-max 30ms: the sleep is within it"
else fail "bmax: $(jq -c '.attempts[0]' "$FM_DIR/bmax.json")"; fi
# The budget bounds retries, not a fixed count: 50 attempts run and are all reported.
expect 7 "--attempts 50: every attempt runs" -- --attempts 50 --backoff-base 1ms \
    --backoff-max 2ms --idempotency-key cli-a50 --report "$FM_DIR/a50.json" -w '%{attempts} %{reason}\n' \
    "$CHAT?status=503&fail_first=999&_t=cli_a50"
has "$OUT" "50 attempts_exhausted" "50 attempts, then the count stops it"
if [ "$(fm_count cli-a50 received)" -eq 50 ]; then pass "the server saw 50 requests"; else fail "a50 count"; fi
if [ "$(grep -o '{"n":' "$FM_DIR/a50.json" | wc -l)" -eq 50 ]; then pass "the report lists 50 attempts"; else fail "a50 report"; fi
expect 7 "--attempts 50 within --budget 1s: the budget stops it" -- --attempts 50 --budget 1s \
    --backoff-base 50ms --backoff-max 200ms --idempotency-key cli-a50b --report "$FM_DIR/a50b.json" \
    -w '%{attempts} %{reason}\n' "$CHAT?status=503&fail_first=999&_t=cli_a50b"
if grep -qE '^[0-9]+ (backoff_exceeds_budget|lease_too_short)$' "$OUT"; then
    pass "the budget, not the count, ended it"; else fail "a50b: $(cat "$OUT")"; fi
n50=$(cut -d' ' -f1 "$OUT")
if [ "$(grep -o '{"n":' "$FM_DIR/a50b.json" | wc -l)" -eq "$n50" ] && [ "$(fm_count cli-a50b received)" -eq "$n50" ]; then
    pass "the report lists each of the $n50 attempts the server saw"; else fail "a50b report"; fi

# ---- exit 8: transport and protocol -----------------------------------------
expect 8 "connection refused" -- --attempts 2 --backoff-base 5ms "http://127.0.0.1:1/"
expect 8 "event over --max-event-bytes" -- --max-event-bytes 4096 "$CHAT?n=1&event_bytes=100000&_t=cli_huge"
has "$ERR" "protocol_error" "says protocol_error"
# an item larger than stdout's waiting room (OUT_MAX, 8 MiB) once escaped
# is printed whole: the room bounds what waits, not one item
expect 0 "a 3 MB item as a JSON line" -- --max-event-bytes 4000000 --output jsonl \
    "$CHAT?n=1&event_bytes=3000000&_t=cli_bigjsonl"
if [ "$(head -c 9 "$OUT")" = '{"event":' ] && [ "$(tail -c 4 "$OUT")" = '""}' ] &&
    [ "$(wc -l <"$OUT")" -eq 1 ] && [ "$(wc -c <"$OUT")" -gt 2900000 ]; then
    pass "the 3 MB item came out whole"; else fail "big jsonl item: $(wc -c <"$OUT") bytes"; fi
expect 8 "TLS without the CA is refused" -- "$TLS/v1/chat/completions?n=1&_t=cli_tlsbad"
expect 0 "TLS with --cacert" -- --cacert "$FM_CA" "$TLS/v1/chat/completions?n=1&_t=cli_tls"

# ---- unsafe POST that times out: outcome unknown -------------------------------
expect 3 "unsafe POST that times out" -- --attempts 3 --first-item 200ms -d '{"charge":1}' \
    -w '%{outcome_unknown} %{attempts}\n' "$CHAT?hang=1&_t=cli_unsafe"
has "$OUT" "true 1" "outcome unknown, not retried"
has "$ERR" "outcome unknown" "stderr says outcome unknown"

# ---- request flags ------------------------------------------------------------
printf '{"from":"file"}' >"$FM_DIR/body.json"
expect 0 "-d @FILE, -X, -H" -- -X GET -H 'X-Custom: 1' -d @"$FM_DIR/body.json" \
    --idempotency-key cli-put "$CHAT?n=1&_t=cli_put"
if [ "$(fm_field cli-put received method)" = "GET" ]; then pass "-X GET overrides -d's POST"; else fail "-X"; fi
if [ "$(fm_field cli-put received body_bytes | tr -d '}')" = "15" ]; then pass "-d @FILE sends the file"; else fail "body bytes $(fm_field cli-put received body_bytes)"; fi
expect 0 "-X POST without -d" -- -X POST --idempotency-key cli-post-nobody "$CHAT?n=1&_t=cli_post"
if [ "$(fm_field cli-post-nobody received method)" = "POST" ]; then pass "-X POST without a body is sent as POST"; else fail "-X POST sent as $(fm_field cli-post-nobody received method)"; fi
expect 0 "-H reaches the server" -- -H 'X-SG-Scenario: n=2' --idempotency-key cli-hdr \
    -w '%{items}\n' --output none "$CHAT?_t=cli_hdr"
has "$OUT" "2" "the scenario header from -H was applied"
if [ "$(fm_field cli-hdr received x_sg_scenario)" = "n=2" ]; then pass "-H logged by the server"; else fail "-H not seen"; fi
expect 1 "an unwritable report is an internal error" -- --report /nonexistent-dir/r.json \
    "$CHAT?n=1&_t=cli_badreport"
has "$ERR" "cannot write report" "says why"
expect 0 "--grpc-timeout" -- --grpc-timeout --idempotency-key cli-grpc "$CHAT?n=1&_t=cli_grpc"
if [ -n "$(fm_field cli-grpc received grpc_timeout)" ]; then pass "grpc-timeout stamped"; else fail "no grpc-timeout"; fi
expect 0 "--http1.1" -- --http1.1 --idempotency-key cli-h1 "$CHAT?n=1&_t=cli_h1"
if [ "$(fm_field cli-h1 received proto)" = "h1" ]; then pass "HTTP/1.1"; else fail "proto h1"; fi
expect 0 "--http2 (h2c)" -- --http2 --idempotency-key cli-h2 "$CHAT?n=1&_t=cli_h2"
if [ "$(fm_field cli-h2 received proto)" = "h2" ]; then pass "HTTP/2"; else fail "proto h2: $(fm_field cli-h2 received proto)"; fi
# the later of the two wins, as in curl
expect 0 "--http2 --http1.1" -- --http2 --http1.1 --idempotency-key cli-h21 "$CHAT?n=1&_t=cli_h21"
if [ "$(fm_field cli-h21 received proto)" = "h1" ]; then pass "the later --http1.1 wins"; else fail "proto: $(fm_field cli-h21 received proto)"; fi
expect 0 "--http1.1 --http2" -- --http1.1 --http2 --idempotency-key cli-h12 "$CHAT?n=1&_t=cli_h12"
if [ "$(fm_field cli-h12 received proto)" = "h2" ]; then pass "the later --http2 wins"; else fail "proto: $(fm_field cli-h12 received proto)"; fi

# ---- --http2 on streamguard's own HTTP/2 transport ---------------------------------
if "$SG" --version | grep -q nghttp2; then
    expect 0 "--http2 over h2c" -- --http2 --idempotency-key cli-own-h2 -w '%{items}\n' \
        --output none "$CHAT?n=3&_t=cli_own_h2"
    has "$OUT" "3" "all items over HTTP/2"
    expect 3 "--http2 over TLS: a stalled stream is reset alone" -- --http2 --cacert "$FM_CA" \
        --idle 150ms --idempotency-key cli-own-h2-stall "$TLS/v1/chat/completions?n=9&stall_after=2&stall=forever&_t=cli_own_h2s"
    if fm_wait_event cli-own-h2-stall client_gone &&
        fm_log "key=cli-own-h2-stall&event=client_gone" | grep -q '"h2_error":"CANCEL"'; then
        pass "the server saw RST_STREAM(CANCEL) for the expired stream"
    else
        fail "no RST_STREAM(CANCEL) in the server log"
    fi
    expect 8 "--http2 over TLS without the CA" -- --http2 "$TLS/v1/chat/completions?n=1&_t=cli_own_h2bad"
    expect 0 "https:// negotiates h2 by itself" -- --cacert "$FM_CA" --idempotency-key cli-alpn \
        --output none "$TLS/v1/chat/completions?n=1&_t=cli_alpn"
    if [ "$(fm_field cli-alpn received proto)" = "h2" ]; then pass "https:// went over h2"; else fail "alpn proto"; fi
    expect 0 "--http1.1 keeps https:// on HTTP/1.1" -- --http1.1 --cacert "$FM_CA" \
        --idempotency-key cli-alpn1 --output none "$TLS/v1/chat/completions?n=1&_t=cli_alpn1"
    if [ "$(fm_field cli-alpn1 received proto)" = "h1" ]; then pass "https:// over h1"; else fail "h1 proto"; fi
    # -H fields HTTP/2 does not carry (connection-specific) are left out,
    # as curl does, and a value's trailing space trimmed: the request goes
    expect 0 "--http2 with HTTP/1.1's connection headers" -- --http2 --output none \
        -H 'Connection: keep-alive' -H 'Keep-Alive: timeout=5' -H 'TE: gzip' \
        -H 'te: trailers, deflate' -H 'X-A: b  ' \
        --idempotency-key cli-h2-conn "$CHAT?n=1&_t=cli_h2_conn"
    if [ "$(fm_field cli-h2-conn received proto)" = "h2" ]; then pass "sent over h2"; else fail "h2 conn headers: $(fm_field cli-h2-conn received proto)"; fi
    # An https:// URL as libcurl takes it: credentials (libcurl sends them,
    # so no probe), a fragment, the scheme in capitals.
    expect 0 "https:// with credentials goes to libcurl" -- --cacert "$FM_CA" --output none \
        --idempotency-key cli-cred "https://u:SECRET@localhost:$FM_PORT/v1/chat/completions?n=1&_t=cli_cred"
    if [ -n "$(fm_field cli-cred received proto)" ]; then pass "credentials: the request was sent"; else fail "credentials: not received"; fi
    expect 0 "https:// with a user and no password" -- --cacert "$FM_CA" --output none \
        "https://u@localhost:$FM_PORT/v1/chat/completions?n=1&_t=cli_user"
    expect 2 "--http2 refuses credentials in the URL" -- --http2 --cacert "$FM_CA" \
        "https://u:SECRET@localhost:$FM_PORT/v1/chat/completions?n=1&_t=cli_cred2"
    nosecret "--http2 with credentials"
    has "$ERR" "Authorization" "says how to send them instead"
    expect 0 "https:// with a fragment" -- --cacert "$FM_CA" --output none --idempotency-key cli-frag \
        "https://localhost:$FM_PORT/v1/chat/completions?n=1&_t=cli_frag#part"
    if [ "$(fm_field cli-frag received proto)" = "h2" ]; then pass "a fragment: still the h2 probe"; else fail "fragment proto: $(fm_field cli-frag received proto)"; fi
    expect 0 "--http2 HTTPS:// in capitals" -- --http2 --cacert "$FM_CA" --output none \
        "HTTPS://LOCALHOST:$FM_PORT/v1/chat/completions?n=1&_t=cli_caps"
    # --http2 without --connect-timeout: the connection is bounded by the
    # lease alone (no hidden 10 s clock).  A stopped server's kernel takes
    # the TCP connection; the TLS handshake never ends.
    "$FM" --port 0 --quiet >"$FM_DIR/stopped.port" 2>/dev/null &
    STOPPED=$!
    for _ in $(seq 1 200); do [ -s "$FM_DIR/stopped.port" ] && break; sleep 0.02; done
    kill -STOP "$STOPPED"
    expect 4 "--http2: a handshake that never ends runs to the budget" -- --http2 --budget 10500ms \
        --attempts 1 -w '%{outcome} %{phase}\n' "https://localhost:$(head -n 1 "$FM_DIR/stopped.port")/"
    has "$OUT" "budget_exhausted connect" "the budget, not a hidden connect clock, ended it"
    { kill -KILL "$STOPPED" && wait "$STOPPED"; } 2>/dev/null
    # The HTTP/2 connection is part of each attempt: leased, reported, retried.
    expect 8 "--http2 to a closed port: three attempts" -- --http2 --attempts 3 \
        --backoff-base 10ms --report "$FM_DIR/h2closed.json" -w '%{outcome} %{attempts}\n' \
        http://127.0.0.1:1/
    has "$OUT" "transport_error 3" "each attempt dialled, each in phase connect"
    has "$FM_DIR/h2closed.json" '"phase":"connect"' "the report is written"
    # Nothing can be leased: no probe, no handshake, no dialling at all.
    before=$(curl -s "$BASE/_stats" | sed 's/.*"connections_total":\([0-9]*\).*/\1/')
    expect 4 "--budget 1s --floor 1s on https:// is refused" -- --budget 1s --floor 1s \
        --cacert "$FM_CA" -w '%{outcome}\n' "$TLS/v1/chat/completions?n=1&_t=cli_refused_tls"
    has "$OUT" "refused" "refused"
    after=$(curl -s "$BASE/_stats" | sed 's/.*"connections_total":\([0-9]*\).*/\1/')
    # the two /_stats requests themselves are one connection each
    if [ "$after" -eq $((before + 1)) ]; then pass "a refusal dials nothing"; else fail "connections $before -> $after"; fi
    # The probe's time is the budget's, and the report says so: a server
    # that accepts and never answers (stopped) holds the probe for its whole
    # lease; then libcurl's own attempt gets what is left, or nothing.
    "$FM" --port 0 --quiet >"$FM_DIR/stopped2.port" 2>/dev/null &
    stopped=$!
    for _ in $(seq 1 200); do [ -s "$FM_DIR/stopped2.port" ] && break; sleep 0.02; done
    kill -STOP "$stopped"
    SURL="https://127.0.0.1:$(head -n 1 "$FM_DIR/stopped2.port")/v1/chat/completions"
    # field NAME FILE: a top-level field of the report
    field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[2]))[sys.argv[1]])' "$1" "$2"; }
    # A report for every run: the probe that used the budget up is its
    # attempt - phase connect, never sent, its error - not "no attempt".
    expect 4 "the probe spends the budget: budget_exhausted" -- --budget 500ms --cacert "$FM_CA" \
        --report "$FM_DIR/probe.json" -w '%{outcome} %{attempts} %{phase} %{elapsed_ms} %{remaining_ms}\n' "$SURL"
    read -r wo wa wp we wr <"$OUT"
    if [ "$wo $wa $wp" = "budget_exhausted 1 connect" ] && [ "$we" -ge 480 ] && [ "$wr" -le 20 ]; then
        pass "-w: budget_exhausted, the probe's attempt, phase connect, ${we} ms spent"
    else fail "probe -w: $(cat "$OUT")"; fi
    if [ "$(field budget_ms "$FM_DIR/probe.json")" = 500 ] && [ "$(field elapsed_ms "$FM_DIR/probe.json")" = "$we" ]; then
        pass "the report: the 500 ms budget, the same elapsed as -w"
    else fail "probe report: $(head -c 400 "$FM_DIR/probe.json")"; fi
    a0=$(jq -c '.attempts[0] | [.probe, .outcome, .phase, .sent, .decision, .reason, .start_ms < 20, .elapsed_ms >= 470]' "$FM_DIR/probe.json")
    if [ "$a0" = '[true,"budget_exhausted","connect",false,"stop","budget_exhausted",true,true]' ] &&
        jq -e '.phase == "connect" and (.attempts[0].error | test("timed out"))' "$FM_DIR/probe.json" >/dev/null; then
        pass "the report: the probe is attempt 1, budget_exhausted in connect, never sent, its error"
    else fail "probe attempt: $a0 $(jq -c '.attempts' "$FM_DIR/probe.json")"; fi
    has "$ERR" "HTTP/2 probe" "the diagnostic says where the budget went"
    expect 3 "a probe cut by --connect-timeout, then libcurl's attempt" -- --budget 3s \
        --connect-timeout 300ms --cacert "$FM_CA" --report "$FM_DIR/probe2.json" \
        -w '%{outcome} %{attempts} %{elapsed_ms} %{remaining_ms}\n' "$SURL"
    read -r wo wa we wr <"$OUT"
    start=$(jq '.attempts[1].start_ms' "$FM_DIR/probe2.json")
    if [ "$wo $wa" = "connect_timeout 2" ] && [ "$we" -ge 590 ] && [ "$((we + wr))" -ge 2990 ] &&
        [ "$((we + wr))" -le 3000 ] && [ "${start:-0}" -ge 290 ]; then
        pass "libcurl's attempt starts ${start} ms in, after the probe; ${we} + ${wr} ms = the budget"
    else fail "probe then libcurl: -w $(cat "$OUT"), start_ms ${start:-none}"; fi
    a0=$(jq -c '.attempts[0] | [.probe, .outcome, .sent, .decision, .granted_ms.connect, .elapsed_ms >= 290]' "$FM_DIR/probe2.json")
    if [ "$a0" = '[true,"connect_timeout",false,"retry",300,true]' ] &&
        [ "$(jq -c '[.max_attempts, .attempts[1].probe, .attempts[1].n]' "$FM_DIR/probe2.json")" = '[1,false,2]' ]; then
        pass "the report: the probe's connect_timeout, then libcurl's one attempt (--attempts 1)"
    else fail "probe2 attempts: $(jq -c '.attempts' "$FM_DIR/probe2.json")"; fi
    if [ "$(field budget_ms "$FM_DIR/probe2.json")" = 3000 ] && [ "$(field elapsed_ms "$FM_DIR/probe2.json")" = "$we" ]; then
        pass "the report: the 3 s budget, the same elapsed as -w"
    else fail "probe2 report: $(head -c 400 "$FM_DIR/probe2.json")"; fi
    kill -KILL "$stopped"
    # A server that answers without h2 is no failed probe: no probe attempt.
    "$FM" --port 0 --quiet --no-h2 --write-ca "$FM_DIR/noh2.ca" >"$FM_DIR/noh2.port" 2>/dev/null &
    noh2=$!
    for _ in $(seq 1 100); do [ -s "$FM_DIR/noh2.port" ] && break; sleep 0.02; done
    expect 0 "https:// without h2: libcurl, and no probe attempt" -- --cacert "$FM_DIR/noh2.ca" --output none \
        --report "$FM_DIR/noh2.json" -w '%{attempts}\n' \
        "https://localhost:$(head -n 1 "$FM_DIR/noh2.port")/v1/chat/completions?n=1"
    if [ "$(cat "$OUT")" = 1 ] && ! grep -q '"probe"' "$FM_DIR/noh2.json"; then
        pass "one attempt, libcurl's; the report names no probe"
    else fail "no-h2: $(cat "$OUT") $(head -c 300 "$FM_DIR/noh2.json")"; fi
    kill -TERM "$noh2"; wait "$noh2"
    H2LEDGER=$FM_DIR/h2ledger
    expect 3 "--http2 --ledger records an unsafe POST that times out" -- --http2 \
        --ledger "$H2LEDGER" --first-item 200ms -d '{"charge":3}' "$CHAT?hang=1&_t=cli_h2_ledger"
    expect 0 "--unresolved lists the HTTP/2 operation" -- --ledger "$H2LEDGER" --unresolved
    has "$OUT" "POST $CHAT?hang=1&_t=cli_h2_ledger" "HTTP/2 intent recorded"
    has "$OUT" " first_item_timeout unknown" "HTTP/2 resolution recorded"
    expect 4 "--http2: the same operation is refused while unresolved" -- --http2 \
        --ledger "$H2LEDGER" --first-item 200ms -d '{"charge":3}' "$CHAT?hang=1&_t=cli_h2_ledger"
fi

# ---- framings -----------------------------------------------------------------
expect 0 "--format ndjson" -- --format ndjson "$BASE/ndjson?n=3&_t=cli_nd"
if [ "$(lines "$OUT")" -ge 3 ]; then pass "ndjson lines"; else fail "ndjson lines"; fi
# --done with NDJSON: a line equal to it is the clean end; without it, truncated
expect 6 "--format ndjson --done, the line never comes" -- --format ndjson \
    --done '{"end":true}' -w '%{outcome}\n' "$BASE/ndjson?n=3&_t=cli_nd_done"
has "$OUT" "truncated" "an NDJSON stream without its --done line is truncated"
expect 0 "--done-event message_stop" -- --done-event message_stop --output jsonl \
    "$BASE/v1/messages?n=2&_t=cli_anth"
has "$OUT" '"event":"message_stop"' "the terminal event is delivered"
expect 0 "--skip-event" -- --done-event message_stop --output jsonl --skip-event message_start \
    --skip-event content_block_start "$BASE/v1/messages?n=2&_t=cli_skip"
if grep -q '"event":"message_start"\|"event":"content_block_start"' "$OUT"; then
    fail "skipped event types were delivered"
else
    pass "--skip-event types are not items"
fi
has "$OUT" '"event":"content_block_delta"' "other events still are"

# ---- quiet ---------------------------------------------------------------------
expect 3 "-q" -- -q --idle 100ms "$CHAT?n=9&stall_after=1&stall=forever&_t=cli_quiet"
if [ ! -s "$ERR" ]; then pass "-q prints nothing on stderr"; else fail "-q stderr: $(cat "$ERR")"; fi

# ---- the intent ledger ----------------------------------------------------------
LEDGER=$FM_DIR/ledger
expect 3 "--ledger records an unsafe POST that times out" -- --ledger "$LEDGER" \
    --first-item 200ms -d '{"charge":2}' "$CHAT?hang=1&_t=cli_ledger"
expect 0 "--unresolved lists it" -- --ledger "$LEDGER" --unresolved
has "$OUT" "POST $CHAT?hang=1&_t=cli_ledger" "the line names method and URL"
has "$OUT" " 1 first_item_timeout unknown" "attempts, last outcome and state"
KEY=$(cut -d' ' -f1 "$OUT")
expect 4 "the same operation is refused while unresolved" -- --ledger "$LEDGER" \
    --first-item 200ms -d '{"charge":2}' "$CHAT?hang=1&_t=cli_ledger"
has "$ERR" "reconcile it first" "says why"
has "$ERR" "refused before any attempt (intent_refused)" "in the run's own words"
# a refusal is an end like any other: the report, the -w line, and -q
expect 4 "a refusal writes the report and the -w line, quietly with -q" -- -q \
    --ledger "$LEDGER" --report "$FM_DIR/refused.json" -w '%{outcome} %{reason} %{attempts} %{phase}\n' \
    --first-item 200ms -d '{"charge":2}' "$CHAT?hang=1&_t=cli_ledger"
if [ ! -s "$ERR" ]; then pass "-q: nothing on stderr"; else fail "-q said: $(cat "$ERR")"; fi
has "$OUT" "refused intent_refused 0 -" "-w: refused, intent_refused, no attempt"
has "$FM_DIR/refused.json" '"outcome":"refused","phase":null,"decision":"stop","reason":"intent_refused"' "the report"
has "$FM_DIR/refused.json" '"attempts":[]' "no attempt in the report"
if [ "$(fm_log "event=received" | grep -c "_t=cli_ledger")" -eq 1 ]; then
    pass "the refused operation never dialled out"
else
    fail "the refused operation reached the server"
fi
expect 0 "--reconcile" -- --ledger "$LEDGER" --reconcile "$KEY"
expect 0 "--unresolved after reconciling" -- --ledger "$LEDGER" --unresolved
if [ ! -s "$OUT" ]; then pass "nothing left to reconcile"; else fail "still listed: $(cat "$OUT")"; fi
expect 0 "a successful operation resolves done" -- --ledger "$LEDGER" --output none \
    --idempotency-key cli-ledger-ok "$CHAT?n=1&_t=cli_ledger_ok"
expect 0 "--unresolved" -- --ledger "$LEDGER" --unresolved
if [ ! -s "$OUT" ]; then pass "a done operation is not listed"; else fail "done listed"; fi
expect 2 "--reconcile an unknown key" -- --ledger "$LEDGER" --reconcile no-such-key
expect 2 "--unresolved needs --ledger" -- --unresolved
"$SG" --ledger 'postgresql://u:SECRET@127.0.0.1:1/db?password=SECRET&sslpassword=SECRET&connect_timeout=1' --unresolved >"$OUT" 2>"$ERR"
if [ -s "$ERR" ]; then nosecret "a ledger URI that cannot be reached"; else fail "no word on an unreachable ledger"; fi
expect 2 "--unresolved on a ledger that does not exist" -- --ledger "$FM_DIR/no-such-ledger" --unresolved
has "$ERR" "not found" "a mistyped ledger is not an all-clear"
if [ ! -e "$FM_DIR/no-such-ledger" ]; then pass "listing did not create the ledger"; else fail "--unresolved created $FM_DIR/no-such-ledger"; fi

# ---- one TLS name policy for both transports: subject alternative names only --
# A second server whose certificate names localhost only in its CN (RFC 9525
# allows no CN fallback): both transports refuse it, and never send.
CNDIR=$FM_DIR/cn
mkdir -p "$CNDIR"
"$FM" --port 0 --quiet --cert-cn-only localhost --write-ca "$CNDIR/ca.pem" >"$CNDIR/out" 2>"$CNDIR/err" &
CNPID=$!
for _ in $(seq 1 200); do [ -s "$CNDIR/out" ] && break; sleep 0.02; done
CNPORT=$(head -n 1 "$CNDIR/out")
for v in --http1.1 --http2; do
    expect 8 "$v refuses a CN-only certificate" -- "$v" --cacert "$CNDIR/ca.pem" \
        --output none "https://localhost:$CNPORT/v1/chat/completions?n=1&_t=cli_cn"
    has "$ERR" "hostname mismatch" "$v says the name does not match"
done
if [ "$(curl -s "http://127.0.0.1:$CNPORT/_log?event=received" | grep -c '"received"')" -eq 0 ]; then
    pass "no request reached the CN-only server"
else
    fail "a request reached the CN-only server"
fi
kill -TERM "$CNPID"
wait "$CNPID" 2>/dev/null

# ---- items are flushed one by one ----------------------------------------------
# The second item comes 3 s after the first: the first must reach the pipe
# while sg-stream is still waiting for it (polled, not slept on).
"$SG" --no-done "$CHAT?n=2&gap=3000&no_done=1&_t=cli_flush" >"$FM_DIR/flush" 2>/dev/null &
SGPID=$!
flushed=no
for _ in $(seq 1 50); do
    if [ "$(lines "$FM_DIR/flush")" -ge 1 ]; then
        kill -0 "$SGPID" 2>/dev/null && flushed=yes
        break
    fi
    sleep 0.05
done
if [ "$flushed" = yes ]; then pass "the first item is out before the stream ends"; else fail "items not flushed"; fi
wait $SGPID

# ---- --profile: time to first token, in-band errors, the clean end ------------
W='%{outcome} %{attempts} ttft=%{first_token_ms} pe=%{provider_error}\n'
ROLE="$CHAT?n=3&gap=0&role_chunk=1&first_delay=300"
expect 0 "no profile: the role chunk is the first item" -- --output none -w "$W" "$ROLE&_t=cli_p0"
if grep -qE '^ok 1 ttft=[0-9]{1,2} ' "$OUT"; then pass "without a profile the first item came at once (well before the token's 300 ms)"; else fail "no profile ttft: $(cat "$OUT")"; fi
expect 0 "--profile openai: the first token after the prefill" -- --profile openai --output none -w "$W" "$ROLE&_t=cli_p1"
if grep -qE '^ok 1 ttft=(29[0-9]|3[0-9][0-9]) ' "$OUT"; then pass "time to first token ~300 ms"; else fail "ttft: $(cat "$OUT")"; fi
expect 3 "--profile openai --first-item 200ms: metadata does not satisfy it" -- --profile openai \
    --first-item 200ms --output none -w "$W" "$ROLE&_t=cli_p2"
has "$OUT" "first_item_timeout 1 ttft=- " "first-token clock fired"
expect 7 "--profile openai: an error before [DONE] is provider_error" -- --profile openai \
    --output none -w "$W" "$CHAT?n=5&gap=0&error_at=2&error_then_done=1&_t=cli_p3"
if grep -qE '^provider_error 1 ttft=[0-9]+ pe=server_error$' "$OUT"; then pass "type named"; else fail "type: $(cat "$OUT")"; fi
expect 0 "without a profile the same stream ends ok" -- --output none "$CHAT?n=5&gap=0&error_at=2&error_then_done=1&_t=cli_p4"
expect 7 "--profile anthropic: overloaded before the first token is retried (GET)" -- \
    --profile anthropic --attempts 3 --backoff-base 10ms --output none -w "$W" \
    --report "$FM_DIR/prof.json" "$BASE/v1/messages?n=3&gap=0&error_at=0&_t=cli_p5"
has "$OUT" "provider_error 3 ttft=- pe=overloaded_error" "three attempts, each overloaded"
has "$FM_DIR/prof.json" '"provider_error":{"type":"overloaded_error","message":"scripted failure"}' "the report names it"
# HTTP 529 is Anthropic's overloaded_error: retried before the first token
# as 503 is, never the final answer
expect 0 "--profile anthropic: a 529 is retried" -- --profile anthropic --attempts 3 \
    --backoff-base 10ms --idempotency-key cli-529 --output none -w '%{outcome} %{attempts}\n' \
    --report "$FM_DIR/p529.json" "$BASE/v1/messages?n=2&gap=0&status=529&fail_first=1&_t=cli_p529"
has "$OUT" "ok 2" "the second attempt answered"
has "$FM_DIR/p529.json" '"http_status":529,"partial":false,"retryable":true' "the 529 was retryable"
if [ "$(fm_count cli-529 received)" -eq 2 ]; then pass "the server saw the retry"; else fail "529 count: $(fm_count cli-529 received)"; fi
# Anthropic's spend limit is a 429 rate_limit_error whose
# error.details.error_code says retrying fails until the month turns: not
# retried, whatever the status (the profile's classifier reads the body)
expect 7 "--profile anthropic: a spend limit's 429 is not retried" -- --profile anthropic \
    --attempts 3 --backoff-base 10ms --idempotency-key cli-spend -w '%{outcome} %{attempts} %{reason}\n' \
    "$BASE/v1/messages?status=429&error_code=enforced_spend_limit_reached&_t=cli_spend"
has "$OUT" "http_error 1 provider_final" "one attempt, the provider's final word"
if [ "$(fm_count cli-spend received)" -eq 1 ]; then pass "the server was asked once"; else fail "spend limit asked $(fm_count cli-spend received) times"; fi
expect 0 "--profile anthropic: a plain 429 is still retried" -- --profile anthropic \
    --attempts 3 --backoff-base 10ms --idempotency-key cli-rl -w '%{outcome} %{attempts}\n' \
    "$BASE/v1/messages?n=1&status=429&fail_first=1&_t=cli_rl"
has "$OUT" "ok 2" "retried"
expect 0 "--profile anthropic: ping is nothing" -- --profile anthropic -w '%{items}\n' \
    "$BASE/v1/messages?n=2&gap=100&keepalive=30&_t=cli_p6"
if ! grep -q '"ping"' "$OUT"; then pass "no ping printed"; else fail "ping printed"; fi
expect 0 "--profile ollama: done is the clean end" -- --profile ollama --output none "$BASE/api/chat?n=3&gap=0&format=ollama&_t=cli_p7"
expect 6 "--profile ollama: no done line is truncated" -- --profile ollama --output none "$BASE/api/chat?n=3&gap=0&format=ollama&no_done=1&_t=cli_p8"
expect 2 "--profile with an unknown name" -- --profile nosuch "$CHAT"

fm_finish
