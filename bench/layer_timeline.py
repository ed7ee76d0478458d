#!/usr/bin/env python3
"""One layer of the batch-1 decode step on one time line, from two traces of the same `qwen3 bench` run:
`--mlp-trace MLP.json --attention-o-trace ATTN.json` (both stamp %globaltimer, so their times compare).

Per layer l (both traces present): the one-launch MLP of layer l, then the QKV GEMV of layer l + 1 (untraced: the
span from the MLP's last CTA end to the attention launch's PDL wait releasing), then qkv_attention_o of layer l + 1,
then the boundary to the MLP of layer l + 1 releasing its wait; where the MLP trace carries the QKV GEMV's own
stamps (v12), its points too. Prints the mean over layers of each span in us, and how many of the next MLP's CTAs
were resident before the attention launch's last CTA end and before its mean CTA merged the heads (beside it: v18).
Usage: bench/layer_timeline.py MLP.json ATTN.json
"""
import gzip
import json
import statistics
import sys


def load(path):
    """A trace file, plain or gzip-compressed (bench/results keeps them as .json.gz)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def per_cta(t, layer):
    """The layer's stamps, a row per CTA that ran (CTAs past a smaller grid, e.g. v37's 120 of 128, stay 0)."""
    n, ctas = t["events"], t["ctas"]
    s = t["stamps_ns"]
    return [r for r in (s[(layer * ctas + c) * n:(layer * ctas + c + 1) * n] for c in range(ctas)) if r[0] != 0]


def main(mlp_path, attn_path):
    mlp, attn = load(mlp_path), load(attn_path)
    mn = {e: i for i, e in enumerate(mlp["event_names"])}
    qkv = None  # the QKV GEMV's own stamps (v12), when the MLP trace carries them
    if any(mlp.get("qkv_stamps_ns", [])):
        qn = {e: i for i, e in enumerate(mlp["qkv_event_names"])}
        q_events, q_stamps = mlp["qkv_events"], mlp["qkv_stamps_ns"]
        q_ctas = len(q_stamps) // (q_events * (mlp["layers"] + 1))
        qkv = {"layers": mlp["layers"] + 1, "ctas": q_ctas, "events": q_events, "stamps_ns": q_stamps}
    an = {e: i for i, e in enumerate(attn.get("event_names", ["start", "issued", "waited", "attended", "all_splits",
                                                              "merged", "weights_in", "end"]))}
    spans = {}
    counts = {}  # per layer, in CTAs rather than us

    def add(name, value):
        spans.setdefault(name, []).append(value / 1e3)

    def count(name, value):
        counts.setdefault(name, []).append(value)

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
        if qkv is not None:
            q = [r for r in per_cta(qkv, l + 1) if r[qn["end"]]]
            if q:
                add("  qkv: first CTA resident, after mlp end", min(r[qn["start"]] for r in q) - m_end)
                add("  qkv: mean CTA resident, after mlp end", statistics.mean(r[qn["start"]] for r in q) - m_end)
                add("  qkv: wait released, after mlp end", min(r[qn["waited"]] for r in q) - m_end)
                add("  qkv: normed input ready (mean), after mlp end", statistics.mean(r[qn["normed"]] for r in q) - m_end)
                add("  qkv: rows done (mean), after mlp end", statistics.mean(r[qn["rows_done"]] for r in q) - m_end)
                add("  qkv: last CTA end, after mlp end", max(r[qn["end"]] for r in q) - m_end)
        add("attention_o: wait -> last split written", max(attended) - a_wait)
        attention_ends = [r[an["o_staged"]] for r in a if r[an["attended"]] and r[an["o_staged"]]] \
            if "o_staged" in an else []
        if attention_ends:  # (traces since session 34: a split CTA's attention end, before it writes and counts)
            add("attention_o: wait -> last split's attention end", max(attention_ends) - a_wait)
        add("attention_o: wait -> merged (mean CTA)", a_merged - a_wait)
        # The o phase's points, where the trace has them; "o_staged" over the CTAs without a split (in a CTA with a
        # split that slot holds its attention's end since session 34).
        for point in ("weights_in", "o_staged", "o_rows"):
            rows = [r for r in a if r[an[point]] and (point != "o_staged" or not r[an["attended"]])] \
                if point in an else []
            if rows:
                add(f"attention_o: wait -> {point} (mean CTA)", statistics.mean(r[an[point]] for r in rows) - a_wait)
        add("attention_o: wait -> last CTA end", a_end - a_wait)
        add("boundary: attention_o end -> next mlp wait released", n_wait - a_end)
        # Where the next MLP's CTAs become resident: as the attention's CTAs leave their SMs, or beside them (v18).
        n_start = sorted(r[mn["start"]] for r in m_next)
        add("  (next mlp: first CTA resident, after attention_o wait)", n_start[0] - a_wait)
        add("  (next mlp: median CTA resident, after attention_o wait)", n_start[len(n_start) // 2] - a_wait)
        add("  (next mlp: last CTA resident, after attention_o wait)", n_start[-1] - a_wait)
        count("next mlp: CTAs resident before attention_o's last CTA end", sum(1 for t in n_start if t < a_end))
        count("next mlp: CTAs resident before attention_o's mean merge", sum(1 for t in n_start if t < a_merged))
        add("  (next mlp: mean CTA past its wait, after attention_o end)",
            statistics.mean(r[mn["waited"]] for r in m_next) - a_end)
        add("layer period (mlp wait -> next mlp wait)", n_wait - m_wait)
    print(f"{mlp_path} + {attn_path}: prompt {mlp.get('prompt_len')}, {len(spans['layer period (mlp wait -> next mlp wait)'])} layers")
    for k, v in spans.items():
        print(f"{k:<56} {statistics.mean(v):8.2f} us (min {min(v):.2f}, max {max(v):.2f})")
    for k, v in counts.items():
        print(f"{k:<56} {statistics.mean(v):8.1f} CTAs (min {min(v)}, max {max(v)}, of {mlp['ctas']})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
