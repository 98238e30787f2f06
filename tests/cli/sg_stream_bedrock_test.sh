#!/usr/bin/env bash
# Bedrock end to end: sg-stream --profile bedrock-converse / bedrock-invoke,
# signing with --aws-sigv4, against sg-fakemodel playing Bedrock's event
# streams behind its SigV4 verifier (--sigv4-key, a test key).  What each
# scenario must become:
#  - a normal ConverseStream: ok, every event printed, the time to first
#    token the first contentBlockDelta's (messageStart is metadata);
#  - InvokeModelWithResponseStream (Claude's events, base64 in each chunk):
#    ok, the model's message_stop the end;
#  - a slow first token (only the first attempt's): first_item_timeout, then
#    the retry streams ok;
#  - throttlingException before the first token: provider_error, retried
#    (an idempotency key makes the POST safe to repeat); after the first
#    token: partial, never retried;
#  - modelStreamErrorException before the first token: not retried;
#  - a damaged message CRC and a damaged prelude CRC: protocol_error;
#  - a message cut in the middle: truncated; the stream ending before
#    messageStop: truncated;
#  - a wrong secret: Bedrock's 403, http_error, nothing streamed.
# Scenario knobs travel in X-SG-Scenario, which libcurl signs like any
# header (its 7.88 signer signs a query as written, unsorted).
# Usage: sg_stream_bedrock_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
FM=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

KEY_ID=AKIDSGFAKEMODELTEST
SECRET=sg-fakemodel-test-secret-never-real
fm_start "$FM" --sigv4-key "$KEY_ID:$SECRET"
BASE=http://127.0.0.1:$FM_PORT
CONVERSE=$BASE/model/sg-fake/converse-stream
INVOKE=$BASE/model/sg-fake/invoke-with-response-stream
OUT=$FM_DIR/out.txt
ERR=$FM_DIR/err.txt
BODY='{"messages":[{"role":"user","content":[{"text":"hi"}]}]}'
W='%{outcome} attempts=%{attempts} first=%{first_token_ms} type=%{provider_error} http=%{http_status}\n'

# run PROFILE SCENARIO URL [ARGS...]: sg-stream, signed, with the scenario
run() {
    local profile=$1 scenario=$2 url=$3
    shift 3
    AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$SECRET \
        "$SG" --profile "$profile" --aws-sigv4 aws:amz:us-east-1:bedrock -d "$BODY" \
        -H "X-SG-Scenario: $scenario" -w "$W" "$@" "$url" >"$OUT" 2>"$ERR"
    echo $?
}

# outcome_is WANT WHAT: the -w line (the last of stdout) starts with WANT
outcome_is() {
    local got
    got=$(tail -n 1 "$OUT")
    case $got in
    "$1 "*) pass "$2: $got" ;;
    *) fail "$2: '$got', wanted $1; stderr: $(head -c 300 "$ERR")" ;;
    esac
}

attempts_are() {
    grep -q "attempts=$1 " <(tail -n 1 "$OUT") && pass "$2: $1 attempt(s)" ||
        fail "$2: $(tail -n 1 "$OUT")"
}

# ---- normal streams ---------------------------------------------------------
rc=$(run bedrock-converse "n=3&first_delay=300" "$CONVERSE" --output data)
[ "$rc" -eq 0 ] && pass "converse: exit 0" || fail "converse: exit $rc: $(cat "$ERR")"
outcome_is ok "converse"
grep -c '"delta":{"text":"tok' "$OUT" | grep -qx 3 && pass "three tokens printed" ||
    fail "tokens: $(cat "$OUT")"
has "$OUT" '"stopReason":"end_turn"' "messageStop printed"
has "$OUT" '"usage":{' "metadata after messageStop printed"
# the first item is the first token's, 300 ms in; messageStart came at once
first=$(tail -n 1 "$OUT" | sed 's/.*first=//; s/ .*//')
[ "${first:-0}" -ge 290 ] && [ "$first" -lt 1000 ] &&
    pass "time to first token ${first} ms (messageStart held, not the first item)" ||
    fail "time to first token ${first} ms"

rc=$(run bedrock-invoke "n=4" "$INVOKE" --output none)
[ "$rc" -eq 0 ] && pass "invoke: exit 0" || fail "invoke: exit $rc: $(cat "$ERR")"
outcome_is ok "invoke (the model's message_stop inside the last chunk)"

# ---- the first token slow on the first attempt only ---------------------------
REP=$FM_DIR/report.json
rc=$(run bedrock-converse "n=3&tail_first=1&tail_delay=2000" "$CONVERSE" --output none \
    --first-item 300ms --attempts 3 --idempotency-key br-slow --report "$REP")
outcome_is ok "slow first token, then a fast retry"
attempts_are 2 "slow first token"
has "$REP" '"outcome":"first_item_timeout"' "the first attempt's timeout in the report"

# ---- in-band exceptions -----------------------------------------------------
rc=$(run bedrock-converse "error_at=0&n=3" "$CONVERSE" --output none --attempts 3 \
    --idempotency-key br-throttle)
[ "$rc" -eq 7 ] && pass "throttling every attempt: exit 7" || fail "throttling: exit $rc"
outcome_is provider_error "throttling before the first token"
attempts_are 3 "throttling before the first token (transient: retried)"
has "$ERR" "sg-fakemodel scripted failure" "the exception's message reported"
has "$OUT" "type=throttlingException" "its type in %{provider_error}"

rc=$(run bedrock-converse "error_at=1&n=3" "$CONVERSE" --output none --attempts 3 \
    --idempotency-key br-throttle-late)
outcome_is provider_error "throttling after the first token"
attempts_are 1 "throttling after the first token (partial: never retried)"
has "$ERR" "partial" "said partial"

rc=$(run bedrock-converse "error_at=0&error_type=modelStreamErrorException&n=3" \
    "$CONVERSE" --output none --attempts 3 --idempotency-key br-model-err)
outcome_is provider_error "modelStreamErrorException"
attempts_are 1 "modelStreamErrorException (not transient)"

# ---- damaged and cut streams --------------------------------------------------
rc=$(run bedrock-converse "bad_crc_at=1&n=3" "$CONVERSE" --output none)
[ "$rc" -eq 8 ] && pass "bad message CRC: exit 8" || fail "bad message CRC: exit $rc"
outcome_is protocol_error "bad message CRC"
has "$ERR" "CRC32" "the error names the CRC"
rc=$(run bedrock-converse "bad_crc=prelude&bad_crc_at=0&n=3" "$CONVERSE" --output none)
outcome_is protocol_error "bad prelude CRC"
rc=$(run bedrock-converse "cut_at=2&n=3" "$CONVERSE" --output none)
outcome_is truncated "a message cut in the middle"
rc=$(run bedrock-converse "n=3&no_done=1" "$CONVERSE" --output none)
outcome_is truncated "the stream ending before messageStop"

# ---- the signature ------------------------------------------------------------
AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=not-the-secret \
    "$SG" --profile bedrock-converse --aws-sigv4 aws:amz:us-east-1:bedrock -d "$BODY" \
    -w "$W" --output data "$CONVERSE" >"$OUT" 2>"$ERR"
outcome_is http_error "a wrong secret"
has "$OUT" "http=403" "Bedrock's 403"
grep -q 'tok0' "$OUT" && fail "streamed without a valid signature" || pass "nothing streamed"

fm_finish
