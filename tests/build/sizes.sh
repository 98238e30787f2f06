#!/usr/bin/env bash
# The sources stay small enough to read (STYLE.md; issue 32, item 5): no
# file of src/ (*.c, *.h) over 800 lines, no function in src/ over 120.  A
# function counts from the line of its signature to its closing brace at
# column 0 (the code is clang-formatted: a body ends at a line "}").
# Files listed in the allow-list (tests/build/sizes_allow.txt: one path
# per line, relative to the source tree, then a '#' comment saying why)
# are not checked; an entry that is no longer needed is pointed out.
# Usage: sizes.sh SOURCE_DIR [ALLOW_LIST]
set -euo pipefail
src=$1
allow=${2:-$src/tests/build/sizes_allow.txt}
max_file=800
max_fn=120
fail=0
say() { echo "sizes: $*" >&2; fail=1; }

# path -> 1 for every allowed file; an entry without a reason is an error
declare -A allowed=()
if [ -f "$allow" ]; then
  n=0
  while IFS= read -r entry || [ -n "$entry" ]; do
    n=$((n + 1))
    path=${entry%%#*}
    path=${path//[[:space:]]/}
    [ -z "$path" ] && continue
    why=${entry#*#}
    if [ "$why" = "$entry" ] || [ -z "${why//[[:space:]]/}" ]; then
      say "$(basename "$allow"):$n: $path: say why it is allowed (a '#' comment)"
    fi
    allowed[$path]=1
  done <"$allow"
fi

cd "$src"
mapfile -t files < <(find src -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "sizes: no sources under $src/src" >&2
  exit 1
fi

# FILE:LINE NAME LENGTH for every function definition: a line at column 0
# with a '(' (not an initialiser, not inside a macro) opens a signature,
# which a line ending in '{' makes a definition and one ending in ';' a
# declaration; the definition ends at the first "}" line.
functions() {
  awk '
    FNR == 1 { state = 0; cont = 0 }
    {
        line = $0
        was_cont = cont
        cont = (line ~ /\\$/)
        if (was_cont) { next }
        if (state == 0) {
            if (line !~ /^[A-Za-z_]/ || line !~ /\(/) { next }
            pre = substr(line, 1, index(line, "(") - 1)
            if (pre ~ /=/) { next }
            sub(/[ \t]+$/, "", pre)
            if (!match(pre, /[A-Za-z_][A-Za-z0-9_]*$/)) { next }
            name = substr(pre, RSTART)
            start = FNR
            state = 1
        }
        if (state == 1) {
            if (line ~ /\{[ \t]*$/) { state = 2 }
            else if (line ~ /;[ \t]*$/) { state = 0 }
            next
        }
        if (state == 2 && line ~ /^}[ \t]*$/) {
            print FILENAME ":" start " " name " " (FNR - start + 1)
            state = 0
        }
    }' "$@"
}

longest_file=0 longest_file_name=
longest_fn=0 longest_fn_name=
checked=0 nfn=0
for f in "${files[@]}"; do
  lines=$(wc -l <"$f")
  fns=$(functions "$f")
  over_fn=$(awk -v max="$max_fn" '$3 > max' <<<"$fns")
  if [ -n "${allowed[$f]:-}" ]; then
    if [ "$lines" -le "$max_file" ] && [ -z "$over_fn" ]; then
      echo "sizes: note: $f is within the limits now: remove it from $(basename "$allow")"
    fi
    continue
  fi
  checked=$((checked + 1))
  if [ "$lines" -gt "$max_file" ]; then
    say "$f: $lines lines (at most $max_file)"
  fi
  if [ "$lines" -gt "$longest_file" ]; then
    longest_file=$lines longest_file_name=$f
  fi
  while read -r at name len; do
    [ -z "$at" ] && continue
    nfn=$((nfn + 1))
    if [ "$len" -gt "$max_fn" ]; then
      say "$at: $name: $len lines (at most $max_fn)"
    fi
    if [ "$len" -gt "$longest_fn" ]; then
      longest_fn=$len longest_fn_name="$name ($at)"
    fi
  done <<<"$fns"
done
for f in "${!allowed[@]}"; do
  if [ ! -f "$f" ]; then
    echo "sizes: note: $f (in $(basename "$allow")) does not exist: remove it"
  fi
done
if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "sizes: $checked files, $nfn functions within the limits;" \
  "longest file $longest_file_name ($longest_file lines)," \
  "longest function $longest_fn_name, $longest_fn lines;" \
  "allowed: ${!allowed[*]}"
