#!/usr/bin/env bash
# Tokenizer encode benchmark: ours vs Hugging Face tokenizers vs fastokens, single-threaded, on the parity corpus.
# Builds qwen3_tokenizer_bench (CPU-only release build in $BUILD_DIR, default build/cpu), makes a Python
# environment with both libraries in build/bench-pyenv, runs bench/tokenizer_bench.py and writes
# bench/results/tokenizer_encode.json. Extra arguments go to the Python script (--rounds, --passes, --out).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build/cpu}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DQWEN3_CUDA=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" --target qwen3_tokenizer_bench >/dev/null
venv=build/bench-pyenv
want="tokenizers==0.23.2 fastokens==0.3.5"
if [ ! -f "$venv/.ready" ] || [ "$(cat "$venv/.ready")" != "$want" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check $want
  echo "$want" > "$venv/.ready"
fi
exec "$venv/bin/python" bench/tokenizer_bench.py --binary "$build/bin/qwen3_tokenizer_bench" "$@"
