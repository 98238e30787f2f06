#!/usr/bin/env bash
# sg-proxy's request side, checked at an upstream that records every
# request byte for byte (sg-fakemodel --record): the method goes whole or
# is refused; the upstream gets the client's headers (less the hop-by-hop
# ones, plus the deadline and key the library stamps) and nothing else -
# over HTTP/1.1 and HTTP/2; a path that could leave its route is refused;
# Expect: 100-continue is answered (curl, a peer no one here wrote, is the
# client); a client that leaves cancels its operation upstream. Requests
# are written raw (bash's /dev/tcp) where their exact bytes matter, and
# with the curl command elsewhere.
# Usage: sg_proxy_request_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_recording_upstream # REC, recorded TAG, masked FILE
CFG=$FM_DIR/proxy.conf
cat >"$CFG" <<CONF
[route up]
prefix = /up
upstream = $UP
profile = openai
attempts = 1

[route tls]
prefix = /tls
upstream = https://localhost:$FM_PORT
cacert = $FM_CA
profile = openai
attempts = 1
CONF
px_start R --config "$CFG" --max-body 3000000
PR=$PX_PORT

now_ms() {
    local t=${EPOCHREALTIME/./}
    echo "$((t / 1000))"
}

# check DESCRIPTION CONDITION [DETAIL]: CONDITION (shell, eval'd) holds.
check() {
    if eval "$2"; then pass "$1"; else fail "$1${3:+: $3}"; fi
}

# raw TAG: writes $REQ to proxy R as it is, reads the answer to the end
# into TAG.resp; its status in $CODE.
raw() {
    exec 3<>"/dev/tcp/127.0.0.1/$PR"
    printf '%s' "$REQ" >&3
    timeout 10 cat <&3 >"$FM_DIR/$1.resp"
    exec 3<&-
    CODE=$(head -n 1 "$FM_DIR/$1.resp" | cut -d' ' -f2)
}

# received TAG: how many requests with _t=TAG in their query the upstream
# received.
received() {
    fm_log "event=received" | grep -c "_t=$1[&\"]"
}

# same WHAT TAG WANT: the request recorded for TAG is WANT byte for byte
# (deadline and port masked).
same() {
    local got
    got=$(recorded "$2")
    printf '%s' "$3" >"$FM_DIR/$2.want"
    if [ -n "$got" ] && masked "$got" | cmp -s "$FM_DIR/$2.want" -; then
        pass "$1"
    else
        fail "$1: $(diff <(cat -A "$FM_DIR/$2.want") <([ -n "$got" ] && masked "$got" | cat -A) | head -c 900)"
    fi
}

# proxy_said TAG: TAG.resp is an answer of the proxy's own (its JSON
# error names sg-proxy).
proxy_said() {
    grep -q '"message":"sg-proxy: ' "$FM_DIR/$1.resp"
}

# ---- the method: whole, or refused ------------------------------------------
m31=ABCDEFGHIJKLMNOPQRSTUVWXYZABCDE
m32=${m31}F
REQ="$m31 /up/v1/chat/completions?n=1&_t=rq_m31 HTTP/1.1"$'\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}'
raw m31
check "a method of 31 characters reaches the upstream whole" \
    '[ -n "$(recorded rq_m31)" ] && [ "$(head -n 1 "$(recorded rq_m31)" | cut -d" " -f1)" = "$m31" ]' \
    "$CODE; upstream: $(head -n 1 "$(recorded rq_m31)" 2>/dev/null)"
