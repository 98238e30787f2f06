#!/usr/bin/env bash
# sg-stream describes itself three times - --help, docs/sg-stream.md and the
# man page made from it - and the three agree with the program: the same long
# options as its getopt table, the same short forms, the same exit statuses
# as its exit codes.  The page renders without a warning, and --version names
# the libraries the program runs on.
# Usage: manpage.sh SOURCE_DIR SG_STREAM MAN_PAGE
set -euo pipefail
src=$1
sg=$2
page=$3
md=$src/docs/sg-stream.md
fail=0
say() { echo "manpage: $*" >&2; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

long_opts() { grep -oE -- '--[a-z][a-z0-9.-]*[a-z0-9]' | sort -u || true; }
short_pairs() { grep -oE -- '-[A-Za-z], --[a-z][a-z0-9.-]*[a-z0-9]' | sort -u || true; }
# same NAME A B: the two sorted lists are equal, or say what each lacks
same() {
  if ! cmp -s "$2" "$3"; then
    say "$1: only in $(basename "$2"): $(comm -23 "$2" "$3" | tr '\n' ' ')" \
      "only in $(basename "$3"): $(comm -13 "$2" "$3" | tr '\n' ' ')"
  fi
}

if ! command -v groff >/dev/null; then
  echo "manpage: groff not found (Debian: groff-base; scripts/setup.sh installs it)" >&2
  exit 1
fi

# ---- the options: program, --help, the document, the page
sed -n '/long_opts\[\] = {/,/^};/p' "$src/tools/sg-stream/options.c" |
  grep -oE '^[[:space:]]*\{"[a-z][a-z0-9.-]*"' | sed -E 's/.*"(.*)"/--\1/' | sort -u \
  >"$tmp/program"
"$sg" --help >"$tmp/help.txt"
long_opts <"$tmp/help.txt" >"$tmp/help"
# the document's options are the first cells of the tables under OPTIONS
awk '/^## / { inside = ($0 == "## OPTIONS") } inside && /^\|/ { split($0, c, "|"); print c[2] }' \
  "$md" >"$tmp/md-cells"
long_opts <"$tmp/md-cells" >"$tmp/docs-sg-stream.md"
# the page as a reader sees it: plain text, no bold or underline
groff -man -Tascii -P-cbou "$page" >"$tmp/page.txt" 2>/dev/null
long_opts <"$tmp/page.txt" >"$tmp/page"

[ -s "$tmp/program" ] || say "no long options found in tools/sg-stream/options.c"
same "long options" "$tmp/program" "$tmp/help"
same "long options" "$tmp/help" "$tmp/docs-sg-stream.md"
missing=$(comm -23 "$tmp/help" "$tmp/page" | tr '\n' ' ')
[ -z "$missing" ] || say "the man page lacks $missing"

short_pairs <"$tmp/help.txt" >"$tmp/help-short"
short_pairs <"$tmp/md-cells" >"$tmp/docs-short"
same "short options" "$tmp/help-short" "$tmp/docs-short"

# ---- exit statuses: the program's codes, --help's and the document's
grep -oE 'EXIT_[A-Z]+ = [0-9]+' "$src/tools/sg-stream/sg_stream.h" | awk '{ print $3 }' |
  sort -n >"$tmp/program-codes"
# "Exit status: 0 ok; 1 internal error; ..." -> "0 ok" lines
tr '\n' ' ' <"$tmp/help.txt" | sed -E 's/.*Exit status: *//; s/\. *$//' | tr ';' '\n' |
  sed -E 's/^ +//; s/  +/ /g' >"$tmp/help-status"
awk '{ print $1 }' "$tmp/help-status" | sort -n >"$tmp/help-codes"
awk '/^## / { inside = ($0 == "## EXIT STATUS") }
     inside && /^\| *[0-9]+ *\|/ { split($0, c, "|"); gsub(/ /, "", c[2]); print c[2] "\t" c[3] }' \
  "$md" >"$tmp/docs-status"
cut -f1 "$tmp/docs-status" | sort -n >"$tmp/docs-codes"
same "exit codes" "$tmp/program-codes" "$tmp/help-codes"
same "exit codes" "$tmp/help-codes" "$tmp/docs-codes"
# Each outcome is named (by its first word) in --help's entry for the code
# whose row in the document first names it; a row that names none, by its
# own first word.
declare -A named=()
while IFS=$'\t' read -r code text; do
  names=""
  # shellcheck disable=SC2016 # the backticks are Markdown's, not a command
  for n in $(grep -oE '`[a-z_]+`' <<<"$text" | tr -d '`' || true); do
    [ -n "${named[$n]:-}" ] || names="$names ${n%%_*}"
    named[$n]=$code
  done
  [ -n "$names" ] || names=$(awk '{ print $1 }' <<<"$text" | tr -d ':`')
  entry=$(grep -E "^$code " "$tmp/help-status" || true)
  for n in $names; do
    grep -qiw -- "$n" <<<"$entry" || say "exit $code: '$n' is in the document, not in --help ('$entry')"
  done
done < <(sort -n "$tmp/docs-status")

# ---- the page renders cleanly and says what it is
if ! groff -man -Tutf8 -ww -z "$page" 2>"$tmp/warnings" || [ -s "$tmp/warnings" ]; then
  say "groff warns about the page: $(cat "$tmp/warnings")"
fi
grep -q '^NAME' "$tmp/page.txt" || say "the page has no NAME section"
grep -qE '^ +sg-stream - ' "$tmp/page.txt" || say "NAME is not 'sg-stream - ...'"
if command -v lexgrog >/dev/null; then
  lexgrog "$page" | grep -q '"sg-stream - ' || say "whatis cannot read NAME: $(lexgrog "$page")"
fi
if command -v man >/dev/null; then
  man -l -P cat "$page" >/dev/null 2>"$tmp/man-err" || say "man -l fails: $(cat "$tmp/man-err")"
fi

# ---- --version: sg-stream's, then each library's
"$sg" --version >"$tmp/version"
own=$(sed -n '1s/^sg-stream \([0-9][0-9.]*\)$/\1/p' "$tmp/version")
[ -n "$own" ] || say "--version's first line is not 'sg-stream VERSION': $(head -1 "$tmp/version")"
for lib in streamguard libcurl nghttp2 OpenSSL c-ares; do
  grep -qE "^$lib [0-9]+\.[0-9]+" "$tmp/version" || say "--version does not name $lib: $(cat "$tmp/version")"
done
grep -qx "streamguard $own" "$tmp/version" || say "the library's version is not sg-stream's ($own)"

[ "$fail" -eq 0 ] || exit 1
echo "manpage: --help, docs/sg-stream.md and the man page agree ($(wc -l <"$tmp/help") long options," \
  "$(wc -l <"$tmp/help-codes") exit codes); $(tr '\n' ' ' <"$tmp/version")"
