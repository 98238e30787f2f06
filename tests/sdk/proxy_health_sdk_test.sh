#!/usr/bin/env bash
# sg-proxy's endpoint health with real clients: the official openai and
# @anthropic-ai/sdk SDKs (pinned in package.json, installed by
# scripts/setup.sh) pointed at one sg-proxy each, sg-fakemodel as a
# rate-limited upstream; proxy_health_check.mjs checks that a request the
# proxy refuses locally is the SDK's RateLimitError, and that the SDK,
# retrying by default, waits the Retry-After given and is then served with
# one upstream request (one ok/FAIL line per check).
# Usage: proxy_health_sdk_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/../cli/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream
. "$(dirname "$0")/sdk_lib.sh"
sdk_require openai @anthropic-ai/sdk

px_upstream
# a budget shorter than the upstream's 4 s window: the proxy answers
# rather than waits
px_start openai --upstream "$UP" --profile openai --budget 2s --attempts 1
PO=$PX_PORT
px_start anthropic --upstream "$UP" --profile anthropic --budget 2s --attempts 1
PA=$PX_PORT
sdk_run 12 proxy_health_check.mjs "http://127.0.0.1:$PO" "http://127.0.0.1:$PA" \
    "http://127.0.0.1:$FM_PORT"
px_stop_all
fm_finish
