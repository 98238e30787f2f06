#!/usr/bin/env bash
# The main job: set up, build, and run the streamguard demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${SG_BUILD_ROOT:-build}
cmake -S . -B "$build/release" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build/release" -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
"$build/release/examples/clocks_demo"
