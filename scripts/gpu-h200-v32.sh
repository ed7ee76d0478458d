#!/usr/bin/env bash
# Issue 5's H200 numbers in one short device call on prebuilt binaries, only on an H200 (on any other card it prints
# the card and exits 0 at once, so a lease that came back on an H100 costs only its start): measure_peaks, then
# qkv_attention_o v32 against v25 (the default) at prompts 128 / 512 / 1024 / 2048 over three interleaved rounds and
# at 8192 once, then the default at batch 2 / 4 / 8 (prompt 128), then the QKV GEMV's row ramp (norm_gemv v26, the
# default at 450 per mille since session 32, measured on an H100 only) against even rows (v22) and 250 at prompts 128
# and 1024, two rounds.
#
# Usage: scripts/gpu-h200-v32.sh [BIN_DIR]   (default build/h200/bin: qwen3 and measure_peaks; BUDGET=240 s of
#        benches; writes $OUT, else build/gpu-h200-v32). Prints each tag's step times in ms, its best, and v25's best
#        over it (> 1: faster) last.
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-h200-v32}
BUDGET=${BUDGET:-240}
# shellcheck source=scripts/gpu-bench-lib.sh
source scripts/gpu-bench-lib.sh
h200_start v32-h200.jsonl
COMMON=(--synthetic qwen3-8b --path fast --peak-gb-s "$PEAK" --json --gen 256)
START=$(date +%s)
v32_against_v25 128 512 1024 2048
for batch in 2 4 8; do
  bench "v25_batch$batch" 128 --batch "$batch"
done
for _ in 1 2; do
  for prompt in 128 1024; do
    bench v25 "$prompt"
    bench v22_even_rows "$prompt" --norm-gemv v22_gemv_norm_ring_paced
    bench ramp250 "$prompt" --qkv-row-ramp-permille 250
  done
done
step_table v25
