#!/usr/bin/env bash
# sg-proxy in front of an upstream that speaks HTTP/2 over TLS (ALPN h2),
# with the curl command as the client and a real sg-fakemodel as the
# upstream: a request the upstream says it never processed -
# RST_STREAM(REFUSED_STREAM), or a stream above a GOAWAY's last stream id
# (RFC 9113 §8.7) - is retried by the proxy as never sent, a POST without
# an idempotency key too, and is never answered X-SG-Outcome-Unknown; each
# request that reached the upstream is an attempt in the proxy's report.
# The refused requests go on a pooled connection, as they do in a proxy
# that has been serving.
# Usage: sg_proxy_h2_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream

px_upstream
UP=https://127.0.0.1:$FM_PORT
BODY='{"model":"sg-fakemodel","stream":true,"messages":[{"role":"user","content":"hi"}]}'

# post NAME PORT TAG QUERY: an unsafe POST (no Idempotency-Key) through
# proxy NAME; headers to TAG.hdr, body to TAG.body, the status in $CODE,
# and the proxy's report line for it in $REP.
post() {
    local name=$1 port=$2 tag=$3 query=$4 before
    before=$(wc -l <"$FM_DIR/$name.out")
    CODE=$(curl -sN -m 15 -o "$FM_DIR/$tag.body" -D "$FM_DIR/$tag.hdr" -w '%{http_code}' \
        -H 'Content-Type: application/json' -d "$BODY" \
        "http://127.0.0.1:$port/v1/chat/completions?$query&_t=$tag")
    for _ in $(seq 1 100); do
        [ "$(wc -l <"$FM_DIR/$name.out")" -gt "$before" ] && break
        sleep 0.05
    done
    REP=$(sed -n "$((before + 1))p" "$FM_DIR/$name.out")
}

# hdr TAG NAME: the value of response header NAME (case-insensitive).
hdr() {
    grep -i "^$2:" "$FM_DIR/$1.hdr" | head -n 1 | sed 's/^[^:]*: *//' | tr -d '\r'
}

# received TAG: how many requests tagged TAG reached the upstream.
received() {
    fm_log event=received | grep -c "_t=$1\""
}

check() {
    if eval "$2"; then pass "$1"; else fail "$1${3:+: $3}"; fi
}

jqcheck() {
    if jq -e "$3" <<<"$2" >/dev/null 2>&1; then pass "$1"; else fail "$1: $(head -c 900 <<<"$2")"; fi
}

px_start R --upstream "$UP" --cacert "$FM_CA" --profile openai --attempts 3
post R "$PX_PORT" warm "n=1"
check "a first request through the proxy is served over TLS h2" \
    '[ "$CODE" = 200 ] && fm_log event=received | grep "_t=warm\"" | grep -q "\"proto\":\"h2\",\"tls\":true"' \
    "$CODE $(fm_log event=received | grep "_t=warm\"")"

for how in refuse goaway; do
    # the first request is refused (fail_first counts requests without a key
    # together: a fresh count for each)
    curl -sS -m 5 -X POST "http://127.0.0.1:$FM_PORT/_log/reset" >/dev/null
    post R "$PX_PORT" "r_$how" "n=2&$how=1&fail_first=1"
    check "$how: the POST is answered 200 with its stream" \
        '[ "$CODE" = 200 ] && [ "$(grep -c "\"content\":\"tok" "$FM_DIR/r_$how.body")" -eq 2 ] && grep -q "^data: \[DONE\]" "$FM_DIR/r_$how.body"' \
        "$CODE $(head -c 300 "$FM_DIR/r_$how.body")"
    check "$how: no X-SG-Outcome-Unknown" '[ -z "$(hdr "r_$how" X-SG-Outcome-Unknown)" ]'
    check "$how: two requests reached the upstream, the first sent away ($how)" \
        '[ "$(received "r_$how")" -eq 2 ] && fm_log event=finished | head -n 2 | grep -q "\"reason\":\"${how/refuse/refused}\""' \
        "$(fm_log event=finished)"
    jqcheck "$how: the report has both as attempts, the first never sent and retried" "$REP" \
        '.report.outcome == "ok" and (.report.attempts | length) == 2 and
         (.report.attempts[0] | .outcome == "transport_error" and .phase == "send" and
          .sent == false and .outcome_unknown == false and .decision == "retry" and
          (.error | endswith("never processed")))'
done

# one attempt: the answer says what happened - nothing was processed
px_start S --upstream "$UP" --cacert "$FM_CA" --profile openai --attempts 1
post S "$PX_PORT" warm1 "n=1"
for how in refuse goaway; do
    post S "$PX_PORT" "s_$how" "n=2&$how=1"
    check "$how, one attempt: 502, X-SG-Outcome: transport_error, no X-SG-Outcome-Unknown" \
        '[ "$CODE" = 502 ] && [ "$(hdr "s_$how" X-SG-Outcome)" = transport_error ] && [ -z "$(hdr "s_$how" X-SG-Outcome-Unknown)" ]' \
        "$CODE $(cat "$FM_DIR/s_$how.hdr")"
    check "$how, one attempt: one request reached the upstream" '[ "$(received "s_$how")" -eq 1 ]'
    jqcheck "$how, one attempt: the report says never sent, not outcome unknown" "$REP" \
        '.report.outcome == "transport_error" and .report.outcome_unknown == false and
         (.report.attempts | length) == 1 and
         (.report.attempts[0] | .sent == false and .phase == "send" and .outcome_unknown == false)'
done

px_stop_all
fm_finish
