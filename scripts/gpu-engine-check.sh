#!/usr/bin/env bash
# Engine checks on a GPU machine from prebuilt binaries (built elsewhere with -DCMAKE_CUDA_ARCHITECTURES=90a-real):
# engine tests, end-to-end benchmarks (fast, cuBLAS and v0 paths; prefill at 512 and 2048), and the 8B comparison
# with transformers. Full logs and JSON under $OUT; a short summary last.
# Usage: scripts/gpu-engine-check.sh [BIN_DIR] [--skip-e2e]
set -u
BIN=${1:-build/h200/bin}
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
cublas_dir=$(python3 -c "import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${cublas_dir}:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$OUT/gpu.txt"
ldd "$BIN/qwen3" | grep -E "not found|cublas" || true

if [ -x "$BIN/qwen3_gpu_tests" ]; then
  echo "== kernel tests"
  timeout 240 "$BIN/qwen3_gpu_tests" > "$OUT/kernel_tests.log" 2>&1
  echo "kernel tests exit $?"
  grep -E "^\[ +(FAILED|PASSED)|cases FAILED|Failure" "$OUT/kernel_tests.log" | head -30
fi

echo "== engine tests"
timeout 300 "$BIN/qwen3_engine_tests" > "$OUT/engine_tests.log" 2>&1
echo "engine tests exit $?"
grep -E "^\[ +(FAILED|PASSED)|logits max|diverges|differences|Failure|Expected|Which is|actual" "$OUT/engine_tests.log" | head -60

if [ -x "$BIN/measure_peaks" ]; then
  echo "== measure_peaks"
  timeout 180 "$BIN/measure_peaks" --out "$OUT" > "$OUT/peaks.log" 2>&1 || echo "measure_peaks failed"
  tail -12 "$OUT/peaks.log"
  peak=$(python3 -c "import json,glob; print(json.load(open(sorted(glob.glob('$OUT/peaks-*.json'))[-1]))['read_GB_s'])" 2>/dev/null)
fi
peak_flag=${peak:+--peak-gb-s $peak}

echo "== bench"
bench() { timeout 240 "$BIN/qwen3" bench "$@" $peak_flag --json >> "$OUT/bench.jsonl" 2>> "$OUT/bench.err" || echo "bench $* failed: $(tail -2 "$OUT/bench.err")"; }
S="--synthetic qwen3-8b"
if [ "${SESSION6:-0}" = 1 ]; then
  # Session 6: the MLP in one launch and the QKV GEMV on a shared-memory ring (defaults), beside session 5's final
  # path (two MLP GEMVs, v10 QKV) and each change alone (ladder rows 22-24); traced; the usual other shapes.
  for p in 128 1024 8192; do
    g=256; [ $p = 8192 ] && g=128
    bench $S --path fast --prompt-len $p --gen $g --mlp off --norm-gemv v10_gemv_norm_wave
    bench $S --path fast --prompt-len $p --gen $g --norm-gemv v10_gemv_norm_wave
    bench $S --path fast --prompt-len $p --gen $g
    bench $S --path fast --prompt-len $p --gen $g --mlp-trace "$OUT/mlp-trace-p$p.json" \
      --attention-o-trace "$OUT/attention-o-trace-p$p.json"
  done
  bench $S --path fast --prompt-len 128 --gen 256 --mlp v3_mlp_qkv_next
  bench $S --path fast --prompt-len 128 --gen 256 --profile
  for b in 2 4 8; do bench $S --path fast --prompt-len 128 --gen 128 --batch $b; done
  bench $S --path fast --prompt-len 512 --gen 8
  bench $S --path fast --prompt-len 2048 --gen 8
  bench $S --path cublas --prompt-len 128 --gen 256
  bench $S --path v0 --prompt-len 128 --gen 8 --warmup 2 --repeat 1
  for p in 128 1024; do
    python3 bench/layer_timeline.py "$OUT/mlp-trace-p$p.json" "$OUT/attention-o-trace-p$p.json"
  done | tee "$OUT/layer_timeline.txt"
elif [ "${SESSION7:-0}" = 1 ]; then
  # Session 7: qkv_attention_o v2 (the default) beside v3-v5, v3's chain steps one at a time, the o loop run twice
  # (a diagnostic), traced at context 128.
  for p in 128 1024 8192; do
    g=256; [ $p = 8192 ] && g=128
    for v in v2_qkv_attention_o_head_merge v3_qkv_attention_o_short_chain v4_qkv_attention_o_grouped \
             v5_qkv_attention_o_mma; do
      bench $S --path fast --prompt-len $p --gen $g --attention-o $v
    done
    for steps in 0 1 2 4; do
      bench $S --path fast --prompt-len $p --gen $g --attention-o v3_qkv_attention_o_short_chain \
        --attention-o-chain-steps $steps
    done
  done
  for v in v2_qkv_attention_o_head_merge v4_qkv_attention_o_grouped v5_qkv_attention_o_mma; do
    bench $S --path fast --prompt-len 128 --gen 256 --attention-o $v --mlp-trace "$OUT/mlp-trace-$v.json" \
      --attention-o-trace "$OUT/attention-o-trace-$v.json"
    python3 bench/layer_timeline.py "$OUT/mlp-trace-$v.json" "$OUT/attention-o-trace-$v.json"
  done | tee "$OUT/layer_timeline.txt"
  bench $S --path fast --prompt-len 128 --gen 256 --attention-o v2_qkv_attention_o_head_merge \
    --attention-o-chain-steps 8
elif [ "${SESSION8:-0}" = 1 ]; then
  # Session 8: the MLP's ring with every stage in flight (v5, the default) beside v2 and the TMA prologue (v6);
  # the QKV GEMV's v13 / v14 beside v12; the o projection in the MLP launch (v7) with its tuning; traced at 128.
  for p in 128 1024 8192; do
    g=256; [ $p = 8192 ] && g=128
    for v in v2_mlp_split_down_ring v5_mlp_split_down_full_ring v6_mlp_split_down_tma v7_mlp_with_o; do
      bench $S --path fast --prompt-len $p --gen $g --mlp $v
    done
    for v in v13_gemv_norm_ring_full v14_gemv_norm_ring_tma; do
      bench $S --path fast --prompt-len $p --gen $g --norm-gemv $v
    done
  done
  for ahead in 0 1 2 3; do bench $S --path fast --prompt-len 128 --gen 256 --mlp v7_mlp_with_o --mlp-o-ahead $ahead; done
  bench $S --path fast --prompt-len 128 --gen 256 --mlp v7_mlp_with_o --mlp-o-ctas 108
  for v in v2_mlp_split_down_ring v5_mlp_split_down_full_ring v7_mlp_with_o; do
    bench $S --path fast --prompt-len 128 --gen 256 --mlp $v --mlp-trace "$OUT/mlp-trace-$v.json" \
      --attention-o-trace "$OUT/attention-o-trace-$v.json"
  done
  python3 bench/layer_timeline.py "$OUT/mlp-trace-v5_mlp_split_down_full_ring.json" \
    "$OUT/attention-o-trace-v5_mlp_split_down_full_ring.json" | tee "$OUT/layer_timeline.txt"
  for b in 2 4 8; do bench $S --path fast --prompt-len 128 --gen 128 --batch $b; done
  bench $S --path cublas --prompt-len 128 --gen 256
elif [ "${FINAL_ONLY:-0}" = 1 ]; then
  # The ladder at context 128 (each row one change: sessions 2 and 3), then the final path at other shapes beside
  # session 2's attention (v2) and the unfused pair.
  bench $S --path fast --prompt-len 128 --gen 256 --qkv-attention off --norm-gemv v8_gemv_norm --attention-o off
  bench $S --path fast --prompt-len 128 --gen 256 --qkv-attention v1_qkv_attention_cluster --norm-gemv v8_gemv_norm --attention-o off
  bench $S --path fast --prompt-len 128 --gen 256 --qkv-attention v2_qkv_attention_mma --norm-gemv v8_gemv_norm --attention-o off
  bench $S --path fast --prompt-len 128 --gen 256 --norm-gemv v10_gemv_norm_wave --qkv-attention v2_qkv_attention_mma --attention-o off
  bench $S --path fast --prompt-len 128 --gen 256 --profile
  bench $S --path fast --prompt-len 1024 --gen 256
  bench $S --path fast --prompt-len 1024 --gen 256 --qkv-attention v2_qkv_attention_mma --attention-o off
  bench $S --path fast --prompt-len 1024 --gen 256 --qkv-attention off --norm-gemv v8_gemv_norm --attention-o off
  bench $S --path fast --prompt-len 8192 --gen 128 --profile
  bench $S --path fast --prompt-len 8192 --gen 128 --qkv-attention v2_qkv_attention_mma --attention-o off
  bench $S --path fast --prompt-len 8192 --gen 128 --qkv-attention off --norm-gemv v8_gemv_norm --attention-o off
  for b in 2 4 8; do bench $S --path fast --prompt-len 128 --gen 128 --batch $b; done
  bench $S --path fast --prompt-len 512 --gen 8
  bench $S --path fast --prompt-len 2048 --gen 8
  bench $S --path cublas --prompt-len 128 --gen 256
  bench $S --path v0 --prompt-len 128 --gen 8 --warmup 2 --repeat 1
  # Session 4: every layer in one persistent kernel, beside the chain above (ladder rows 17-18).
  bench $S --path fast --prompt-len 128 --gen 256 --decode-layers v1_decode_layers_persistent --attention-o off
  bench $S --path fast --prompt-len 1024 --gen 256 --decode-layers v1_decode_layers_persistent --attention-o off
  if [ -x "$BIN/decode_layers_trace" ]; then
    timeout 120 "$BIN/decode_layers_trace" --position 128 --bucket 256 --out "$OUT" | tee "$OUT/decode_layers_trace.txt"
  fi
  # Session 5: the attention and the o projection in one launch (default v2) beside the chain and v1 (ladder rows
  # 19-21), traced; and what the chain's pair costs (skipped).
  for p in 128 1024 8192; do
    g=256; [ $p = 8192 ] && g=128
    bench $S --path fast --prompt-len $p --gen $g --attention-o off
    bench $S --path fast --prompt-len $p --gen $g --attention-o v1_qkv_attention_o
    bench $S --path fast --prompt-len $p --gen $g --attention-o-trace "$OUT/attention-o-trace-p$p.json"
  done
  bench $S --path fast --prompt-len 128 --gen 256 --attention-o off --skip qkv_attention,gemm_o_residual
  python3 bench/attention_o_trace.py "$OUT"/attention-o-trace-p*.json | tee "$OUT/attention_o_trace.txt"
else
# Decode ladder at context 128 (rows in the order the versions were added; each changes one thing).
bench $S --path v0 --prompt-len 128 --gen 8 --warmup 2 --repeat 1
bench $S --path cublas --prompt-len 128 --gen 256
bench $S --path fast-v1 --prompt-len 128 --gen 256 --graph off
bench $S --path fast-v1 --prompt-len 128 --gen 256
bench $S --path fast-v1 --prompt-len 128 --gen 256 --decode-gemm v4_gemv_pdl
bench $S --path fast-v1 --prompt-len 128 --gen 256 --decode-gemm v4_gemv_pdl --pdl on
bench $S --path fast-v1 --prompt-len 128 --gen 256 --decode-gemm v4_gemv_pdl --pdl on --fused-swiglu on --gate-up-swiglu v1_gate_up_swiglu
bench $S --path fast --prompt-len 128 --gen 256 --fold-norms off
bench $S --path fast --prompt-len 128 --gen 256 --profile
bench $S --path fast --prompt-len 128 --gen 256 --graph off
bench $S --path fast --prompt-len 1024 --gen 256
bench $S --path fast --prompt-len 8192 --gen 128 --profile
for b in 2 4 8; do bench $S --path fast --prompt-len 128 --gen 128 --batch $b; done
bench $S --path fast --prompt-len 512 --gen 8
bench $S --path fast --prompt-len 2048 --gen 8
bench $S --path cublas --prompt-len 2048 --gen 8

fi

if [ "${2:-}" != "--skip-e2e" ]; then
  echo "== e2e vs transformers"
  timeout 420 python3 tests/e2e/e2e_transformers.py --qwen3 "$BIN/qwen3" --workdir /tmp/qwen3-8b-random --out "$OUT" \
    > "$OUT/e2e.log" 2>&1 || echo "e2e failed: $(tail -5 "$OUT/e2e.log")"
  grep -A20 "e2e vs transformers" "$OUT/e2e.log"
  echo "== bench on the saved checkpoint"
  bench --model /tmp/qwen3-8b-random --path fast --prompt-len 128 --gen 256
  tail -1 "$OUT/bench.jsonl" | python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('saved 8B checkpoint:', round(j['decode_tok_s'],1), 'tok/s', round(j['pct_of_peak'],1), '% of peak')"
fi

echo "== text end to end on the GPU (tests/data/text_real_vocab, greedy, vs transformers' text)"
python3 - "$BIN/qwen3" <<'PY'
import json, subprocess, sys
exp = json.load(open("tests/data/text_real_vocab/expected.json"))
ok = 0
for r in exp["runs"]:
    cmd = [sys.argv[1], "run", "--backend", "cuda", "--model", "tests/data/text_real_vocab", "--tokenizer",
           "tests/data/tokenizer/tokenizer.json", "--prompt", r["prompt"], "--temperature", "0", "--max-tokens", "40",
           "--ignore-eos"]
    if r.get("raw"): cmd.append("--raw")
    elif not r["enable_thinking"]: cmd.append("--no-think")
    out = subprocess.run(cmd, capture_output=True, text=True)
    same = out.stdout.rstrip("\n") == r["text_skip_special"].rstrip("\n")
    ok += same
    if not same: print("  differs:", repr(r["prompt"][:30]), out.returncode, out.stderr[-200:])
print(f"  {ok}/{len(exp['runs'])} runs print transformers' text exactly")
PY

if [ -x "$BIN/bench_runner" ] && [ "${RUNNER:-1}" = 1 ]; then
  echo "== bench_runner (decode)"
  peaks_json=$(ls "$OUT"/peaks-*.json 2>/dev/null | tail -1)
  timeout 200 "$BIN/bench_runner" --regime ${RUNNER_REGIME:-decode} --out "$OUT" ${peaks_json:+--peaks $peaks_json} --time-budget-s ${RUNNER_BUDGET:-150} > "$OUT/runner.log" 2>&1 || echo "runner failed: $(tail -3 "$OUT/runner.log")"
  sed -n '/^SUMMARY/,$p' "$OUT/runner.log" | head -40
fi

echo "== summary"
python3 - "$OUT/bench.jsonl" <<'PY'
import json, sys
print(f"{'path':7} {'gemv':14} {'attn':18} g p f swiglu {'mlp':6} {'qkv':6} {'B':>2} {'prompt':>6} {'ms/step':>8} {'tok/s':>7} {'GB/s':>6} {'%pk':>5} {'prefill':>8} {'ln':>4}")
for line in open(sys.argv[1]):
    j = json.loads(line)
    flags = " ".join("1" if j.get(k) else "0" for k in ("cuda_graph", "pdl", "fold_norms")) + " " + j.get("gate_up_swiglu", "?")[:6]
    attn = j.get("qkv_attention", "off") if j.get("qkv_attention", "off") != "off" else j["decode_attention"]
    print(f"{j['path']:7} {j['decode_gemm'][:14]:14} {attn[:18]:18} {flags} {j.get('mlp', 'off')[:6]:6} "
          f"{j.get('norm_gemv', '?')[:6]:6} {j['batch']:>2} {j['prompt_len']:>6} "
          f"{j['decode_ms_per_tok']:8.3f} {j['decode_tok_s']:7.1f} {j['effective_GB_s']:6.0f} {j['pct_of_peak']:5.1f} "
          f"{j['prefill_tok_s']:8.0f} {j['launches_per_step']:>4}")
    if "profile" in j:
        print("    profile: " + ", ".join(f"{r['what']} {r['total_us']:.0f}us ({r['GB_s']:.0f} GB/s)" for r in j["profile"]))
PY
