#!/usr/bin/env bash
# One case of the fused attention's kernel test many times, under several delays of the late-input producer, in one
# device call on a prebuilt qwen3_gpu_tests: to catch session 41's intermittent failure (v14_qkv_attention_o_warm_code
# at ctx=1, graph with PDL and late inputs: two kv heads' outputs non-finite, once in ~8 runs of that case) and to
# tell whether it depends on when the inputs land against a version's own pre-wait work. For each delay
# (QWEN3_GPU_TESTS_LATE_DELAY_CYCLES; the tests' default 100000 is ~50 us) it runs GpuTest.QkvAttentionODecode with
# QWEN3_GPU_TESTS_CASES=CASE and QWEN3_GPU_TESTS_VERSIONS=VERSIONS under --gtest_repeat=REPEAT, then prints per
# version the cases run and failed over the repeats, and the first failure's lines.
#
# Usage: scripts/gpu-late-inputs.sh [BIN_DIR]   (default build/h200/bin; DELAYS="0 20000 100000 400000",
#        VERSIONS=v14_,v15_,v16_,v44_,v46_ (v14-v16: warm-ups before the PDL wait; v44: the default; v46: its split's
#        first tiles before the wait), CASE="ctx=1 heads", REPEAT=40, LIMIT=120 s a delay; ON_TIME=none: every
#        input late, the positions too; ON_TIME=positions: the positions on time, only qkv and the residual late (the
#        engine's order, where a version's pre-wait hint reads a valid position while qkv is still being written; see
#        QWEN3_GPU_TESTS_ON_TIME in tests/gpu/gpu_test_util.h); writes $OUT, else build/gpu-late-inputs).
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-late-inputs}
DELAYS=${DELAYS:-0 20000 100000 400000}
VERSIONS=${VERSIONS:-v14_,v15_,v16_,v44_,v46_}
CASE=${CASE:-ctx=1 heads}
REPEAT=${REPEAT:-40}
LIMIT=${LIMIT:-120}
ON_TIME=${ON_TIME:-none}
suffix=$ON_TIME
[[ $suffix == none ]] && suffix=""
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name --format=csv,noheader
for delay in $DELAYS; do
  log=$OUT_DIR/late${suffix:+-on-time-$suffix}-$delay.txt
  QWEN3_GPU_TESTS_LATE_DELAY_CYCLES=$delay QWEN3_GPU_TESTS_CASES=$CASE QWEN3_GPU_TESTS_VERSIONS=$VERSIONS \
    QWEN3_GPU_TESTS_ON_TIME=$ON_TIME timeout "$LIMIT" "$BIN/qwen3_gpu_tests" \
    --gtest_filter=GpuTest.QkvAttentionODecode --gtest_repeat="$REPEAT" > "$log" 2>&1
  status=$?
  passed=$(grep -c '^\[       OK' "$log")
  echo "delay $delay cycles, on time: $ON_TIME: exit $status, $passed of $REPEAT repeats passed"
  # "[ versions ] NAME N cases run, ..." and "[ versions ] NAME N cases FAILED, the first: LABEL", one pair a repeat
  awk '$1 == "[" && $2 == "versions" && $3 == "]" {
         if ($7 == "run,") run[$4] += $5; else if ($7 == "FAILED,") failed[$4] += $5
       }
       END { for (v in run) printf "  %-48s %5d cases run, %3d failed\n", v, run[v], failed[v] + 0 }' "$log" | sort
  grep -m 3 -e "non-finite" -e "partials bad" "$log" | cut -c1-200
done
