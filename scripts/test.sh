#!/usr/bin/env bash
# The test command (README): installs dependencies, builds with warnings as errors, runs the whole test suite,
# then fuzzes the safetensors and config parsers for a bounded time. GPU tests skip with a message when no GPU
# is present. Usage: scripts/test.sh [--no-fuzz] [--fuzz-seconds N]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
fuzz=1
fuzz_seconds=30
while (($#)); do
  case "$1" in
    --no-fuzz) fuzz=0 ;;
    --fuzz-seconds) fuzz_seconds="$2"; shift ;;
    *) echo "usage: scripts/test.sh [--no-fuzz] [--fuzz-seconds N]" >&2; exit 2 ;;
  esac
  shift
done

scripts/setup.sh
scripts/python-env.sh
cmake --preset ci >/dev/null
cmake --build --preset ci
ctest --preset ci --output-on-failure -j "$(nproc)"
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1); then
  echo "note: no GPU on this machine: the GPU kernel and engine tests ran as skipped (\"no CUDA device\");" \
       "run scripts/gpu-check.sh on a GPU machine for them" >&2
fi
if ((fuzz)); then
  scripts/fuzz.sh "$fuzz_seconds"
fi
echo "all tests passed"
