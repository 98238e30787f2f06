#!/usr/bin/env bash
# The README's guarded stream compiles and links against the
# library as it is: a public API change that breaks it fails here.
# Usage: readme_snippet.sh SOURCE_DIR LIBRARY_DIR C_COMPILER
set -euo pipefail
src=$1
lib=$2
cc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^```c$/ { inside = 1; next } /^```$/ { if (inside) exit } inside' \
  "$src/README.md" >"$tmp/readme.c"
[ -s "$tmp/readme.c" ] || { echo "readme: no C block found"; exit 1; }
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Werror -Wno-unused-parameter -I "$src/include" \
  "$tmp/readme.c" -o "$tmp/readme" -L "$lib" -lstreamguard \
  $(pkg-config --libs libcurl) -Wl,-rpath,"$lib"
echo "readme: the C example compiles and links"
