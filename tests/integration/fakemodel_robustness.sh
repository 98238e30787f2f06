#!/usr/bin/env bash
# Hostile and odd input never takes sg-fakemodel down: garbage over raw
# sockets (HTTP/1.1, h2c preface, TLS records), malformed requests get 4xx and
# are logged, and the server keeps serving every protocol afterwards.  Also the
# command line: --help, bad options.
#   fakemodel_robustness.sh SERVER CLIENT
# "A && B || fail ..." is meant: fail unless both hold.
# shellcheck disable=SC2015
SERVER=$1
CLIENT=$2
. "$(dirname "$0")/fakemodel_lib.sh"

# ---- command line
"$SERVER" --help | grep -q -- '--write-ca' || fail "--help"
for bad in "--port abc" "--port 70000" "--bogus" "--cert x" "extra" "--record /nonexistent/dir"; do
    rc=0
    # shellcheck disable=SC2086 # one string, several arguments
    msg=$("$SERVER" $bad 2>&1 >/dev/null) || rc=$?
    [ "$rc" = 2 ] && [ "$(echo "$msg" | wc -l)" = 1 ] || fail "option '$bad': rc=$rc msg=$msg"
done
pass command_line

fm_start "$SERVER"
U=http://127.0.0.1:$FM_PORT

"$CLIENT" garbage "$FM_PORT" || fail "garbage client"
N400=$(fm_log "event=finished" | grep -c '"reason":"bad_request"')
[ "$N400" -ge 15 ] || fail "malformed requests logged: $N400"
fm_log "event=received" | grep -q '"error":"malformed request"' || fail "received with error"
fm_log "event=conn_error" | grep -q '"proto":"h2"' || fail "h2 garbage not logged"
fm_log "event=conn_error" | grep -q '"proto":"tls"' || fail "tls garbage not logged"
pass garbage

# ---- still serving everything
curl -sS -m 5 "$U/stream?n=2&gap=0" | grep -q '\[DONE\]' || fail "h1 after garbage"
curl -sS -m 5 --http2-prior-knowledge "$U/stream?n=2&gap=0" | grep -q '\[DONE\]' || fail "h2c after garbage"
curl -sS -m 5 --cacert "$FM_CA" "https://127.0.0.1:$FM_PORT/stream?n=2&gap=0" | grep -q '\[DONE\]' ||
    fail "TLS h2 after garbage"
# A client that rejects the certificate aborts the handshake; no harm done.
curl -sS -m 5 "https://127.0.0.1:$FM_PORT/stream" >/dev/null 2>&1 && fail "untrusted cert accepted?"
curl -sS -m 5 --cacert "$FM_CA" "https://127.0.0.1:$FM_PORT/_health" | grep -q ok || fail "TLS after bad handshake"
pass still_serving

# ---- HTTP/1.0, pipelining, keep-alive reuse
OUT=$(curl -sS -m 5 --http1.0 -D - "$U/stream?n=2&gap=0")
echo "$OUT" | grep -qi 'transfer-encoding' && fail "HTTP/1.0 got chunked"
echo "$OUT" | grep -q '\[DONE\]' || fail "HTTP/1.0 body"
exec 3<>"/dev/tcp/127.0.0.1/$FM_PORT"
printf 'GET /stream?n=1&gap=0 HTTP/1.1\r\nHost: x\r\n\r\nGET /ndjson?n=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3
PIPE=$(timeout 5 cat <&3)
exec 3<&-
[ "$(echo "$PIPE" | grep -c '^HTTP/1.1 200')" = 2 ] || fail "pipelined: $(echo "$PIPE" | head -c 300)"
echo "$PIPE" | grep -q '"done":true' || fail "pipelined: second response"
N=$(curl -sS -m 5 -w '%{num_connects}\n' -o /dev/null -o /dev/null "$U/stream?n=1" "$U/stream?n=1" | tail -n 1)
[ "$N" = 0 ] || fail "keep-alive: second request opened a new connection"
pass http1_details

# ---- a request head split into single bytes, then a body in odd chunks
exec 3<>"/dev/tcp/127.0.0.1/$FM_PORT"
REQ=$'POST /stream?n=1&gap=0 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n'
for ((i = 0; i < ${#REQ}; i += 7)); do
    printf '%s' "${REQ:i:7}" >&3
    sleep 0.01
done
PIPE=$(timeout 5 cat <&3)
exec 3<&-
echo "$PIPE" | grep -q '\[DONE\]' || fail "split request"
fm_log "event=received" | grep -q '"body_bytes":3' || fail "chunked body bytes"
pass split_request

# ---- huge body refused with 413 (limit lowered by a restart option is not
# needed: Content-Length alone decides)
CODE=$(curl -sS -m 5 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Length: 99999999999' \
    -H 'Expect:' "$U/stream" 2>/dev/null)
[ "$CODE" = 413 ] || fail "413: $CODE"
pass body_limit

# ---- --record DIR: each request's bytes exactly as they arrived (a head
# with odd spacing and case, a chunked body split across writes), and over
# HTTP/2 its fields one "name: value" line each, then the body
fm_stop
mkdir "$FM_DIR/rec"
fm_start "$SERVER" --record "$FM_DIR/rec"
U=http://127.0.0.1:$FM_PORT
REQ=$'POST /stream?n=1&gap=0&_t=rec HTTP/1.1\r\nhost: x\r\nX-Odd:   two  spaces \r\nX-Empty:\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n'
exec 3<>"/dev/tcp/127.0.0.1/$FM_PORT"
printf '%s' "${REQ:0:60}" >&3
sleep 0.05
printf '%s' "${REQ:60}" >&3
timeout 5 cat <&3 >/dev/null
exec 3<&-
id=$(fm_log "event=received" | grep '_t=rec' | grep -o '"id":[0-9]*' | cut -d: -f2)
printf '%s' "$REQ" >"$FM_DIR/rec.want"
cmp -s "$FM_DIR/rec.want" "$FM_DIR/rec/$id.req" ||
    fail "--record h1: $(cat -A "$FM_DIR/rec/$id.req" 2>&1 | head -c 400)"
curl -sS -m 5 -o /dev/null --http2-prior-knowledge -H 'X-Case: v' -d 'h2body' "$U/stream?n=1&_t=rec2"
id=$(fm_log "event=received" | grep '_t=rec2' | grep -o '"id":[0-9]*' | cut -d: -f2)
printf ':method: POST\r\n:path: /stream?n=1&_t=rec2\r\n:scheme: http\r\n:authority: 127.0.0.1:%s\r\nuser-agent: curl/%s\r\naccept: */*\r\nx-case: v\r\ncontent-length: 6\r\ncontent-type: application/x-www-form-urlencoded\r\n\r\nh2body' \
    "$FM_PORT" "$(curl --version | head -n 1 | cut -d' ' -f2)" >"$FM_DIR/rec2.want"
cmp -s "$FM_DIR/rec2.want" "$FM_DIR/rec/$id.req" ||
    fail "--record h2c: $(diff <(cat -A "$FM_DIR/rec2.want") <(cat -A "$FM_DIR/rec/$id.req") 2>&1 | head -c 600)"
pass record

fm_finish
