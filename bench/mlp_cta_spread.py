#!/usr/bin/env python3
"""The one-launch MLP's CTAs one by one, from a `qwen3 bench --mlp-trace MLP.json` dump (plain or .json.gz).

Means over layers hide why a launch's last CTA ends late. Per layer, every stamp is taken relative to the launch's
first PDL release (the earliest "waited" stamp); this prints, as means over layers:
  * each event's first / 10th percentile / mean / 90th percentile / last CTA;
  * each CTA's run from its own "waited" stamp to its end (if that is the same on every CTA, the spread of the
    ends is the spread of the waits);
  * the correlation, per layer, of a CTA's "waited" stamp with its end, and of its end across layers (split
    halves: is it the same CTAs every layer?);
  * the "waited" stamp of every 12th CTA, by block index (which CTAs become resident late);
  * where the trace has the QKV GEMV's stamps (v12-v14), how long after it became resident its "waited" and
    "normed" stamps land (the norm's loads behind the CTA's prefetch: ITERATIONS.md session 8), and its CTAs'
    stamps by block index after the MLP's last end (the last indices become resident last: session 22).
Usage: bench/mlp_cta_spread.py MLP.json
"""
import gzip
import json
import statistics
import sys


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def per_cta(stamps, events, ctas, layer):
    return [stamps[(layer * ctas + c) * events:(layer * ctas + c + 1) * events] for c in range(ctas)]


def correlation(x, y):
    mx, my = statistics.mean(x), statistics.mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else float("nan")


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main(path):
    t = load(path)
    names, ctas, events, layers = t["event_names"], t["ctas"], t["events"], t["layers"]
    idx = {e: i for i, e in enumerate(names)}
    names = [e for e in names if e != "sm"]  # the CTA's SM, not a time (bench/sm_spread.py reads it)
    stamps = t["stamps_ns"]
    # Layer 0 runs after the embedding, not after an attention launch: left out, as the last (no next layer).
    rows = {e: [] for e in names}
    runs, corr_wait_end, by_block = [], [], [[] for _ in range(ctas)]
    end_halves = ([0.0] * ctas, [0.0] * ctas)
    used = range(1, layers - 1) if layers > 2 else range(layers)
    for l in used:
        m = per_cta(stamps, events, ctas, l)
        t0 = min(r[idx["waited"]] for r in m if r[idx["waited"]])
        for e in names:
            v = sorted((r[idx[e]] - t0) / 1e3 for r in m if r[idx[e]])
            if v:
                rows[e].append((v[0], percentile(v, 0.1), statistics.mean(v), percentile(v, 0.9), v[-1]))
        waited = [(r[idx["waited"]] - t0) / 1e3 for r in m]
        ends = [(r[idx["end"]] - t0) / 1e3 for r in m]
        runs.append(sorted(e - w for e, w in zip(ends, waited)))
        corr_wait_end.append(correlation(waited, ends))
        for c in range(ctas):
            by_block[c].append(waited[c])
            end_halves[l % 2][c] += ends[c]
    print(f"{path}: {t.get('mlp')}, prompt {t.get('prompt_len')}, {ctas} CTAs, {len(used)} layers "
          "(us after the launch's first PDL release, means over layers)")
    print(f"{'event':<12} {'first':>8} {'p10':>8} {'mean':>8} {'p90':>8} {'last':>8}")
    for e in names:
        if rows[e]:
            cols = [statistics.mean(r[i] for r in rows[e]) for i in range(5)]
            print(f"{e:<12} " + " ".join(f"{c:8.2f}" for c in cols))
    print("a CTA's run, waited -> end: shortest {:.2f}, median {:.2f}, longest {:.2f} us".format(
        statistics.mean(r[0] for r in runs), statistics.mean(r[len(r) // 2] for r in runs),
        statistics.mean(r[-1] for r in runs)))
    print(f"correlation of a CTA's waited stamp with its end, per layer: {statistics.mean(corr_wait_end):.2f}")
    print(f"correlation of a CTA's end across layers (split halves): {correlation(*end_halves):.2f}")
    print("waited stamp by block index (every 12th CTA): " +
          " ".join(f"{c}:{statistics.mean(by_block[c]):.1f}" for c in range(0, ctas, 12)))
    if any(t.get("qkv_stamps_ns", [])):
        q_names, q_events, q_stamps = t["qkv_event_names"], t["qkv_events"], t["qkv_stamps_ns"]
        qi = {e: i for i, e in enumerate(q_names)}
        q_ctas = len(q_stamps) // (q_events * (layers + 1))
        to_wait, to_norm = [], []
        for l in range(1, layers):
            for r in per_cta(q_stamps, q_events, q_ctas, l):
                if r[qi["end"]]:
                    to_wait.append((r[qi["waited"]] - r[qi["start"]]) / 1e3)
                    to_norm.append((r[qi["normed"]] - r[qi["waited"]]) / 1e3)
        if to_wait:
            print(f"QKV GEMV CTAs: resident -> waited stamp {statistics.mean(to_wait):.2f} us, "
                  f"waited -> normed input {statistics.mean(to_norm):.2f} us (means over CTAs and layers)")
        # By block index (the block scheduler places CTAs in index order as the MLP's leave their SMs), each event
        # relative to the MLP launch's last CTA end, as means over layers: which CTAs hold the launch's end.
        bucket = 12
        by_index = {}
        for l in used:
            mlp_end = max(r[idx["end"]] for r in per_cta(stamps, events, ctas, l))
            for c, r in enumerate(per_cta(q_stamps, q_events, q_ctas, l + 1)):
                if r[qi["end"]]:
                    by_index.setdefault(c // bucket, []).append([(r[qi[e]] - mlp_end) / 1e3 for e in q_names])
        if by_index:
            print(f"QKV GEMV by block index, us after the MLP's last CTA end (means over {bucket} CTAs and layers):")
            print(f"{'CTAs':<9} " + " ".join(f"{e:>9}" for e in q_names))
            for b, v in sorted(by_index.items()):
                print(f"{b * bucket:>3}-{min(b * bucket + bucket, q_ctas) - 1:<5} " +
                      " ".join(f"{statistics.mean(x[i] for x in v):9.2f}" for i in range(len(q_names))))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench/mlp_cta_spread.py MLP.json[.gz]")
    main(sys.argv[1])
