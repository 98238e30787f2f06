#!/usr/bin/env bash
# Builds and runs every test: the whole suite in a warnings-as-errors build,
# again under AddressSanitizer + UndefinedBehaviorSanitizer, and the unit
# tests under valgrind.  Usage: scripts/test.sh   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

jobs=$(nproc 2>/dev/null || echo 2)
build=${SG_BUILD_ROOT:-build}

echo "== release build (warnings are errors)"
cmake -S . -B "$build/release" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_WERROR=ON >/dev/null
cmake --build "$build/release" -j"$jobs"
ctest --test-dir "$build/release" --output-on-failure -j"$jobs"

echo "== sanitizer build (ASan + UBSan)"
cmake -S . -B "$build/asan" -DCMAKE_BUILD_TYPE=Debug -DSG_WERROR=ON -DSG_SANITIZE=ON \
      -DSG_BUILD_BENCH=OFF -DCMAKE_C_COMPILER=clang >/dev/null
cmake --build "$build/asan" -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$build/asan" --output-on-failure -j"$jobs" -LE install

echo "== valgrind (unit tests)"
failed=0
for t in "$build"/release/tests/*_test; do
  [ -x "$t" ] || continue
  if ! valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
       "$t" >/dev/null 2>"$t.valgrind.log"; then
    echo "valgrind: $t"; cat "$t.valgrind.log"; failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
echo "valgrind: clean"
