#!/usr/bin/env bash
# sg-fakemodel's Bedrock imitations read by AWS's own client
# (@aws-sdk/client-bedrock-runtime, pinned in package.json and
# package-lock.json, installed by scripts/setup.sh), which signs every
# request with its own SigV4 signer for sg-fakemodel --sigv4-key to verify;
# and sg-stream --profile bedrock-converse|bedrock-invoke on the same
# streams agreeing with it (bedrock_check.mjs says what is checked).
# Usage: bedrock_sdk_test.sh SG_FAKEMODEL SG_STREAM
set -u
FM=$1
SG=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

if [ ! -d "$dir/node_modules/@aws-sdk/client-bedrock-runtime" ]; then
    echo "the AWS SDK is not installed: run scripts/setup.sh (npm ci in tests/sdk)" >&2
    exit 1
fi
KEY_ID=AKIDSGFAKEMODELTEST
SECRET=sg-fakemodel-test-secret-never-real
fm_start "$FM" --sigv4-key "$KEY_ID:$SECRET"
# The SDK warns on stderr that its later versions need Node 22: not ours.
if node "$dir/bedrock_check.mjs" "http://127.0.0.1:$FM_PORT" "$SG" "$KEY_ID" "$SECRET" \
    >"$FM_DIR/got.txt" 2>"$FM_DIR/node.err"; then
    cat "$FM_DIR/got.txt"
else
    cat "$FM_DIR/got.txt"
    fail "bedrock_check.mjs: $(grep -c '^FAIL' "$FM_DIR/got.txt") check(s) failed; $(grep -v Warning "$FM_DIR/node.err" | head -c 300)"
fi
grep -q '^ok: ' "$FM_DIR/got.txt" || fail "no check ran"
fm_finish
