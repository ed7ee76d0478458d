#!/usr/bin/env python3
"""Summarizes a `qwen3 bench --attention-o-trace FILE` (or `--mlp-trace FILE`) dump: where each launch of the
traced op spends its time.

For every layer, times are taken from the first CTA's start (the moment the launch got its first SM). Per event it
prints the mean and the slowest CTA over CTAs, averaged over layers, in microseconds, over the CTAs that reached
the event (a stamp of 0: not reached, e.g. "attended" for CTAs without a split). Event names come from the file
("event_names"; the attention_o trace predates it). With --by-split (attention_o traces) it also prints each event's
mean for the CTAs with a split and those without one, in microseconds after the layer's first PDL wait ("waited"),
the first layer left out (as in ITERATIONS.md session 15's table), and the head merges: CTA c attends kv head
c % kv_heads (--kv-heads, default 8: Qwen3-8B; in a v37 trace, "cluster_merge" in its version's name, c // 8, the
cluster), and the head's last split, which merges it (v2 and later), stamps "attended" after the merge, so its lag
behind the head's other splits is the merge's time on the chain (session 33). CTAs that never started (a stamp of
0 at "start": v37's grid is smaller than the trace's) are left out.
Usage: bench/attention_o_trace.py [--by-split [--kv-heads N]] TRACE.json [TRACE2.json ...]
"""
import gzip
import json
import sys

EVENTS = ["start", "issued", "waited", "attended", "all_splits", "merged", "weights_in", "end"]


