#!/usr/bin/env bash
# Profiles a command with Nsight Compute and keeps the report under profiles/ (reports are gitignored; the written
# finding, profiles/NAME.md, is committed: see profiles/README.md).
#
# Usage: scripts/ncu_collect.sh NAME [ncu options...] -- COMMAND [ARGS...]
#   NAME         report name: profiles/NAME.ncu-rep (letters, digits, '.', '_', '-')
#   ncu options  passed through, e.g. -k regex:gemv --launch-skip 20 --launch-count 5 (--set full is slow: profile
#                a few launches of the kernels you are asking about, not a whole run)
# Example:
#   scripts/ncu_collect.sh gemv-v2-qkv -k regex:gemv --launch-count 3 -- \
#     build/release/bin/bench_runner --kernels gemm --regime decode --versions v2 --repeat 3 --no-json
#
# Runs `ncu --clock-control none --set full -o profiles/NAME ...` (clocks stay as the machine set them), prints
# where the report went and a one-line-per-kernel summary (time, memory and compute throughput), and creates
# profiles/NAME.md from a template when it does not exist yet. Where $OUT is set (the GPU machine's output folder),
# the report is copied there as well, so that it comes back.
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 3)); then
  sed -n '5,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
name=$1
shift
if [[ ! "$name" =~ ^[A-Za-z0-9._-]+$ ]]; then
  echo "ncu_collect: NAME may hold only letters, digits, '.', '_' and '-'" >&2
  exit 2
fi
ncu_options=()
while (($#)) && [[ "$1" != "--" ]]; do
  ncu_options+=("$1")
  shift
done
if [[ "${1:-}" != "--" ]] || (($# < 2)); then
  echo "ncu_collect: missing '-- COMMAND'" >&2
  exit 2
fi
shift
command -v ncu >/dev/null || { echo "ncu_collect: ncu (Nsight Compute) is not on the PATH" >&2; exit 1; }

mkdir -p profiles
report=profiles/$name.ncu-rep
echo "ncu_collect: profiling '$*' into $report" >&2
ncu --clock-control none --set full "${ncu_options[@]}" -f -o "profiles/$name" "$@"

echo "report: $PWD/$report ($(du -h "$report" | cut -f1))"
# One line per profiled kernel: duration and the speed-of-light percentages the finding starts from.
ncu --import "$report" --csv --page raw \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread \
  2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
if len(rows) < 3:
    sys.exit(0)
head = rows[0]
col = {name: head.index(name) for name in head}
def get(row, key):
    return row[col[key]] if key in col else "?"
print(f"{'kernel':50} {'time':>12} {'dram %':>8} {'sm %':>8} {'regs':>5}")
for row in rows[2:]:  # row 1 holds the units
    print(f"{get(row, 'Kernel Name')[:50]:50} {get(row, 'gpu__time_duration.sum'):>12} "
          f"{get(row, 'dram__throughput.avg.pct_of_peak_sustained_elapsed'):>8} "
          f"{get(row, 'sm__throughput.avg.pct_of_peak_sustained_elapsed'):>8} "
          f"{get(row, 'launch__registers_per_thread'):>5}")
' || true

finding=profiles/$name.md
if [[ ! -e "$finding" ]]; then
  cat >"$finding" <<EOF
# $name

- Command: \`scripts/ncu_collect.sh $name ${ncu_options[*]} -- $*\`
- GPU, driver, commit: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), \
$(git describe --always --dirty 2>/dev/null || echo "${QWEN3_GIT_COMMIT:-unknown}")
- Report: \`$report\` (not committed)

## What was asked

## What the profile shows
(time per kernel and its % of the measured bandwidth or tensor rate; the limiting unit; stalls)

## Finding and next step
EOF
  echo "finding to write: $finding"
fi

if [[ -n "${OUT:-}" ]]; then
  size=$(stat -c %s "$report")
  if ((size > 16 * 1024 * 1024)); then
    echo "ncu_collect: $report is over 16 MiB, not copied to \$OUT (profile fewer launches)" >&2
  else
    cp "$report" "$finding" "$OUT/"
    echo "copied to $OUT/"
  fi
fi
