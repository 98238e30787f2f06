#!/usr/bin/env bash
# sg-proxy with real clients: the official openai and @anthropic-ai/sdk
# SDKs (pinned in package.json, installed by scripts/setup.sh) pointed at
# one sg-proxy each (--profile openai, --profile anthropic), sg-fakemodel
# as the upstream; proxy_check.mjs runs the scenarios and prints one
# ok/FAIL line per check (a normal stream, a slow first token retried
# invisibly, a stall and a cut raised by the SDK, a 429 then success, a
# 504 before commit, an inbound X-Deadline-Ms).
# Usage: proxy_sdk_test.sh SG_PROXY SG_FAKEMODEL
set -u
PX=$1
FM=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

for pkg in openai @anthropic-ai/sdk; do
    if [ ! -d "$dir/node_modules/$pkg" ]; then
        echo "the SDKs are not installed ($pkg): run scripts/setup.sh (npm ci in tests/sdk)" >&2
        exit 1
    fi
done

PX_PIDS=()
px_cleanup() {
    local p
    for p in "${PX_PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    fm_cleanup
}
trap px_cleanup EXIT

# px_start NAME PROFILE: a proxy on 127.0.0.1:0 in front of sg-fakemodel;
# sets PX_PORT.
IDLE_MS=300
px_start() {
    "$PX" --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$FM_PORT" --profile "$2" \
        --first-item "${IDLE_MS}ms" --idle "${IDLE_MS}ms" --attempts 3 --backoff-base 5ms \
        --backoff-max 20ms --budget 10s >"$FM_DIR/$1.out" 2>"$FM_DIR/$1.err" &
    PX_PIDS+=($!)
    for _ in $(seq 1 200); do
        [ "$(wc -l <"$FM_DIR/$1.out")" -ge 1 ] && break
        sleep 0.05
    done
    PX_PORT=$(head -n 1 "$FM_DIR/$1.out")
    case "$PX_PORT" in
    '' | *[!0-9]*)
        echo "sg-proxy --profile $2 did not print its port; stderr:" >&2
        cat "$FM_DIR/$1.err" >&2
        exit 1
        ;;
    esac
}

fm_start "$FM"
px_start openai openai
PO=$PX_PORT
px_start anthropic anthropic
PA=$PX_PORT
node "$dir/proxy_check.mjs" "http://127.0.0.1:$PO" "http://127.0.0.1:$PA" \
    "http://127.0.0.1:$FM_PORT" "$IDLE_MS" >"$FM_DIR/checks" 2>"$FM_DIR/node.err"
rc=$?
cat "$FM_DIR/checks"
if [ "$rc" -ne 0 ]; then
    FM_FAILS=$((FM_FAILS + $(grep -c '^FAIL:' "$FM_DIR/checks")))
    if [ ! -s "$FM_DIR/checks" ] || ! grep -q '^FAIL:' "$FM_DIR/checks"; then
        fail "node proxy_check.mjs exited $rc: $(head -c 400 "$FM_DIR/node.err")"
    fi
fi
for p in "${PX_PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null
done
fm_finish
