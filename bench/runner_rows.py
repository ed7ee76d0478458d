#!/usr/bin/env python3
"""ITERATIONS.md rows from a bench_runner JSON (bench/results/runner-<UTC>.json).

One row per (op, version) at the chosen shapes (default: the runner's headline shapes: decode at one token,
attention at context 1024, prefill at 2048 tokens), in the table format of ITERATIONS.md. The "profiled?" and
"finding" cells are left for the author: a profile is named by its profiles/*.md file, and the finding is one line
from it or from the comparison.

Usage: bench/runner_rows.py RUNNER_JSON [--op OP] [--all-shapes]
"""
import argparse
import json
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runner_json")
    parser.add_argument("--op", action="append", help="only these ops (repeatable)")
    parser.add_argument("--all-shapes", action="store_true", help="every shape, not only the headline ones")
    args = parser.parse_args()

    with open(args.runner_json) as f:
        doc = json.load(f)
    commit, gpu = doc.get("git_commit", "?"), doc.get("gpu", "?")
    print(f"<!-- from {args.runner_json}: {gpu}, commit {commit}, peaks: {doc['peaks']['source']} -->")
    for r in doc["results"]:
        if args.op and r["op"] not in args.op:
            continue
        if not args.all_shapes and not r.get("headline"):
            continue
        if r["status"] == "unsupported":
            continue
        shape = f"{r['regime']} {r['shape']}"
        if r["status"] != "ok":
            print(f"| {r['op']} | {r['version']} | {shape} | {r['status']} | | | | |")
            continue
        time = f"{r['median_us']:.2f} us"
        speedup = f"{r['speedup_vs_baseline']:.2f}x" if r.get("speedup_vs_baseline") else "-"
        if r.get("speedup_vs_cublas"):
            speedup += f" ({r['speedup_vs_cublas']:.2f}x cuBLAS)"
        rate = f"{r['GB_s']:.0f} GB/s" if r["bound"] == "memory" else f"{r['TFLOP_s']:.1f} TFLOP/s"
        peak = f"{r['pct_of_peak']:.1f}% ({rate})"
        print(f"| {r['op']} | {r['version']} | {shape} | {time} | {speedup} | {peak} | no | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
