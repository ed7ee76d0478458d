#!/usr/bin/env bash
# The whole GPU check in one command, for the GPU machine (the H200 lent by the device tool):
#   build   cmake preset "release" for sm_90a only (the build runs on the GPU machine itself)
#   tests   qwen3_gpu_tests: every kernel version against the CPU reference
#   peaks   measure_peaks: the ceilings behind every "% of peak"
#   runner  bench_runner: every kernel version at Qwen3-8B shapes, decode and prefill
#   e2e     `qwen3 bench` runs listed in E2E_BENCHES below (the lead's list)
#   memcheck  (only when asked for) compute-sanitizer over the quick kernel tests
# Every stage is time-boxed and the whole run fits a budget (default 560 s: a device command may last 600 s). Full
# logs and JSON go to $OUT (else build/gpu-check): at most 8 files, since the device tool returns no more. The short
# summary is printed last, because only the end of the output comes back.
#
# Usage: scripts/gpu-check.sh [--only tests,peaks,runner,e2e,memcheck] [--bin DIR] [--budget SECONDS]
#                             [--tests-filter GTEST_FILTER] [--quick-tests] [--kernels OPS] [--regime R] [--repeat N]
#   --only      stages to run (default: tests,peaks,runner,e2e); the build runs unless --bin is given
#   --bin DIR   use binaries built elsewhere (e.g. here with -DCMAKE_CUDA_ARCHITECTURES=90a-real) instead of building
#   --kernels, --regime, --repeat   passed to bench_runner
# Results name their commit from `git describe`; on a copy of the tree without .git, set QWEN3_GIT_COMMIT=<sha>.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---- options ---------------------------------------------------------------------------------------------------
STAGES="tests,peaks,runner,e2e"
BIN=""
BUDGET=560
TESTS_FILTER="*"
QUICK_TESTS=0
RUNNER_ARGS=()
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    --only) STAGES="$2"; shift ;;
    --bin) BIN=$(cd "$2" && pwd) || exit 2; shift ;;
    --budget) BUDGET="$2"; shift ;;
    --tests-filter) TESTS_FILTER="$2"; shift ;;
    --quick-tests) QUICK_TESTS=1 ;;
    --kernels|--regime|--repeat) RUNNER_ARGS+=("$1" "$2"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
wants() { [[ ",$STAGES," == *",$1,"* ]]; }

OUT_DIR=${OUT:-$ROOT/build/gpu-check}
mkdir -p "$OUT_DIR"
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
# Seconds a stage may take: its own cap, less if the budget (minus a reserve for the summary) runs short.
stage_limit() {
  local cap=$1 left=$((BUDGET - $(elapsed) - 15))
  ((left < cap)) && cap=$left
  echo "$cap"
}

# cuBLAS is a shared library there: the CUDA toolkit's, or the one PyTorch's wheel carries.
cublas_dir=$(python3 -c "import nvidia.cublas as c, os; print(os.path.join(os.path.dirname(c.__file__), 'lib'))" \
  2>/dev/null || true)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${cublas_dir}:${LD_LIBRARY_PATH:-}"
# The commit goes into every result file; a copy of the tree without .git can pass it in.
if [[ -z "${QWEN3_GIT_COMMIT:-}" ]]; then
  QWEN3_GIT_COMMIT=$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
fi
export QWEN3_GIT_COMMIT
GPU=$(nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1)
echo "gpu-check: ${GPU:-no nvidia-smi} | commit $QWEN3_GIT_COMMIT | stages $STAGES | budget ${BUDGET}s | out $OUT_DIR"

declare -A STATUS TIME RESULT
ORDER=()
# record STAGE STATUS SECONDS RESULT
record() { ORDER+=("$1"); STATUS[$1]=$2; TIME[$1]=$3; RESULT[$1]=$4; }
# run_limited SECONDS LOG COMMAND...: runs with a time limit, output appended to LOG; prints the exit code.
run_limited() {
  local limit=$1 log=$2
  shift 2
  if ((limit < 5)); then echo 125; return; fi
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
  echo $?
}
status_of() {  # exit code -> word
  case "$1" in 0) echo ok ;; 124|137) echo TIMEOUT ;; 125) echo "NO TIME" ;; *) echo "FAILED($1)" ;; esac
}
json_field() {  # json_field FILE KEY...: values of top-level keys, space-separated
  python3 - "$@" <<'PY' 2>/dev/null || echo "?"
import json, sys
j = json.load(open(sys.argv[1]))
print(" ".join(f"{j[k]:.0f}" if isinstance(j.get(k), (int, float)) else str(j.get(k, "?")) for k in sys.argv[2:]))
PY
}

