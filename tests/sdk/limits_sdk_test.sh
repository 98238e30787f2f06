#!/usr/bin/env bash
# sg-fakemodel's limits read by the providers' own clients: the official
# openai and @anthropic-ai/sdk SDKs (pinned in package.json, installed by
# scripts/setup.sh), with their retries on, against the rate limiter's
# 429s in either style (retry-after-ms, retry-after) and an upstream that
# fails N times then recovers; limits_check.mjs prints one ok/FAIL line
# per check.
# Usage: limits_sdk_test.sh SG_FAKEMODEL
set -u
FM=$1
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

for pkg in openai @anthropic-ai/sdk; do
    if [ ! -d "$dir/node_modules/$pkg" ]; then
        echo "the SDKs are not installed ($pkg): run scripts/setup.sh (npm ci in tests/sdk)" >&2
        exit 1
    fi
done
fm_start "$FM"
node "$dir/limits_check.mjs" "http://127.0.0.1:$FM_PORT" >"$FM_DIR/checks" 2>"$FM_DIR/node.err"
rc=$?
cat "$FM_DIR/checks"
FM_FAILS=$((FM_FAILS + $(grep -c '^FAIL:' "$FM_DIR/checks")))
if [ "$rc" -ne 0 ] && ! grep -q '^FAIL:' "$FM_DIR/checks"; then
    fail "node limits_check.mjs exited $rc: $(head -c 400 "$FM_DIR/node.err")"
fi
[ "$(grep -c '^ok:' "$FM_DIR/checks")" -ge 20 ] ||
    fail "limits_check.mjs ran $(grep -c '^ok:' "$FM_DIR/checks") checks that passed, expected 20"
fm_finish
