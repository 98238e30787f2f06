#!/usr/bin/env bash
# The main job: set up, build, start the fault server, and run sg-stream
# through the faults streamguard exists for, printing one row per scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${SG_BUILD_ROOT:-build}
cmake -S . -B "$build/release" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build/release" -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
SG=$build/release/tools/sg-stream
FM=$build/release/tools/sg-fakemodel

work=$(mktemp -d "${TMPDIR:-/tmp}/sg-demo.XXXXXX")
"$FM" --port 0 --quiet >"$work/port" 2>"$work/server.err" &
fm_pid=$!
trap 'kill $fm_pid 2>/dev/null; wait $fm_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do
  [ -s "$work/port" ] && break
  sleep 0.05
done
port=$(head -n 1 "$work/port")
chat="http://127.0.0.1:$port/v1/chat/completions"

echo "streamguard demo: sg-stream against sg-fakemodel on 127.0.0.1:$port"
echo "every run: --budget 3s --first-item 500ms --idle 300ms --deadline-header X-Deadline-Ms"
echo
fmt='%-24s %-20s %-16s %8s %9s %10s %s\n'
# shellcheck disable=SC2059
printf "$fmt" scenario outcome phase attempts ttfi_ms elapsed_ms note
# shellcheck disable=SC2059
printf "$fmt" -------- ------- ----- -------- ------- ---------- ----

row() {
  local name=$1 note=$2
  shift 2
  local out
  out=$("$SG" -q --output none --budget 3s --first-item 500ms --idle 300ms \
    --deadline-header X-Deadline-Ms \
    -w '%{outcome} %{phase} %{attempts} %{first_item_ms} %{elapsed_ms} %{partial} %{outcome_unknown}' \
    "$@" || true)
  local outcome phase attempts ttfi elapsed partial unknown
  read -r outcome phase attempts ttfi elapsed partial unknown <<<"$out"
  [ "$partial" = "true" ] && note="$note; partial: discard"
  [ "$unknown" = "true" ] && note="$note; outcome unknown: reconcile"
  # shellcheck disable=SC2059
  printf "$fmt" "$name" "$outcome" "$phase" "$attempts" "$ttfi" "$elapsed" "$note"
}

row "normal stream" "8 tokens then [DONE]" "$chat?n=8&gap=20&first_delay=80"
row "slow first item" "first token after 2s" "$chat?first_delay=2000"
row "stall mid-stream" "3 tokens, then silence" "$chat?n=8&gap=20&stall_after=3&stall=forever"
row "keepalive trickle" "comments every 50ms" \
  "$chat?n=8&gap=20&stall_after=3&stall=forever&keepalive=50"
row "runaway generation" "capped at 100 items" --max-items 100 "$chat?runaway=1&gap=1"
row "abrupt drop" "connection closed" "$chat?n=8&gap=20&drop_after=3"
row "429 then success" "Retry-After: 1, same key" --attempts 3 --idempotency-key demo-429 \
  -d '{"prompt":"hi"}' "$chat?status=429&retry_after=1&fail_first=2&n=4"
row "unsafe POST times out" "no key: not retried" --attempts 3 -d '{"charge":1}' \
  "$chat?hang=1"

echo
echo "The server's view of the 429 retries (one idempotency key, the deadline shrinking):"
curl -s "http://127.0.0.1:$port/_log?event=received&key=demo-429" |
  sed -n 's/.*"t_ms":\([0-9]*\).*"x_deadline_ms":"\([0-9]*\)".*/\1 \2/p' |
  awk 'NR == 1 { t0 = $1 } { printf "  attempt %d received at +%5d ms   X-Deadline-Ms: %s\n", NR, $1 - t0, $2 }'
