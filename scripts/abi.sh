#!/usr/bin/env bash
# libstreamguard's ABI against the committed baseline, with libabigail
# (Debian abigail-tools: abidw, abidiff).  README, "Changing the public
# API", says when to run what.
#
#   scripts/abi.sh update [--force]
#       Builds the release libraries (every part, RelWithDebInfo:
#       libstreamguard and libstreamguard-otel) and writes the ABI of each
#       as its baseline abi/<SONAME>.abi, removing the baselines of the
#       same library's other SONAMEs.  Refuses a change that breaks the baseline of the
#       same SONAME: bump SG_SOVERSION first (--force overrides, after you
#       have read abidiff's report and judged it compatible).
#   scripts/abi.sh check LIBRARY INCLUDE_DIR ABI_DIR
#       What the test abi.check runs: LIBRARY's ABI against
#       ABI_DIR/<its SONAME>.abi.  Passes when nothing changed but
#       additions (new functions, new variables); fails on anything else,
#       and when there is no baseline for the SONAME (a SOVERSION bumped
#       without a new baseline).
#
# Only the public interface counts: the functions the library exports and
# the types of the public headers (INCLUDE_DIR/streamguard) they reach;
# an opaque type's insides are private (--drop-private-types).  Changes a
# release may make without a bump - the unstable/ headers, a record the
# library hands out that grows at its end - are suppressed in
# ABI_DIR/streamguard.abignore (libabigail's suppression format).
set -euo pipefail

die() {
  echo "abi: $*" >&2
  exit 1
}
need_tools() {
  command -v abidw >/dev/null && command -v abidiff >/dev/null ||
    die "abidw and abidiff not found (Debian: abigail-tools; scripts/setup.sh installs it)"
}

soname_of() { # LIBRARY
  readelf -d "$1" | sed -nE 's/.*\(SONAME\).*\[([^]]+)\].*/\1/p'
}

# dump LIBRARY INCLUDE_DIR OUT: the ABI as abidw writes it, without what
# changes when nothing did (paths, line numbers, DT_NEEDED).
dump() {
  abidw --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
    --drop-private-types --headers-dir "$2/streamguard" --out-file "$3" "$1"
}

# compare BASELINE CURRENT ABI_DIR: 0 when CURRENT changes nothing of
# BASELINE but adds; else prints abidiff's report and returns 1.
compare() {
  local suppr=() rc=0
  if [ -f "$3/streamguard.abignore" ]; then
    suppr=(--suppressions "$3/streamguard.abignore")
  fi
  abidiff --no-added-syms "${suppr[@]}" "$1" "$2" >"$tmp/report" || rc=$?
  if [ "$rc" -eq 0 ]; then
    abidiff "${suppr[@]}" "$1" "$2" >"$tmp/added" || true
    local added
    added=$(grep -cE '^  \[A\] ' "$tmp/added" || true)
    if [ "$added" -gt 0 ]; then
      echo "abi: $added added since the baseline (compatible; scripts/abi.sh update records them):"
      grep -E '^  \[A\] ' "$tmp/added" | sed 's/^/abi:/'
    fi
    return 0
  fi
  if [ $((rc & 3)) -ne 0 ]; then
    die "abidiff could not compare (exit $rc): $(cat "$tmp/report")"
  fi
  cat "$tmp/report" >&2
  return 1
}

check() { # LIBRARY INCLUDE_DIR ABI_DIR
  local lib=$1 inc=$2 dir=$3 soname
  soname=$(soname_of "$lib")
  [ -n "$soname" ] || die "$lib has no SONAME"
  if [ ! -f "$dir/$soname.abi" ]; then
    local have
    have=$(cd "$dir" && ls -- *.abi 2>/dev/null | tr '\n' ' ' || true)
    die "no baseline for $soname in $dir (there is: ${have:-none}): after bumping" \
      "SG_SOVERSION, run scripts/abi.sh update and commit the new baseline"
  fi
  dump "$lib" "$inc" "$tmp/current.abi"
  if ! compare "$dir/$soname.abi" "$tmp/current.abi" "$dir"; then
    die "$soname: the ABI changed incompatibly (above). Either keep the old" \
      "interface, or bump SG_SOVERSION in CMakeLists.txt and run scripts/abi.sh update" \
      "(README, \"Changing the public API\")"
  fi
  echo "abi: $soname matches $(basename "$dir")/$soname.abi (nothing removed or changed)"
}

# write LIBRARY INCLUDE_DIR ABI_DIR FORCE: the baseline for LIBRARY's
# SONAME, refusing an incompatible change of the same SONAME.
write() {
  local lib=$1 inc=$2 dir=$3 force=$4 soname
  soname=$(soname_of "$lib")
  [ -n "$soname" ] || die "$lib has no SONAME"
  mkdir -p "$dir"
  dump "$lib" "$inc" "$tmp/new.abi"
  if [ -f "$dir/$soname.abi" ] && ! compare "$dir/$soname.abi" "$tmp/new.abi" "$dir"; then
    if [ "$force" -ne 1 ]; then
      die "$soname: this breaks the baseline's ABI (above): bump SG_SOVERSION in" \
        "CMakeLists.txt and run this again (or --force, if the report is wrong)"
    fi
    echo "abi: --force: writing over an incompatible change of $soname" >&2
  fi
  cp "$tmp/new.abi" "$dir/$soname.abi"
  # (each library's own: libstreamguard.so.N, libstreamguard-otel.so.N)
  for old in "$dir/${soname%.so.*}".so.*.abi; do
    if [ "$old" != "$dir/$soname.abi" ]; then
      rm -f "$old"
      echo "abi: removed $(basename "$old"), the baseline of an older SOVERSION"
    fi
  done
  echo "abi: wrote $dir/$soname.abi: commit it"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
need_tools
cmd=${1:-}
shift || true
case $cmd in
  check)
    [ $# -eq 3 ] || die "usage: scripts/abi.sh check LIBRARY INCLUDE_DIR ABI_DIR"
    check "$1" "$2" "$3"
    ;;
  write)
    # (the test of this script: a library of its own, not the release build)
    [ $# -ge 3 ] || die "usage: scripts/abi.sh write LIBRARY INCLUDE_DIR ABI_DIR [--force]"
    write "$1" "$2" "$3" "$([ "${4:-}" = --force ] && echo 1 || echo 0)"
    ;;
  update)
    force=0
    [ "${1:-}" = --force ] && force=1
    src=$(cd "$(dirname "$0")/.." && pwd)
    build=${SG_BUILD_ROOT:-$src/build}/release
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_WITH_CURL=ON \
      -DSG_WITH_H2=ON -DSG_WITH_LEDGER=ON -DSG_WITH_POSTGRESQL=ON -DSG_WITH_EVENTSTREAM=ON \
      -DSG_WITH_OTEL=ON >/dev/null
    cmake --build "$build" --target streamguard streamguard_otel \
      -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
    write "$build/libstreamguard.so" "$src/include" "$src/abi" "$force"
    write "$build/libstreamguard-otel.so" "$src/include" "$src/abi" "$force"
    ;;
  *)
    die "usage: scripts/abi.sh update [--force] | check LIBRARY INCLUDE_DIR ABI_DIR"
    ;;
esac
