#!/usr/bin/env bash
# sg-fakemodel's imitations of the providers, checked against the
# providers' own clients: the official SDKs (openai, @anthropic-ai/sdk,
# ollama; pinned in package.json and package-lock.json, installed by
# scripts/setup.sh) read each scripted stream - normal, metadata first,
# keepalive events, an in-band error, an error then the sentinel - and what
# they make of it (text, error class and type) must be what the scenario
# scripted, as expected.jsonl records it.
# Usage: sdk_test.sh SG_FAKEMODEL
set -u
FM=$1
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

if [ ! -d "$dir/node_modules/openai" ]; then
    echo "the SDKs are not installed: run scripts/setup.sh (npm ci in tests/sdk)" >&2
    exit 1
fi
fm_start "$FM"
if ! node "$dir/check.mjs" "http://127.0.0.1:$FM_PORT" >"$FM_DIR/got.jsonl" 2>"$FM_DIR/node.err"; then
    fail "node check.mjs: $(head -c 400 "$FM_DIR/node.err")"
fi
while IFS= read -r want; do
    name=$(sed 's/^{"case":"\([^"]*\)".*/\1/' <<<"$want")
    got=$(grep -F "{\"case\":\"$name\"," "$FM_DIR/got.jsonl")
    if [ "$got" = "$want" ]; then
        pass "$name"
    else
        fail "$name: the SDK made $got, expected $want"
    fi
done <"$dir/expected.jsonl"
fm_finish
