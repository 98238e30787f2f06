#!/usr/bin/env bash
# The README's first C block is real code that runs: it is examples/hello.c
# word for word, it compiles against the library alone (no libcurl of its
# own, every warning an error) and it runs against a fresh sg-fakemodel -
# a clean stream (exit 0, every token printed, outcome ok) and the stall
# the README shows (exit 1, three tokens, idle_timeout, partial).
# Usage: readme_snippet.sh SOURCE_DIR LIBRARY_DIR C_COMPILER SG_FAKEMODEL
set -uo pipefail
src=$1
lib=$2
cc=$3
fakemodel=$4
# fm_start / fm_finish / fail / pass; sets FM_PORT, FM_DIR.
# shellcheck source=../integration/fakemodel_lib.sh
. "$src/tests/integration/fakemodel_lib.sh"

awk '/^```c$/ { inside = 1; next } /^```$/ { if (inside) exit } inside' \
  "$src/README.md" >"$FM_DIR/readme.c"
[ -s "$FM_DIR/readme.c" ] || { echo "readme: no C block found"; exit 1; }
if cmp -s "$FM_DIR/readme.c" "$src/examples/hello.c"; then
    pass "the README's C block is examples/hello.c"
else
    fail "the README's C block differs from examples/hello.c:"
    diff "$FM_DIR/readme.c" "$src/examples/hello.c" >&2
fi
if "$cc" -std=c11 -Wall -Wextra -Werror -I "$src/include" "$FM_DIR/readme.c" \
     -o "$FM_DIR/readme" -L "$lib" -lstreamguard -Wl,-rpath,"$lib"; then
    pass "it compiles and links against the library alone"
else
    fail "it does not compile"
    exit 1
fi

fm_start "$fakemodel"
base=http://127.0.0.1:$FM_PORT/v1/chat/completions
out=$FM_DIR/readme.out

# run WANT_RC QUERY: the README's program on base?QUERY, at most 30 s.
run() {
    local rc=0
    timeout 30 "$FM_DIR/readme" "$base?$2" >"$out" 2>&1 || rc=$?
    cat "$out"
    if [ "$rc" -eq "$1" ]; then pass "exit status $rc"; else fail "exit status $rc, expected $1"; fi
}
expect() {
    if grep -qF -- "$1" "$out"; then pass "prints '$1'"; else fail "does not print '$1'"; fi
}

run 0 "n=5&gap=10"
for i in 0 1 2 3 4; do
    expect "\"delta\":{\"content\":\"tok$i\"}"
done
expect "outcome=ok"
expect 'report: {"version":1,"label":null,"finished":true,"outcome":"ok"'

# The README's own try: a stall after three tokens behind keepalives.
run 1 "n=9&gap=50&stall_after=3&stall=forever&keepalive=100"
expect "\"content\":\"tok2\""
if grep -qF '"content":"tok3"' "$out"; then fail "a fourth token"; else pass "three tokens"; fi
expect "outcome=idle_timeout no next item in 2000 ms"
expect '"partial":true'
expect '"reason":"partial_stream"'
fm_finish
