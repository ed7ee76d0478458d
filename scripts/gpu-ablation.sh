#!/usr/bin/env bash
# Ablation timing of the batch-1 decode step on a GPU machine (prebuilt qwen3): the graph-replayed step with launch
# sites left out (qwen3 bench --skip), so each site's real cost under the graph and PDL is the difference from the
# full step. The tokens of an ablated step are garbage; only the times mean something.
# Usage: scripts/gpu-ablation.sh [BIN_DIR]   (writes $OUT/ablation.jsonl; prints a table last)
set -u
BIN=${1:-build/h200/bin}
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
# The chain's sites (the attention and the o GEMV as two launches): --attention-o off. With the default one-launch
# attention + o (qkv_attention_o) the site to skip for both is qkv_attention_o.
S="--synthetic qwen3-8b --path fast --gen 256 --repeat 1 --json --attention-o off ${BENCH_FLAGS:-}"
run() {  # prompt_len skip-list
  local skip=${2:+--skip $2}
  timeout 120 "$BIN/qwen3" bench $S --prompt-len "$1" $skip >> "$OUT/ablation.jsonl" 2>> "$OUT/ablation.err" ||
    echo "bench --prompt-len $1 $skip failed: $(tail -2 "$OUT/ablation.err")"
}
attn=qk_norm_rope_cache,attention,qkv_attention
small=gemm_qkv_norm,gemm_o_residual
large=gemm_gate_up_swiglu_norm,gemm_down_residual
head=gemm_lm_head,sample
for ctx in 128 ${ABLATION_LONG:-8192}; do
  run $ctx ""
  run $ctx $attn  # the fused qkv_attention, or qk_norm_rope_cache + attention where it is off
done
run 128 gemm_o_residual
run 128 gemm_qkv_norm
run 128 $head
run 128 $attn,$small,$head          # gate|up + down only
run 128 $attn,$large,$head          # qkv + o only
run 128 $attn,$small,$large         # lm_head + sample only
run 128 $attn,$small,$large,$head   # embedding + advance: the floor of a graph replay
python3 - "$OUT/ablation.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'ctx':>5} {'ms/step':>8} {'tok/s':>7}  skipped")
base = {}
for j in rows:
    skip = ",".join(j.get("skipped_launches", [])) or "-"
    if skip == "-": base[j["prompt_len"]] = j["decode_ms_per_tok"]
    d = j["decode_ms_per_tok"] - base.get(j["prompt_len"], 0)
    print(f"{j['prompt_len']:>5} {j['decode_ms_per_tok']:8.3f} {j['decode_tok_s']:7.1f}  {skip}  (delta {d:+.3f} ms)")
PY
