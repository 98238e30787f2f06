#!/usr/bin/env bash
# The checks of the exported interface catch what they exist for, run on
# variants of a small library (fixture/) built as libstreamguard is:
# hidden visibility, the export map, a SONAME from a SOVERSION.
#  - the ABI check (scripts/abi.sh) passes the library unchanged, with a
#    function added, and with an opaque type grown; it fails a function
#    removed, a struct the caller allocates grown, a signature changed, and
#    a SOVERSION bumped without a new baseline.  Writing the baseline is
#    refused for an incompatible change of the same SOVERSION, and taken
#    after the bump (the older baseline goes).
#  - the export check (exports.sh) passes the fixture; an sg__ helper of
#    default visibility stays inside through the map and fails the check
#    without it; an exported name no public header declares fails it.
# Usage: checks_test.sh SOURCE_DIR C_COMPILER
set -euo pipefail
src=$1
cc=$2
if ! command -v abidw >/dev/null || ! command -v abidiff >/dev/null; then
  echo "checks: abidw/abidiff not found (Debian: abigail-tools): skipped"
  exit 77
fi
fx=$src/tests/build/fixture
abi_sh=$src/scripts/abi.sh
exports_sh=$src/tests/build/exports.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
passed=0

# lib NAME SOVERSION MAP(map|nomap) DEFINE...: builds a variant, prints its path
lib() {
  local name=$1 so=$2 map=$3
  shift 3
  local link=()
  if [ "$map" = map ]; then
    sed "s/@SG_SOVERSION@/$so/" "$src/cmake/streamguard.map.in" >"$tmp/$name.map"
    link=("-Wl,--version-script=$tmp/$name.map")
  fi
  mkdir -p "$tmp/$name"
  "$cc" -std=c11 -g -O2 -fPIC -shared -fvisibility=hidden -I "$fx/include" "$@" \
    "$fx/fixture.c" "-Wl,-soname,libstreamguard.so.$so" "${link[@]}" \
    -o "$tmp/$name/libstreamguard.so"
  echo "$tmp/$name/libstreamguard.so"
}

# expect pass|fail WHAT COMMAND...
expect() {
  local want=$1 what=$2 got
  shift 2
  if "$@" >"$tmp/out" 2>&1; then got=pass; else got=fail; fi
  if [ "$got" != "$want" ]; then
    echo "checks: $what: expected $want, got $got:"
    sed 's/^/    /' "$tmp/out"
    fail=1
  else
    echo "checks: $what: $got ($(grep -m1 -E '^abi: |^exports: ' "$tmp/out" | cut -c1-110))"
    passed=$((passed + 1))
  fi
}

abi=$tmp/abi
inc=$fx/include
base=$(lib base 0 map)
"$abi_sh" write "$base" "$inc" "$abi" >/dev/null

expect pass "unchanged" "$abi_sh" check "$base" "$inc" "$abi"
expect pass "a function added" "$abi_sh" check "$(lib add 0 map -DFX_ADD)" "$inc" "$abi"
expect pass "an opaque type grown" \
  "$abi_sh" check "$(lib opaque 0 map -DFX_GROW_OPAQUE)" "$inc" "$abi"
removed=$(lib remove 0 map -DFX_REMOVE)
expect fail "a function removed" "$abi_sh" check "$removed" "$inc" "$abi"
expect fail "a struct the caller allocates grown" \
  "$abi_sh" check "$(lib grow 0 map -DFX_GROW)" "$inc" "$abi"
expect fail "a signature changed" "$abi_sh" check "$(lib change 0 map -DFX_CHANGE)" "$inc" "$abi"
bumped=$(lib bumped 1 map -DFX_REMOVE)
expect fail "a SOVERSION bumped without a new baseline" "$abi_sh" check "$bumped" "$inc" "$abi"
expect fail "a new baseline for a removal, same SOVERSION" "$abi_sh" write "$removed" "$inc" "$abi"
expect pass "... which left the baseline as it was" "$abi_sh" check "$base" "$inc" "$abi"
expect pass "a new baseline after the bump" "$abi_sh" write "$bumped" "$inc" "$abi"
expect pass "... which the bumped library matches" "$abi_sh" check "$bumped" "$inc" "$abi"
expect fail "... and the older baseline is gone" test -f "$abi/libstreamguard.so.0.abi"

full=$(lib full 0 map -DFX_ADD)
expect pass "exports of the fixture" "$exports_sh" "$full" "$inc" 0
expect pass "an sg__ helper of default visibility, with the map" \
  "$exports_sh" "$(lib internal 0 map -DFX_ADD -DFX_INTERNAL)" "$inc" 0
expect fail "the same without the map" \
  "$exports_sh" "$(lib internal_nomap 0 nomap -DFX_ADD -DFX_INTERNAL)" "$inc" 0
expect fail "an exported name no public header declares" \
  "$exports_sh" "$(lib secret 0 map -DFX_ADD -DFX_UNDECLARED)" "$inc" 0
expect fail "a function a public header declares, not exported" \
  "$exports_sh" "$base" "$inc" 0

if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "checks: $passed cases as expected"
