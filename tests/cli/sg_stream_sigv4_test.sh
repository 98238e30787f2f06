#!/usr/bin/env bash
# AWS Signature Version 4 end to end: sg-fakemodel --sigv4-key verifies, and
# two signers no one here wrote are held to it - libcurl's, through
# sg-stream --aws-sigv4 (CURLOPT_AWS_SIGV4), and the curl command's own
# --aws-sigv4.  A good signature streams (also on the hedge's duplicated
# handle and on a fallback endpoint); a wrong secret or an unknown key gets
# Bedrock's 403; missing credentials are a usage error before anything is
# sent; the secret and the session token appear in no output and no report.
#
# The key is a test key, for this server only.  Query parameters are
# written in sorted order: libcurl 7.88 (Debian 12) signs the query as
# written instead of sorting it (curl/curl#9717), which AWS - and this
# verifier - refuse for an unsorted query.
# Usage: sg_stream_sigv4_test.sh SG_STREAM SG_FAKEMODEL
set -u
SG=$1
FM=$2
dir=$(cd "$(dirname "$0")" && pwd)
. "$dir/../integration/fakemodel_lib.sh"

KEY_ID=AKIDSGFAKEMODELTEST
SECRET=sg-fakemodel-test-secret-never-real
WRONG=sg-fakemodel-wrong-secret-never-real
TOKEN=sg-fakemodel-test-session-token
fm_start "$FM" --sigv4-key "$KEY_ID:$SECRET"
BASE=http://127.0.0.1:$FM_PORT
TLS=https://localhost:$FM_PORT
OUT=$FM_DIR/out.txt
ERR=$FM_DIR/err.txt
REP=$FM_DIR/report.json
SIGN=aws:amz:us-east-1:bedrock
CONVERSE=/model/sg-fake/converse-stream
BODY='{"messages":[{"role":"user","content":[{"text":"hi"}]}]}'
# The signature is the subject here, so the Bedrock path plays plain
# OpenAI-style SSE (format=openai); sg_stream_bedrock_test.sh signs
# Bedrock's own event streams, read with --profile bedrock-*.
SSE="$CONVERSE?format=openai&gap=5&n=3"

# creds SECRET TOKEN -- ARGS: sg-stream with those credentials
with() {
    local secret=$1 token=$2
    shift 3
    AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$secret AWS_SESSION_TOKEN=$token "$SG" "$@"
}
reason() { fm_field "$1" finished reason; }
no_secrets() {
    for f in "$OUT" "$ERR" "$REP"; do
        [ -f "$f" ] || continue
        if grep -qF -e "$SECRET" -e "$WRONG" -e "$TOKEN" "$f"; then
            fail "$1: a secret or the session token in $(basename "$f")"
        fi
    done
}

# ---- a good signature: 200 and the stream
rm -f "$REP"
with "$SECRET" "" -- --aws-sigv4 "$SIGN" --idempotency-key sv-ok -d "$BODY" --report "$REP" \
    -w '%{outcome} %{http_status} %{items}\n' "$BASE$SSE" >"$OUT" 2>"$ERR"
RC=$?
[ "$RC" = 0 ] && [ "$(tail -n 1 "$OUT")" = "ok 200 3" ] && pass "signed: ok 200 3" ||
    fail "signed: rc=$RC $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
grep -q '"content":"tok2"' "$OUT" || fail "signed: no tok2"
[ "$(reason sv-ok)" = done ] || fail "signed: server reason $(reason sv-ok)"
no_secrets signed

# ---- temporary credentials: the session token signed as x-amz-security-token
rm -f "$REP"
with "$SECRET" "$TOKEN" -- --aws-sigv4 "$SIGN" --idempotency-key sv-token -d "$BODY" \
    --report "$REP" -w '%{outcome} %{http_status}\n' "$BASE$SSE" >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok 200" ] && pass "session token: ok 200" ||
    fail "session token: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
no_secrets "session token"

# ---- TLS (libcurl negotiates h2 itself; streamguard's h2 transport is not used)
with "$SECRET" "" -- --aws-sigv4 "$SIGN" --cacert "$FM_CA" --idempotency-key sv-tls \
    -d "$BODY" -w '%{outcome} %{http_status}\n' "$TLS$SSE" >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok 200" ] && pass "https: ok 200" ||
    fail "https: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
[ "$(fm_log 'key=sv-tls&event=received' | grep -c '"proto":"h2","tls":true')" = 1 ] ||
    fail "https: not received over h2 + TLS"

