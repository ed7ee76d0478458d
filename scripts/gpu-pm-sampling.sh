#!/usr/bin/env bash
# HBM over one replayed decode step of the current defaults, in one device call on prebuilt binaries: for each
# prompt, Nsight Compute's PM sampling over one CUDA graph replay (DRAM read, L2, SM issue, L1 and CTAs launched,
# sampled through the whole step with PDL overlap intact), exported to CSV and folded into one layer by
# bench/pm_timeline.py; beside it one untraced `qwen3 bench` of the same step on the same lease, so that the profile
# has the step time it belongs to. Session 22's profile (profiles/decode-step-qwen3-8b.md) was the last one taken,
# on the defaults of then (qkv_attention_o v25).
#
# Usage: scripts/gpu-pm-sampling.sh [BIN_DIR]   (default build/h200/bin: qwen3; PROMPTS="128 1024"; EXTRA: more
#        `qwen3 bench` flags for both; writes $OUT, else build/gpu-pm-sampling: pm-<prompt>-raw.csv.gz,
#        pm-<prompt>.txt (the folded layer, headed by ncu's sampling interval), bench.jsonl and pm.log (ncu's and the
#        benches' messages): few files, as the device tool brings back a limited count). Prints each prompt's folded
#        layer last.
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-build/h200/bin}
OUT_DIR=${OUT:-build/gpu-pm-sampling}
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
NCU=$(command -v ncu)
for candidate in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
  [ -z "$NCU" ] && [ -x "$candidate" ] && NCU=$candidate
done
if [ -z "$NCU" ]; then
  echo "no ncu on this machine: nothing sampled"
  exit 1
fi
read -r -a PROMPT_LENS <<< "${PROMPTS:-128 1024}"
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
: > "$OUT_DIR/bench.jsonl"
LOG=$OUT_DIR/pm.log
: > "$LOG"
for prompt in "${PROMPT_LENS[@]}"; do
  timeout 150 "$BIN/qwen3" bench --synthetic qwen3-8b --path fast --json --gen 256 --prompt-len "$prompt" \
    "${EXTRA_ARGS[@]}" >> "$OUT_DIR/bench.jsonl" 2>> "$LOG" || echo "bench at $prompt failed"
  # The graph is named "graph"; 20 replays skipped (the warm-up and the first steps), one sampled.
  echo "== ncu at prompt $prompt" >> "$LOG"
  timeout 300 "$NCU" --graph-profiling graph --section PmSampling --pm-sampling-interval 1000 -k graph \
    --launch-skip 20 --launch-count 1 --clock-control none -f -o "$OUT_DIR/pm-$prompt" \
    "$BIN/qwen3" bench --synthetic qwen3-8b --path fast --gen 48 --prompt-len "$prompt" "${EXTRA_ARGS[@]}" \
    >> "$LOG" 2>&1 || { echo "ncu at $prompt: exit $?"; tail -5 "$LOG"; }
  if [ -f "$OUT_DIR/pm-$prompt.ncu-rep" ]; then
    "$NCU" -i "$OUT_DIR/pm-$prompt.ncu-rep" --page raw --print-metric-instances values --csv |
      gzip > "$OUT_DIR/pm-$prompt-raw.csv.gz"
    {
      "$NCU" -i "$OUT_DIR/pm-$prompt.ncu-rep" --page details 2>&1 | grep -i -m2 "interval"
      python3 bench/pm_timeline.py "$OUT_DIR/pm-$prompt-raw.csv.gz" 2>&1
    } > "$OUT_DIR/pm-$prompt.txt"
    rm -f "$OUT_DIR/pm-$prompt.ncu-rep"
  fi
done
python3 -c 'import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    print("prompt %d: %.4f ms a step, %.1f tok/s" % (j["prompt_len"], j["decode_ms_per_tok"], j["decode_tok_s"]))
' "$OUT_DIR/bench.jsonl"
for prompt in "${PROMPT_LENS[@]}"; do
  echo "== prompt $prompt"
  cat "$OUT_DIR/pm-$prompt.txt" 2> /dev/null
done
exit 0
