#!/usr/bin/env bash
# Runs one example against a fresh sg-fakemodel and checks what it printed,
# its exit status and, where that proves something, what the server saw.
#
#   run_examples.sh SG_FAKEMODEL EXAMPLE_BINARY SCENARIO
#
# Registered with ctest by examples/CMakeLists.txt (label "example"), one
# entry per example and scenario.  Exit 0 when every check passed.

here=$(cd "$(dirname "$0")" && pwd)
# fm_start / fm_finish / fm_log / fail / pass; sets FM_PORT, FM_DIR.
# shellcheck source=../tests/integration/fakemodel_lib.sh
. "$here/../tests/integration/fakemodel_lib.sh"

if [ $# -ne 3 ]; then
    echo "usage: $0 SG_FAKEMODEL EXAMPLE_BINARY SCENARIO" >&2
    exit 2
fi
fakemodel=$1
bin=$2
scenario=$3
prog=$(basename "$bin")

fm_start "$fakemodel"
base=http://127.0.0.1:$FM_PORT
out=$FM_DIR/example.out

# run RC ARGS...: run the example (at most 30 s) and expect exit status RC.
run() {
    local want=$1
    shift
    local rc=0
    timeout 30 "$bin" "$@" >"$out" 2>&1 || rc=$?
    echo "\$ $prog $*"
    cat "$out"
    if [ "$rc" -eq "$want" ]; then
        pass "exit status $rc"
    else
        fail "exit status $rc, expected $want"
    fi
}

# check MESSAGE COMMAND...: the command succeeds (e.g. a [ ] test).
check() {
    local msg=$1
    shift
    if "$@"; then
        pass "$msg"
    else
        fail "$msg"
    fi
}

# later_than T1 T2: both set and T2 > T1.
# shellcheck disable=SC2317 # called through check
later_than() {
    [ -n "$1" ] && [ -n "$2" ] && [ "$2" -gt "$1" ]
}

# expect TEXT: the output holds TEXT (a fixed string).
expect() {
    if grep -qF -- "$1" "$out"; then
        pass "prints '$1'"
    else
        fail "does not print '$1'"
    fi
}

# expect_not TEXT: the output does not hold TEXT.
expect_not() {
    if grep -qF -- "$1" "$out"; then
        fail "prints '$1'"
    else
        pass "does not print '$1'"
    fi
}

# expect_log QUERY TEXT: the server's log filtered by QUERY holds TEXT.
expect_log() {
    if fm_log "$1" | grep -qF -- "$2"; then
        pass "server log ($1) has '$2'"
    else
        fail "server log ($1) lacks '$2'"
        fm_log "$1" >&2
    fi
}

# wait_log QUERY TEXT: wait up to 3 s for the filtered log to hold TEXT.
wait_log() {
    for _ in $(seq 1 60); do
        fm_log "$1" | grep -qF -- "$2" && return 0
        sleep 0.05
    done
    return 1
}

# log_count QUERY TEXT: how many lines of the filtered log hold TEXT.
log_count() {
    fm_log "$1" | grep -cF -- "$2"
}

case "$prog:$scenario" in
hello:ok)
    # The README's first program: each item printed as it arrives (the
    # role chunk is metadata, held and delivered with the first token),
    # then the outcome and the report; exit 0.
    run 0 "$base/v1/chat/completions?n=5&gap=10&role_chunk=1"
    for i in 0 1 2 3 4; do
        expect "\"delta\":{\"content\":\"tok$i\"}"
    done
    expect "outcome=ok"
    expect 'report: {"version":1,"label":null,"finished":true,"outcome":"ok"'
    expect '"method":"POST","idempotency_key":true'
    expect '"granted_ms":{"connect":null,"attempt":30000,"first_item":10000,"idle":2000,'
    check "six items printed (the role chunk and five tokens)" \
        [ "$(grep -c '^{"id":"chatcmpl' "$out")" -eq 6 ]
    expect_log "event=received" '"method":"POST"'
    expect_log "event=received" '"idempotency_key":"hello-7f3a"'
    expect_log "event=received" '"body_bytes":84'
    ;;
hello:idle_timeout)
    # Two tokens, then keepalive comments only: the 2 s idle clock ends it,
    # partial (never retried): exit 1.
    run 1 "$base/v1/chat/completions?n=9&gap=10&stall_after=2&stall=forever&keepalive=50"
    expect "\"content\":\"tok1\""
    expect_not "tok2"
    expect "outcome=idle_timeout no next item in 2000 ms"
    expect '"reason":"partial_stream","partial":true'
    check "one request: a partial stream is not retried" \
        [ "$(log_count "event=received" '"event":"received"')" -eq 1 ]
    ;;
