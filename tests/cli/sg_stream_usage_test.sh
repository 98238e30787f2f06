#!/usr/bin/env bash
# sg-stream's usage and cost, against sg-fakemodel: the price options and
# their errors.
# Usage: sg_stream_usage_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
FM=$2
. "$(dirname "$0")/../integration/fakemodel_lib.sh"

OUT=$FM_DIR/stdout
ERR=$FM_DIR/stderr
fm_start "$FM"
CHAT=http://127.0.0.1:$FM_PORT/v1/chat/completions

# ---- the price options --------------------------------------------------------
# bad ARGS... / WANT: a usage error on one line saying WANT, nothing dialled
bad() {
    local want=${*: -1}
    expect 2 "usage error: ${*:1:$#-1}" -- "${@:1:$#-1}" "$CHAT?n=1&_t=u_bad"
    if [ "$(wc -l <"$ERR")" -eq 1 ] && grep -qF -- "$want" "$ERR"; then
        pass "... one line saying '$want'"
    else
        fail "... wanted one line saying '$want': $(cat "$ERR")"
    fi
}
MSG="takes a price per million tokens, a decimal number from 0 to 1000000000 (digits with at most one point: 2.5, 0.075)"
for v in -1 +1 1e3 abc 1,5 '' . 1.2.3 1000000001 0x10 inf nan 2usd; do
    bad --price-in "$v" --price-out 1 "--price-in $MSG, not '$v'"
    bad --price-in 1 --price-out "$v" "--price-out $MSG, not '$v'"
    bad --price-in 1 --price-out 1 --price-cached "$v" "--price-cached $MSG, not '$v'"
done
bad --price-in 1 "--price-in needs --price-out"
bad --price-out 1 "--price-out needs --price-in"
bad --price-cached 1 "--price-cached needs --price-in and --price-out"
bad --price-in 1 --price-cached 1 "--price-in needs --price-out"
[ "$(fm_log "event=received" | grep -c '_t=u_bad')" -eq 0 ] &&
    pass "a bad price dials nothing" || fail "a request went with a bad price"
for ok in "--price-in 0 --price-out 0" "--price-in 2.5 --price-out 10 --price-cached 1.25" \
    "--price-in .5 --price-out 1. --price-cached 0" "--price-in 1000000000 --price-out 0.000001"; do
    # shellcheck disable=SC2086
    expect 0 "prices $ok: the run goes" -- $ok --profile openai "$CHAT?n=2"
done

fm_finish