# ---- a wrong secret: 403, http_error, the verifier says why
rm -f "$REP"
with "$WRONG" "$TOKEN" -- --aws-sigv4 "$SIGN" --idempotency-key sv-wrong -d "$BODY" \
    --report "$REP" -w '%{outcome} %{http_status}\n' "$BASE$SSE" >"$OUT" 2>"$ERR"
RC=$?
[ "$RC" = 7 ] && [ "$(tail -n 1 "$OUT")" = "http_error 403" ] && pass "wrong secret: http_error 403" ||
    fail "wrong secret: rc=$RC $(tail -n 1 "$OUT")"
[ "$(reason sv-wrong)" = sigv4_mismatch ] || fail "wrong secret: server reason $(reason sv-wrong)"
no_secrets "wrong secret"

# ---- an unknown access key id
AWS_ACCESS_KEY_ID=AKIDSOMEONEELSE AWS_SECRET_ACCESS_KEY=$SECRET "$SG" --aws-sigv4 "$SIGN" \
    --idempotency-key sv-akid -w '%{outcome} %{http_status}\n' "$BASE$SSE" >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "http_error 403" ] && [ "$(reason sv-akid)" = sigv4_unknown_key ] &&
    pass "unknown key id: 403" || fail "unknown key id: $(tail -n 1 "$OUT") $(reason sv-akid)"

# ---- no signature at all
"$SG" --idempotency-key sv-none -w '%{outcome} %{http_status}\n' "$BASE$SSE" >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "http_error 403" ] && [ "$(reason sv-none)" = sigv4_missing ] &&
    pass "unsigned: 403" || fail "unsigned: $(tail -n 1 "$OUT") $(reason sv-none)"

# ---- missing credentials, or --http2: usage errors, nothing is sent
before=$(fm_log 'event=received' | grep -c '"event":"received"')
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY "$SG" --aws-sigv4 "$SIGN" "$BASE$SSE" \
    >"$OUT" 2>"$ERR"
RC=$?
[ "$RC" = 2 ] && grep -q 'needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY' "$ERR" &&
    pass "no credentials: usage error" || fail "no credentials: rc=$RC $(cat "$ERR")"
AWS_ACCESS_KEY_ID=$KEY_ID "$SG" --aws-sigv4 "$SIGN" "$BASE$SSE" >"$OUT" 2>"$ERR"
[ "$?" = 2 ] || fail "no secret: not a usage error"
with "$SECRET" "" -- --http2 --aws-sigv4 "$SIGN" "$BASE$SSE" >"$OUT" 2>"$ERR"
[ "$?" = 2 ] && grep -q 'drop --http2' "$ERR" && pass "--http2: usage error" ||
    fail "--http2: $(cat "$ERR")"
"$SG" --aws-sigv4 'aws amz' "$BASE$SSE" >"$OUT" 2>"$ERR"
[ "$?" = 2 ] || fail "a malformed --aws-sigv4: not a usage error"
[ "$(fm_log 'event=received' | grep -c '"event":"received"')" = "$before" ] &&
    pass "usage errors sent nothing" || fail "a usage error sent a request"

# ---- the hedge runs on a duplicate of the easy handle: it is signed too
with "$SECRET" "" -- --aws-sigv4 "$SIGN" --budget 10s --hedge-after 100ms \
    --idempotency-key sv-hedge -d "$BODY" -w '%{outcome} %{attempts} %{items}\n' \
    "$BASE$CONVERSE?format=openai&n=3&tail_delay=5000&tail_first=1" >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok 2 3" ] && pass "hedge: the signed hedge won" ||
    fail "hedge: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
[ "$(fm_count sv-hedge received)" = 2 ] || fail "hedge: $(fm_count sv-hedge received) requests"
if fm_log 'key=sv-hedge&event=finished' | grep -q 'sigv4_'; then
    fail "hedge: a request was refused by the verifier"
fi

# ---- a fallback endpoint: the next attempt, signed for its own path
with "$SECRET" "" -- --aws-sigv4 "$SIGN" --budget 10s --attempts 2 --idempotent \
    --idempotency-key sv-fallback -d "$BODY" -w '%{outcome} %{attempts}\n' \
    --fallback "$BASE/model/sg-other/converse-stream?format=openai&n=2" \
    "$BASE$CONVERSE?format=openai&status=503" >"$OUT" 2>"$ERR"
[ "$(tail -n 1 "$OUT")" = "ok 2" ] && pass "fallback: signed on the second endpoint" ||
    fail "fallback: $(tail -n 1 "$OUT") $(head -c 300 "$ERR")"
