#!/usr/bin/env bash
# sg-proxy's systemd unit, as the build configured it for installation:
# `systemd-analyze verify` finds nothing to say about it (its ExecStart
# pointed at the built program, which the installed path may not hold
# yet), it carries the hardening the service needs (DynamicUser,
# ProtectSystem=strict, NoNewPrivileges, RestrictAddressFamilies, no
# capabilities), and `systemd-analyze security --offline` rates its
# exposure at most 2.0 ("OK").  Skipped (77) without systemd-analyze.
# Usage: sg_proxy_unit_test.sh UNIT_FILE SG_PROXY
set -u
UNIT=$1
PX=$(realpath "$2")
command -v systemd-analyze >/dev/null ||
    { echo "skip: systemd-analyze is not installed: the unit is not checked"; exit 77; }
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
DIR=$(mktemp -d "${TMPDIR:-/tmp}/sg-proxy-unit.XXXXXX")
trap 'rm -rf "$DIR"' EXIT

[ -f "$UNIT" ] || { echo "FAIL: no unit at $UNIT" >&2; exit 1; }
exec_bin=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$UNIT")
case "$exec_bin" in
*/sg-proxy) pass "ExecStart runs $exec_bin" ;;
*) fail "ExecStart is not sg-proxy: $exec_bin" ;;
esac
sed "s|^ExecStart=[^ ]*|ExecStart=$PX|" "$UNIT" >"$DIR/sg-proxy.service"

if systemd-analyze verify "$DIR/sg-proxy.service" >"$DIR/verify" 2>&1 && [ ! -s "$DIR/verify" ]; then
    pass "systemd-analyze verify: clean"
else
    fail "systemd-analyze verify: $(cat "$DIR/verify")"
fi

for want in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes \
    'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' CapabilityBoundingSet= \
    ExecReload= KillSignal=SIGTERM LimitNOFILE=; do
    grep -q "^$want" "$UNIT" && pass "$want" || fail "the unit lacks $want"
done

systemd-analyze security --offline=yes --no-pager "$DIR/sg-proxy.service" >"$DIR/security" 2>&1
level=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$DIR/security")
if [ -n "$level" ] && awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }'; then
    pass "exposure level $level"
else
    fail "exposure level ${level:-?}: $(tail -n 3 "$DIR/security")"
fi

[ "$FAILS" -eq 0 ] || { echo "$FAILS failure(s)" >&2; exit 1; }
echo "all passed"
