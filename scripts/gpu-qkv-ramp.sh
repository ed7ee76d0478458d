#!/usr/bin/env bash
# norm_gemv v26_gemv_norm_ring_ramp (the QKV GEMV's rows split in shares that fall with the block index) against
# v22 (even rows; the default before session 32), in one device call on prebuilt binaries: on an H200 first issue
# 5's pending qkv_attention_o v32 measurement (scripts/gpu-h200-v32.sh's benches at prompts 128 and 1024), then on
# any card the kernel tests of v26 (GpuTest.NormGemv*, RowSplit.*) and, where qwen3_engine_tests is in BIN_DIR, its
# engine test (EngineQkvRamp.*), interleaved benches of v22 and v26 at several ramps (prompt 128: three rounds; 1024:
# two), and one traced step of each of v22 and RAMP_TRACE (bench/mlp_cta_spread.py: the QKV GEMV's CTAs by block
# index; bench/layer_timeline.py: the layer's spans).
#
# Usage: scripts/gpu-qkv-ramp.sh [BIN_DIR]   (default build/h200/bin: qwen3, qwen3_gpu_tests, measure_peaks;
#        BUDGET=300 s of benches; RAMPS="150 300 450 -150"; RAMP_TRACE=300; writes $OUT, else build/gpu-qkv-ramp).
#        A ramp is PERMILLE or PERMILLE@FIRST_CTA (--qkv-row-ramp-first-cta: the CTAs before it keep the even
#        share). Prints each tag's step times in ms, its best, and v22's best over it (> 1: faster) last.
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-qkv-ramp}
BUDGET=${BUDGET:-300}
read -r -a RAMPS <<< "${RAMPS:-150 300 450 -150}"
RAMP_TRACE=${RAMP_TRACE:-300}
mkdir -p "$OUT_DIR"
RESULTS=$OUT_DIR/qkv-ramp.jsonl
: > "$RESULTS"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$GPU"
# shellcheck source=scripts/gpu-bench-lib.sh
source scripts/gpu-bench-lib.sh
PEAK=4540
if [[ $GPU == *H200* ]]; then
  PEAK=$(measure_read_peak 2> /dev/null)
  echo "read peak: $PEAK GB/s"
fi
run_tests "$BIN/qwen3_gpu_tests" 'GpuTest.NormGemv*:RowSplit.*' v26_gemv_norm_ring_ramp,v22_gemv_norm_ring_paced \
  "$OUT_DIR/kernel-tests.txt"
run_tests "$BIN/qwen3_engine_tests" 'EngineQkvRamp.*' "" "$OUT_DIR/engine-tests.txt" "ramp "
COMMON=(--synthetic qwen3-8b --path fast --peak-gb-s "$PEAK" --json --gen 256)
# ramp_flags PERMILLE[@FIRST_CTA]: v26's flags for one entry of RAMPS.
ramp_flags() {
  local permille=${1%@*} first=0
  [[ $1 == *@* ]] && first=${1#*@}
  echo --norm-gemv v26_gemv_norm_ring_ramp --qkv-row-ramp-permille "$permille" --qkv-row-ramp-first-cta "$first"
}
START=$(date +%s)
if [[ $GPU == *H200* ]]; then
  for _ in 1 2; do
    for prompt in 128 1024; do
      bench v25 "$prompt"
      bench v32 "$prompt" --attention-o v32_qkv_attention_o_trigger_late
    done
  done
fi
for round in 1 2 3; do
  for prompt in 128 1024; do
    ((round == 3 && prompt == 1024)) && continue
    bench v22 "$prompt" --norm-gemv v22_gemv_norm_ring_paced
    for ramp in "${RAMPS[@]}"; do
      read -r -a flags <<< "$(ramp_flags "$ramp")"
      bench "ramp$ramp" "$prompt" "${flags[@]}"
    done
  done
done
# One traced step each of v22 and RAMP_TRACE at prompt 128.
for tag in v22 "ramp$RAMP_TRACE"; do
  flags=(--norm-gemv v22_gemv_norm_ring_paced)
  [ "$tag" != v22 ] && read -r -a flags <<< "$(ramp_flags "$RAMP_TRACE")"
  trace_step "$tag" "${flags[@]}"
  {
    echo "== $tag: QKV GEMV CTAs"
    python3 bench/mlp_cta_spread.py "$OUT_DIR/traces/mlp_$tag.json" | sed -n '/^QKV GEMV by block/,$p'
  } >> "$OUT_DIR/timelines.txt" 2>&1
done
pack_traces
cat "$OUT_DIR/timelines.txt"
step_table v22
[[ $GPU == *H200* ]] && step_table v25 | grep -v "v22\|ramp"
exit 0