hello:http_error)
    # A final status: the answer, not a failure of the call - exit 1, with
    # the status in words; usage errors exit 2.
    run 1 "$base/v1/chat/completions?status=401"
    expect "outcome=http_error HTTP 401"
    expect '"reason":"final_status"'
    run 2 "ftp://127.0.0.1:$FM_PORT/"
    expect "hello: invalid argument"
    ;;
own_loop:ok)
    run 0 "$FM_PORT" "/v1/chat/completions?n=5&gap=10"
    expect "item 4:"
    expect "outcome=ok phase=streaming attempts=1 items=5"
    expect "partial=false http_status=200"
    ;;
own_loop:idle_timeout)
    # Two items, then keepalive comments only: they never reset the idle
    # clock (500 ms), so the loop closes the socket and the server sees it.
    run 1 "$FM_PORT" "/v1/chat/completions?n=5&gap=10&stall_after=2&stall=forever&keepalive=20"
    expect "clock expired: idle_timeout (closing the socket)"
    expect "outcome=idle_timeout phase=streaming attempts=1 items=2"
    expect "partial=true"
    expect "discard: 2 items"
    wait_log "event=client_gone" '"event":"client_gone"'
    expect_log "event=client_gone" '"reason":"connection_closed"'
    ;;
curl_poll_loop:one_stalls)
    # Two streams in a loop that polls only the multi's fd and its own 1 s
    # ticker: the stalled one is cut by the idle clock (300 ms), on time,
    # while the other finishes.
    run 1 "$base/v1/chat/completions?n=5&gap=20" \
        "$base/v1/chat/completions?n=20&gap=10&stall_after=3&stall=forever"
    expect "n=5&gap=20: outcome=ok items=5"
    expect "stall=forever: outcome=idle_timeout items=3 cut 30"
    ;;
openai_chat:ok)
    # The role-only first chunk is metadata under the profile: no token.
    run 0 "$base/v1/chat/completions?n=5&gap=10&role_chunk=1"
    expect "tok0tok1tok2tok3tok4"
    expect "outcome=ok phase=streaming attempts=1 tokens=5 partial=false reason=ok"
    expect "first_token_ms="
    expect_not "first_token_ms=none"
    expect 'report: {"version":1,"label":"openai chat","finished":true,"outcome":"ok"'
    expect_log "event=received" '"method":"POST"'
    expect_log "event=received" '"idempotency_key":"openai-chat-'
    ;;
openai_chat:idle_timeout)
    run 1 "$base/v1/chat/completions?n=5&gap=10&stall_after=2&stall=forever&keepalive=20" 10000 300
    expect "tok0tok1"
    expect "discard: attempt 1 ended idle_timeout after delivering tokens"
    expect "outcome=idle_timeout phase=streaming attempts=1 tokens=2 partial=true reason=partial_stream"
    expect '"granted_ms":{"connect":3000,"attempt":30000,"first_item":10000,"idle":300'
    # A partial stream is never retried: exactly one request reached the server.
    check "one request: a partial stream is not retried" \
        [ "$(log_count "event=received" '"event":"received"')" -eq 1 ]
    ;;
openai_chat:provider_error)
    # data: {"error": ...} after two tokens, then [DONE] (as vLLM sends it):
    # still provider_error, with the server's type; partial, not retried.
    run 1 "$base/v1/chat/completions?n=5&gap=10&error_at=2&error_then_done=1"
    expect "tok0tok1"
    expect "discard: attempt 1 ended provider_error after delivering tokens"
    expect "outcome=provider_error phase=streaming attempts=1 tokens=2 partial=true reason=partial_stream"
    expect 'provider error: type=server_error message="scripted failure"'
    expect '"provider_error":{"type":"server_error","message":"scripted failure"}'
    check "one request: a partial stream is not retried" \
        [ "$(log_count "event=received" '"event":"received"')" -eq 1 ]
    ;;
