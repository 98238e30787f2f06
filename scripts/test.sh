#!/usr/bin/env bash
# Builds and runs every test: the whole suite in a warnings-as-errors build
# with every part, the library and its tests in builds with fewer parts
# (README, "Build options"), the whole suite again under AddressSanitizer +
# UndefinedBehaviorSanitizer, and the unit tests under valgrind.
# Usage: scripts/test.sh   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

jobs=$(nproc 2>/dev/null || echo 2)
build=${SG_BUILD_ROOT:-build}

# every part of the library (README, "Build options"), whatever a cache says
everything=(-DSG_WITH_CURL=ON -DSG_WITH_H2=ON -DSG_WITH_LEDGER=ON -DSG_WITH_POSTGRESQL=ON
            -DSG_WITH_EVENTSTREAM=ON -DSG_WITH_OTEL=ON)

echo "== release build (warnings are errors)"
cmake -S . -B "$build/release" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_WERROR=ON \
      "${everything[@]}" >/dev/null
cmake --build "$build/release" -j"$jobs"
ctest --test-dir "$build/release" --output-on-failure -j"$jobs"

# A build with fewer parts: the library and the tests that apply (no
# programs, examples or benchmarks), in release mode.  Every part is named,
# so that nothing a cache kept from another run decides.
reduced() { # NAME OPTION...
  local name=$1
  shift
  echo "== $name build: $*"
  cmake -S . -B "$build/$name" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_WERROR=ON \
        -DSG_BUILD_TOOLS=OFF -DSG_BUILD_EXAMPLES=OFF -DSG_BUILD_BENCH=OFF "$@" >/dev/null
  cmake --build "$build/$name" -j"$jobs"
  ctest --test-dir "$build/$name" --output-on-failure -j"$jobs"
}
# the core, the framing and the policy: libc alone (build.needed_libs)
reduced core -DSG_WITH_CURL=OFF -DSG_WITH_H2=OFF -DSG_WITH_LEDGER=OFF \
        -DSG_WITH_POSTGRESQL=OFF -DSG_WITH_EVENTSTREAM=OFF -DSG_WITH_OTEL=OFF
# the libcurl transport and the file ledger: no nghttp2, c-ares or libpq
reduced curl-only -DSG_WITH_CURL=ON -DSG_WITH_H2=OFF -DSG_WITH_LEDGER=ON \
        -DSG_WITH_POSTGRESQL=OFF -DSG_WITH_EVENTSTREAM=ON -DSG_WITH_OTEL=OFF

echo "== sanitizer build (ASan + UBSan)"
cmake -S . -B "$build/asan" -DCMAKE_BUILD_TYPE=Debug -DSG_WERROR=ON -DSG_SANITIZE=ON \
      -DSG_BUILD_BENCH=OFF -DCMAKE_C_COMPILER=clang "${everything[@]}" >/dev/null
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
