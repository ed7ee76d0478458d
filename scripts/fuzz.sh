#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (address + undefined-behaviour sanitizers) and runs each for a bounded
# time from the seed corpora in fuzz/seeds. Usage: scripts/fuzz.sh [seconds per target, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
build=build/fuzz
CC=clang CXX=clang++ cmake -S fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build"
for target in safetensors config; do
  corpus="$build/corpus-$target"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${seconds}s" >&2
  "$build/fuzz_$target" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=0 "$corpus" "fuzz/seeds/$target" 2>"$build/fuzz_$target.log" || {
    tail -50 "$build/fuzz_$target.log" >&2
    echo "fuzz: $target found a failure (reproducer above, log $build/fuzz_$target.log)" >&2
    exit 1
  }
  grep -E "^(#[0-9]+|Done)" "$build/fuzz_$target.log" | tail -1 >&2 || true
done