openai_chat:first_token_timeout)
    # The role chunk comes with the headers, the first token 2 s later: the
    # chunk does not satisfy the 300 ms first-token clock, and as nothing
    # was delivered each attempt may be retried (the idempotency key).
    run 1 "$base/v1/chat/completions?n=3&role_chunk=1&first_delay=2000" 300
    expect "attempt 1: outcome=first_item_timeout phase=wait_first_item status=200 items=0 decision=retry reason=retryable"
    expect "outcome=first_item_timeout phase=wait_first_item attempts=3 tokens=0 partial=false reason=attempts_exhausted"
    expect "first_token_ms=none"
    expect_not "discard:"
    check "three requests" [ "$(log_count "event=received" '"event":"received"')" -eq 3 ]
    ;;
openai_chat:no_done)
    run 1 "$base/v1/chat/completions?n=5&gap=10&no_done=1"
    expect "tok0tok1tok2tok3tok4"
    expect "outcome=truncated phase=streaming attempts=1 tokens=5 partial=true reason=partial_stream"
    ;;
openai_chat:retry_429)
    # 429 twice (Retry-After: 1), then a stream: the idempotency key makes
    # the retries safe, and the same key is sent on every attempt.
    run 0 "$base/v1/chat/completions?n=3&gap=10&status=429&retry_after=1&fail_first=2"
    expect "attempt 1: outcome=http_error phase=wait_headers status=429 items=0 decision=retry reason=retryable"
    expect "attempt 2: outcome=http_error phase=wait_headers status=429 items=0 decision=retry reason=retryable"
    expect "outcome=ok phase=streaming attempts=3 tokens=3"
    expect '"retry_after":"1","retry_after_ms":1000'
    key=$(fm_log "event=received" | sed -n 's/.*"idempotency_key":"\([^"]*\)".*/\1/p' | sort -u)
    check "one idempotency key on all attempts: $key" \
        [ "$(printf '%s\n' "$key" | grep -c .)" -eq 1 ]
    ;;
openai_responses:ok)
    # response.created, in_progress and the two *.added events are
    # metadata (held, printed as nothing); the text is the deltas';
    # response.completed is the clean end.
    run 0 "$base/v1/responses?n=5&gap=10"
    expect "tok0tok1tok2tok3tok4"
    expect "attempt 1: outcome=ok phase=streaming status=200 items=13 decision=done reason=ok"
    expect "outcome=ok phase=streaming attempts=1 tokens=5 partial=false reason=ok"
    expect "first_token_ms="
    expect_not "first_token_ms=none"
    expect_not "discard:"
    expect 'report: {"version":1,"label":"openai responses","finished":true,"outcome":"ok"'
    expect_log "event=received" '"method":"POST"'
    expect_log "event=received" '"path":"/v1/responses"'
    expect_log "event=received" '"idempotency_key":"openai-responses-'
    ;;
openai_responses:first_token_timeout)
    # The four metadata events come with the headers, the first delta 2 s
    # later: they do not satisfy the 300 ms first-token clock, and as
    # nothing was delivered each attempt may be retried (the idempotency
    # key) - three attempts, then attempts_exhausted.
    run 1 "$base/v1/responses?n=3&first_delay=2000" 300
    expect "attempt 1: outcome=first_item_timeout phase=wait_first_item status=200 items=0 decision=retry reason=retryable"
    expect "attempt 2: outcome=first_item_timeout phase=wait_first_item status=200 items=0 decision=retry reason=retryable"
    expect "outcome=first_item_timeout phase=wait_first_item attempts=3 tokens=0 partial=false reason=attempts_exhausted"
    expect "first_token_ms=none (no token arrived)"
    expect '"granted_ms":{"connect":3000,"attempt":60000,"first_item":300,'
    expect_not "tok0"
    expect_not "discard:"
    # The metadata did arrive (bytes, no items) before the clock fired.
    bytes=$(grep -o '"items":0,"bytes":[0-9]*' "$out" | head -n 1 | sed 's/.*://')
    check "metadata arrived on attempt 1 (${bytes:-no} bytes, 0 items)" \
        [ "${bytes:-0}" -gt 0 ]
    check "three requests" [ "$(log_count "event=received" '"event":"received"')" -eq 3 ]
    check "no delta was sent before the client left" \
        [ "$(log_count "event=first_item_sent" '"event":"first_item_sent"')" -eq 0 ]
    ;;