def load(path):
    """A trace file, plain or gzip-compressed (bench/results keeps them as .json.gz)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def layer_rows(t, layer):
    """The layer's rows of stamps by block index, one a CTA that ran (CTAs past a launch's grid keep their zeroed
    stamps)."""
    ctas, events, stamps = t["ctas"], t["events"], t["stamps_ns"]
    rows = (stamps[(layer * ctas + c) * events:(layer * ctas + c + 1) * events] for c in range(ctas))
    return {c: r for c, r in enumerate(rows) if r[0] != 0}


def summarize(path):
    t = load(path)
    layers, events = t["layers"], t["events"]
    names = t.get("event_names", EVENTS)
    times = [e for e in names if e != "sm"]  # "sm": the CTA's SM, not a time (bench/sm_spread.py reads it)
    last = names.index("end") if "end" in names else events - 1
    sums = {e: [0.0, 0.0, 0] for e in names}  # mean-sum, max-sum, layers counted
    spans, starts = [], []
    for layer in range(layers):
        rows = list(layer_rows(t, layer).values())
        ref = min(r[0] for r in rows)
        starts.append(ref)
        spans.append((max(r[last] for r in rows) - ref) / 1e3)
        for i, e in enumerate(names):
            if e not in times:
                continue
            vals = [(r[i] - ref) / 1e3 for r in rows if r[i] != 0]
            if not vals:
                continue
            sums[e][0] += sum(vals) / len(vals)
            sums[e][1] += max(vals)
            sums[e][2] += 1
    print(f"{path}: {t.get('mlp', t.get('attention_o'))}, prompt {t.get('prompt_len')}, {layers} layers x "
          f"{t['ctas']} CTAs; "
          f"launch span (first start -> last end) {sum(spans) / len(spans):.2f} us mean, layer period "
          f"{(starts[-1] - starts[0]) / 1e3 / max(1, layers - 1):.2f} us")
    print(f"{'event':<12} {'mean us':>8} {'slowest':>8}")
    for e in times:
        s = sums[e]
        if s[2]:
            print(f"{e:<12} {s[0] / s[2]:8.2f} {s[1] / s[2]:8.2f}")


def by_split(path, kv_heads):
    """Per event, the mean over the CTAs with a split ("attended" stamped) and over those without, us after the
    layer's earliest "waited" stamp, layers 1.. (the first layer's launch waits on the embedding, not a GEMV). Then
    the head merges: per kv head and layer, the head's last "attended" stamp (its merging split, stamped after the
    merge) against the head's other splits."""
    t = load(path)
    layers = t["layers"]
    names = t.get("event_names", EVENTS)
    if "attended" not in names or "waited" not in names:
        print(f"{path}: no attended / waited events (not an attention_o trace)")
        return
    ix = {n: i for i, n in enumerate(names)}
    # CTA c's kv head: c % kv_heads, or in v37's clusters of 8 (cluster c // 8 < kv_heads holds kv head c // 8)
    clustered = "cluster_merge" in str(t.get("attention_o", ""))
    kv_head_of = (lambda c: c // 8) if clustered else (lambda c: c % kv_heads)
    groups = {"with a split": {}, "without": {}}
    counts = {"with a split": 0, "without": 0}
    lags, others, mergers = [], [], []  # per kv head and layer: the merge's lag, the other splits', the merger's
    # (traces since session 34: a split CTA's "o_staged" is its attention's end, before it writes and counts; per kv
    # head and layer, the merging split's and the latest other split's, and the merger's merge and count)
    merger_ends, other_ends, merges = [], [], []
    for layer in range(1, layers):
        rows = layer_rows(t, layer)
        ref = min(r[ix["waited"]] for r in rows.values() if r[ix["waited"]] != 0)
        attended = [[] for _ in range(kv_heads)]
        for c, r in rows.items():
            group = "with a split" if r[ix["attended"]] != 0 else "without"
            counts[group] += 1
            for n in names:
                if n != "sm" and r[ix[n]] != 0:
                    groups[group].setdefault(n, []).append((r[ix[n]] - ref) / 1e3)
            if r[ix["attended"]] != 0:
                end = r[ix["o_staged"]] if "o_staged" in ix else 0
                attended[kv_head_of(c)].append(((r[ix["attended"]] - ref) / 1e3, (end - ref) / 1e3 if end else None))
        for done in (sorted(a) for a in attended if len(a) > 1):  # (a lone split merges nothing)
            lags.append(done[-1][0] - done[-2][0])
            others.append(done[-2][0])
            mergers.append(done[-1][0])
            if all(end is not None for _, end in done):
                merger_ends.append(done[-1][1])
                other_ends.append(max(end for _, end in done[:-1]))
                merges.append(done[-1][0] - done[-1][1])
    print(f"{path}: means by CTA group, us after the layer's first PDL wait (layers 1-{layers - 1})")
    for group, values in groups.items():
        if counts[group] == 0:
            continue
        cells = " ".join(f"{n}={sum(v) / len(v):.2f}" for n, v in values.items() if n not in ("start", "issued"))
        print(f"  {group:<13} {counts[group] / (layers - 1):6.1f} CTAs a layer  {cells}")
    if not lags:
        return
    lags.sort()
    print(f"  head merges ({kv_heads} kv heads): the merging split counted {sum(lags) / len(lags):.2f} us (median "
          f"{lags[len(lags) // 2]:.2f}) after its head's other splits; those at {sum(others) / len(others):.2f} us, "
          f"the merging split at {sum(mergers) / len(mergers):.2f} us (means)")
    if merges:
        print(f"  merging split: its attention ended at {sum(merger_ends) / len(merger_ends):.2f} us (its head's "
              f"latest other split's at {sum(other_ends) / len(other_ends):.2f}); from there to its head counted "
              f"{sum(merges) / len(merges):.2f} us (median {sorted(merges)[len(merges) // 2]:.2f}; means)")


args = sys.argv[1:]
split_view = "--by-split" in args
kv_heads = 8
if "--kv-heads" in args:
    i = args.index("--kv-heads")
    kv_heads = int(args[i + 1])
    del args[i:i + 2]
for p in (a for a in args if a != "--by-split"):
    summarize(p)
    if split_view:
        by_split(p, kv_heads)
