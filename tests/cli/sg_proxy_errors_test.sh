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
dir=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_upstream

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
[ "$should" = true ] &&
    pass "shutting down, nothing sent upstream: x-should-retry: true (another instance may serve it)" ||
    fail "shutting down: x-should-retry $should"
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
read -r code type should < <(python3 - "$PX_PORT" <<'PY'
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
should = [l.split(b":")[1].strip().decode() for l in head.split(b"\r\n") if l.lower().startswith(b"x-should-retry:")]
print(head.split(b" ")[1].decode() if head else "-", json.loads(body)["error"]["type"] if body else "-",
      should[0] if should else "-")
PY
)
[ "$code" = 503 ] && [ "$type" = server_error ] && [ "$should" = true ] &&
    pass "out of memory for a request body: 503, type server_error, x-should-retry: true" ||
    fail "out of memory: $code $type, x-should-retry $should"
kill -0 "$PX_PID" && pass "... and the proxy serves on" || fail "the proxy died of it"

# ---- x-should-retry: a client's retry never multiplies the route's ----------------
# hdr NAME: the value of response header NAME of the last answer.
hdr() {
    grep -i "^$1:" "$FM_DIR/h.hdr" | head -n 1 | sed 's/^[^:]*: *//' | tr -d '\r'
}
# ask PORT PATH [curl options]: the answer's status in $CODE, headers in h.hdr.
ask() {
    local port=$1 path=$2
    shift 2
    CODE=$(curl -s -m 15 -o /dev/null -D "$FM_DIR/h.hdr" -w '%{http_code}' -d '{}' "$@" \
        "http://127.0.0.1:$port$path")
}
px_start retry --upstream "$UP" --profile openai --attempts 3 --idempotent \
    --first-item 200ms --backoff-base 5ms --backoff-max 10ms
PR=$PX_PORT
ask "$PR" '/v1/chat/completions?first_delay=3000&_t=sr_slow'
[ "$CODE" = 504 ] && [ "$(hdr x-should-retry)" = false ] &&
    [ "$(fm_log event=received | grep -c '_t=sr_slow')" -eq 3 ] &&
    pass "504 after the route's 3 attempts: x-should-retry: false" ||
    fail "504 after retries: $CODE, x-should-retry '$(hdr x-should-retry)'"
ask "$PR" '/v1/chat/completions?status=429&retry_after=0&_t=sr_429'
[ "$CODE" = 429 ] && [ "$(hdr x-should-retry)" = false ] &&
    pass "the upstream's 429, retried by the route: x-should-retry: false" ||
    fail "429: $CODE, x-should-retry '$(hdr x-should-retry)'"
ask "$PR" '/v1/chat/completions?status=401&_t=sr_401'
[ "$CODE" = 401 ] && [ "$(hdr x-should-retry)" = false ] &&
    pass "the upstream's 401: x-should-retry: false" ||
    fail "401: $CODE, x-should-retry '$(hdr x-should-retry)'"
ask "$PR" '/v1/chat/completions?status=500&_t=sr_500'
[ "$CODE" = 502 ] && [ "$(hdr x-should-retry)" = false ] &&
    pass "the upstream's 500 (a 502): x-should-retry: false" ||
    fail "500: $CODE, x-should-retry '$(hdr x-should-retry)'"
ask "$PR" '/v1/chat/completions?n=1&_t=sr_ok'
[ "$CODE" = 200 ] && [ -z "$(hdr x-should-retry)" ] &&
    pass "a stream that commits: no x-should-retry" || fail "200: x-should-retry '$(hdr x-should-retry)'"
px_start slowhead --upstream "$UP" --profile openai --header-timeout 300ms
should=$(python3 - "$PX_PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
head = s.recv(4096).split(b"\r\n\r\n")[0].decode()
print(head.split()[1], [l.split(":")[1].strip() for l in head.split("\r\n") if l.lower().startswith("x-should-retry:")])
PY
)
[ "$should" = "408 ['true']" ] && pass "a request head too slow: 408, x-should-retry: true" ||
    fail "408: $should"

# X-Stainless-Timeout (the Stainless SDKs' timeout, whole seconds) is an
# inbound deadline as X-Deadline-Ms is
px_start stainless --upstream "$UP" --profile openai --attempts 3 --idempotent --budget 20s
t0=${EPOCHREALTIME/./}
ask "$PX_PORT" '/v1/chat/completions?first_delay=30000&_t=st_2' -H 'X-Stainless-Timeout: 2'
el=$(((${EPOCHREALTIME/./} - t0) / 1000))
xd=$(fm_log event=received | grep '_t=st_2' | grep -o '"x_deadline_ms":"*[0-9]*' | head -n 1 | tr -dc 0-9)
[ "$CODE" = 504 ] && [ "$(hdr X-SG-Outcome)" = budget_exhausted ] && [ "$el" -ge 1900 ] &&
    [ "$el" -le 2500 ] && [ "${xd:-0}" -le 2000 ] && [ "${xd:-0}" -gt 1500 ] &&
    pass "X-Stainless-Timeout: 2 - budget_exhausted in ${el} ms (bound 1900..2500), the upstream saw X-Deadline-Ms $xd" ||
    fail "X-Stainless-Timeout: 2: $CODE $(hdr X-SG-Outcome) after ${el} ms, upstream X-Deadline-Ms ${xd:-none}"
ask "$PX_PORT" '/v1/chat/completions?n=1&_t=st_0' -H 'X-Stainless-Timeout: 0'
xd=$(fm_log event=received | grep '_t=st_0' | grep -o '"x_deadline_ms":"*[0-9]*' | head -n 1 | tr -dc 0-9)
[ "$CODE" = 200 ] && [ "${xd:-0}" -gt 10000 ] &&
    pass "X-Stainless-Timeout: 0 (under a second) bounds nothing: served, X-Deadline-Ms $xd" ||
    fail "X-Stainless-Timeout: 0: $CODE, upstream X-Deadline-Ms ${xd:-none}"

px_stop_all
fm_finish
