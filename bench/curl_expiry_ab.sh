#!/usr/bin/env bash
# bench_curl_transport binaries side by side on 1,000 streams expiring
# together (sections 4 and 7), interleaved for RUNS rounds (the order turns
# each round): per binary the median, over the runs, of each figure, and
# in how many runs the p99 lateness was within 2 ms.  For a before/after of
# a change: build each version in its own tree (a git worktree) with this
# bench's source (bench/curl_transport.c: the before tree's own may lack
# section 7), and name each tree's bench_curl_transport.
#
# With SG_AB_PREFIX="chrt -f 1" (root) each bench runs under that prefix,
# real-time: what is left of the tail is the library's, not the
# scheduler's.
#
# Usage: bench/curl_expiry_ab.sh SG_FAKEMODEL RUNS BENCH...
set -euo pipefail
FM=$1
RUNS=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$RUNS"); do
    order=("$@")
    if ((r % 2 == 0)); then
        order=()
        for ((i = $#; i >= 1; i--)); do order+=("${!i}"); done
    fi
    for b in "${order[@]}"; do
        key=$(echo "$b" | md5sum | cut -c1-8)
        ${SG_AB_PREFIX:-} "$b" "$FM" 1000 47 >"$dir/out"
        # one line per run: s4 p50 p99, server p50 p99, s7 managed p99,
        # poll-loop p99, floor p99 (section 4's)
        awk -v load="$(cut -d' ' -f1 /proc/loadavg)" '
            /^4\./ { match($0, /p50 [0-9.]+ ms, p99 [0-9.]+/); split(substr($0, RSTART, RLENGTH), a, " ");
                     s4p50 = a[2]; s4p99 = a[5] }
            /server saw/ { match($0, /p50 [0-9.]+ ms, p99 [0-9.]+/); split(substr($0, RSTART, RLENGTH), a, " ");
                           sp50 = a[2]; sp99 = a[5] }
            /machine.s floor: a bare/ { n = split($0, a, " "); fl = a[n - 3] }
            /managed multi:/ { mp99 = $5 }
            /caller.s poll loop:/ { pp99 = $6 }
            END { print s4p50, s4p99, sp50, sp99, mp99, pp99, fl, load }' "$dir/out" >>"$dir/$key"
        echo "$b" >"$dir/$key.name"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-44s %6s %6s %6s %6s %6s %6s %6s %s\n' "median of $RUNS runs (ms)" "4 p50" "4 p99" \
    "srv50" "srv99" "7 mgd" "7 poll" "floor" "p99<=2 ms (4 / 7 mgd / 7 poll)"
for f in "$dir"/*.name; do
    key=${f%.name}
    med() { cut -d' ' -f"$1" "$key" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
    within() { cut -d' ' -f"$1" "$key" | awk '$1 <= 2 { n++ } END { print n + 0 }'; }
    printf '%-44s %6s %6s %6s %6s %6s %6s %6s %s / %s / %s of %s\n' "$(cat "$f")" "$(med 1)" \
        "$(med 2)" "$(med 3)" "$(med 4)" "$(med 5)" "$(med 6)" "$(med 7)" "$(within 2)" \
        "$(within 5)" "$(within 6)" "$RUNS"
done
