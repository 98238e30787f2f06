#!/usr/bin/env bash
# Client CPU per item: sg-stream in its three output modes next to
# `curl -sN`, on the same stream from the same loopback sg-fakemodel, run
# side by side (interleaved, RUNS rounds) so the machine's load hits every
# client alike.  Prints the median user+system CPU of each client's process
# per item and its ratio to curl's median, and the median of the per-round
# ratios (each client against the curl run of its own round, seconds
# apart: what drifts with the machine's load between rounds cancels).
#
# Also prints the load average at the start and the end of the run.
#
# A loaded figure that another run can reproduce: LOAD=spin or LOAD=mem in
# the environment starts two busy processes at nice 0, pinned nowhere, for
# the whole run (and stops them at the end): spin, two shell busy loops;
# mem, two `dd if=/dev/zero of=/dev/null bs=64M`, which stream 64 MiB
# through the caches on every pass (what a build's compilers do to them).
#
# Where the clients run against the server: PIN=same pins sg-fakemodel and
# every client on CPU 0, PIN=apart the server on CPU 0 and the clients on
# CPU 1 (taskset); unset, the scheduler places them.  On a small machine
# the ratio moves most with this: sharing the server's CPU makes curl's
# reads cheaper (no cross-CPU wakeup, the bytes hot in that CPU's caches)
# and sg-stream's parse and output dearer.
#
# A change to sg-stream or the library, measured in the same rounds:
# OLD=PATH names another sg-stream (a wrapper script that sets its
# LD_LIBRARY_PATH will do), run in the three modes after the new one in
# every round ("old data", ...), its ratios against the same curl runs.
#
# Usage: [LOAD=spin|mem] [PIN=same|apart] [OLD=SG_STREAM_BEFORE] bench/sg_stream_cpu.sh SG_STREAM SG_FAKEMODEL [ITEMS] [RUNS]
#   ITEMS default 1000000 (an OpenAI-shaped chunk each, ~182 bytes of SSE)
#   RUNS  default 5
set -euo pipefail
SG=$1
FM=$2
ITEMS=${3:-1000000}
RUNS=${4:-5}
LOAD=${LOAD:-}
PIN=${PIN:-}
OLD=${OLD:-}
case $PIN in
'') srv=() cli=() ;;
same) srv=(taskset -c 0) cli=(taskset -c 0) ;;
apart) srv=(taskset -c 0) cli=(taskset -c 1) ;;
*)
    echo "PIN must be same or apart, not '$PIN'" >&2
    exit 2
    ;;
esac
dir=$(mktemp -d)
loaders=()
trap 'kill "$fm" "${loaders[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
"${srv[@]}" "$FM" --port 0 --quiet >"$dir/port" &
fm=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
port=$(head -n 1 "$dir/port")
url="http://127.0.0.1:$port/v1/chat/completions?n=$ITEMS&gap=0"

# cpu CMD...: the command's user+system CPU in ms (its own process tree).
cpu() {
    local TIMEFORMAT='%3U %3S'
    { time "$@" >/dev/null 2>&1; } 2>"$dir/t"
    awk '{ printf "%d\n", ($1 + $2) * 1000 }' "$dir/t"
}

case $LOAD in
'') ;;
spin | mem)
    for _ in 1 2; do
        if [ "$LOAD" = spin ]; then
            nice -n 0 sh -c 'while :; do :; done' &
        else
            nice -n 0 dd if=/dev/zero of=/dev/null bs=64M 2>/dev/null &
        fi
        loaders+=("$!")
    done
    sleep 5 # the load in place before the first round
    ;;
*)
    echo "LOAD must be spin or mem, not '$LOAD'" >&2
    exit 2
    ;;
esac

load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
clients=(curl data jsonl none)
[ -n "$OLD" ] && clients+=(old-data old-jsonl old-none)
declare -A samples ratios
for r in $(seq 1 "$RUNS"); do
    for c in "${clients[@]}"; do
        case $c in
        curl) ms=$(cpu "${cli[@]}" curl -sN -o /dev/null "$url") ;;
        old-*) ms=$(cpu "${cli[@]}" "$OLD" --budget 10m --output "${c#old-}" "$url") ;;
        *) ms=$(cpu "${cli[@]}" "$SG" --budget 10m --output "$c" "$url") ;;
        esac
        samples[$c]="${samples[$c]:-} $ms"
        [ "$c" = curl ] && round_curl=$ms
        ratios[$c]="${ratios[$c]:-} $(awk -v a="$ms" -v b="$round_curl" 'BEGIN { printf "%.3f", a / b }')"
    done
done

# the machine's load at the start and the end: the figures move with it
[ -n "$LOAD" ] && echo "LOAD=$LOAD: two busy processes beside the clients"
[ -n "$OLD" ] && echo "OLD=$OLD: the old sg-stream in the same rounds"
[ -n "$PIN" ] && echo "PIN=$PIN: the server on CPU 0, the clients on CPU ${cli[2]}"
echo "load average: $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?') at the end"
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
base=$(echo "${samples[curl]}" | median)
printf '%-22s %8s %9s %8s %9s   %s\n' client "CPU ms" "ns/item" "x curl" "x round" "samples (ms)"
for c in "${clients[@]}"; do
    m=$(echo "${samples[$c]}" | median)
    rr=$(echo "${ratios[$c]}" | median)
    name=$c
    case $c in
    curl) name="curl -sN" ;;
    old-*) name="old --output ${c#old-}" ;;
    *) name="sg-stream --output $c" ;;
    esac
    awk -v n="$name" -v m="$m" -v b="$base" -v rr="$rr" -v items="$ITEMS" -v s="${samples[$c]}" \
        'BEGIN { printf "%-22s %8d %9.1f %8.2f %9.2f  %s\n", n, m, m * 1e6 / items, m / b, rr, s }'
done
