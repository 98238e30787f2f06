#!/usr/bin/env bash
# sg-proxy with real clients: the official openai and @anthropic-ai/sdk
# SDKs (pinned in package.json, installed by scripts/setup.sh) pointed at
# one sg-proxy each (--profile openai, --profile anthropic), sg-fakemodel
# as the upstream; proxy_check.mjs runs the scenarios and prints one
# ok/FAIL line per check (a normal stream, a slow first token retried
# invisibly, a stall and a cut raised by the SDK, a 429 then success, a
# 504 before commit, an inbound X-Deadline-Ms; with the SDKs' own retries
# on, as by default, no more upstream requests than the route's attempts,
# and the SDK's error within its timeout; through a route with
# --include-usage, the usage chunk it then gets read as the SDK reads it).
# Usage: proxy_sdk_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/../cli/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream
. "$(dirname "$0")/sdk_lib.sh"
sdk_require openai @anthropic-ai/sdk

IDLE_MS=300
# px PROFILE: a proxy in front of sg-fakemodel with that profile and
# IDLE_MS for its first-token and idle clocks; sets PX_PORT.
px() {
    px_start "$1" --upstream "http://127.0.0.1:$FM_PORT" --profile "$1" \
        --first-item "${IDLE_MS}ms" --idle "${IDLE_MS}ms" --attempts 3 --backoff-base 5ms \
        --backoff-max 20ms --budget 10s
}

px_upstream
px openai
PO=$PX_PORT
px anthropic
PA=$PX_PORT
# and one each without a first-token clock: a stream that never starts
# waits the whole budget - the client's own, when it sends one
for p in openai anthropic; do
    px_start "$p-nofirst" --upstream "http://127.0.0.1:$FM_PORT" --profile "$p" --attempts 3 \
        --idempotent --backoff-base 5ms --backoff-max 20ms --budget 20s
    eval "PN_$p=\$PX_PORT"
done
# and one that asks OpenAI Chat Completions streams for their usage chunk
px_start openai-usage --upstream "http://127.0.0.1:$FM_PORT" --profile openai --include-usage
PU=$PX_PORT
# shellcheck disable=SC2154 # set by the eval above
sdk_run 1 proxy_check.mjs "http://127.0.0.1:$PO" "http://127.0.0.1:$PA" \
    "http://127.0.0.1:$FM_PORT" "$IDLE_MS" "http://127.0.0.1:$PN_openai" \
    "http://127.0.0.1:$PN_anthropic" "http://127.0.0.1:$PU"
# the SDKs' API keys (SDKSECRET in proxy_check.mjs) never reach a report line
if grep -qF SDKSECRET "$FM_DIR/openai.out" "$FM_DIR/openai.err" "$FM_DIR/anthropic.out" "$FM_DIR/anthropic.err"; then
    fail "an API key is in sg-proxy's output: $(grep -lF SDKSECRET "$FM_DIR"/*.out "$FM_DIR"/*.err)"
else
    pass "no API key in sg-proxy's report lines or stderr"
fi
px_stop_all
fm_finish