openai_responses:failed_before_token)
    # event: response.failed (code server_error) after the metadata, before
    # any delta: nothing was shown, the code is transient and the request
    # has an idempotency key, so it is retried - three attempts in all.
    run 1 "$base/v1/responses?n=5&gap=10&error_at=0&error_event=response.failed"
    expect "attempt 1: outcome=provider_error phase=wait_first_item status=200 items=0 decision=retry reason=retryable type=server_error"
    expect "attempt 3: outcome=provider_error phase=wait_first_item status=200 items=0 decision=stop reason=attempts_exhausted type=server_error"
    expect "outcome=provider_error phase=wait_first_item attempts=3 tokens=0 partial=false reason=attempts_exhausted"
    expect "first_token_ms=none (no token arrived)"
    expect 'provider error: type=server_error message="scripted failure"'
    expect '"provider_error":{"type":"server_error","message":"scripted failure"}'
    expect_not "discard:"
    check "three requests" [ "$(log_count "event=received" '"event":"received"')" -eq 3 ]
    key=$(fm_log "event=received" | sed -n 's/.*"idempotency_key":"\([^"]*\)".*/\1/p' | sort -u)
    check "one idempotency key on all attempts: $key" \
        [ "$(printf '%s\n' "$key" | grep -c .)" -eq 1 ]
    ;;
openai_responses:failed_not_transient)
    # The same response.failed with a code that is not transient: one
    # attempt, outcome_not_retryable, the code as the type.
    run 1 "$base/v1/responses?n=5&gap=10&error_at=0&error_event=response.failed&error_type=invalid_prompt"
    expect "attempt 1: outcome=provider_error phase=wait_first_item status=200 items=0 decision=stop reason=outcome_not_retryable type=invalid_prompt"
    expect "outcome=provider_error phase=wait_first_item attempts=1 tokens=0 partial=false reason=outcome_not_retryable"
    expect 'provider error: type=invalid_prompt message="scripted failure"'
    check "one request" [ "$(log_count "event=received" '"event":"received"')" -eq 1 ]
    ;;
openai_responses:error_mid_stream)
    # The flat `event: error` (code server_error) after two deltas: the
    # tokens were shown, so the attempt is partial and never retried.
    run 1 "$base/v1/responses?n=5&gap=10&error_at=2"
    expect "tok0tok1"
    expect_not "tok2"
    expect "discard: attempt 1 ended provider_error after delivering tokens"
    expect "outcome=provider_error phase=streaming attempts=1 tokens=2 partial=true reason=partial_stream"
    expect 'provider error: type=server_error message="scripted failure"'
    expect '"provider_error":{"type":"server_error","message":"scripted failure"}'
    check "one request: a partial stream is not retried" \
        [ "$(log_count "event=received" '"event":"received"')" -eq 1 ]
    ;;
openai_responses:no_completed)
    # The three *.done events, then the body ends politely without
    # response.completed: truncated, the tokens discarded.
    run 1 "$base/v1/responses?n=5&gap=10&no_done=1"
    expect "tok0tok1tok2tok3tok4"
    expect "discard: attempt 1 ended truncated after delivering tokens"
    expect "outcome=truncated phase=streaming attempts=1 tokens=5 partial=true reason=partial_stream"
    expect_log "event=finished" '"reason":"no_done"'
    check "one request" [ "$(log_count "event=received" '"event":"received"')" -eq 1 ]
    ;;
anthropic_messages:ok)
    # event: ping every 3 ms between the deltas: keepalives, not events.
    run 0 "$base/v1/messages?n=5&gap=10&keepalive=3"
    expect "[message_start]"
    expect "tok0tok1tok2tok3tok4"
    expect "[message_stop]"
    expect_not "[ping]"
    expect "outcome=ok phase=streaming attempts=1 events=10 partial=false reason=ok"
    expect "first_token_ms="
    expect_not "first_token_ms=none"
    expect 'report: {"version":1,"label":"anthropic messages"'
    ;;