# ---- build -----------------------------------------------------------------------------------------------------
BUILD_LOG=$OUT_DIR/build.log
: >"$BUILD_LOG"
if [[ -z "$BIN" ]]; then
  t0=$(elapsed)
  targets=()
  wants tests && targets+=(qwen3_gpu_tests)
  wants memcheck && targets+=(qwen3_gpu_tests)
  wants peaks && targets+=(measure_peaks)
  wants runner && targets+=(bench_runner measure_peaks)
  wants e2e && targets+=(qwen3)
  limit=$(stage_limit 330)
  rc=$(run_limited "$limit" "$BUILD_LOG" cmake --preset release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DQWEN3_CUDA=ON)
  if [[ "$rc" == 0 && ${#targets[@]} -gt 0 ]]; then
    rc=$(run_limited "$(stage_limit $((limit - $(elapsed) + t0)))" "$BUILD_LOG" \
      cmake --build build/release --parallel "$(nproc)" --target $(printf '%s\n' "${targets[@]}" | sort -u))
  fi
  BIN=$ROOT/build/release/bin
  if [[ "$rc" == 0 ]]; then
    record build ok $(($(elapsed) - t0)) "build/release (sm_90a)"
  else
    first_error=$(grep -m1 -E 'error|Error' "$BUILD_LOG" | cut -c1-80)
    record build "$(status_of "$rc")" $(($(elapsed) - t0)) "see build.log: $first_error"
    echo "== build failed; the end of build.log:"
    tail -25 "$BUILD_LOG"
  fi
else
  echo "prebuilt binaries: $BIN" >>"$BUILD_LOG"
  record build skipped 0 "prebuilt: $BIN"
fi
BUILD_OK=1
[[ "${STATUS[build]}" == ok || "${STATUS[build]}" == skipped ]] || BUILD_OK=0

# ---- tests -----------------------------------------------------------------------------------------------------
TESTS_LOG=$OUT_DIR/tests.log
if wants tests; then
  : >"$TESTS_LOG"
  t0=$(elapsed)
  if ((BUILD_OK)); then
    rc=$(QWEN3_GPU_TESTS_QUICK=$QUICK_TESTS run_limited "$(stage_limit 180)" "$TESTS_LOG" \
      "$BIN/qwen3_gpu_tests" --gtest_color=no --gtest_filter="$TESTS_FILTER")
    passed=$(grep -c '^\[       OK \]' "$TESTS_LOG")
    failed=$(grep -c '^\[  FAILED  \] [A-Za-z0-9_]*\.[A-Za-z0-9_]* (' "$TESTS_LOG")
    skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z0-9_]*\.[A-Za-z0-9_]* (' "$TESTS_LOG")
    # The kernel versions with failing cases, from the runner's per-version summary lines.
    failing=$(grep -E '^\[ versions \] [A-Za-z0-9_]+ +[0-9]+ cases FAILED' "$TESTS_LOG" | awk '{print $4}' |
      sort -u | paste -sd, -)
    record tests "$(status_of "$rc")" $(($(elapsed) - t0)) \
      "$passed passed, $failed failed, $skipped skipped${failing:+ (failing versions: $failing)}"
  else
    record tests "NOT RUN" 0 "no build"
  fi
fi

# ---- peaks -----------------------------------------------------------------------------------------------------
BENCH_LOG=$OUT_DIR/bench.log
: >"$BENCH_LOG"
if wants peaks; then
  t0=$(elapsed)
  if ((BUILD_OK)); then
    echo "== measure_peaks" >>"$BENCH_LOG"
    rc=$(run_limited "$(stage_limit 90)" "$BENCH_LOG" "$BIN/measure_peaks" --out "$ROOT/bench/results")
    peaks_file=$(ls -t "$ROOT"/bench/results/peaks-*.json 2>/dev/null | head -1)
    if [[ "$rc" == 0 && -n "$peaks_file" ]]; then
      cp "$peaks_file" "$OUT_DIR/"
      read -r read_bw copy_bw bf16 fp32 <<<"$(json_field "$peaks_file" read_GB_s copy_GB_s bf16_tflops fp32_tflops)"
      record peaks ok $(($(elapsed) - t0)) \
        "read $read_bw GB/s, copy $copy_bw GB/s, bf16 $bf16 TFLOP/s, fp32 $fp32 TFLOP/s"
    else
      record peaks "$(status_of "$rc")" $(($(elapsed) - t0)) "see bench.log"
    fi
  else
    record peaks "NOT RUN" 0 "no build"
  fi
fi

# ---- runner ----------------------------------------------------------------------------------------------------
RUNNER_STDOUT=$(mktemp)
if wants runner; then
  t0=$(elapsed)
  if ((BUILD_OK)); then
    limit=$(stage_limit 240)
    echo "== bench_runner ${RUNNER_ARGS[*]}" >>"$BENCH_LOG"
    # The runner stops starting new shapes before its limit, so its JSON is complete up to there.
    rc=$(run_limited "$limit" "$RUNNER_STDOUT" "$BIN/bench_runner" --out "$ROOT/bench/results" \
      --time-budget-s $((limit > 40 ? limit - 25 : 15)) "${RUNNER_ARGS[@]}")
    cat "$RUNNER_STDOUT" >>"$BENCH_LOG"
    runner_file=$(ls -t "$ROOT"/bench/results/runner-*.json 2>/dev/null | head -1)
    [[ -n "$runner_file" ]] && cp "$runner_file" "$OUT_DIR/"
    results=$(grep -o 'wrote .* (\([0-9]*\) results)' "$RUNNER_STDOUT" | grep -o '([0-9]* results)')
    problems=$(grep -o '^[0-9]* cases did not run cleanly' "$RUNNER_STDOUT" | grep -o '^[0-9]*')
    record runner "$(status_of "$rc")" $(($(elapsed) - t0)) \
      "${results:-no JSON written}${problems:+, $problems cases not clean}"
  else
    record runner "NOT RUN" 0 "no build"
  fi
fi

# ---- end-to-end ------------------------------------------------------------------------------------------------
# ==== END-TO-END BENCHMARKS: the lead fills this list =========================================================
# One entry per line, "label|arguments of qwen3 bench" (--json is added). Each run is time-boxed; keep the list
# short enough for the budget (an 8B synthetic run takes tens of seconds).
E2E_BENCHES=(
  "8b-fast-ctx128|--synthetic qwen3-8b --path fast --prompt-len 128 --gen 256"
  "8b-cublas-ctx128|--synthetic qwen3-8b --path cublas --prompt-len 128 --gen 256"
  "8b-fast-ctx8192|--synthetic qwen3-8b --path fast --prompt-len 8192 --gen 128"
  "8b-fast-b8|--synthetic qwen3-8b --path fast --prompt-len 128 --gen 128 --batch 8"
  "8b-fast-prefill2048|--synthetic qwen3-8b --path fast --prompt-len 2048 --gen 8"
)
E2E_RUN_LIMIT=120  # seconds per run
# ==== end of the list ===========================================================================================
E2E_LOG=$OUT_DIR/e2e.log
E2E_JSONL=$OUT_DIR/e2e.jsonl
if wants e2e; then
  : >"$E2E_LOG"
  : >"$E2E_JSONL"
  t0=$(elapsed)
  ok=0 failed=0
  if ((BUILD_OK)); then
    for entry in "${E2E_BENCHES[@]}"; do
      label=${entry%%|*}
      args=${entry#*|}
      out=$(mktemp)
      echo "== $label: qwen3 bench $args --json" >>"$E2E_LOG"
      # shellcheck disable=SC2086  # the arguments are one string on purpose
      rc=$(run_limited "$(stage_limit $E2E_RUN_LIMIT)" "$E2E_LOG" \
        sh -c "\"$BIN/qwen3\" bench $args --json >\"$out\"")
      if [[ "$rc" == 0 ]] && python3 - "$label" "$out" >>"$E2E_JSONL" 2>>"$E2E_LOG" <<'PY'; then
import json, sys
j = json.loads(open(sys.argv[2]).read())
j["label"] = sys.argv[1]
print(json.dumps(j))
PY
        ok=$((ok + 1))
      else
        failed=$((failed + 1))
        echo "$label: $(status_of "$rc")" >>"$E2E_LOG"
      fi
      cat "$out" >>"$E2E_LOG"
      rm -f "$out"
    done
    e2e_status=ok
    ((failed)) && e2e_status=FAILED
    record e2e "$e2e_status" $(($(elapsed) - t0)) "$ok runs ok, $failed failed"
  else
    record e2e "NOT RUN" 0 "no build"
  fi
fi

# ---- memcheck (only when asked for) -----------------------------------------------------------------------------
if wants memcheck; then
  t0=$(elapsed)
  if ((BUILD_OK)) && command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer --tool memcheck (quick tests)" >>"$TESTS_LOG"
    rc=$(QWEN3_GPU_TESTS_QUICK=1 run_limited "$(stage_limit 300)" "$TESTS_LOG" compute-sanitizer --tool memcheck \
      --error-exitcode 3 "$BIN/qwen3_gpu_tests" --gtest_color=no --gtest_filter="$TESTS_FILTER")
    record memcheck "$(status_of "$rc")" $(($(elapsed) - t0)) \
      "$(grep -m1 -E 'ERROR SUMMARY' "$TESTS_LOG" || echo 'see tests.log')"
  else
    record memcheck "NOT RUN" 0 "no build or no compute-sanitizer"
  fi
fi

# ---- summary (last: the device tool returns only the end of the output) ------------------------------------------
{
  if wants tests || wants memcheck; then
    echo
    echo "== kernel tests: failures (first 12; full log in tests.log)"
    grep -E '^\[  FAILED  \] [A-Za-z0-9_]+\.[A-Za-z0-9_]+ \(' "$TESTS_LOG" | head -12
    grep -E ' \| ' "$TESTS_LOG" | grep -vE '^\[ (versions|check) ' | cut -c1-230 | head -12
    grep -E '^\[ seed' "$TESTS_LOG" | head -1
  fi
  if wants runner && [[ -s "$RUNNER_STDOUT" ]]; then
    echo
    sed -n '/^SUMMARY/,/^$/p' "$RUNNER_STDOUT" | head -45
    grep -E '^(peaks|error):' "$RUNNER_STDOUT" | head -3
  fi
  if wants e2e && [[ -s "$E2E_JSONL" ]]; then
    echo
    echo "== end-to-end (qwen3 bench)"
    python3 - "$E2E_JSONL" <<'PY' 2>/dev/null || cat "$E2E_JSONL"
import json, sys
keys = ["decode_tok_s", "decode_ms_per_tok", "pct_of_peak", "effective_GB_s", "prefill_tok_s", "logits_hash"]
print(f"{'label':26} " + " ".join(f"{k:>17}" for k in keys))
for line in open(sys.argv[1]):
    j = json.loads(line)
    cells = [f"{j[k]:17.2f}" if isinstance(j.get(k), (int, float)) else f"{str(j.get(k, '-')):>17}" for k in keys]
    print(f"{j['label'][:26]:26} " + " ".join(cells))
PY
  fi
  echo
  echo "== gpu-check summary: ${GPU:-?} | commit $QWEN3_GIT_COMMIT | $(elapsed)s | files in $OUT_DIR"
  printf '%-9s %-10s %6s  %s\n' stage status time result
  for stage in "${ORDER[@]}"; do
    printf '%-9s %-10s %5ss  %s\n' "$stage" "${STATUS[$stage]}" "${TIME[$stage]}" "${RESULT[$stage]}"
  done
  echo "(copy $OUT_DIR/peaks-*.json and runner-*.json into bench/results/ and commit them)"
} | tee "$OUT_DIR/summary.txt"
rm -f "$RUNNER_STDOUT"

for stage in "${ORDER[@]}"; do
  case "${STATUS[$stage]}" in ok|skipped) ;; *) exit 1 ;; esac
done
exit 0
