#!/usr/bin/env bash
# Issue 5's H200 numbers for the current defaults in one device call on prebuilt binaries, only on an H200 (on any other
# card it prints the card and exits 0 at once, so a lease that came back on an H100 costs only its start):
# measure_peaks; one round of the default at prompts 128 / 512 / 1024 first (the bar, so that a call cut short still
# brings it back); the kernel tests of qkv_attention_o v34, v40, v42 (v40 with v32's late PDL trigger, the default of
# sessions 37-38) and v44 (the default since session 39: v42 whose split CTAs read their residual rows in the
# attention's prepare step where a split takes at most two K/V tiles; 1.003x of v42 at prompt 128 on H100s) and the
# engine tests of their bits and of the transformers goldens; the default against v42, v40 (the default of session
# 36), v34 and v25 (two rounds) at prompts 128 / 512 / 1024 over three interleaved rounds and at 8192 once (not v25);
# the default at batch 2 / 4 / 8 (prompt 128); then the QKV GEMV's row ramp (norm_gemv v26, 450 per mille by
# default, tuned on an H100 in session 32) at 0 / 300 / 600 against the default at prompts 128 and 1024, two rounds;
# last, HBM over one replayed step of the default at prompt 128 (scripts/gpu-pm-sampling.sh, ~20 s; its files in
# pm-sampling.tar; PM=0 skips it). The last H200 measurement was session 26's (88.12% at prompt 128).
#
# Usage: scripts/gpu-h200-default.sh [BIN_DIR]   (default build/h200/bin: qwen3, qwen3_gpu_tests,
#        qwen3_engine_tests, measure_peaks; BUDGET=360 s of benches; writes $OUT, else build/gpu-h200-default).
#        Prints each tag's step times in ms, its best and the default's best over it (> 1: faster), then the best
#        step of each tag as % of the read peak. CUDA_MODULE_LOADING=EAGER in the environment loads every kernel at
#        each run's start, one code placement for every version (ITERATIONS.md session 36). ANY_GPU=1 runs it on
#        any card (to check the script, or for that card's numbers).
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-h200-default}
BUDGET=${BUDGET:-360}
# shellcheck source=scripts/gpu-bench-lib.sh
source scripts/gpu-bench-lib.sh
h200_start h200-default.jsonl
COMMON=(--synthetic qwen3-8b --path fast --peak-gb-s "$PEAK" --json --gen 256)
START=$(date +%s)
# The bar first (one round of the default, tagged apart so that the interleaved rounds below compare like with like),
# so that a call cut short still brings it back; then the tests, whose minutes the benches' BUDGET does not count.
for prompt in 128 512 1024; do bench v44_first "$prompt"; done
step_table v44_first
run_tests "$BIN/qwen3_gpu_tests" 'GpuTest.QkvAttentionO*' v34_,v40_,v42_,v44_ "$OUT_DIR/kernel-tests.txt" "versions \]"
run_tests "$BIN/qwen3_engine_tests" 'EngineAttentionO.*:Golden/EngineGolden.*' "" "$OUT_DIR/engine-tests.txt"
START=$(date +%s)
for round in 1 2 3; do
  for prompt in 128 512 1024; do
    bench v44 "$prompt"
    bench v42 "$prompt" --attention-o v42_qkv_attention_o_trigger_late_short
    bench v40 "$prompt" --attention-o v40_qkv_attention_o_merge_at_once_short
    bench v34 "$prompt" --attention-o v34_qkv_attention_o_release_counts
    ((round < 3)) && bench v25 "$prompt" --attention-o v25_qkv_attention_o_scaled_early
  done
done
bench v44 8192
bench v42 8192 --attention-o v42_qkv_attention_o_trigger_late_short
bench v40 8192 --attention-o v40_qkv_attention_o_merge_at_once_short
bench v34 8192 --attention-o v34_qkv_attention_o_release_counts
for batch in 2 4 8; do
  bench "v44_batch$batch" 128 --batch "$batch"
done
for _ in 1 2; do
  for prompt in 128 1024; do
    bench v44 "$prompt"
    for ramp in 0 300 600; do bench "ramp$ramp" "$prompt" --qkv-row-ramp-permille "$ramp"; done
  done
done
if [[ ${PM:-1} == 1 ]]; then
  # (one tar for its files: the device tool brings back a limited count of files)
  OUT="$OUT_DIR/pm" PROMPTS=128 bash scripts/gpu-pm-sampling.sh "$BIN" > "$OUT_DIR/pm-sampling.txt" 2>&1
  tar cf "$OUT_DIR/pm-sampling.tar" -C "$OUT_DIR" pm pm-sampling.txt && rm -rf "$OUT_DIR/pm" "$OUT_DIR/pm-sampling.txt"
  tar xOf "$OUT_DIR/pm-sampling.tar" pm/pm-128.txt 2> /dev/null | grep -e "period" -e "lost a layer"
fi
step_table v44
python3 - "$RESULTS" << 'PY'
import json, sys
best = {}
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    key = (j["prompt_len"], j["tag"])
    if key not in best or j["decode_ms_per_tok"] < best[key]["decode_ms_per_tok"]:
        best[key] = j
for (prompt, tag), j in sorted(best.items()):
    print(f"{prompt:5d} {tag:16s} {j['decode_ms_per_tok']:.4f} ms  {j['decode_tok_s']:7.1f} tok/s"
          f"  {j['pct_of_peak']:.2f}% of {j['peak_GB_s']:.0f} GB/s")
PY
exit 0