for m in "$m32" "${m31}${m31}XY"; do
    REQ="$m /up/v1/chat/completions?n=1&_t=rq_mlong${#m} HTTP/1.1"$'\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}'
    raw "mlong${#m}"
    check "a method of ${#m} characters is 501, the proxy's own answer" \
        '[ "$CODE" = 501 ] && proxy_said mlong${#m}' "$(head -c 300 "$FM_DIR/mlong${#m}.resp")"
    check "... and it never reaches the upstream (cut or whole)" '[ "$(received rq_mlong${#m})" -eq 0 ]' \
        "upstream: $(head -n 1 "$(recorded rq_mlong${#m})" 2>/dev/null)"
done
REQ=$'PO"ST /up/v1/chat/completions?n=1&_t=rq_mtok HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}'
raw mtok
check "a method that is not a token is 400, never forwarded" \
    '[ "$CODE" = 400 ] && [ "$(received rq_mtok)" -eq 0 ]' "$CODE"
REQ=$'post /up/v1/chat/completions?n=1&_t=rq_mcase HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}'
raw mcase
check "a method goes as written: 'post' stays lower case (methods are case-sensitive)" \
    '[ "$(head -n 1 "$(recorded rq_mcase)" | cut -d" " -f1)" = post ]' \
    "$(head -n 1 "$(recorded rq_mcase)" 2>/dev/null)"

# ---- the headers: the client's, and nothing else ------------------------------
# libcurl would add Accept: */* to every request and a form Content-Type to
# every POST without one; an empty header must go, as empty
BODY='{"model":"m","stream":true}'
REQ="POST /up/v1/chat/completions?n=1&_t=rq_exact HTTP/1.1"$'\r\n'"Host: proxy.example"$'\r\nx-lower: a\r\nX-Mixed-Case: b  c\r\nAuthorization: Bearer sk-rq-SECRET\r\nX-Empty:\r\nContent-Type: application/json\r\nIdempotency-Key: rq-exact\r\nContent-Length: '"${#BODY}"$'\r\nConnection: close\r\nX-Deadline-Ms: 30000\r\n\r\n'"$BODY"
raw exact
same "the upstream gets the client's headers in order, an empty one empty, no Accept, the key and the deadline stamped" rq_exact \
    "POST /v1/chat/completions?n=1&_t=rq_exact HTTP/1.1"$'\r\nHost: 127.0.0.1:N\r\nx-lower: a\r\nX-Mixed-Case: b  c\r\nAuthorization: Bearer sk-rq-SECRET\r\nX-Empty:\r\nContent-Type: application/json\r\nIdempotency-Key: rq-exact\r\nX-Deadline-Ms: N\r\nContent-Length: '"${#BODY}"$'\r\n\r\n'"$BODY"
REQ=$'POST /up/v1/chat/completions?n=1&_t=rq_noct HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}'
raw noct
same "a POST without Content-Type gets none upstream (and no Accept)" rq_noct \
    $'POST /v1/chat/completions?n=1&_t=rq_noct HTTP/1.1\r\nHost: 127.0.0.1:N\r\nX-Deadline-Ms: N\r\nContent-Length: 2\r\n\r\n{}'
REQ=$'POST /up/v1/chat/completions?n=1&_t=rq_connct HTTP/1.1\r\nHost: p\r\nContent-Type: application/json\r\nConnection: close, Content-Type\r\nContent-Length: 2\r\n\r\n{}'
raw connct
same "a Content-Type the client's Connection names is dropped, and not replaced" rq_connct \
    $'POST /v1/chat/completions?n=1&_t=rq_connct HTTP/1.1\r\nHost: 127.0.0.1:N\r\nX-Deadline-Ms: N\r\nContent-Length: 2\r\n\r\n{}'
REQ=$'GET /up/v1/chat/completions?n=1&_t=rq_get HTTP/1.1\r\nHost: p\r\nAccept: text/event-stream\r\nUser-Agent: rq/1\r\n\r\n'
raw get
same "a GET: the client's Accept and User-Agent, once each, and no body framing" rq_get \
    $'GET /v1/chat/completions?n=1&_t=rq_get HTTP/1.1\r\nHost: 127.0.0.1:N\r\nAccept: text/event-stream\r\nUser-Agent: rq/1\r\nX-Deadline-Ms: N\r\n\r\n'
REQ=$'POST /up/v1/chat/completions?n=1&_t=rq_chunked HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n1;x=y\r\n{\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n'
raw chunked
same "a chunked body goes decoded, with its Content-Length" rq_chunked \
    $'POST /v1/chat/completions?n=1&_t=rq_chunked HTTP/1.1\r\nHost: 127.0.0.1:N\r\nContent-Type: application/json\r\nX-Deadline-Ms: N\r\nContent-Length: 2\r\n\r\n{}'
# over HTTP/2 (TLS, ALPN h2): the fields as sg-fakemodel decoded them
REQ=$'POST /tls/v1/chat/completions?n=1&_t=rq_h2 HTTP/1.1\r\nHost: p\r\nX-Empty:\r\nX-Case: v\r\nContent-Length: 2\r\n\r\n{}'
raw h2
same "over HTTP/2: the client's fields and nothing else" rq_h2 \
    $':method: POST\r\n:path: /v1/chat/completions?n=1&_t=rq_h2\r\n:scheme: https\r\n:authority: localhost:N\r\nx-empty: \r\nx-case: v\r\nx-deadline-ms: N\r\ncontent-length: 2\r\n\r\n{}'

# ---- a path that could leave its route --------------------------------------
# an upstream that drops ";" parameters, decodes %2F (or decodes twice), or
# reads "\" as "/" would resolve these outside the route's prefix
i=0
for path in '/up/v1/..;/admin' '/up/v1/..%2fadmin' '/up/v1/..%2Fadmin' '/up/v1/..\admin' \
    '/up/v1/%2e%2e;x/admin' '/up/v1/%252e%252e/admin' '/up/v1/.%2e/admin' '/up/v1/x/..' \
    '/up/v1/.;/admin' '/up/v1/%2e%2e%5cadmin' '/up/v1/%25252E./admin'; do
    i=$((i + 1))
    REQ="POST $path?_t=rq_dot$i HTTP/1.1"$'\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}'
    raw "dot$i"
    check "$path: 400, the proxy's own answer" '[ "$CODE" = 400 ] && proxy_said dot$i' \
        "$(head -c 300 "$FM_DIR/dot$i.resp")"
    check "$path: never forwarded" '[ "$(received rq_dot$i)" -eq 0 ]' \
        "upstream: $(head -n 1 "$(recorded rq_dot$i)" 2>/dev/null)"
done
# dots that are not a segment of their own, or are in the query: forwarded
REQ=$'POST /up/v1/chat/completions?n=1&_v=..;/..%2f&_t=rq_dotok HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}'
raw dotok
check "dots and escapes in the query are the upstream's: forwarded, 200" \
    '[ "$CODE" = 200 ] && [ "$(received rq_dotok)" -eq 1 ]' "$CODE"
REQ=$'POST /up/v1/chat/completions/...;x/a..b/%2e%2e%2e?n=1&_t=rq_dotok2 HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}'
raw dotok2
check "segments '...', 'a..b', '%2e%2e%2e' are no dot segments: forwarded" \
    '[ "$(received rq_dotok2)" -eq 1 ]' "$CODE $(head -c 200 "$FM_DIR/dotok2.resp")"

# ---- Expect: 100-continue ---------------------------------------------------
# curl sends it for a body over 1 MiB and waits up to a second for the
# answer before sending the body anyway
head -c 2000000 /dev/zero | tr '\0' a >"$FM_DIR/big"
t0=$(now_ms)
code=$(curl -sv -m 15 -o "$FM_DIR/big.body" -w '%{http_code}' -H 'Content-Type: text/plain' \
    --data-binary @"$FM_DIR/big" "http://127.0.0.1:$PR/up/v1/chat/completions?n=1&_t=rq_big" \
    2>"$FM_DIR/big.err")
el=$(($(now_ms) - t0))
check "a 2 MB POST (curl sends Expect: 100-continue): 200 in $el ms, its body whole upstream" \
    '[ "$code" = 200 ] && [ "$(fm_log "event=received" | grep "_t=rq_big" | grep -o "\"body_bytes\":[0-9]*" | cut -d: -f2)" = 2000000 ]' \
    "$code $(grep -i 'expect\|continue\|waiting' "$FM_DIR/big.err" | head -c 400)"
check "... the proxy answered 100 Continue, and curl did not wait it out (bound 900 ms: it waits 1000)" \
    'grep -q "^< HTTP/1.1 100 Continue" "$FM_DIR/big.err" && ! grep -q "Done waiting for 100-continue" "$FM_DIR/big.err" && [ "$el" -lt 900 ]' \
    "$el ms; $(grep -i 'continue' "$FM_DIR/big.err" | head -c 400)"
# a request that will not be read gets its final status at once, and the
# body is never sent: over --max-body (413), no route (404)
for case in "413 /up/v1/chat/completions?_t=rq_e413 $FM_DIR/big.over" "404 /nope/x?_t=rq_e404 $FM_DIR/big"; do
    read -r want path file <<<"$case"
    [ -f "$FM_DIR/big.over" ] || head -c 3000001 /dev/zero | tr '\0' a >"$FM_DIR/big.over"
    t0=$(now_ms)
    out=$(curl -s -m 15 -o /dev/null -w '%{http_code} %{size_upload}' --data-binary @"$file" \
        "http://127.0.0.1:$PR$path" 2>&1)
    el=$(($(now_ms) - t0))
    check "Expect: 100-continue to $path: $want at once ($el ms, bound 900), the body never sent (sent: ${out#* })" \
        '[ "${out% *}" = "$want" ] && [ "$el" -lt 900 ] && [ "${out#* }" -lt 65536 ]' "$out"
done
# an HTTP/1.0 client's expectation is ignored (RFC 9110 10.1.1): no 100,
# the body is waited for
exec 3<>"/dev/tcp/127.0.0.1/$PR"
printf 'POST /up/v1/chat/completions?n=1&_t=rq_e10 HTTP/1.0\r\nHost: p\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n' >&3
sleep 0.2
printf '{}' >&3
timeout 10 cat <&3 >"$FM_DIR/e10.resp"
exec 3<&-
check "Expect from an HTTP/1.0 client: no 100, the answer after the body" \
    '[ "$(head -n 1 "$FM_DIR/e10.resp" | cut -d" " -f2)" = 200 ] && ! grep -q "100 Continue" "$FM_DIR/e10.resp"' \
    "$(head -c 200 "$FM_DIR/e10.resp")"

# ---- a client that leaves cancels its operation -----------------------------
# before the commit (the upstream has not answered) and after it (mid-stream)
for case in "hang=1 rq_gone1 0" "n=200&gap=50 rq_gone2 1"; do
    read -r q tag committed <<<"$case"
    before=$(wc -l <"$FM_DIR/R.out")
    curl -sN -m 1 -o "$FM_DIR/$tag.body" -H 'Content-Type: application/json' -d '{}' \
        "http://127.0.0.1:$PR/up/v1/chat/completions?$q&_t=$tag"
    t0=$(now_ms)
    gone=
    id=$(rid "$tag")
    for _ in $(seq 1 100); do
        fm_log "event=client_gone" | grep -q "\"id\":${id}[,}]" && gone=1 && break
        sleep 0.02
    done
    el=$(($(now_ms) - t0))
    check "a client gone $([ "$committed" = 1 ] && echo mid-stream || echo "before the first token"): the upstream sees its request cancelled ($el ms after, bound 1000)" \
        '[ -n "$gone" ] && [ "$el" -lt 1000 ]' "$(fm_log "event=finished" | tail -c 300)"
    for _ in $(seq 1 100); do
        [ "$(wc -l <"$FM_DIR/R.out")" -gt "$before" ] && break
        sleep 0.02
    done
    r=$(tail -n 1 "$FM_DIR/R.out")
    check "... and the proxy's report says cancelled" \
        'jq -e ".report.outcome == \"cancelled\"" <<<"$r" >/dev/null' "$(head -c 400 <<<"$r")"
    if [ "$committed" = 1 ]; then
        check "... after tokens had reached the client" 'grep -q "\"content\":\"tok0\"" "$FM_DIR/$tag.body"'
    fi
done

# the proxy ends clean: under the sanitizer build, exit 0 means no leak
# and no error in any of the above
kill -TERM "$PX_PID"
rc=0
wait "$PX_PID" || rc=$?
check "SIGTERM: sg-proxy exits 0" '[ "$rc" -eq 0 ]' "exit $rc: $(tail -c 600 "$FM_DIR/R.err")"

fm_finish
