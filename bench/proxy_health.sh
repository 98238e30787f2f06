#!/usr/bin/env bash
# Endpoint health through sg-proxy, side by side in one run (the figures
# in bench/RESULTS.md, "Endpoint health through sg-proxy").
#
#   bench/proxy_health.sh SG_PROXY SG_FAKEMODEL [proxy_health.py options]
#
# Part 1: 200 clients through sg-proxy against an sg-fakemodel allowing
# 100 requests per 1000 ms window, health on (the default) and
# --health off, in turns: requests sent upstream, 429s received upstream,
# operations completed, time to first token p50/p99 at the client
# (medians of the runs).  Part 2: the same clients against a dead upstream
# (connect refused; a host that accepts and never answers) with
# sg-fakemodel as the fallback, with the breaker and without it
# (--breaker-failures 0), and the fallback alone.  Options (see
# bench/proxy_health.py): --runs 3 --seconds 15 --clients 200 --limit 100
# --window 1000 --part 1|2|both ...  Python 3 standard library only.
set -eu
PX=$1
FM=$2
shift 2
# each client holds a socket to the proxy, and the proxy one upstream
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)"
exec python3 "$(cd "$(dirname "$0")" && pwd)/proxy_health.py" --proxy "$PX" --fakemodel "$FM" "$@"
