#!/usr/bin/env bash
# sg-stream's usage and cost, against sg-fakemodel: the price options and
# their errors; the -w variables %{input_tokens}, %{output_tokens},
# %{discarded_output_tokens} and %{cost} on a clean stream (OpenAI's and
# Anthropic's figures), a retried first-token timeout, stalls after
# tokens (an estimate, Gemini's own figures), a fallback, and with no
# usage or no price.
# Usage: sg_stream_usage_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
FM=$2
. "$(dirname "$0")/../integration/fakemodel_lib.sh"

OUT=$FM_DIR/stdout
ERR=$FM_DIR/stderr
fm_start "$FM"
BASE_URL=http://127.0.0.1:$FM_PORT
CHAT=$BASE_URL/v1/chat/completions

# ---- the price options --------------------------------------------------------
# bad ARGS... / WANT: a usage error on one line saying WANT, nothing dialled
bad() {
    local want=${*: -1}
    expect 2 "usage error: ${*:1:$#-1}" -- "${@:1:$#-1}" "$CHAT?n=1&_t=u_bad"
    if [ "$(wc -l <"$ERR")" -eq 1 ] && grep -qF -- "$want" "$ERR"; then
        pass "... one line saying '$want'"
    else
        fail "... wanted one line saying '$want': $(cat "$ERR")"
    fi
}
MSG="takes a price per million tokens, a decimal number from 0 to 1000000000 (digits with at most one point: 2.5, 0.075)"
for v in -1 +1 1e3 abc 1,5 '' . 1.2.3 1000000001 0x10 inf nan 2usd; do
    bad --price-in "$v" --price-out 1 "--price-in $MSG, not '$v'"
    bad --price-in 1 --price-out "$v" "--price-out $MSG, not '$v'"
    bad --price-in 1 --price-out 1 --price-cached "$v" "--price-cached $MSG, not '$v'"
done
bad --price-in 1 "--price-in needs --price-out"
bad --price-out 1 "--price-out needs --price-in"
bad --price-cached 1 "--price-cached needs --price-in and --price-out"
bad --price-in 1 --price-cached 1 "--price-in needs --price-out"
[ "$(fm_log "event=received" | grep -c '_t=u_bad')" -eq 0 ] &&
    pass "a bad price dials nothing" || fail "a request went with a bad price"
for ok in "--price-in 0 --price-out 0" "--price-in 2.5 --price-out 10 --price-cached 1.25" \
    "--price-in .5 --price-out 1. --price-cached 0" "--price-in 1000000000 --price-out 0.000001"; do
    # shellcheck disable=SC2086
    expect 0 "prices $ok: the run goes" -- $ok --profile openai "$CHAT?n=2"
done

# ---- -w: %{input_tokens} %{output_tokens} %{discarded_output_tokens} %{cost} ----
# The fake server's figures (docs/sg-fakemodel.md, USAGE): prompt_tokens
# input, cached_tokens of it cached, output the items plus reasoning_tokens.
W='%{input_tokens} %{output_tokens} %{discarded_output_tokens} %{cost}'
FIG='prompt_tokens=100&cached_tokens=40&reasoning_tokens=7'
ASK='{"stream":true,"stream_options":{"include_usage":true}}'
PRICES=(--price-in 2 --price-out 10 --price-cached 0.5)
# w WANT DESCRIPTION -- ARGS...: the run's -w line is WANT
w() {
    local want=$1 what=$2
    shift 3
    "$SG" -q --output none -w "$W" "$@" >"$OUT" 2>"$ERR"
    if [ "$(cat "$OUT")" = "$want" ]; then
        pass "$what: '$want'"
    else
        fail "$what: '$(cat "$OUT")', wanted '$want'; stderr: $(head -c 300 "$ERR")"
    fi
}
# the provider's figures, kept: (60 x 2 + 40 x 0.5 + 12 x 10) / 1e6
w "100 12 0 0.00026" "a clean OpenAI stream with its usage chunk" -- --profile openai \
    "${PRICES[@]}" -d "$ASK" "$CHAT?n=5&$FIG"
"$SG" -q --output none --profile openai "${PRICES[@]}" -d "$ASK" --report "$FM_DIR/clean.json" \
    "$CHAT?n=5&$FIG"
has "$FM_DIR/clean.json" '"cost":{"kept":0.00026,"discarded":0}' "... and the report says the same cost"
# Anthropic counts cache reads apart; the report's input includes them:
# (60 x 3 + 40 x 0.3 + 12 x 15) / 1e6
w "100 12 0 0.000372" "a clean Anthropic stream" -- --profile anthropic --price-in 3 \
    --price-out 15 --price-cached 0.3 -d '{}' "$BASE_URL/v1/messages?n=5&$FIG"
# a first attempt that times out before its first token, retried: the
# kept stream's figures, and the discarded prefill priced at the kept
# attempt's input (an estimate): 0.00026 + (60 x 2 + 40 x 0.5) / 1e6
w "100 12 0 0.0004" "a retried first-token timeout: its prefill in the cost" -- --profile openai \
    "${PRICES[@]}" --first-item 300ms --attempts 2 --idempotency-key u-retried \
    --backoff-base 5ms -d "$ASK" "$CHAT?n=5&$FIG&tail_first=1&tail_delay=2000"
# a stall after 3 tokens: nothing kept ('-'), the 3 delivered discarded
# (estimated from the text: 'tok0'... 4 bytes a token), 3 x 10 / 1e6
w "- - 3 0.00003" "a stall after 3 tokens: nothing kept" -- --profile openai "${PRICES[@]}" \
    --idle 200ms -d "$ASK" "$CHAT?n=9&stall_after=3&stall=forever"
# Gemini's running figures: the provider's own count at the stall,
# 3 items + 2 reasoning out, 50 in: (50 x 2 + 5 x 10) / 1e6
w "- - 5 0.00015" "a Gemini stall after 3 tokens: the provider's figures" -- --profile gemini \
    "${PRICES[@]}" --idle 200ms -d '{}' \
    "$BASE_URL/v1beta/models/m:streamGenerateContent?alt=sse&n=9&stall_after=3&stall=forever&prompt_tokens=50&reasoning_tokens=2"
# the same prices for every endpoint: the URL's attempt times out before
# its first token (nothing known of it on its endpoint - no other attempt
# there to copy its input from: its output '-', no cost), the fallback's
# stream is kept and priced
w "100 12 - 0.00026" "--fallback priced as the URL" -- --profile openai "${PRICES[@]}" \
    --first-item 300ms --attempts 2 --idempotency-key u-fallback --backoff-base 5ms -d "$ASK" \
    --fallback "$CHAT?n=5&$FIG" "$CHAT?n=5&$FIG&first_delay=2000"
# no usage asked (no include_usage): the kept output estimated, the input
# unknown; no price: no cost
w "- 3 0 -" "no usage chunk, no price" -- --profile openai "$CHAT?n=3"
# no profile: nothing is read, nothing estimated
w "- - 0 -" "no profile: no usage" -- "$CHAT?n=3"

fm_finish
