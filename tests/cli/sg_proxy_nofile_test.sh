#!/usr/bin/env bash
# sg-proxy raises its soft limit on open files to the hard limit at start
# (two descriptors per open HTTP/1.1 stream: the usual 1024 would refuse
# connections near 500 streams), and says so on stderr; a hard limit too
# low for --max-connections is said too.  Skipped (77) when the hard limit
# is too low to leave room under it.
# Usage: sg_proxy_nofile_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge 1024 ] ||
    { echo "skip: the hard limit on open files is $hard"; exit 77; }
px_upstream

# soft_of PID: the process's soft limit on open files.
soft_of() { awk '/^Max open files/ { print $4 }' "/proc/$1/limits"; }

ulimit -Sn 512
px_start raised --upstream "$UP" --profile openai --log /dev/null
[ "$(soft_of "$PX_PID")" = "$hard" ] && pass "soft limit 512 raised to $(soft_of "$PX_PID")" ||
    fail "the soft limit is $(soft_of "$PX_PID"), the hard one $hard"
grep -q "open files: soft limit raised from 512 to the hard limit" "$FM_DIR/raised.err" &&
    pass "said: $(cat "$FM_DIR/raised.err")" || fail "not said: $(cat "$FM_DIR/raised.err")"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=2")
[ "$code" = 200 ] && pass "it serves" || fail "a request: $code"

# a hard limit below what --max-connections needs: said at start
(
    ulimit -n 300
    exec "$PX" --listen 127.0.0.1:0 --upstream "$UP" --profile openai --log /dev/null \
        --max-connections 256
) >"$FM_DIR/low.out" 2>"$FM_DIR/low.err" &
PX_PIDS+=($!)
read_port "$!" "$FM_DIR/low.out" "$FM_DIR/low.err" "sg-proxy (low)" >/dev/null || exit 1
grep -q -- "--max-connections 256 needs about 576, the limit is 300" "$FM_DIR/low.err" &&
    pass "a limit too low said: $(cat "$FM_DIR/low.err")" ||
    fail "a limit too low not said: $(cat "$FM_DIR/low.err")"

px_stop_all
fm_finish
