# shellcheck shell=bash
# Shared by the one-call device measurements (scripts/gpu-beside.sh, gpu-v32.sh, gpu-h200-v32.sh, gpu-handoff.sh,
# gpu-qkv-ramp.sh, gpu-chain-sync.sh, gpu-h200-default.sh):
# source it after setting BIN (the binaries), OUT_DIR, RESULTS (a JSON-lines file), BUDGET (seconds of benches),
# START (date +%s) and COMMON (the `qwen3 bench` flags every run shares); measure_read_peak needs only BIN and OUT_DIR.

# measure_read_peak: measure_peaks into $OUT_DIR (its output in peaks.txt, the last 4 lines echoed to stderr), then
# its streaming read bandwidth in GB/s on stdout (4530, the H200's, where it wrote none).
measure_read_peak() {
  timeout 120 "$BIN/measure_peaks" --out "$OUT_DIR" > "$OUT_DIR/peaks.txt" 2>&1
  tail -4 "$OUT_DIR/peaks.txt" >&2
  python3 -c 'import glob, json, sys; f = sorted(glob.glob(sys.argv[1] + "/peaks-*.json"));
print(round(json.load(open(f[-1]))["read_GB_s"]) if f else 4530)' "$OUT_DIR" 2>/dev/null || echo 4530
}

# h200_start RESULTS_NAME: the start of an H200-only script (gpu-h200-v32.sh, gpu-h200-default.sh): prints the card
# and, on any other card, exits the script at once with status 0 (unless ANY_GPU=1), so that a lease that came back on
# an H100 costs only its start; then makes $OUT_DIR, empties RESULTS=$OUT_DIR/RESULTS_NAME and sets PEAK to the
# measured read bandwidth (measure_read_peak).
h200_start() {
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  echo "$gpu"
  if [[ $gpu != *H200* && ${ANY_GPU:-0} != 1 ]]; then
    echo "not an H200: nothing run"
    exit 0
  fi
  mkdir -p "$OUT_DIR"
  RESULTS=$OUT_DIR/$1
  : > "$RESULTS"
  PEAK=$(measure_read_peak)
  echo "read peak: $PEAK GB/s"
}

# run_tests BINARY FILTER VERSIONS OUT_FILE [GREP]: one gtest binary under --gtest_filter=FILTER (and, where VERSIONS
# is not empty, QWEN3_GPU_TESTS_VERSIONS=VERSIONS), its output in OUT_FILE; prints its exit status and counts, then
# the first lines of OUT_FILE that show failures or match GREP. Nothing where BINARY is not there.
run_tests() {
  local binary=$1 filter=$2 versions=$3 out=$4 extra=${5:-FAILED}
  [ -x "$binary" ] || return 0
  if [ -n "$versions" ]; then
    QWEN3_GPU_TESTS_VERSIONS=$versions timeout 240 "$binary" --gtest_filter="$filter" > "$out" 2>&1
  else
    timeout 240 "$binary" --gtest_filter="$filter" > "$out" 2>&1
  fi
  echo "$(basename "$binary") $filter: exit $? ($(grep -c '^\[       OK' "$out") ok," \
    "$(grep -c '^\[  FAILED' "$out") failed lines)"
  grep -h -e "FAILED" -e "Failure" -e "$extra" "$out" | head -12
}

# bench TAG PROMPT_LEN FLAGS...: one `qwen3 bench` run, its JSON line tagged into $RESULTS; none once the budget is
# spent.
bench() {
  local tag=$1 prompt=$2
  shift 2
  if (($(date +%s) - START > BUDGET)); then echo "bench $tag $prompt skipped: past the ${BUDGET} s budget"; return; fi
  timeout 150 "$BIN/qwen3" bench "${COMMON[@]}" --prompt-len "$prompt" "$@" 2>> "$OUT_DIR/bench.err" |
    sed "s/^{/{\"tag\":\"$tag\",/" >> "$RESULTS" || echo "bench $tag failed: $(tail -1 "$OUT_DIR/bench.err")"
}

# trace_step TAG FLAGS...: one traced `qwen3 bench` step at prompt 128, its traces in $OUT_DIR/traces/mlp_TAG.json
# (the MLP and the QKV GEMV) and attn_TAG.json (the attention launch), and the layer's time line from them
# (bench/layer_timeline.py) appended to $OUT_DIR/timelines.txt under "== TAG: layer timeline".
trace_step() {
  local tag=$1
  shift
  mkdir -p "$OUT_DIR/traces"
  timeout 150 "$BIN/qwen3" bench "${COMMON[@]}" --prompt-len 128 "$@" \
    --mlp-trace "$OUT_DIR/traces/mlp_$tag.json" --attention-o-trace "$OUT_DIR/traces/attn_$tag.json" \
    > /dev/null 2>> "$OUT_DIR/bench.err"
  {
    echo "== $tag: layer timeline"
    python3 bench/layer_timeline.py "$OUT_DIR/traces/mlp_$tag.json" "$OUT_DIR/traces/attn_$tag.json"
  } >> "$OUT_DIR/timelines.txt" 2>&1
}

# pack_traces: $OUT_DIR/traces into one file to bring back, $OUT_DIR/traces.tgz; the folder removed.
pack_traces() { (cd "$OUT_DIR" && tar -czf traces.tgz traces && rm -rf traces); }

# v32_against_v25 PROMPT...: qkv_attention_o v32 (tag v32) against the default v25 (tag v25) at each prompt over
# three interleaved rounds, then at 8192 once (scripts/gpu-v32.sh, scripts/gpu-h200-v32.sh).
v32_against_v25() {
  local v32=(--attention-o v32_qkv_attention_o_trigger_late) prompt
  for _ in 1 2 3; do
    for prompt in "$@"; do
      bench v25 "$prompt"
      bench v32 "$prompt" "${v32[@]}"
    done
  done
  bench v25 8192
  bench v32 8192 "${v32[@]}"
}

# step_table BASE_TAG: each tag's step times in ms by prompt, its best, and the best against BASE_TAG's best at the
# same prompt (> 1: faster), the base first.
step_table() {
  python3 - "$RESULTS" "$1" << 'PY'
import collections, json, sys
base_tag = sys.argv[2]
times = collections.defaultdict(list)
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    times[(j["tag"], j["prompt_len"])].append(j["decode_ms_per_tok"])
for (tag, prompt), ms in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0] != base_tag, kv[0][0])):
    base = min(times.get((base_tag, prompt), [float("nan")]))
    median = sorted(ms)[len(ms) // 2]
    runs = ' '.join(f'{m:.4f}' for m in ms) if len(ms) <= 4 else f'{len(ms)} runs, median {median:.4f}'
    print(f"{prompt:5d} {tag:26s} {runs:40s} best {min(ms):.4f}"
          f"  {base / min(ms):.4f}x of {base_tag}")
PY
}
