#!/usr/bin/env python3
"""Per-SM run times of the decode step's three launches a layer, from `qwen3 bench --mlp-trace MLP.json
--attention-o-trace ATTN.json` traces whose last event, "sm", holds each CTA's %smid. Session 12 wrote such traces
(bench/results/*-trace-20261130T1936Z-sm-*) with a build that recorded %smid in the MLP's, the QKV GEMV's and the
attention launch's trace paths; the recording was taken out again (it cost the untraced step 0.13% at context 8192:
the kernels' code moved), so to trace SMs again, put back a store of %smid into a slot after "end" of each trace.

Why: bench/sm_rates found some SMs streaming the same bytes ~25% faster than the others, the same SMs every launch
(bench/results/sm-rates-*.txt). Whether that holds inside the step decides whether a split of the bytes by SM would
shorten the launches' tails. For each launch kind (the MLP, the QKV GEMV, the attention + o launch) and each SM
this prints the mean over layers of the CTA's run on it (MLP and QKV: waited -> end; attention: waited -> end, and
waited -> attended for the CTAs with a split), the spread of those means, how well the means over the even layers
predict those over the odd ones (correlation), and the fastest and slowest SMs.
Usage: bench/sm_spread.py MLP.json[.gz] ATTN.json[.gz]
"""
import statistics
import sys

from mlp_cta_spread import correlation, load  # (bench/, this script's folder, is on the path)


def per_sm(stamps, events, ctas, layers, names, begin, end, skip_first_layer):
    """{sm: ([runs of even layers], [runs of odd layers])} of end - begin in us, CTAs that reached both."""
    idx = {e: i for i, e in enumerate(names)}
    out = {}
    for layer in range(1 if skip_first_layer else 0, layers):
        for c in range(ctas):
            r = stamps[(layer * ctas + c) * events:(layer * ctas + c + 1) * events]
            if not r[idx[begin]] or not r[idx[end]]:
                continue
            out.setdefault(r[idx["sm"]], ([], []))[layer % 2].append((r[idx[end]] - r[idx[begin]]) / 1e3)
    return out


def report(what, runs):
    sms = sorted(s for s, (a, b) in runs.items() if a and b)
    if len(sms) < 4:
        print(f"{what}: no per-SM data (the trace has no SM ids)")
        return
    even = [statistics.mean(runs[s][0]) for s in sms]
    odd = [statistics.mean(runs[s][1]) for s in sms]
    both = [statistics.mean(runs[s][0] + runs[s][1]) for s in sms]
    order = sorted(range(len(sms)), key=lambda i: both[i])
    print(f"{what}: {len(sms)} SMs, per-SM mean {min(both):.2f} .. {statistics.median(both):.2f} (median) .. "
          f"{max(both):.2f} us; even vs odd layers: correlation {correlation(even, odd):.2f}")
    print("  fastest: " + " ".join(f"{sms[i]}:{both[i]:.2f}" for i in order[:12]))
    print("  slowest: " + " ".join(f"{sms[i]}:{both[i]:.2f}" for i in order[-12:]))


def main(mlp_path, attn_path):
    mlp, attn = load(mlp_path), load(attn_path)
    if "sm" not in mlp["event_names"] or "sm" not in attn.get("event_names", []):
        sys.exit("these traces carry no SM ids (written before the \"sm\" event was added)")
    # The MLP trace's first layer runs after the embedding: left out, as in bench/mlp_cta_spread.py.
    report("MLP, waited -> end", per_sm(mlp["stamps_ns"], mlp["events"], mlp["ctas"], mlp["layers"],
                                         mlp["event_names"], "waited", "end", True))
    if any(mlp.get("qkv_stamps_ns", [])):
        q_events = mlp["qkv_events"]
        q_layers = mlp["layers"] + 1
        q_ctas = len(mlp["qkv_stamps_ns"]) // (q_events * q_layers)
        report("QKV GEMV, waited -> end", per_sm(mlp["qkv_stamps_ns"], q_events, q_ctas, q_layers,
                                                 mlp["qkv_event_names"], "waited", "end", True))
        report("QKV GEMV, normed -> end", per_sm(mlp["qkv_stamps_ns"], q_events, q_ctas, q_layers,
                                                 mlp["qkv_event_names"], "normed", "end", True))
    report("attention + o, waited -> attended (CTAs with a split)",
           per_sm(attn["stamps_ns"], attn["events"], attn["ctas"], attn["layers"], attn["event_names"], "waited",
                  "attended", True))
    report("attention + o, waited -> end", per_sm(attn["stamps_ns"], attn["events"], attn["ctas"], attn["layers"],
                                                   attn["event_names"], "waited", "end", True))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: bench/sm_spread.py MLP.json[.gz] ATTN.json[.gz]")
    main(sys.argv[1], sys.argv[2])
