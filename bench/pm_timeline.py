#!/usr/bin/env python3
"""DRAM read throughput over one replayed decode step, from Nsight Compute's PM sampling, folded into one layer.

The layer traces (bench/layer_timeline.py) say when each CTA reached each point, not what HBM was doing meanwhile.
PM sampling does: ncu samples hardware counters every ~1.5 us across a whole CUDA graph replay (PDL overlap kept),
so the step's DRAM read rate shows where HBM idles. Collect on the GPU machine (the graph is named "graph"):

  ncu --graph-profiling graph --section PmSampling --pm-sampling-interval 1000 -k graph --launch-skip 20 \\
      --launch-count 1 --clock-control none -f -o pm build/h200/bin/qwen3 bench --synthetic qwen3-8b \\
      --path fast --gen 48 --prompt-len 128
  ncu -i pm.ncu-rep --page raw --print-metric-instances values --csv > pm-raw.csv

then: bench/pm_timeline.py pm-raw.csv[.gz] [--period SAMPLES]

Prints the mean DRAM read rate over the active samples (% of the DRAM's peak as ncu counts it), the layer period in
samples (autocorrelation, or --period), and the layer profile: each sample's mean over the layers, aligned at the
MLP's start (the first sample above 90% after the layer's deepest trough), the DRAM time it loses against the MLP's
steady rate ("lost", in samples), and beside it the L2, SM issue and L1 throughput and the CTAs launched. The sample
interval is ncu's (the details page prints it: 1.5 us on the H200 for a 3.9 ms step), so a stretch's loss in samples
times the interval is microseconds a layer.
"""
import csv
import gzip
import statistics
import sys

READ = "dramc__read_throughput.avg.pct_of_peak_sustained_elapsed"
# Printed beside the DRAM read rate where the report has them (the PmSampling section's): L2, SM issue and L1
# throughput (% of peak) and CTAs launched in the sample (which launch's CTAs are arriving).
OTHERS = [("L2 %", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
          ("issue %", "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed"),
          ("L1 %", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed"),
          ("CTAs", "gr__ctas_launched_realtime.sum")]


def read_rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return list(csv.reader(f))


def series(rows, metric):
    """The sampled values of the instanced metric whose name ends in `metric`, or None."""
    header, values = rows[0], rows[-1]  # (row 1 holds the units)
    for name, cell in zip(header, values):
        if name.endswith(metric) and "(" in cell:
            inner = cell[cell.index("(") + 1:cell.rindex(")")]
            return [float(x.replace(",", "")) for x in inner.split(";")]
    return None


def period_of(active, lo=20, hi=400):
    """The layer period in samples: the shortest lag whose autocorrelation is a local peak within 10% of the
    highest. (Two layers correlate about as well as one; the highest alone picked 173 samples, two layers, on one
    of session 40's runs where the other gave 87.)"""
    m = statistics.mean(active)
    lags = list(range(lo, min(hi, len(active) // 3)))
    corr = {}
    for lag in lags:
        n = len(active) - lag
        corr[lag] = sum((active[i] - m) * (active[i + lag] - m) for i in range(n)) / n
    best = max(corr.values())
    for lag in lags[1:-1]:
        if corr[lag] >= 0.9 * best and corr[lag] >= corr[lag - 1] and corr[lag] >= corr[lag + 1]:
            return lag
    return max(lags, key=lambda lag: corr[lag])


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--period"):
        sys.exit("usage: bench/pm_timeline.py PM-RAW.csv[.gz] [--period SAMPLES]")
    rows = read_rows(argv[1])
    rd = series(rows, READ)
    if rd is None:
        sys.exit(f"{argv[1]}: no instanced metric ending in {READ} (was it collected with --section PmSampling?)")
    busy = [i for i, x in enumerate(rd) if x > 1.0]
    first, end = busy[0], busy[-1] + 1
    active = rd[first:end]
    others = []  # (label, its samples over the active range)
    for label, metric in OTHERS:
        values = series(rows, metric)
        if values is not None and len(values) == len(rd):
            others.append((label, values[first:end]))
    period = int(argv[3]) if len(argv) == 4 else period_of(active)
    print(f"{argv[1]}: {len(rd)} samples, {len(active)} active, DRAM read {statistics.mean(active):.1f}% of peak "
          f"over them; layer period {period} samples")
    # Layer starts. The deepest trough of a layer (5-sample mean) is the attention launch's o phase, before the next
    # MLP streams: found in the first period, then within +-period/4 of one period later, so that drift is
    # followed; a layer starts at the first sample above 90% within a quarter period after its trough.
    smooth = [statistics.mean(active[max(i - 2, 0):i + 3]) for i in range(len(active))]
    troughs = [min(range(period), key=lambda i: smooth[i])]
    while troughs[-1] + period + period // 4 < len(active):
        lo, hi = troughs[-1] + period - period // 4, troughs[-1] + period + period // 4
        troughs.append(min(range(lo, hi), key=lambda i: smooth[i]))
    starts = []
    for t in troughs:
        after = [i for i in range(t, min(t + period // 4, len(active))) if active[i] > 90.0]
        if after:
            starts.append(after[0])
    starts = [s for s in starts if s + period <= len(active)]
    layers = [active[s:s + period] for s in starts]
    if not layers:
        sys.exit("no layer found (no sample above 90% after a trough)")
    profile = [statistics.mean(layer[k] for layer in layers) for k in range(period)]
    steady = statistics.median(profile)
    print(f"{len(layers)} layers aligned at the MLP's start; steady rate (median sample) {steady:.1f}%")
    print(f"{'sample':>6} {'read %':>7} {'lost':>5}" + "".join(f" {label:>8}" for label, _ in others))
    lost_total = 0.0
    for k, x in enumerate(profile):
        lost = max(steady - x, 0.0) / steady  # in samples of the steady rate
        lost_total += lost
        cols = "".join(f" {statistics.mean(values[s + k] for s in starts):8.1f}" for _, values in others)
        print(f"{k:>6} {x:7.1f} {lost:5.2f}{cols}  {'#' * int(x / 4)}")
    print(f"lost a layer: {lost_total:.2f} samples of {period} ({100 * lost_total / period:.1f}%)")


if __name__ == "__main__":
    main(sys.argv)
