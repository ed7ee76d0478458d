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
bench() {  # tag prompt_len flags...: one run, its JSON line tagged; none once the budget is spent
  local tag=$1 prompt=$2
  shift 2
  if (($(date +%s) - START > BUDGET)); then echo "bench $tag $prompt skipped: past the ${BUDGET} s budget"; return; fi
  timeout 120 "$BIN/qwen3" bench "${COMMON[@]}" --prompt-len "$prompt" "$@" 2>> "$OUT_DIR/bench.err" |
    sed "s/^{/{\"tag\":\"$tag\",\"prompt\":$prompt,/" >> "$RESULTS" || echo "bench $tag failed"
}
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
for _ in 1 2 3; do
  for prompt in 512 2048 128 1024; do
    bench v25 "$prompt"
    bench v32 "$prompt" "${V32[@]}"
  done
done
bench v25 8192
bench v32 8192 "${V32[@]}"
python3 - "$RESULTS" << 'PY'
import collections, json, sys
times = collections.defaultdict(list)
for line in open(sys.argv[1]):
    row = json.loads(line)
    times[(row["prompt"], row["tag"])].append(row["decode_ms_per_tok"])
for prompt in sorted({p for p, _ in times}):
    base = min(times.get((prompt, "v25"), [float("nan")]))
    for (p, tag), ms in sorted(times.items()):
        if p == prompt:
            runs = " ".join(f"{x:.4f}" for x in ms)
            print(f"{p:5d} {tag:20s} {runs}  best {min(ms):.4f}  v25/this {base / min(ms):.4f}")
PY
