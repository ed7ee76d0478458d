#!/usr/bin/env bash
# Engine checks on a GPU machine from prebuilt binaries (built elsewhere with -DCMAKE_CUDA_ARCHITECTURES=90a-real):
# engine tests, end-to-end benchmarks (fast, cuBLAS and v0 paths; prefill at 512 and 2048), and the 8B comparison
# with transformers. Full logs and JSON under $OUT; a short summary last.
# Usage: scripts/gpu-engine-check.sh [BIN_DIR] [--skip-e2e]
set -u
BIN=${1:-build/h200/bin}
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
cublas_dir=$(python3 -c "import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${cublas_dir}:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$OUT/gpu.txt"
ldd "$BIN/qwen3" | grep -E "not found|cublas" || true

echo "== engine tests"
timeout 300 "$BIN/qwen3_engine_tests" > "$OUT/engine_tests.log" 2>&1
echo "engine tests exit $?"
grep -E "^\[ +(FAILED|PASSED)|logits max|diverges|differences|Failure|Expected|Which is|actual" "$OUT/engine_tests.log" | head -60

echo "== bench"
bench() { timeout 240 "$BIN/qwen3" bench "$@" --json >> "$OUT/bench.jsonl" 2>> "$OUT/bench.err" || echo "bench $* failed: $(tail -2 "$OUT/bench.err")"; }
bench --synthetic qwen3-8b --path fast --prompt-len 128 --gen 256
bench --synthetic qwen3-8b --path cublas --prompt-len 128 --gen 256
bench --synthetic qwen3-8b --path v0 --prompt-len 128 --gen 8 --warmup 2 --repeat 1
bench --synthetic qwen3-8b --path fast --prompt-len 1024 --gen 256
bench --synthetic qwen3-8b --path fast --prompt-len 512 --gen 32
bench --synthetic qwen3-8b --path fast --prompt-len 2048 --gen 32
bench --synthetic qwen3-8b --path fast --prompt-len 8192 --gen 128
for b in 2 4 8; do bench --synthetic qwen3-8b --path fast --prompt-len 128 --gen 128 --batch $b; done

if [ "${2:-}" != "--skip-e2e" ]; then
  echo "== e2e vs transformers"
  timeout 420 python3 tests/e2e/e2e_transformers.py --qwen3 "$BIN/qwen3" --workdir /tmp/qwen3-8b-random --out "$OUT" \
    > "$OUT/e2e.log" 2>&1 || echo "e2e failed: $(tail -5 "$OUT/e2e.log")"
  grep -A20 "e2e vs transformers" "$OUT/e2e.log"
fi

echo "== summary"
python3 - "$OUT/bench.jsonl" <<'PY'
import json, sys
print(f"{'path':7} {'B':>2} {'prompt':>6} {'ms/step':>8} {'tok/s':>8} {'GB/s':>7} {'%peak':>6} {'prefill tok/s':>13} {'launch':>6}")
for line in open(sys.argv[1]):
    j = json.loads(line)
    print(f"{j['path']:7} {j['batch']:>2} {j['prompt_len']:>6} {j['decode_ms_per_tok']:8.3f} {j['decode_tok_s']:8.1f} "
          f"{j['effective_GB_s']:7.0f} {j['pct_of_peak']:6.1f} {j['prefill_tok_s']:13.0f} {j['launches_per_step']:>6}")
PY
