#!/usr/bin/env bash
# qkv_attention_o v32 (PDL trigger once every split is in) against v25, the default, in one device call on prebuilt
# binaries: v32's diagnostic trigger points (warm_code bits 1024 / 2048: once the heads are merged, once the CTA's o
# rows are written, never) and staged budgets of 208 / 226 KB at prompts 128 and 1024 (two rounds), then v32 against
# v25 at prompts 512 / 2048 / 128 / 1024 (three rounds) and 8192 (once), interleaved.
#
# Usage: scripts/gpu-v32.sh [BIN_DIR]   (default build/h200/bin; BUDGET=380 s of benches; writes $OUT, else
#        build/gpu-v32). Prints each tag's step times in ms, its best, and v25's best over it (> 1: faster) last.
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-v32}
BUDGET=${BUDGET:-380}
mkdir -p "$OUT_DIR"
RESULTS=$OUT_DIR/v32.jsonl
: > "$RESULTS"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
COMMON=(--synthetic qwen3-8b --path fast --peak-gb-s 4540 --json --gen 256)
V32=(--attention-o v32_qkv_attention_o_trigger_late)
START=$(date +%s)
# shellcheck source=scripts/gpu-bench-lib.sh
source scripts/gpu-bench-lib.sh
for _ in 1 2; do
  for prompt in 128 1024; do
    bench v25 "$prompt"
    bench v32 "$prompt" "${V32[@]}"
    bench v32_trigger_merged "$prompt" "${V32[@]}" --attention-o-warm-code 1024
    bench v32_trigger_o_rows "$prompt" "${V32[@]}" --attention-o-warm-code 2048
    bench v32_trigger_never "$prompt" "${V32[@]}" --attention-o-warm-code 3072
    bench v32_smem208 "$prompt" "${V32[@]}" --attention-o-smem-kb 208
    bench v32_smem226 "$prompt" "${V32[@]}" --attention-o-smem-kb 226
  done
done
v32_against_v25 512 2048 128 1024
step_table v25
