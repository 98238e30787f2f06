#!/usr/bin/env bash
# The library needs the libraries of the parts it was built with, and no
# other (README, "Build options"): its DT_NEEDED entries, read with
# readelf -d, are exactly WANT (base names: libc, libz, libcurl, ...).  With
# every part off that is libc alone.
# A compiler without TLS descriptors makes the library import
# __tls_get_addr from the dynamic loader: with --loader, one ld-linux entry
# is the C library's too.
# Usage: needed.sh [--loader] LIBRARY WANT...
set -euo pipefail
loader=0
if [ "$1" = --loader ]; then
  loader=1
  shift
fi
lib=$1
shift
want=$(printf '%s\n' "$@" | sort -u)
got=$(readelf -d "$lib" | sed -nE 's/.*\(NEEDED\).*\[([^]]+)\].*/\1/p' | sed -E 's/\.so.*//' |
  { if [ "$loader" -eq 1 ]; then grep -v '^ld-linux' || true; else cat; fi; } | sort -u)
if [ "$got" != "$want" ]; then
  echo "needed: $(basename "$lib") needs: $(echo $got)" >&2
  echo "needed: the parts built ask for: $(echo $want)" >&2
  echo "needed: only needed: $(comm -23 <(echo "$got") <(echo "$want") | tr '\n' ' ')" \
    "only asked for: $(comm -13 <(echo "$got") <(echo "$want") | tr '\n' ' ')" >&2
  exit 1
fi
echo "needed: $(basename "$lib") needs $(echo $got)"
