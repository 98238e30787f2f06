#!/usr/bin/env bash
# The names the OpenTelemetry observer writes (src/otel/trace_spans.c:
# attributes, events and their attributes) and the ones docs/otel.md,
# "Spans and attributes", lists, kept in step: every name the code writes
# is in one of the section's tables, and every name a table row begins
# with is one the code writes.  The operation's span name without GenAI
# names (the one literal passed to snprintf(name, ...)) need only be named
# in the section.
# Usage: otel_attributes.sh SOURCE_DIR
set -u
root=$1
src=$root/src/otel/trace_spans.c
doc=$root/docs/otel.md
names='"(gen_ai|http|url|server|error|streamguard)\.[a-z0-9_.]+"'
section=$(sed -n '/^## Spans and attributes/,/^## [^S]/p' "$doc")
rows=$(grep '^| `' <<<"$section")
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

code=$(grep -v 'snprintf(name' "$src" | grep -oE "$names" | tr -d '"' | sort -u)
span_names=$(grep 'snprintf(name' "$src" | grep -oE "$names" | tr -d '"' | sort -u)
in_rows=$(grep -oE '`[a-z0-9_.]+`' <<<"$rows" | tr -d '`' | sort -u)
first_cells=$(cut -d'|' -f2 <<<"$rows" | grep -oE '`[a-z0-9_.]+`' | tr -d '`' | sort -u)
[ -n "$code" ] || fail "no names found in $src"
[ -n "$first_cells" ] || fail "no table rows found in $doc"

for n in $code; do
    grep -qxF "$n" <<<"$in_rows" || fail "$n: written by trace_spans.c, in no table of docs/otel.md"
done
for n in $span_names; do
    grep -qF "\`$n\`" <<<"$section" || fail "$n: a span name, not named in docs/otel.md"
done
for n in $first_cells; do
    grep -qxF "$n" <<<"$code" || fail "$n: in docs/otel.md's tables, never written by trace_spans.c"
done
if [ "$fails" -gt 0 ]; then
    exit 1
fi
echo "ok: $(wc -w <<<"$code") names, code and docs/otel.md in step"
