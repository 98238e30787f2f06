#!/usr/bin/env bash
# sg-proxy and a client slower than the stream: the upstream read is
# paused while --client-buffer bytes wait for the client and resumed when
# it catches up, so the stream arrives whole and the proxy's memory does
# not grow with it; the clocks run on meanwhile, so a client that stops
# reading for longer than --idle ends the stream as idle_timeout.
# Against sg-fakemodel, with a reader (python3) that reads 8 KiB every
# 2 ms: about 4 MB/s, far slower than the upstream on loopback.
# Usage: sg_proxy_slow_client_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 1; }

px_upstream

# slow_read PORT PATH PAUSE_MS: reads the answer 8 KiB every 2 ms (and
# stops reading for PAUSE_MS once 64 KiB are in); prints the body's size,
# its token count and whether it ended with [DONE] or an error's code.
slow_read() {
    python3 - "$@" <<'PY'
import socket, sys, time, re
port, path, pause_ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
buf = b""
paused = pause_ms == 0
while True:
    d = s.recv(8192)
    if not d:
        break
    buf += d
    if not paused and len(buf) > 65536:
        paused = True
        time.sleep(pause_ms / 1000)
    time.sleep(0.002)
body = buf.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in buf else b""
err = re.search(rb'"code":"([a-z_]+)"', body)
print(len(body), body.count(b'"content":"tok'),
      "done" if body.endswith(b"data: [DONE]\n\n") else (err.group(1).decode() if err else "none"))
PY
}

# Under AddressSanitizer freed blocks wait in its quarantine (256 MiB by
# default) instead of going back to the heap, so the proxy's peak would
# grow with the stream whatever it holds: keep the quarantine small here.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1"

hwm_kb() { awk '/VmHWM/ { print $2 }' "/proc/$1/status"; }

px_start slow --upstream "$UP" --profile openai --client-buffer 65536 --idle 2s
before=$(hwm_kb "$PX_PID")
read -r size tokens end < <(slow_read "$PX_PORT" '/v1/chat/completions?n=30000&gap=0&_t=slow' 0)
after=$(hwm_kb "$PX_PID")
[ "$end" = done ] && [ "$tokens" -eq 30000 ] &&
    pass "a slow client gets the whole stream: $tokens tokens, $size bytes" ||
    fail "slow client: $tokens tokens, end $end, $size bytes"
grow=$((after - before))
# the release build grows 330-500 KiB.  Under AddressSanitizer its
# allocator's own memory comes on top (2,744-3,748 KiB measured, from run
# to run): there the bound is the stream itself, which a proxy that
# buffered it would hold whole.  An ASan build is told by its runtime's
# symbols (clang links the runtime in: no libasan for ldd to show)
most=3000
grep -qa __asan_init "$PX" && most=$((size / 1024))
[ "$grow" -lt "$most" ] && pass "the proxy's peak memory grew by $grow KiB for a $((size / 1024)) KiB stream" ||
    fail "the proxy's peak memory grew by $grow KiB for a $((size / 1024)) KiB stream"
grep -q '"outcome":"ok"' "$FM_DIR/slow.out" && pass "reported ok" ||
    fail "report: $(tail -c 400 "$FM_DIR/slow.out")"

# a client that keeps reading gets all of it, however long the rest takes
# after the upstream is done: --header-timeout bounds a client that takes
# nothing, not one that reads (64 KiB buffered, ~4 MB/s, ~1.2 s after the
# upstream's end against a 300 ms --header-timeout)
px_start steady --upstream "$UP" --profile openai --client-buffer 4194304 --header-timeout 300ms
read -r size tokens end < <(slow_read "$PX_PORT" '/v1/chat/completions?n=30000&gap=0&_t=steady' 0)
[ "$end" = done ] && [ "$tokens" -eq 30000 ] &&
    pass "a steady reader past --header-timeout gets the whole answer: $tokens tokens" ||
    fail "steady reader: $tokens tokens, end $end, $size bytes"

# a body that keeps coming, a byte every 100 ms for 2 s, against a 500 ms
# --header-timeout: the head's window does not cover the body
px_start body --upstream "$UP" --profile openai --header-timeout 500ms
code=$(python3 - "$PX_PORT" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
body = b'{"a":"' + b"x" * 12 + b'"}'
s.sendall(b"POST /v1/chat/completions?n=1 HTTP/1.1\r\nHost: x\r\nContent-Length: "
          + str(len(body)).encode() + b"\r\n\r\n")
for i in range(len(body)):
    time.sleep(0.1)
    s.sendall(body[i:i + 1])
print(s.recv(64).split(b" ")[1].decode())
PY
)
[ "$code" = 200 ] && pass "a slow body within --header-timeout between its reads: 200" ||
    fail "slow body: $code"

# an event larger than --client-buffer is no slow client: it goes through
px_start big --upstream "$UP" --profile openai --client-buffer 65536
read -r size tokens end < <(slow_read "$PX_PORT" '/v1/chat/completions?n=3&event_bytes=300000&_t=big' 0)
[ "$end" = done ] && [ "$tokens" -eq 3 ] &&
    pass "events of 300 KB through a 64 KiB --client-buffer: $tokens tokens, whole" ||
    fail "big events: $tokens tokens, end $end, $size bytes"

# a client that stops reading for longer than the idle clock
px_start stop --upstream "$UP" --profile openai --client-buffer 65536 --idle 300ms
read -r size tokens end < <(slow_read "$PX_PORT" '/v1/chat/completions?n=30000&gap=0&_t=stop' 1500)
[ "$end" = idle_timeout ] && [ "$tokens" -gt 0 ] && [ "$tokens" -lt 30000 ] &&
    pass "a client stopped past the idle clock: idle_timeout in-band after $tokens tokens" ||
    fail "stopped client: $tokens tokens, end $end"

# a client that takes nothing of its answer for --header-timeout is
# dropped: what it gets must never look like a shorter answer - whole
# events then the in-band error, or a reset; never a clean end after a
# cut event
px_start deaf --upstream "$UP" --profile openai --idle 500ms \
    --header-timeout 1s
read -r size tokens end how < <(python3 - "$PX_PORT" <<'PY'
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/chat/completions?n=3000&gap=0&line_bytes=8000&_t=deaf HTTP/1.1\r\n"
          b"Host: x\r\nContent-Length: 2\r\n\r\n{}")
time.sleep(3)  # reads nothing: the idle clock ends the stream, then
               # --header-timeout passes with the answer's rest unread
buf, how = b"", "eof"
while True:
    try:
        d = s.recv(65536)
    except ConnectionResetError:
        how = "reset"
        break
    if not d:
        break
    buf += d
body = buf.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in buf else b""
last = body.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
end = ("done" if last == b"data: [DONE]" else "error" if last.startswith(b'data: {"error"')
       else "whole" if body.endswith(b"\n\n") else "cut")
print(len(body), body.count(b'"content":"tok'), end, how)
PY
)
grep -q 'took nothing of its answer' "$FM_DIR/deaf.err" || fail "the deaf client was not dropped: $(cat "$FM_DIR/deaf.err")"
{ [ "$how" = reset ] || { [ "$how" = eof ] && [ "$end" = error ]; }; } &&
    pass "a client that takes nothing for --header-timeout: $tokens tokens, then a $how (its last event: $end)" ||
    fail "a client that takes nothing: a clean $how after $tokens tokens, its last event $end ($size bytes)"

fm_finish
