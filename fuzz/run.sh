#!/usr/bin/env bash
# Runs one libFuzzer target with the limits in fuzz/<target>.options, over a
# scratch copy of its seed corpus (the checked-in corpus is never written).
#
# Usage: fuzz/run.sh TARGET [libFuzzer flags...]
#   e.g. fuzz/run.sh eventstream -max_total_time=600
#
# The binary is $SG_FUZZ_BUILD/fuzz/fuzz_TARGET (default build/fuzz), built
# with -DSG_SANITIZE=ON -DSG_LIBFUZZER=ON -DCMAKE_C_COMPILER=clang.
# The options file has the sections ClusterFuzz reads: [libfuzzer] keys
# become -key=value flags, [asan] and [ubsan] keys are put before
# ASAN_OPTIONS / UBSAN_OPTIONS.  Flags and options given by the caller come
# after the file's, so they win.  fuzz/README.md says why the limits are
# what they are.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: fuzz/run.sh TARGET [libFuzzer flags...]" >&2
  exit 2
fi
target=$1
shift
src=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$src")
build=${SG_FUZZ_BUILD:-$root/build/fuzz}
bin=$build/fuzz/fuzz_$target
if [ ! -x "$bin" ]; then
  echo "fuzz/run.sh: no $bin (configure $build with -DSG_LIBFUZZER=ON)" >&2
  exit 2
fi
if [ ! -d "$src/corpus/$target" ]; then
  echo "fuzz/run.sh: no seed corpus $src/corpus/$target" >&2
  exit 2
fi

flags=(-print_final_stats=1)
asan=""
ubsan=""
options=$src/$target.options
if [ -f "$options" ]; then
  section=""
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%%#*}
    line=$(echo "$line" | tr -d '[:space:]')
    case $line in
      "") ;;
      \[*\]) section=${line:1:${#line}-2} ;;
      *=*)
        case $section in
          libfuzzer) flags+=("-$line") ;;
          asan) asan=$asan${asan:+:}$line ;;
          ubsan) ubsan=$ubsan${ubsan:+:}$line ;;
          *)
            echo "fuzz/run.sh: $options: '$line' outside a known section" >&2
            exit 2
            ;;
        esac
        ;;
      *)
        echo "fuzz/run.sh: $options: cannot read '$line'" >&2
        exit 2
        ;;
    esac
  done <"$options"
fi
ASAN_OPTIONS=$asan${ASAN_OPTIONS:+${asan:+:}$ASAN_OPTIONS}
UBSAN_OPTIONS=$ubsan${UBSAN_OPTIONS:+${ubsan:+:}$UBSAN_OPTIONS}
export ASAN_OPTIONS UBSAN_OPTIONS

corpus=$(mktemp -d "${TMPDIR:-/tmp}/sg-fuzz-$target.XXXXXX")
cp "$src/corpus/$target"/* "$corpus/"
echo "fuzz/run.sh: $target over $corpus; ASAN_OPTIONS=$ASAN_OPTIONS; flags: ${flags[*]} $*"
exec "$bin" "${flags[@]}" "$@" "$corpus"
