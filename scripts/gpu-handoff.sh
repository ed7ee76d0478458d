#!/usr/bin/env bash
# Counter hand-offs between the batch-1 layer's launches in place of their PDL waits (kernels/common/handoff.cuh):
# norm_mlp v19_mlp_split_down_handoff with norm_gemv v25_gemv_norm_ring_handoff (MLP -> next QKV GEMV), and with
# qkv_attention_o v33_qkv_attention_o_counted too (all three boundaries), against the defaults, in one device call on
# prebuilt binaries: the kernel test (NormMlpHandsOffToNormGemv), the engine test (EngineHandoff), then interleaved
# benches: at prompts 128 and 1024 three rounds of the default, the MLP -> QKV hand-off, all three, all three with a
# 200 ns pause between polls, and qkv_attention_o v32; at 512 and 2048 two rounds of the default and all three; then
# one traced step of each at prompt 128 (bench/layer_timeline.py).
#
# Usage: scripts/gpu-handoff.sh [BIN_DIR]   (default build/h200/bin; BUDGET=330 s of benches; writes $OUT, else
#        build/gpu-handoff). Prints each tag's step times in ms, its best, and the default's best over it (> 1:
#        faster) last.
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-handoff}
BUDGET=${BUDGET:-330}
mkdir -p "$OUT_DIR"
RESULTS=$OUT_DIR/handoff.jsonl
: > "$RESULTS"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
# (Without hand-off fields v19 / v25 / v33 launch v15 / v22 / v25, which the NormMlp / NormGemv / QkvAttentionO
# suites cover; TESTS=... adds them.)
QWEN3_GPU_TESTS_VERSIONS=v19_mlp_split_down_handoff,v25_gemv_norm_ring_handoff,v33_qkv_attention_o_counted \
  timeout 240 "$BIN/qwen3_gpu_tests" --gtest_filter="${TESTS:-GpuTest.NormMlpHandsOffToNormGemv}" \
  > "$OUT_DIR/kernel-tests.txt" 2>&1
echo "kernel tests: exit $? ($(grep -c '^\[       OK' "$OUT_DIR/kernel-tests.txt") ok," \
  "$(grep -c '^\[  FAILED' "$OUT_DIR/kernel-tests.txt") failed lines)"
timeout 240 "$BIN/qwen3_engine_tests" --gtest_filter='EngineHandoff.*' > "$OUT_DIR/engine-tests.txt" 2>&1
echo "engine tests: exit $? ($(grep -c '^\[       OK' "$OUT_DIR/engine-tests.txt") ok)"
grep -h "hand-off\|FAILED\|Failure" "$OUT_DIR/kernel-tests.txt" "$OUT_DIR/engine-tests.txt" | head -20
COMMON=(--synthetic qwen3-8b --path fast --peak-gb-s 4540 --json --gen 256)
MLP_QKV=(--mlp v19_mlp_split_down_handoff --norm-gemv v25_gemv_norm_ring_handoff)
ALL3=("${MLP_QKV[@]}" --attention-o v33_qkv_attention_o_counted)
START=$(date +%s)
# shellcheck source=scripts/gpu-bench-lib.sh
source scripts/gpu-bench-lib.sh
for _ in 1 2 3; do
  for prompt in 128 1024; do
    bench default "$prompt"
    bench mlp_qkv "$prompt" "${MLP_QKV[@]}"
    bench all3 "$prompt" "${ALL3[@]}"
    bench all3_poll200 "$prompt" "${ALL3[@]}" --handoff-poll-ns 200
    bench v32 "$prompt" --attention-o v32_qkv_attention_o_trigger_late
  done
done
for _ in 1 2; do
  for prompt in 512 2048; do
    bench default "$prompt"
    bench all3 "$prompt" "${ALL3[@]}"
  done
done
# One traced step each of the default and all three hand-offs (bench/layer_timeline.py: the layer's spans).
for tag in default all3; do
  flags=()
  [ "$tag" = all3 ] && flags=("${ALL3[@]}")
  trace_step "$tag" "${flags[@]}"
done
pack_traces
cat "$OUT_DIR/timelines.txt"
step_table default
