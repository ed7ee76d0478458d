#!/usr/bin/env bash
# How qkv_attention_o's chain from the splits to the merged heads synchronizes, measured in one device call on prebuilt
# binaries: v25 (every thread's __threadfence), v34 (one thread's release / acquire on the counts, the default since
# session 34), v35 (tagged words: no fence, no count on the splits' side), v36 (v34 whose merge loads its values with
# its statistics), v37 (a kv head's splits in one cluster, merged from its shared memory), v38 (v37 triggering the next
# launch late), v39 (v38 with its o rows in one round), v40 (v36 up to 1536 keys, v34 past them), v41 (every cluster of
# 8 CTAs attends every kv head; v41s: at 227 KB a CTA, v41n: no unstaged o row into L2, v41k: up to 2048 keys, v41r: a
# K/V ring of 8 tiles) and v42 (v40 with v32's late trigger; v42t1 / v42t2: triggered once the heads are in shared
# memory / once the o rows are done, v42s192 / v42s227: 192 / 227 KB of shared memory a CTA, more o rows staged, against
# the default 160; v17's warm_code bits: v42w1 no first o pass in the CTAs without a split, v42w8 the split CTAs pull
# their unstaged rows into L2 after their split, v42w16 the CTAs without a split pull the split CTAs' unstaged rows into
# L2 after their first pass), v43 (v42 whose split CTAs read their residual rows in the attention's prepare step),
# v44 (v43 where a split takes at most two K/V tiles, v42 past), v45 (v44 with a split's K/V tiles in flight at once
# where they fit its ring) and v46 (v45 issuing a split's first tiles before the PDL wait);
# TAGS picks them (default v25 v34 v35 v36). First the kernel tests of these (GpuTest.QkvAttentionO*) and the engine
# test of their bits (EngineAttentionO.*, where qwen3_engine_tests is in BIN_DIR); then interleaved benches (prompt 128:
# three rounds; 512, 1024 and 2048: two; 8192 once); then one traced step of each at prompt 128 with the merge's time
# per kv head (bench/attention_o_trace.py --by-split; bench/layer_timeline.py).
#
# Usage: scripts/gpu-chain-sync.sh [BIN_DIR]   (default build/h200/bin: qwen3, qwen3_gpu_tests, measure_peaks;
#        BUDGET=200 s of benches; TAGS="v34 v36" for fewer versions; PROMPTS="128 512" for fewer prompts (128 three
#        rounds, the others two); LONG=0 skips 8192; TRACE=0 skips the traces; ENGINE_TESTS: the engine tests'
#        gtest filter (default EngineAttentionO.*); measure_peaks on an H200 only; writes $OUT, else
#        build/gpu-chain-sync).
#        Prints each tag's step times in ms, its best, and BASE's best over it (> 1: faster) last (BASE default v34).
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-chain-sync}
BUDGET=${BUDGET:-200}
mkdir -p "$OUT_DIR"
RESULTS=$OUT_DIR/chain-sync.jsonl
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
read -r -a TAGS <<< "${TAGS:-v25 v34 v35 v36}"
VERSIONS=$(printf '%s_,' "${TAGS[@]}")
run_tests "$BIN/qwen3_gpu_tests" 'GpuTest.QkvAttentionO*' "${VERSIONS%,}" "$OUT_DIR/kernel-tests.txt" "versions \]"
run_tests "$BIN/qwen3_engine_tests" "${ENGINE_TESTS:-EngineAttentionO.*}" "" "$OUT_DIR/engine-tests.txt" "context "
COMMON=(--synthetic qwen3-8b --path fast --peak-gb-s "$PEAK" --json --gen 256)
declare -A VERSION=([v25]=v25_qkv_attention_o_scaled_early [v34]=v34_qkv_attention_o_release_counts
  [v35]=v35_qkv_attention_o_tagged_merge [v36]=v36_qkv_attention_o_merge_at_once
  [v37]=v37_qkv_attention_o_cluster_merge [v38]=v38_qkv_attention_o_cluster_trigger_late
  [v39]=v39_qkv_attention_o_cluster_rows [v40]=v40_qkv_attention_o_merge_at_once_short
  [v41]=v41_qkv_attention_o_cluster_heads [v42]=v42_qkv_attention_o_trigger_late_short
  [v43]=v43_qkv_attention_o_residual_in_prepare [v44]=v44_qkv_attention_o_residual_in_prepare_short
  [v45]=v45_qkv_attention_o_tiles_at_once [v46]=v46_qkv_attention_o_tiles_early)
# Tags that are a version with tuning flags: the version of their first three characters (v41s: v41's).
declare -A FLAGS=([v41s]="--attention-o-smem-kb 227" [v41n]="--attention-o-l2-rows 0"
  [v41k]="--attention-o-keys-per-split 2048" [v41r]="--attention-o-stages 8"
  [v42t1]="--attention-o-warm-code 1024" [v42t2]="--attention-o-warm-code 2048"
  [v42s192]="--attention-o-smem-kb 192" [v42s227]="--attention-o-smem-kb 227"
  [v42w1]="--attention-o-warm-code 1" [v42w8]="--attention-o-warm-code 8" [v42w16]="--attention-o-warm-code 16")
# tag_args TAG: TAG_ARGS, the `qwen3 bench` flags of the tag (its version, then its tuning flags).
tag_args() {
  local extra=()
  read -r -a extra <<< "${FLAGS[$1]:-}"
  TAG_ARGS=(--attention-o "${VERSION[${1:0:3}]}" "${extra[@]}")
}
# bench_tag TAG PROMPT: bench with the tag's flags.
bench_tag() {
  tag_args "$1"
  bench "$1" "$2" "${TAG_ARGS[@]}"
}
START=$(date +%s)
read -r -a PROMPT_LENS <<< "${PROMPTS:-128 512 1024 2048}"
for round in 1 2 3; do
  for prompt in "${PROMPT_LENS[@]}"; do
    ((round == 3 && prompt != 128)) && continue
    for tag in "${TAGS[@]}"; do bench_tag "$tag" "$prompt"; done
  done
done
if [[ ${LONG:-1} == 1 ]]; then
  for tag in "${TAGS[@]}"; do bench_tag "$tag" 8192; done
fi
# One traced step of each at prompt 128 (TRACE=0: none).
for tag in "${TAGS[@]}"; do
  [[ ${TRACE:-1} == 1 ]] || break
  tag_args "$tag"
  trace_step "$tag" "${TAG_ARGS[@]}"
  {
    echo "== $tag: attention launch by split"
    python3 bench/attention_o_trace.py --by-split "$OUT_DIR/traces/attn_$tag.json" | tail -4
  } >> "$OUT_DIR/timelines.txt" 2>&1
done
[[ -d $OUT_DIR/traces ]] && pack_traces
grep -h -e "with a split" -e without -e "last split" -e merged -e "head merges" -e "merging split" -e "layer period" \
  -e "==" "$OUT_DIR/timelines.txt"
step_table "${BASE:-v34}"
exit 0
