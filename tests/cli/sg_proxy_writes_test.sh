#!/usr/bin/env bash
# sg-proxy writes to its client once per upstream read, not once per
# event: every event a read releases goes out in one send (a per-event
# send cost a syscall per item, 20x nginx's CPU per item).  Counted with
# strace on a stream of 20,000 small SSE events as fast as sg-fakemodel
# writes them (so each upstream read carries many): the sends to the
# client (their count, from strace's accept4 and sendto lines) are at most
# the upstream reads that brought bytes, plus the answer's head; and the
# stream arrives whole.  Skipped (77) without strace.
# Usage: sg_proxy_writes_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream
command -v strace >/dev/null || { echo "skip: strace is not installed"; exit 77; }

px_upstream
N=20000
TRACE=$FM_DIR/trace
strace -f -qq -e trace=accept4,sendto,recvfrom -o "$TRACE" \
    "$PX" --listen 127.0.0.1:0 --upstream "$UP" --profile openai --log /dev/null \
    >"$FM_DIR/px.out" 2>"$FM_DIR/px.err" &
PX_PIDS+=($!)
PX_PORT=$(read_port "$!" "$FM_DIR/px.out" "$FM_DIR/px.err" "sg-proxy under strace") || exit 1
# the traced proxy too, should strace be killed first
PX_PIDS+=($(ps -o pid= --ppid "${PX_PIDS[-1]}"))

body=$(curl -sN "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=$N&gap=0&_t=writes")
tokens=$(grep -c '"content":"tok' <<<"$body")
[ "$tokens" -eq "$N" ] && [ "$(tail -n 1 <<<"$body")" = "data: [DONE]" ] &&
    pass "the stream whole: $tokens tokens, then [DONE]" ||
    fail "the stream: $tokens tokens of $N, ending $(tail -n 1 <<<"$body" | head -c 80)"
px_stop_all
wait "${PX_PIDS[0]}" 2>/dev/null

# the client's socket is what accept4 returned; every other recvfrom that
# brought bytes is an upstream read (or the client's request)
read -r writes reads < <(awk '
    /accept4\(/ && $NF ~ /^[0-9]+$/ { client = $NF }
    /sendto\(/ && client != "" && $2 ~ "^sendto\\(" client "," && $NF + 0 > 0 { w++ }
    /recvfrom\(/ && $2 !~ "^recvfrom\\(" client "," && $NF + 0 > 0 { r++ }
    END { print w + 0, r + 0 }' "$TRACE")
[ "$writes" -gt 0 ] && [ "$writes" -le $((reads + 2)) ] &&
    pass "$writes sends to the client for $reads upstream reads ($((N / writes)) events a send)" ||
    fail "$writes sends to the client for $reads upstream reads and $N events"

fm_finish