L=$(fm_log 'key=sv-fallback&event=finished')
echo "$L" | grep -q '"reason":"status","status":503' && echo "$L" | grep -q '"reason":"done"' ||
    fail "fallback: server log $L"

# ---- the server's option itself
for bad in nocolon :secret AKID: ''; do
    "$FM" --port 0 --sigv4-key "$bad" >/dev/null 2>"$ERR"
    [ "$?" = 2 ] && grep -q 'takes ACCESS_KEY_ID:SECRET' "$ERR" ||
        fail "sg-fakemodel --sigv4-key '$bad': not a usage error"
done
pass "sg-fakemodel --sigv4-key checks its value"

# ---- the curl command's own signer against the verifier
if curl --help all 2>/dev/null | grep -q -- '--aws-sigv4'; then
    for proto in --http1.1 --http2-prior-knowledge; do
        CODE=$(curl -sS "$proto" --aws-sigv4 "$SIGN" --user "$KEY_ID:$SECRET" -X POST \
            -H 'Content-Type: application/json' -d "$BODY" -o "$FM_DIR/c.bin" -D "$FM_DIR/c.h" \
            -w '%{http_code}' "$BASE$CONVERSE?gap=5&n=2" 2>"$ERR")
        [ "$CODE" = 200 ] && grep -qi '^content-type: application/vnd.amazon.eventstream' "$FM_DIR/c.h" &&
            pass "curl --aws-sigv4 $proto: 200" || fail "curl --aws-sigv4 $proto: $CODE $(cat "$ERR")"
        CODE=$(curl -sS "$proto" --aws-sigv4 "$SIGN" --user "$KEY_ID:$SECRET" \
            -H "x-amz-security-token: $TOKEN" -o /dev/null -w '%{http_code}' \
            "$BASE$CONVERSE?n=1" 2>"$ERR")
        [ "$CODE" = 200 ] || fail "curl --aws-sigv4 $proto with a session token: $CODE"
        CODE=$(curl -sS "$proto" --aws-sigv4 "$SIGN" --user "$KEY_ID:$WRONG" -d "$BODY" \
            -o "$FM_DIR/c.bin" -D "$FM_DIR/c.h" -w '%{http_code}' "$BASE$CONVERSE" 2>"$ERR")
        [ "$CODE" = 403 ] && grep -qi '^x-amzn-errortype: InvalidSignatureException' "$FM_DIR/c.h" &&
            grep -q '^{"message":"The request signature we calculated does not match' "$FM_DIR/c.bin" &&
            pass "curl --aws-sigv4 $proto, wrong secret: 403 InvalidSignatureException" ||
            fail "curl --aws-sigv4 $proto, wrong secret: $CODE $(cat "$FM_DIR/c.bin")"
    done
    CODE=$(curl -sS --cacert "$FM_CA" --resolve "localhost:$FM_PORT:127.0.0.1" \
        --aws-sigv4 "$SIGN" --user "$KEY_ID:$SECRET" -d "$BODY" -o /dev/null \
        -w '%{http_code} %{http_version}' "$TLS/model/sg-fake/invoke-with-response-stream" 2>"$ERR")
    [ "$CODE" = "200 2" ] && pass "curl --aws-sigv4 over TLS h2: 200" || fail "curl TLS: $CODE"
    # a body changed after signing: what the verifier's payload hash catches
    AUTH=$(curl -sS -v --aws-sigv4 "$SIGN" --user "$KEY_ID:$SECRET" -d "$BODY" -o /dev/null \
        "$BASE$CONVERSE?n=1" 2>&1 | sed -n 's/^> \(Authorization: .*\)\r$/\1/p;s/^> \(X-Amz-Date: .*\)\r$/\1/p')
    mapfile -t SIGNED <<<"$AUTH"
    CODE=$(curl -sS -H "${SIGNED[0]}" -H "${SIGNED[1]}" -d "${BODY/hi/ho}" -o /dev/null \
        -w '%{http_code}' "$BASE$CONVERSE?n=1")
    [ "$CODE" = 403 ] && pass "a body changed after signing: 403" || fail "changed body: $CODE"
    CODE=$(curl -sS -H "${SIGNED[0]}" -H "${SIGNED[1]}" -d "$BODY" -o /dev/null \
        -w '%{http_code}' "$BASE$CONVERSE?n=1")
    [ "$CODE" = 200 ] || fail "the same signed headers replayed with the same body: $CODE"
else
    fail "this curl has no --aws-sigv4 (7.75 or later needed)"
fi

fm_finish
