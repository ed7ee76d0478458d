#!/usr/bin/env bash
# qkv_attention_o v34_qkv_attention_o_release_counts (v25 whose splits, head merges and waits for the merged heads
# synchronize through one thread's release / acquire on their counts instead of every thread's __threadfence)
# against v25, the default, in one device call on prebuilt binaries: the kernel tests of both
# (GpuTest.QkvAttentionO*), the engine test of their bits (EngineAttentionO.*, where qwen3_engine_tests is in
# BIN_DIR), interleaved benches (prompt 128: three rounds; 1024: two; 8192 once), and one traced step of each at
# prompt 128 with the merge's time per kv head (bench/attention_o_trace.py --by-split; bench/layer_timeline.py).
#
# Usage: scripts/gpu-release-counts.sh [BIN_DIR]   (default build/h200/bin: qwen3, qwen3_gpu_tests, measure_peaks;
#        BUDGET=150 s of benches; measure_peaks on an H200 only; writes $OUT, else build/gpu-release-counts).
#        Prints each tag's step times in ms, its best, and v25's best over it (> 1: faster) last.
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-release-counts}
BUDGET=${BUDGET:-150}
mkdir -p "$OUT_DIR"
RESULTS=$OUT_DIR/release-counts.jsonl
: > "$RESULTS"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$GPU"
# shellcheck source=scripts/gpu-bench-lib.sh
source scripts/gpu-bench-lib.sh
PEAK=4530  # (the H200's; elsewhere the ratios between tags are what counts)
if [[ $GPU == *H200* && -x "$BIN/measure_peaks" ]]; then
  PEAK=$(measure_read_peak 2> /dev/null)
  echo "read peak: $PEAK GB/s"
fi
run_tests "$BIN/qwen3_gpu_tests" 'GpuTest.QkvAttentionO*' v34_,v25_ "$OUT_DIR/kernel-tests.txt" "versions \]"
run_tests "$BIN/qwen3_engine_tests" 'EngineAttentionO.*' "" "$OUT_DIR/engine-tests.txt" "context "
COMMON=(--synthetic qwen3-8b --path fast --peak-gb-s "$PEAK" --json --gen 256)
V34=(--attention-o v34_qkv_attention_o_release_counts)
START=$(date +%s)
for round in 1 2 3; do
  for prompt in 128 1024; do
    ((round == 3 && prompt == 1024)) && continue
    bench v25 "$prompt"
    bench v34 "$prompt" "${V34[@]}"
  done
done
bench v25 8192
bench v34 8192 "${V34[@]}"
# One traced step of each at prompt 128.
for tag in v25 v34; do
  flags=()
  [ "$tag" = v34 ] && flags=("${V34[@]}")
  trace_step "$tag" "${flags[@]}"
  {
    echo "== $tag: attention launch by split"
    python3 bench/attention_o_trace.py --by-split "$OUT_DIR/traces/attn_$tag.json" | tail -3
  } >> "$OUT_DIR/timelines.txt" 2>&1
done
pack_traces
grep -h "with a split\|without\|last split\|merged\|layer period\|==" "$OUT_DIR/timelines.txt"
step_table v25
exit 0
