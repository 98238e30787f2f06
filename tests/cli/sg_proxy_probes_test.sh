#!/usr/bin/env bash
# sg-proxy's probes for a service manager: GET /healthz (the process
# answers: live, while it drains too) and GET /readyz (it takes requests:
# routes loaded and not draining, else 503), both the proxy's own (never
# forwarded, whatever the routes); after SIGTERM, on a connection made
# before it, /readyz is 503 "draining" and /healthz still 200.
# Usage: sg_proxy_probes_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 1; }

px_upstream
# one route for everything: the probes must not go to it
px_start probes --upstream "$UP" --profile openai --drain 5s --log /dev/null

probe() { # PATH: "STATUS BODY"
    curl -s -o "$FM_DIR/body" -w '%{http_code}' "http://127.0.0.1:$PX_PORT$1"
    echo " $(cat "$FM_DIR/body")"
}
got=$(probe /healthz)
[ "$got" = '200 {"status":"live"}' ] && pass "/healthz: $got" || fail "/healthz: $got"
got=$(probe '/readyz?verbose=1')
[ "$got" = '200 {"status":"ready","routes":1}' ] && pass "/readyz: $got" || fail "/readyz: $got"
got=$(probe /healthz/x)
fm_log "event=received" | grep -q '"path":"/healthz/x"' &&
    pass "/healthz/x is no probe: forwarded by the route (${got%% *})" ||
    fail "/healthz/x was not forwarded: $got"
n=$(fm_log "event=received" | grep -c '"path":"/\(healthz\|readyz\)"')
[ "$n" -eq 0 ] && pass "the probes never reached the upstream" ||
    fail "the upstream received $n probes"

# SIGTERM with a stream in flight (the drain lasts) and two connections
# made before it: each then asks a probe
out=$(python3 - "$PX_PORT" "$PX_PID" "$UP" <<'PY'
import os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
def conn():
    return socket.create_connection(("127.0.0.1", port))
stream = conn()
stream.sendall(b"POST /v1/chat/completions?n=50&gap=100&_t=drain HTTP/1.1\r\nHost: x\r\n"
               b"Content-Length: 2\r\n\r\n{}")
stream.recv(4096)  # committed: the head and the first token
ready, live = conn(), conn()
time.sleep(0.2)  # accepted before the signal
os.kill(pid, signal.SIGTERM)
time.sleep(0.3)
def ask(s, path):
    s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    buf = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    return head.split(b" ")[1].decode() + " " + body.decode()
print(ask(ready, b"/readyz"))
print(ask(live, b"/healthz"))
PY
)
ready=$(sed -n 1p <<<"$out")
live=$(sed -n 2p <<<"$out")
[ "$ready" = '503 {"status":"draining"}' ] && pass "/readyz while draining: $ready" ||
    fail "/readyz while draining: $ready"
[ "$live" = '200 {"status":"live"}' ] && pass "/healthz while draining: $live" ||
    fail "/healthz while draining: $live"

fm_finish
