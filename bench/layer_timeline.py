#!/usr/bin/env python3
"""One layer of the batch-1 decode step on one time line, from two traces of the same `qwen3 bench` run:
`--mlp-trace MLP.json --attention-o-trace ATTN.json` (both stamp %globaltimer, so their times compare).

Per layer l (both traces present): the one-launch MLP of layer l, then the QKV GEMV of layer l + 1 (untraced: the
span from the MLP's last CTA end to the attention launch's PDL wait releasing), then qkv_attention_o of layer l + 1,
then the boundary to the MLP of layer l + 1 releasing its wait. Prints the mean over layers of each span in us.
Usage: bench/layer_timeline.py MLP.json ATTN.json
"""
import json
import statistics
import sys


def per_cta(t, layer):
    n, ctas = t["events"], t["ctas"]
    s = t["stamps_ns"]
    return [s[(layer * ctas + c) * n:(layer * ctas + c + 1) * n] for c in range(ctas)]


def main(mlp_path, attn_path):
    mlp, attn = json.load(open(mlp_path)), json.load(open(attn_path))
    mn = {e: i for i, e in enumerate(mlp["event_names"])}
    an = {e: i for i, e in enumerate(["start", "issued", "waited", "attended", "all_splits", "merged", "weights_in",
                                      "end"])}
    spans = {}

    def add(name, value):
        spans.setdefault(name, []).append(value / 1e3)

    for l in range(mlp["layers"] - 1):
        m = per_cta(mlp, l)
        a = per_cta(attn, l + 1)  # attention_o of the next layer (its QKV came right after this MLP)
        m_next = per_cta(mlp, l + 1)
        m_wait = min(r[mn["waited"]] for r in m)
        m_end = max(r[mn["end"]] for r in m)
        a_start = min(r[an["start"]] for r in a)
        a_wait = min(r[an["waited"]] for r in a)
        attended = [r[an["attended"]] for r in a if r[an["attended"]]]
        a_merged = statistics.mean(r[an["merged"]] for r in a)
        a_end = max(r[an["end"]] for r in a)
        n_wait = min(r[mn["waited"]] for r in m_next)
        add("mlp: wait released -> last CTA end", m_end - m_wait)
        add("qkv GEMV: mlp end -> attention_o wait released", a_wait - m_end)
        add("  (attention_o first CTA resident, after mlp end)", a_start - m_end)
        add("attention_o: wait -> last split written", max(attended) - a_wait)
        add("attention_o: wait -> merged (mean CTA)", a_merged - a_wait)
        add("attention_o: wait -> last CTA end", a_end - a_wait)
        add("boundary: attention_o end -> next mlp wait released", n_wait - a_end)
        add("layer period (mlp wait -> next mlp wait)", n_wait - m_wait)
    print(f"{mlp_path} + {attn_path}: prompt {mlp.get('prompt_len')}, {len(spans['layer period (mlp wait -> next mlp wait)'])} layers")
    for k, v in spans.items():
        print(f"{k:<56} {statistics.mean(v):8.2f} us (min {min(v):.2f}, max {max(v):.2f})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
