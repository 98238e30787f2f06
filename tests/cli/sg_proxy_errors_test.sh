#!/usr/bin/env bash
# sg-proxy names each error for whose fault it is, and tells a client
# whether its own retry can help: against sg-fakemodel, with the curl
# command and python3 as clients.
# - A committed stream's in-band error from the upstream reaches the
#   client as the upstream wrote it (its type, message and code), in each
#   provider's shape; the report still says provider_error.
# - sg-proxy's own failures (shutting down, out of memory) are 503 (or
#   500) of the provider's type for a server failure, never
#   invalid_request.
# Usage: sg_proxy_errors_test.sh SG_PROXY SG_FAKEMODEL
set -u
PX=$1
FM=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

fm_start "$FM"
UP=http://127.0.0.1:$FM_PORT
. "$dir/sg_proxy_lib.sh"

# as_written NAME PROFILE PATH: the upstream's in-band error after two
# tokens, through a proxy with PROFILE, must end the client's body as the
# upstream wrote it: the proxied body is the direct one (request ids
# aside) up to the end of the error's event (its blank line; NDJSON: its
# line), and nothing after it.
as_written() {
    local name=$1 profile=$2 path=$3 res
    px_start "$name" --upstream "$UP" --profile "$profile" --attempts 1
    curl -sN -m 15 -d '{}' -o "$FM_DIR/$name.direct" "$UP$path&_t=${name}_d"
    curl -sN -m 15 -d '{}' -o "$FM_DIR/$name.body" "http://127.0.0.1:$PX_PORT$path&_t=${name}_p"
    res=$(python3 - "$FM_DIR/$name.direct" "$FM_DIR/$name.body" "$profile" <<'PY'
import re, sys
mask = lambda b: re.sub(rb'(chatcmpl-|msg_|gemini-|gen-|resp_)[0-9]+', rb'\1N', b)
direct, body = (mask(open(f, "rb").read()) for f in sys.argv[1:3])
err = direct.find(b"scripted failure")
stop = (rb"\n",) if sys.argv[3] == "ollama" else (rb"\n\n", rb"\r\n\r\n", rb"\r\r")
found = [m for m in (re.compile(s).search(direct, err) for s in stop) if m]
end = min(m.end() for m in found) if err >= 0 and found else -1
print("ok" if end > 0 and body == direct[:end] else "got %d bytes, ending %r; wanted %d, ending %r"
      % (len(body), body[-160:], end, direct[max(0, end - 160):end]))
PY
)
    if [ "$res" = ok ]; then
        pass "$name: the upstream's in-band error reaches the client as written, nothing after it"
    else
        fail "$name: $res"
    fi
    for _ in $(seq 1 100); do
        grep -q '"outcome"' "$FM_DIR/$name.out" && break
        sleep 0.05
    done
    grep -q '"report":{.*"outcome":"provider_error"' "$FM_DIR/$name.out" &&
        pass "$name: the report says provider_error" ||
        fail "$name: report $(tail -c 300 "$FM_DIR/$name.out")"
}

as_written openai openai '/v1/chat/completions?n=5&gap=5&error_at=2&error_type=server_error&error_then_done=1'
as_written anthropic anthropic '/v1/messages?n=5&gap=5&error_at=2&error_type=overloaded_error'
as_written responses openai-responses '/v1/responses?n=5&gap=5&error_at=2&error_type=rate_limit_exceeded'
as_written gemini gemini '/v1beta/models/m:streamGenerateContent?alt=sse&n=5&gap=5&error_at=2'
as_written gemini_bare gemini '/v1beta/models/m:streamGenerateContent?alt=sse&n=5&gap=5&error_at=2&error_event=bare'
as_written ollama ollama '/api/chat?format=ollama&n=5&gap=5&error_at=2'

# Bedrock: the upstream's exception message is the last one, and the only
px_start bedrock --upstream "$UP" --profile bedrock-converse --attempts 1
curl -sN -m 15 -d '{}' -o "$FM_DIR/br.body" \
    "http://127.0.0.1:$PX_PORT/model/m/converse-stream?n=5&gap=5&error_at=2&_t=br_err"
python3 "$dir/../integration/eventstream_decode.py" "$FM_DIR/br.body" >"$FM_DIR/br.json"
[ "$(grep -c '"exception"' "$FM_DIR/br.json")" -eq 1 ] &&
    tail -n 2 "$FM_DIR/br.json" | head -n 1 | grep -q '"throttlingException"' &&
    pass "bedrock: the upstream's throttlingException is the one and last exception" ||
    fail "bedrock: $(grep exception "$FM_DIR/br.json" | head -c 600)"

# ---- sg-proxy's own failures ----------------------------------------------------
# own_type NAME PROFILE: a request on a connection opened before SIGTERM
# is refused (the proxy is shutting down): prints its status, its
# x-should-retry and its body's error type
own_after_sigterm() {
    px_start "$1" --upstream "$UP" --profile "$2" --drain 300ms
    python3 - "$PX_PORT" "$PX_PID" <<'PY'
import json, os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
time.sleep(0.1)
os.kill(pid, signal.SIGTERM)
time.sleep(0.1)
s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
buf = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    buf += d
head, _, body = buf.partition(b"\r\n\r\n")
lines = head.decode().split("\r\n")
hdr = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
e = json.loads(body)
t = e["error"]["type"] if "error" in e and isinstance(e["error"], dict) else None
print(lines[0].split()[1], hdr.get("x-should-retry", "-"), t)
PY
    wait "$PX_PID"
}
read -r code should type < <(own_after_sigterm down openai)
[ "$code" = 503 ] && [ "$type" = server_error ] &&
    pass "shutting down, openai: 503, type server_error" || fail "shutting down, openai: $code $type"
read -r code should type < <(own_after_sigterm adown anthropic)
[ "$code" = 503 ] && [ "$type" = api_error ] &&
    pass "shutting down, anthropic: 503, type api_error" || fail "shutting down, anthropic: $code $type"

# out of memory: a 100 MB body into a proxy allowed 40 MB more address
# space than it has at rest - a 503 of its own, not the client's 413
# (under AddressSanitizer, whose allocator must then return NULL rather
# than abort)
ASAN_OPTIONS="${ASAN_OPTIONS:-}:allocator_may_return_null=1" \
    px_start oom --upstream "$UP" --profile openai --max-body 200000000
vm=$(awk '/VmSize/ { print $2 }' "/proc/$PX_PID/status")
prlimit --pid "$PX_PID" --as=$(((vm + 40 * 1024) * 1024))
read -r code type < <(python3 - "$PX_PORT" <<'PY'
import json, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
n = 100 * 1000 * 1000
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n)
chunk = b"x" * 65536
sent = 0
try:
    while sent < n:
        sent += s.send(chunk)
except OSError:
    pass
buf = b""
while True:
    try:
        d = s.recv(65536)
    except OSError:
        break
    if not d:
        break
    buf += d
head, _, body = buf.partition(b"\r\n\r\n")
print(head.split(b" ")[1].decode() if head else "-", json.loads(body)["error"]["type"] if body else "-")
PY
)
[ "$code" = 503 ] && [ "$type" = server_error ] &&
    pass "out of memory for a request body: 503, type server_error" ||
    fail "out of memory: $code $type"
kill -0 "$PX_PID" && pass "... and the proxy serves on" || fail "the proxy died of it"

px_stop_all
fm_finish
