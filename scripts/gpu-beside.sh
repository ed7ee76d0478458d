#!/usr/bin/env bash
# The next MLP's CTAs beside the attention's (norm_mlp v18, qkv_attention_o v32), measured in one device call on
# prebuilt binaries: their kernel tests, then `qwen3 bench` at prompt 128 for each pairing interleaved with the
# default step over ROUNDS rounds, a few at prompt 1024, and one traced step of the default and of three pairings
# through bench/layer_timeline.py (when did the next MLP's CTAs become resident, against the attention's wait).
#
# Why the pairings: a v18 CTA (56 registers x 512 threads, a ring of S x 32 KB) fits on an SM beside a
# qkv_attention_o CTA (138 registers x 256 threads) only where the attention keeps K KB of shared memory:
# S 4 with K 83, S 3 with 115, S 2 with 147 (233,472 bytes an SM, 1 KB reserved a CTA). v25 triggers the next launch
# at its start (the MLP's rings fill during the attention's chain), v32 once every split is in (during the o phase).
# And both kernels on one shared-memory split of the SM (--smem-carveout 100): an SM holds CTAs of two kernels only
# under one split (as we understand it), and the driver may pick a smaller one for the attention at 83-147 KB.
# And v18's CTAs pulling 4 or 8 ring groups past their ring (32 KB each: 17 / 34 MB over 132 CTAs) into L2 while
# they wait beside the attention (--mlp-beside-l2-groups).
# And the split CTAs' unstaged o rows pulled into L2 after their split (--attention-o-warm-code 8): with the MLP's
# CTAs resident, the layer waits for the attention's last CTA (the MLP's PDL wait), and at 83 KB a split CTA keeps
# only 3 of its 32 o rows in shared memory.
#
# Usage: scripts/gpu-beside.sh [BIN_DIR]   (default build/h200/bin; ROUNDS=2, BUDGET=470 s of benches; writes $OUT,
#        else build/gpu-beside). Order: one round, the traces, prompt 1024, the other rounds.
# Prints the table last: each tag's step times in ms, its best, and the best's difference from the default's best.
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-beside}
ROUNDS=${ROUNDS:-2}
BUDGET=${BUDGET:-470}  # seconds of benches, so that the whole call stays inside a device command's 600
mkdir -p "$OUT_DIR/traces"
RESULTS=$OUT_DIR/bench.jsonl
: > "$RESULTS"

echo "== kernel tests (norm_mlp v15 and v18, qkv_attention_o v25 and v32)"
QWEN3_GPU_TESTS_VERSIONS=v15_,v18_,v25_,v32_ timeout 300 "$BIN/qwen3_gpu_tests" \
  --gtest_filter='GpuTest.NormMlpMatchesReference:GpuTest.QkvAttentionODecode' > "$OUT_DIR/tests.txt" 2>&1
rc=$?
echo "tests rc=$rc: $(grep -cE '^\[       OK \]' "$OUT_DIR/tests.txt") passed," \
  "$(grep -cE '^\[  FAILED  \]' "$OUT_DIR/tests.txt") FAILED lines (tests.txt)"

COMMON=(--synthetic qwen3-8b --path fast --peak-gb-s 4540 --json --gen 256)
V18="--mlp v18_mlp_split_down_beside"
V32="--attention-o v32_qkv_attention_o_trigger_late"
START=$(date +%s)
# shellcheck source=scripts/gpu-bench-lib.sh
source scripts/gpu-bench-lib.sh
C100="--smem-carveout 100"
S4K83="$V18 --mlp-beside-stages 4 --attention-o-smem-kb 83 $C100"  # v18, 4 stages, beside the attention at 83 KB
declare -A CONFIG=(
  [carveout_only]="$C100"
  [late_only]="$V32"
  [s4_ring_only]="$V18 --mlp-beside-stages 4 $C100"
  [s4k83_no_carveout]="$V18 --mlp-beside-stages 4 --attention-o-smem-kb 83"
  [s4k83]="$S4K83"
  [s3k115]="$V18 --mlp-beside-stages 3 --attention-o-smem-kb 115 $C100"
  [late_s4k83]="$V32 $S4K83"
  [late_s3k115]="$V32 $V18 --mlp-beside-stages 3 --attention-o-smem-kb 115 $C100"
  [late_s2k147]="$V32 $V18 --mlp-beside-stages 2 --attention-o-smem-kb 147 $C100"
  [late_s4k83_wc8]="$V32 $S4K83 --attention-o-warm-code 8"
  [late_s4k83_l2g4]="$V32 $S4K83 --mlp-beside-l2-groups 4"
  [late_s4k83_l2g8]="$V32 $S4K83 --mlp-beside-l2-groups 8"
  [s4k83_l2g8]="$S4K83 --mlp-beside-l2-groups 8"
)
ORDER="late_s4k83 late_s4k83_wc8 s4k83 late_s3k115 late_s2k147 late_s4k83_l2g4 late_s4k83_l2g8 carveout_only
  s4k83_no_carveout late_only s4_ring_only s3k115 s4k83_l2g8"
round() {
  for tag in $ORDER; do
    bench base 128
    # shellcheck disable=SC2086  # the flags split on purpose
    bench "$tag" 128 ${CONFIG[$tag]}
  done
}
round
for tag in base late_s4k83 s4k83 s4k83_no_carveout; do
  # shellcheck disable=SC2086
  bench "trace_$tag" 128 ${CONFIG[$tag]:-} --mlp-trace "$OUT_DIR/traces/mlp_$tag.json" \
    --attention-o-trace "$OUT_DIR/traces/attn_$tag.json"
  [ -f "$OUT_DIR/traces/attn_$tag.json" ] || continue
  echo "== layer timeline: $tag" >> "$OUT_DIR/timelines.txt"
  python3 bench/layer_timeline.py "$OUT_DIR/traces/mlp_$tag.json" "$OUT_DIR/traces/attn_$tag.json" \
    >> "$OUT_DIR/timelines.txt" 2>&1
done
for tag in late_s3k115 late_s2k147; do
  bench base 1024
  # shellcheck disable=SC2086
  bench "$tag" 1024 ${CONFIG[$tag]}
done
for ((r = 2; r <= ROUNDS; ++r)); do round; done

pack_traces
[ -f "$OUT_DIR/timelines.txt" ] && tail -n 60 "$OUT_DIR/timelines.txt"

echo "== step times (ms; prompt 128 unless the tag says; each against the default measured beside it)"
step_table base