anthropic_messages:overloaded)
    # event: error (overloaded_error) before the first token: nothing was
    # delivered (message_start was held), the type is transient and the
    # request has an idempotency key, so it is retried - three times.
    run 1 "$base/v1/messages?n=5&gap=10&error_at=0"
    expect_not "[message_start]"
    expect "attempt 1: outcome=provider_error phase=wait_first_item status=200 items=0 decision=retry reason=retryable type=overloaded_error"
    expect "outcome=provider_error phase=wait_first_item attempts=3 events=0 partial=false reason=attempts_exhausted"
    expect 'provider error: type=overloaded_error message="scripted failure"'
    check "three requests" [ "$(log_count "event=received" '"event":"received"')" -eq 3 ]
    ;;
anthropic_messages:error_mid_stream)
    # The same error after two tokens: partial, so never retried.
    run 1 "$base/v1/messages?n=5&gap=10&error_at=2&error_type=rate_limit_error"
    expect "tok0tok1"
    expect "discard: attempt 1 ended provider_error after delivering events"
    expect "outcome=provider_error phase=streaming attempts=1 events=4 partial=true reason=partial_stream"
    expect 'provider error: type=rate_limit_error message="scripted failure"'
    check "one request" [ "$(log_count "event=received" '"event":"received"')" -eq 1 ]
    ;;
anthropic_messages:first_token_timeout)
    # message_start, content_block_start and pings at once, the first delta
    # 2 s later: first_item_timeout at 300 ms, nothing shown, retried.
    run 1 "$base/v1/messages?n=3&first_delay=2000&keepalive=50" 300
    expect_not "[message_start]"
    expect "outcome=first_item_timeout phase=wait_first_item attempts=3 events=0 partial=false reason=attempts_exhausted"
    expect "first_token_ms=none"
    ;;
anthropic_messages:no_message_stop)
    # The body ends politely but without message_stop: truncated, discard.
    run 1 "$base/v1/messages?n=5&gap=10&no_done=1"
    expect "tok0tok1tok2tok3tok4"
    expect "discard: attempt 1 ended truncated after delivering events"
    expect "outcome=truncated phase=streaming attempts=1 events=7 partial=true reason=partial_stream"
    ;;
ollama_ndjson:ok)
    # format=ollama: /api/chat's own lines (message.content, "done":true);
    # empty keepalive lines every 3 ms are not lines.
    run 0 "$base/api/chat?format=ollama&n=5&gap=10&keepalive=3"
    expect "tok0tok1tok2tok3tok4"
    expect "outcome=ok phase=streaming attempts=1 lines=6 partial=false"
    expect "first_token_ms="
    expect_not "first_token_ms=none"
    ;;
ollama_ndjson:runaway)
    run 1 "$base/api/chat?format=ollama&runaway=1&gap=0" 60000 100
    expect "tok99"
    expect "discard: attempt 1 ended cap_exceeded after delivering lines"
    expect "outcome=cap_exceeded phase=streaming attempts=1 lines=100 partial=true"
    ;;
ollama_ndjson:drop)
    run 1 "$base/api/chat?format=ollama&n=5&gap=10&drop_after=2"
    expect "tok0tok1"
    expect "outcome=truncated phase=streaming attempts=1 lines=2 partial=true"
    ;;
ollama_ndjson:no_done)
    # The body ends on a line boundary, politely, but without "done":true.
    run 1 "$base/api/chat?format=ollama&n=5&gap=10&no_done=1"
    expect "tok0tok1tok2tok3tok4"
    expect "outcome=truncated phase=streaming attempts=1 lines=5 partial=true"
    ;;
ollama_ndjson:provider_error)
    # {"error":"..."} after two lines: Ollama names no type, only a message.
    run 1 "$base/api/chat?format=ollama&n=5&gap=10&error_at=2"
    expect "tok0tok1"
    expect "outcome=provider_error phase=streaming attempts=1 lines=2 partial=true"
    expect 'provider error: type=error message="server_error: scripted failure"'
    ;;
ollama_ndjson:first_token_timeout)
    # The model "loads" for 2 s, sending empty keepalive lines every 50 ms:
    # they satisfy no clock, so the 300 ms first-token clock fires.  A POST
    # without an idempotency key is not retried.
    run 1 "$base/api/chat?format=ollama&n=3&first_delay=2000&keepalive=50" 300
    expect "outcome=first_item_timeout phase=wait_first_item attempts=1 lines=0 partial=false"
    expect "first_token_ms=none"
    check "one request" [ "$(log_count "event=received" '"event":"received"')" -eq 1 ]
    ;;
