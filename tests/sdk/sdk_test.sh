#!/usr/bin/env bash
# sg-fakemodel's imitations of the providers, checked against the
# providers' own clients: the official SDKs (openai - Chat Completions and
# the Responses API -, @anthropic-ai/sdk, @google/genai, ollama; pinned in
# package.json and package-lock.json, installed by scripts/setup.sh) read
# each scripted stream - normal, metadata first, a slow first token,
# keepalives, an in-band error before and after the first token, an error
# then the sentinel, a stream without its clean end - and what they make of
# it (text, error class and type) must be what the scenario scripted, as
# expected.jsonl records it; and `sg-stream --profile` on the same streams
# must agree with each SDK: the same text, an error exactly when the SDK
# raised one, the same error type when the SDK names one, the first token
# after a first_delay.  A case where the two are known to disagree has a
# line {"case", "known", "why"} in expected.jsonl: check.mjs must then
# report exactly that disagreement (never agreement), or the test fails.
# Usage: sdk_test.sh SG_FAKEMODEL SG_STREAM
set -u
FM=$1
SG=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"
. "$dir/sdk_lib.sh"
sdk_require openai @anthropic-ai/sdk @google/genai ollama
fm_start "$FM"
if ! node "$dir/check.mjs" "http://127.0.0.1:$FM_PORT" "$SG" >"$FM_DIR/got.jsonl" 2>"$FM_DIR/node.err"; then
    fail "node check.mjs: $(head -c 400 "$FM_DIR/node.err")"
fi
cases=0
while IFS= read -r want; do
    case "$want" in
    *'","text":'*) ;;
    *) continue ;; # a known-disagreement line, read with its case below
    esac
    cases=$((cases + 1))
    name=$(sed 's/^{"case":"\([^"]*\)".*/\1/' <<<"$want")
    got=$(grep -F "{\"case\":\"$name\",\"text\"" "$FM_DIR/got.jsonl")
    if [ "$got" = "$want" ]; then
        pass "$name: the SDK reads what was scripted"
    else
        fail "$name: the SDK made $got, expected $want"
    fi
    both=$(grep -F "{\"case\":\"$name\",\"agree\"" "$FM_DIR/got.jsonl")
    known=$(grep -F "{\"case\":\"$name\",\"known\":" "$dir/expected.jsonl" |
        sed 's/.*"known":"\([^"]*\)".*/\1/')
    if [ -n "$known" ]; then
        case "$both" in
        *'"agree":false,"known":"'"$known"'"'*)
            pass "$name: sg-stream --profile and the SDK disagree as documented: $known" ;;
        *) fail "$name: expected the known disagreement $known, got: $both" ;;
        esac
    else
        case "$both" in
        *'"agree":true'*) pass "$name: sg-stream --profile agrees with the SDK" ;;
        *) fail "$name: sg-stream and the SDK disagree: $both" ;;
        esac
    fi
done <"$dir/expected.jsonl"
ran=$(grep -c '","text":' "$FM_DIR/got.jsonl")
if [ "$ran" -ne "$cases" ]; then
    fail "check.mjs ran $ran cases, expected.jsonl has $cases"
fi
fm_finish
