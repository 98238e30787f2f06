#!/usr/bin/env bash
# Two (or more) sg-stream binaries side by side in one output mode, next to
# `curl -sN`, on the same loopback sg-fakemodel stream, interleaved for
# RUNS rounds: the median user+system CPU of each client (bash `time`, the
# kernel's account) and its ratio to curl's median.  For a before/after of
# a change: build each version in its own tree (a git worktree) and name
# each tree's sg-stream - not a copy: a copied sg-stream still loads
# libstreamguard from the build tree its RPATH names.
#
# Usage: bench/sg_stream_ab.sh SG_FAKEMODEL ITEMS RUNS MODE SG_STREAM...
set -euo pipefail
FM=$1
ITEMS=$2
RUNS=$3
MODE=$4
shift 4
dir=$(mktemp -d)
trap 'kill "$fm" 2>/dev/null; rm -rf "$dir"' EXIT
"$FM" --port 0 --quiet >"$dir/port" &
fm=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(head -n 1 "$dir/port")/v1/chat/completions?n=$ITEMS&gap=0"
cpu() {
    local TIMEFORMAT='%3U %3S'
    { time "$@" >/dev/null 2>&1; } 2>"$dir/t"
    awk '{ printf "%d\n", ($1 + $2) * 1000 }' "$dir/t"
}
load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
declare -A samples
for _ in $(seq 1 "$RUNS"); do
    samples[curl]+=" $(cpu curl -sN -o /dev/null "$url")"
    for b in "$@"; do
        samples[$b]+=" $(cpu "$b" --budget 10m --output "$MODE" "$url")"
    done
done
# the machine's load at the start and the end: the figures move with it
echo "load average: $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?') at the end"
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
base=$(echo "${samples[curl]}" | median)
printf '%-40s %8s %9s %8s   %s\n' client "CPU ms" "ns/item" "x curl" "samples (ms)"
for c in curl "$@"; do
    m=$(echo "${samples[$c]}" | median)
    awk -v n="$c" -v m="$m" -v b="$base" -v items="$ITEMS" -v s="${samples[$c]}" \
        'BEGIN { printf "%-40s %8d %9.1f %8.2f  %s\n", n, m, m * 1e6 / items, m / b, s }'
done
