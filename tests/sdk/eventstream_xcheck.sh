#!/usr/bin/env bash
# streamguard's event-stream decoder against the reference codec: the
# pinned @smithy/eventstream-codec (package.json, package-lock.json;
# installed by scripts/setup.sh) encodes seeded random messages
# (eventstream_gen.mjs) and eventstream_check decodes them whole, split and
# one byte at a time, checking every header and payload against what the
# reference decoder read.  Exits 77 (ctest's skip) when the codec is not
# installed.
# Usage: eventstream_xcheck.sh EVENTSTREAM_CHECK [SEED]
set -u
check=$1
seed=${2:-19}
dir=$(cd "$(dirname "$0")" && pwd)
for pkg in @smithy/eventstream-codec @smithy/util-utf8; do
    if [ ! -d "$dir/node_modules/$pkg" ]; then
        echo "skipped: $pkg is not installed (run scripts/setup.sh: npm ci in tests/sdk)" >&2
        exit 77
    fi
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! node "$dir/eventstream_gen.mjs" "$out" "$seed"; then
    echo "0 passed, 1 failed: the reference codec could not write the messages"
    exit 1
fi
"$check" "$out"
