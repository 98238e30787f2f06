#!/usr/bin/env bash
# sg-fakemodel's imitations of the providers, checked against the
# providers' own clients: the official SDKs (openai, @anthropic-ai/sdk,
# ollama; pinned in package.json and package-lock.json, installed by
# scripts/setup.sh) read each scripted stream - normal, metadata first,
# keepalive events, an in-band error, an error then the sentinel - and what
# they make of it (text, error class and type) must be what the scenario
# scripted, as expected.jsonl records it; and `sg-stream --profile` on the
# same streams must agree with each SDK: the same text, an error exactly
# when the SDK raised one, the same error type when the SDK names one.
# Usage: sdk_test.sh SG_FAKEMODEL SG_STREAM
set -u
FM=$1
SG=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

if [ ! -d "$dir/node_modules/openai" ]; then
    echo "the SDKs are not installed: run scripts/setup.sh (npm ci in tests/sdk)" >&2
    exit 1
fi
fm_start "$FM"
if ! node "$dir/check.mjs" "http://127.0.0.1:$FM_PORT" "$SG" >"$FM_DIR/got.jsonl" 2>"$FM_DIR/node.err"; then
    fail "node check.mjs: $(head -c 400 "$FM_DIR/node.err")"
fi
while IFS= read -r want; do
    name=$(sed 's/^{"case":"\([^"]*\)".*/\1/' <<<"$want")
    got=$(grep -F "{\"case\":\"$name\",\"text\"" "$FM_DIR/got.jsonl")
    if [ "$got" = "$want" ]; then
        pass "$name: the SDK reads what was scripted"
    else
        fail "$name: the SDK made $got, expected $want"
    fi
    both=$(grep -F "{\"case\":\"$name\",\"agree\"" "$FM_DIR/got.jsonl")
    case "$both" in
    *'"agree":true'*) pass "$name: sg-stream --profile agrees with the SDK" ;;
    *) fail "$name: sg-stream and the SDK disagree: $both" ;;
    esac
done <"$dir/expected.jsonl"
fm_finish
