#!/usr/bin/env bash
# sg-proxy's endpoint health shared by the proxies of a fleet through
# PostgreSQL (docs/sg-proxy.md, "ENDPOINT HEALTH"; docs/health.md): two
# sg-proxy processes in front of one sg-fakemodel, one scratch PostgreSQL
# (pg_lib.sh), one key file.  A 429's Retry-After learned by proxy A makes
# proxy B answer at once, nothing sent upstream (sg-fakemodel's /_stats),
# within 100 ms; a breaker opened by A's failures does the same (503
# circuit_open); a proxy with another key does not match; a proxy started
# later (its key from SG_PROXY_HEALTH_KEY) reads what holds from the
# table; the database stopped mid-run - each proxy says it once on stderr,
# goes on with its own health, reconnects after the restart and what was
# learned meanwhile reaches the other; the key never shows; bad values
# are usage errors.
# Usage: sg_proxy_health_share_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream
. "$(dirname "$0")/../integration/pg_lib.sh"
trap 'px_cleanup; pg_cleanup' EXIT
pg_start

px_upstream
CC=/v1/chat/completions
KEY=$FM_DIR/health.key
head -c 32 /dev/urandom | base64 >"$KEY"
chmod 600 "$KEY"
SECRET=$(head -n 1 "$KEY")

# share NAME [options...]: a proxy sharing through the scratch server.
share() {
    local name=$1
    shift
    px_start "$name" --upstream "$UP" --profile openai --budget 2s --attempts 1 \
        --breaker-failures 2 --breaker-cooldown 20s --health-share "$PG_URI" "$@"
}

# connected BASE: BASE's /metrics says it is connected, within 10 s.
connected() {
    local i
    for i in $(seq 1 200); do
        curl -s "$1/metrics" | grep -qx 'sg_proxy_health_share_connected 1' && return 0
        sleep 0.05
    done
    return 1
}

# refused_now TAG URL: URL's answer (TAG) is the proxy's own refusal.
refused_now() {
    px_ask "$2" "$1"
    [ "$(px_header "$1" X-SG-Outcome)" = refused ]
}

share a --health-key-file "$KEY"
A=http://127.0.0.1:$PX_PORT
share b --health-key-file "$KEY"
B=http://127.0.0.1:$PX_PORT
other=$FM_DIR/other.key
head -c 32 /dev/urandom | base64 >"$other"
chmod 600 "$other"
share c --health-key-file "$other"
C=http://127.0.0.1:$PX_PORT
for base in "$A" "$B" "$C"; do
    connected "$base" && pass "$base: connected to the database" || fail "$base: not connected"
done

# ---- a 429 learned by A: B answers at once, nothing sent ----------------------
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' "$A$CC?status=429&retry_after=30&_t=s_ra1")
[ "$code" = 429 ] && pass "A: the upstream's 429 passes through" || fail "A: $code"
t0=$(date +%s%N)
# how soon B's /metrics says cooling (each look a curl: an upper bound)
seen=
for _ in $(seq 1 400); do
    if curl -s "$B/metrics" | grep -F "sg_proxy_upstream_state{upstream=\"$UP$CC\"" |
        grep -qF 'state="cooling"} 1'; then
        seen=$(($(date +%s%N) - t0))
        break
    fi
done
[ -n "$seen" ] && echo "measured: B cooling $((seen / 1000)) us after A's 429 reached its client" ||
    fail "B never cooling"
# 100 ms after A's answer, B holds the upstream back
sleep 0.1
px_refused "$B$CC?n=2&_t=s_ra2" s_ra2 429 rate_limited 30 '"code":"rate_limit_exceeded"'
# another key is another fleet: C does not match A's keys
curl -sN -o "$FM_DIR/c1" -X POST -d '{}' "$C$CC?n=2&_t=s_c1"
has "$FM_DIR/c1" 'data: [DONE]' "C (another key): the request goes upstream"
curl -s "$B/metrics" >"$FM_DIR/b.metrics"
grep -qE '^sg_proxy_health_share_facts_total\{event="applied"\} [1-9]' "$FM_DIR/b.metrics" &&
    pass "B's /metrics: facts applied" || fail "B's /metrics: $(grep health_share "$FM_DIR/b.metrics")"

# ---- a proxy started later learns from the table (its key from the environment)
SG_PROXY_HEALTH_KEY=$SECRET share d
D=http://127.0.0.1:$PX_PORT
connected "$D" && pass "D: connected" || fail "D: not connected"
px_refused "$D$CC?n=2&_t=s_d1" s_d1 429 rate_limited 30 '"code":"rate_limit_exceeded"'

