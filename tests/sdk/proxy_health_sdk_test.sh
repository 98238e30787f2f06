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
dir=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../cli/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

for pkg in openai @anthropic-ai/sdk; do
    if [ ! -d "$dir/node_modules/$pkg" ]; then
        echo "the SDKs are not installed ($pkg): run scripts/setup.sh (npm ci in tests/sdk)" >&2
        exit 1
    fi
done

px_upstream
# a budget shorter than the upstream's 4 s window: the proxy answers
# rather than waits
px_start openai --upstream "$UP" --profile openai --budget 2s --attempts 1
PO=$PX_PORT
px_start anthropic --upstream "$UP" --profile anthropic --budget 2s --attempts 1
PA=$PX_PORT
node "$dir/proxy_health_check.mjs" "http://127.0.0.1:$PO" "http://127.0.0.1:$PA" \
    "http://127.0.0.1:$FM_PORT" >"$FM_DIR/checks" 2>"$FM_DIR/node.err"
rc=$?
cat "$FM_DIR/checks"
FM_FAILS=$((FM_FAILS + $(grep -c '^FAIL:' "$FM_DIR/checks")))
if [ "$rc" -ne 0 ] && ! grep -q '^FAIL:' "$FM_DIR/checks"; then
    fail "node proxy_health_check.mjs exited $rc: $(head -c 400 "$FM_DIR/node.err")"
fi
[ "$(grep -c '^ok:' "$FM_DIR/checks")" -ge 12 ] ||
    fail "proxy_health_check.mjs ran $(grep -c '^ok:' "$FM_DIR/checks") checks that passed, expected 12"
px_stop_all
fm_finish
