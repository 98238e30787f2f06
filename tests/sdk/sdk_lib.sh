# shellcheck shell=bash
# Shared helpers for the SDK tests (tests/sdk/*_test.sh); sourced after
# fakemodel_lib.sh (fail, FM_DIR, FM_FAILS), not run.

SDK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# sdk_require PACKAGE...: exits 1, saying how to install them, unless every
# PACKAGE is in tests/sdk/node_modules.
sdk_require() {
    local pkg
    for pkg in "$@"; do
        if [ ! -d "$SDK_DIR/node_modules/$pkg" ]; then
            echo "the SDKs are not installed ($pkg): run scripts/setup.sh (npm ci in tests/sdk)" >&2
            exit 1
        fi
    done
}

# sdk_run MIN SCRIPT [ARGS...]: node SCRIPT (of tests/sdk) ARGS, which
# prints one "ok: ..." or "FAIL: ..." line per check (checklines.mjs):
# its lines shown and kept in $FM_DIR/checks, each FAIL counted as a
# failure, and one more when it ended in error without a FAIL line or
# passed fewer than MIN checks.
sdk_run() {
    local min=$1 script=$2 rc=0
    shift 2
    node "$SDK_DIR/$script" "$@" >"$FM_DIR/checks" 2>"$FM_DIR/node.err" || rc=$?
    cat "$FM_DIR/checks"
    FM_FAILS=$((FM_FAILS + $(grep -c '^FAIL:' "$FM_DIR/checks")))
    if [ "$rc" -ne 0 ] && ! grep -q '^FAIL:' "$FM_DIR/checks"; then
        fail "node $script exited $rc: $(head -c 400 "$FM_DIR/node.err")"
    fi
    local passed
    passed=$(grep -c '^ok:' "$FM_DIR/checks")
    [ "$passed" -ge "$min" ] || fail "$script ran $passed checks that passed, expected $min"
}
