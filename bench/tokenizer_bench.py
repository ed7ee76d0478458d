#!/usr/bin/env python3
"""Single-threaded encode throughput on the parity corpus: ours next to Hugging Face tokenizers and fastokens, in
one run, rounds interleaved so that a busy machine slows all three alike. Run it through bench/tokenizer_bench.sh
(which builds the binary and the Python environment).

Every tokenizer encodes each corpus string separately (2,758 strings, 1.68 MB), pass after pass with warm caches;
the first pass of ours is also reported cold. Throughput is MB/s (10^6 bytes of UTF-8 input per second) over two
clocks: wall time, and CPU time of the process (which leaves out time spent descheduled on a shared machine and
counts every thread, so a library that hands work to a helper thread is still measured as one core). For the
Python libraries two call styles are timed and the faster one is reported: one `encode` call per string, and one
batch call over the corpus with their thread pools set to a single thread (RAYON_NUM_THREADS=1).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before the Rust libraries start their pools
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import fastokens  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def timed_passes(function, passes):
    walls, cpus = [], []
    for _ in range(passes):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True, help="qwen3_tokenizer_bench")
    parser.add_argument("--tokenizer", default=os.path.join(REPO, "tests/data/tokenizer/tokenizer.json"))
    parser.add_argument("--corpus", default=os.path.join(REPO, "tests/data/tokenizer-corpus/corpus.jsonl"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=5, help="per round and variant (ours runs 4x as many)")
    parser.add_argument("--out", default=os.path.join(REPO, "bench/results/tokenizer_encode.json"))
    args = parser.parse_args()

    strings = [json.loads(line) for line in open(args.corpus, encoding="utf-8")]
    total_bytes = sum(len(s.encode()) for s in strings)
    hf = Tokenizer.from_file(args.tokenizer)
    ft = fastokens.Tokenizer.from_file(args.tokenizer)

    # Same work: fastokens must produce HF's ids (ours is held to them by tests/cpu/test_tokenizer.cpp).
    reference = [e.ids for e in hf.encode_batch(strings)]
    fastokens_mismatches = sum(1 for s, ids in zip(strings, reference) if list(ft.encode(s).ids) != ids)
    tokens = sum(len(ids) for ids in reference)

    variants = {
        "hf_tokenizers": {
            "encode per string": lambda: [hf.encode(s).ids for s in strings],
            "encode_batch (1 thread)": lambda: hf.encode_batch(strings),
        },
        "fastokens": {
            "encode per string": lambda: [ft.encode(s).ids for s in strings],
            "encode_batch_flat (1 thread)": lambda: ft.encode_batch_flat(strings),
        },
    }
    samples = {name: {variant: ([], []) for variant in v} for name, v in variants.items()}
    ours_runs = []
    load_before = os.getloadavg()
    for round_index in range(args.rounds):
        result = subprocess.run([args.binary, args.tokenizer, args.corpus, str(4 * args.passes)], check=True,
                                capture_output=True, text=True)
        ours_runs.append(json.loads(result.stdout))
        for name, named in variants.items():
            for variant, function in named.items():
                walls, cpus = timed_passes(function, args.passes if round_index or name != "hf_tokenizers" else 2)
                samples[name][variant][0].extend(walls)
                samples[name][variant][1].extend(cpus)
        print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)
    load_after = os.getloadavg()

    def rate(seconds):
        return total_bytes / seconds / 1e6

    summary = {}
    for name, named in samples.items():
        per_variant = {}
        for variant, (walls, cpus) in named.items():
            per_variant[variant] = {
                "wall_best_mb_per_s": rate(min(walls)),
                "wall_median_mb_per_s": rate(statistics.median(walls)),
                "cpu_best_mb_per_s": rate(min(cpus)),
                "cpu_median_mb_per_s": rate(statistics.median(cpus)),
            }
        best_variant = max(per_variant, key=lambda v: per_variant[v]["cpu_median_mb_per_s"])
        summary[name] = {"best_variant": best_variant, **per_variant[best_variant], "variants": per_variant}
    ours = {
        "wall_best_mb_per_s": max(r["best_mb_per_s"] for r in ours_runs),
        "wall_median_mb_per_s": statistics.median(r["median_mb_per_s"] for r in ours_runs),
        "cpu_best_mb_per_s": max(r["cpu_best_mb_per_s"] for r in ours_runs),
        "cpu_median_mb_per_s": statistics.median(r["cpu_median_mb_per_s"] for r in ours_runs),
        "cold_first_pass_mb_per_s": statistics.median(r["cold_mb_per_s"] for r in ours_runs),
        "load_seconds": statistics.median(r["load_seconds"] for r in ours_runs),
    }
    ratios = {}
    for name in summary:
        for clock in ("cpu_median", "wall_median", "cpu_best"):
            ratios[f"ours_over_{name}_{clock}"] = ours[f"{clock}_mb_per_s"] / summary[name][f"{clock}_mb_per_s"]

    report = {
        "benchmark": "single-threaded encode throughput, MB/s of UTF-8 input, warm caches",
        "notes": ("Each library encodes every corpus string on its own, pass after pass, so all of them run warm: ours "
                  "caches ids per piece (a hot table for short pieces) and per whole line, per thread; 'cold' is our "
                  "first pass with empty caches. CPU time counts every thread of the process: fastokens' batch "
                  "call keeps working on helper threads even with RAYON_NUM_THREADS=1 (its wall rate can exceed "
                  "its CPU rate), so its CPU rate is the fair single-core figure."),
        "corpus": os.path.relpath(args.corpus, REPO),
        "strings": len(strings),
        "bytes": total_bytes,
        "tokens": tokens,
        "ours": ours,
        "hf_tokenizers": summary["hf_tokenizers"],
        "fastokens": summary["fastokens"],
        "ratios": ratios,
        "fastokens_id_mismatches_vs_hf": fastokens_mismatches,
        "versions": {"tokenizers": tokenizers.__version__,
                     "fastokens": getattr(fastokens, "__version__", None) or _dist_version("fastokens"),
                     "python": platform.python_version()},
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "load_average_before": load_before,
                    "load_average_after": load_after},
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")

    print(f"corpus: {len(strings)} strings, {total_bytes} bytes, {tokens} tokens")
    print(f"{'tokenizer':<16} {'CPU MB/s (median)':>18} {'wall MB/s (median)':>19}  variant")
    print(f"{'ours':<16} {ours['cpu_median_mb_per_s']:>18.1f} {ours['wall_median_mb_per_s']:>19.1f}  "
          f"(cold first pass {ours['cold_first_pass_mb_per_s']:.1f} MB/s wall)")
    for name in ("hf_tokenizers", "fastokens"):
        s = summary[name]
        print(f"{name:<16} {s['cpu_median_mb_per_s']:>18.1f} {s['wall_median_mb_per_s']:>19.1f}  {s['best_variant']}")
    for key, value in ratios.items():
        print(f"{key}: {value:.2f}x")
    print(f"written to {os.path.relpath(args.out, REPO)}")


def _dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return None


def _cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