# ---- a breaker opened by A's failures: B answers 503 at once -------------------
CO=/v1/completions
for i in 1 2; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST \
        -H 'X-SG-Scenario: status=500&fail_first=2&fail_key=s_br' -d '{}' "$A$CO?n=2&_t=s_br$i")
    [ "$code" = 502 ] || fail "A: failure $i: $code"
done
sleep 0.1
px_refused "$B$CO?n=2&_t=s_br3" s_br3 503 circuit_open 20 '"code":"circuit_open"'

# ---- the database stopped mid-run ------------------------------------------------
# said_count NAME TEXT: lines of proxy NAME's stderr holding TEXT
said_count() { grep -cF -- "$2" "$FM_DIR/$1.err"; }
pg_stop
for n in a b; do
    for _ in $(seq 1 100); do
        [ "$(said_count $n 'health share: database lost (')" -ge 1 ] && break
        sleep 0.05
    done
done
ST=/stream
curl -s -o /dev/null -X POST -d '{}' "$A$ST?status=429&retry_after=30&_t=s_dn1"
px_refused "$A$ST?n=2&_t=s_dn2" s_dn2 429 rate_limited 30 '"code":"rate_limit_exceeded"'
curl -sN -o "$FM_DIR/dn3" -X POST -d '{}' "$B$ST?n=2&_t=s_dn3"
has "$FM_DIR/dn3" 'data: [DONE]' "B, the database gone, does not know: the request goes upstream"
sleep 1 # several tries to reconnect, each unsaid
pg_start_again || fail "restart"
for base in "$A" "$B"; do
    connected "$base" && pass "$base: reconnected after the restart" || fail "$base: not back"
done
ok=
for i in $(seq 1 50); do
    if refused_now "s_up$i" "$B$ST?n=2&_t=s_up$i"; then
        ok=1
        break
    fi
    sleep 0.1
done
[ -n "$ok" ] && pass "what A learned while it was gone reached B once it was back" ||
    fail "B never held $ST back: $(tr -d '\r' <"$FM_DIR/s_up$i.head" | head -n 1)"
for n in a b; do
    [ "$(said_count $n 'health share: database lost (')" -eq 1 ] &&
        [ "$(said_count $n 'endpoint health is this process')" -eq 1 ] &&
        [ "$(said_count $n 'health share: database reachable again after')" -eq 1 ] &&
        pass "$n: the loss said once on stderr, the return once" ||
        fail "$n's stderr: $(cat "$FM_DIR/$n.err")"
done
curl -s "$A/metrics" | grep -qx 'sg_proxy_health_share_losses_total 1' &&
    pass "A's /metrics: one loss" || fail "A's /metrics: $(curl -s "$A/metrics" | grep losses)"

# ---- the key never shows ------------------------------------------------------------
for base in "$A" "$B"; do
    curl -s "$base/metrics" >>"$FM_DIR/all.metrics"
done
if grep -qF -- "$SECRET" "$FM_DIR"/*.out "$FM_DIR"/*.err "$FM_DIR/all.metrics"; then
    fail "the key shows in an output"
else
    pass "the key is in no output, log or /metrics"
fi

# ---- bad values --------------------------------------------------------------------
loose=$FM_DIR/loose.key
cp "$KEY" "$loose"
chmod 644 "$loose"
short=$FM_DIR/short.key
printf 'too-short\n' >"$short"
chmod 600 "$short"
bad() { # WHAT TEXT -- ARGS...: exit 2, stderr holding TEXT
    local what=$1 text=$2
    shift 3
    env -u SG_PROXY_HEALTH_KEY "$PX" --upstream "$UP" --profile openai "$@" \
        >"$FM_DIR/bad.out" 2>"$FM_DIR/bad.err"
    local rc=$?
    [ "$rc" -eq 2 ] && grep -qF -- "$text" "$FM_DIR/bad.err" && pass "$what: exit 2, '$text'" ||
        fail "$what: exit $rc, $(cat "$FM_DIR/bad.err")"
}
bad "not a postgresql:// URI" "health-share takes a postgresql:// URI" -- --health-share mysql://db
bad "no key" "--health-key-file PATH (or SG_PROXY_HEALTH_KEY)" -- --health-share "$PG_URI"
bad "a key others may read" "readable by others" -- --health-share "$PG_URI" --health-key-file "$loose"
bad "a key too short" "the health key holds 9 bytes" -- --health-share "$PG_URI" --health-key-file "$short"
bad "no key file" "cannot open --health-key-file" -- --health-share "$PG_URI" --health-key-file "$FM_DIR/none"

px_stop_all
fm_finish