deadline_service:ok)
    run 0 2000 "$base/v1/chat/completions?n=3&gap=10"
    expect "local budget 19"
    expect "outcome=ok phase=streaming attempts=1 items=3 reason=ok"
    expect "answer: 200"
    # The upstream got the lease: at most 2000 - 50 (allowance) - 100 (floor).
    ms=$(fm_log "event=received" | sed -n 's/.*"x_deadline_ms":"\([0-9]*\)".*/\1/p')
    if [ -n "$ms" ] && [ "$ms" -le 1850 ] && [ "$ms" -ge 1500 ]; then
        pass "upstream received X-Deadline-Ms: $ms"
    else
        fail "upstream X-Deadline-Ms is '$ms', expected 1500..1850"
    fi
    # ... what was left of the lease when the request went: at most the
    # lease, less the connect
    lease=$(sed -n 's/.*leased \([0-9]*\) ms.*/\1/p' "$out" | head -n 1)
    if [ -n "$lease" ] && [ -n "$ms" ] && [ "$ms" -le "$lease" ] && [ "$ms" -ge $((lease - 50)) ]; then
        pass "X-Deadline-Ms $ms: the lease ($lease ms) less the connect"
    else
        fail "X-Deadline-Ms '$ms' against the lease '$lease'"
    fi
    ;;
deadline_service:budget_exhausted)
    # 400 ms inbound leaves a 250 ms lease; the first token takes 2 s.
    run 1 400 "$base/v1/chat/completions?first_delay=2000"
    expect "outcome=budget_exhausted phase=wait_first_item attempts=1 items=0 reason=budget_exhausted"
    expect "answer: 504"
    ms=$(fm_log "event=received" | sed -n 's/.*"x_deadline_ms":"\([0-9]*\)".*/\1/p')
    if [ -n "$ms" ] && [ "$ms" -le 250 ]; then
        pass "upstream received X-Deadline-Ms: $ms"
    else
        fail "upstream X-Deadline-Ms is '$ms', expected <= 250"
    fi
    ;;
deadline_service:refused)
    # 120 ms inbound, 50 ms allowance: 70 ms left, below the 100 ms floor.
    run 1 120 "$base/v1/chat/completions"
    expect "outcome=refused phase=none attempts=0 items=0 reason=budget_below_floor"
    expect "answer: 504"
    check "the upstream was never dialled" \
        [ "$(log_count "event=received" '"event":"received"')" -eq 0 ]
    ;;
deadline_service:malformed)
    run 1 "-5" "$base/v1/chat/completions"
    expect "rejected: EMALFORMED"
    expect "answer: 400"
    check "the upstream was never dialled" \
        [ "$(log_count "event=received" '"event":"received"')" -eq 0 ]
    ;;
h2_multiplex:one_stalls)
    run 0 127.0.0.1 "$FM_PORT"
    wait_log "event=finished" '"items":30'
    expect "fast: outcome=ok phase=streaming attempts=1 items=5 partial=false"
    expect "stall: discard the 2 tokens of attempt 1 (idle_timeout)"
    expect "stall: outcome=idle_timeout phase=streaming attempts=1 items=2 partial=true reason=partial_stream"
    expect "long: outcome=ok phase=streaming attempts=1 items=30 partial=false"
    expect "connection usable=true"
    # On the server: one connection, the stalled stream alone reset with
    # CANCEL, the long one finished after that reset.
    conns=$(fm_log "event=received" | sed -n 's/.*"conn":\([0-9]*\).*/\1/p' | sort -u | grep -c .)
    check "three streams on one connection ($conns)" [ "$conns" -eq 1 ]
    expect_log "event=client_gone" '"reason":"rst_stream","items":2'
    expect_log "event=client_gone" '"h2_error":"CANCEL"'
    check "only the stalled stream was reset" \
        [ "$(log_count "event=client_gone" '"event":"client_gone"')" -eq 1 ]
    gone=$(fm_log "event=client_gone" | sed -n 's/.*"t_ns":\([0-9]*\).*/\1/p')
    last=$(fm_log "event=finished" | sed -n 's/.*"t_ns":\([0-9]*\).*/\1/p' | sort -n | tail -n 1)
    check "the long stream went on after the reset" later_than "$gone" "$last"
    ;;
*)
    echo "unknown scenario $prog:$scenario" >&2
    exit 2
    ;;
esac

fm_finish
