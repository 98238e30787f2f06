#!/usr/bin/env bash
# The library exports its public API and nothing else (README, "Changing
# the public API"):
#  1. every exported symbol is named sg_ (never an sg__ internal, never a
#     helper of src/sgx/, whose names are sgx_) and is in the version node
#     of the SOVERSION (STREAMGUARD_<n>, cmake/streamguard.map.in);
#  2. every exported symbol is declared in a public header;
#  3. every function the headers of the parts built declare (SG_EXTERN) is
#     exported: none is declared and missing.
# Usage: exports.sh LIBRARY INCLUDE_DIR SOVERSION|NODE [HEADER_NOT_BUILT...]
# (HEADER_NOT_BUILT: the file names of the headers of parts the build
# lacks, e.g. h2.h, or of another library's.  A SOVERSION number means the
# node STREAMGUARD_<n>; another library names its node, as
# STREAMGUARD_OTEL_1.)
set -euo pipefail
lib=$1
inc=$2
soversion=$3
shift 3
fail=0
say() { echo "exports: $*" >&2; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The headers without their comments (a name in a comment declares nothing).
strip_comments() { perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g' "$@"; }
find "$inc/streamguard" -name '*.h' | sort >"$tmp/headers"
xargs cat <"$tmp/headers" | strip_comments >"$tmp/all.h"
built=()
while IFS= read -r h; do
  skip=0
  for left in "$@"; do
    [ "$(basename "$h")" = "$left" ] && skip=1
  done
  [ "$skip" -eq 0 ] && built+=("$h")
done <"$tmp/headers"
strip_comments "${built[@]}" >"$tmp/built.h"

# 1. names and versions
nm -D --defined-only --with-symbol-versions "$lib" | awk '$2 != "A" { print $3 }' |
  sort >"$tmp/exported"
node=STREAMGUARD_$soversion
if ! [[ $soversion =~ ^[0-9]+$ ]]; then
  node=$soversion
fi
while IFS= read -r entry; do
  name=${entry%%@*}
  version=${entry#*@}
  version=${version#@}
  if ! [[ $name =~ ^sg_[a-z0-9][a-z0-9_]*$ ]]; then
    say "$name is exported: only the public sg_ names may be"
  fi
  if [ "$version" != "$node" ]; then
    say "$name is exported as version '$version', not $node"
  fi
  # 2. declared in a public header
  if ! grep -qE "(^|[^A-Za-z0-9_])$name[[:space:]]*\(" "$tmp/all.h"; then
    say "$name is exported but no public header declares it"
  fi
done <"$tmp/exported"
sed 's/@.*//' "$tmp/exported" >"$tmp/names"

# 3. every declared function of the parts built is there
tr '\n' ' ' <"$tmp/built.h" | sed 's/;/;\n/g' | grep 'SG_EXTERN' |
  sed -nE 's/.*SG_EXTERN[^(]*[^A-Za-z0-9_](sg_[A-Za-z0-9_]+)[[:space:]]*\(.*/\1/p' |
  sort -u >"$tmp/declared"
if [ ! -s "$tmp/declared" ]; then
  say "no SG_EXTERN declaration found under $inc/streamguard"
fi
while IFS= read -r name; do
  if ! grep -qx "$name" "$tmp/names"; then
    say "$name is declared in a public header but not exported"
  fi
done <"$tmp/declared"

if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "exports: $(wc -l <"$tmp/names") functions, all public sg_ names in $node;" \
  "$(wc -l <"$tmp/declared") declared by the headers built, all exported"
