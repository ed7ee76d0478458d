#!/usr/bin/env python3
"""Groups the SASS of one kernel by how often each instruction ran: its loops, from an Nsight Compute source page.

Input: `ncu -i REPORT --page source --csv --print-source sass > FILE.csv` of a report that has the SourceCounters
section (plain or .gz). Instructions that ran the same number of times a launch are one region (a loop body, or the
code every warp runs once). Per region it prints the instructions, the code span they lie in (KB, from the lowest
to the highest address: a loop scattered over a large span fetches its instructions from far apart), the stall
samples and their share of the kernel's, and the top stall reasons. Usage: bench/ncu_loops.py FILE.csv [--top N]
"""
import argparse
import collections
import csv
import gzip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_csv")
    parser.add_argument("--top", type=int, default=10, help="regions to print, by samples")
    args = parser.parse_args()
    opener = gzip.open if args.source_csv.endswith(".gz") else open
    with opener(args.source_csv, "rt") as f:
        rows = list(csv.reader(f))
    # Row 0 names the kernel, row 1 is the header, the rest one instruction each.
    kernel, header, instructions = rows[0][1] if len(rows[0]) > 1 else "?", rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    regions = collections.defaultdict(
        lambda: {"count": 0, "samples": 0, "addresses": [], "stalls": collections.Counter()})
    total_samples = 0
    for row in instructions:
        executed = int(row[col["Instructions Executed"]] or 0)
        samples = int(row[col["# Samples"]] or 0)
        region = regions[executed]
        region["count"] += 1
        region["samples"] += samples
        region["addresses"].append(int(row[col["Address"]], 16))
        for name in stalls:
            region["stalls"][name[len("stall_"):]] += int(row[col[name]] or 0)
        total_samples += samples
    print(f"kernel: {kernel[:160]}")
    print(f"{len(instructions)} instructions, {total_samples} stall samples")
    print("executed a launch,instructions,address span KB,stall samples,share %,top stall reasons (samples)")
    for executed, r in sorted(regions.items(), key=lambda kv: -kv[1]["samples"])[: args.top]:
        span = (max(r["addresses"]) - min(r["addresses"])) / 1024
        top = "; ".join(f"{k} {v}" for k, v in r["stalls"].most_common(4) if v)
        share = 100.0 * r["samples"] / max(1, total_samples)
        print(f"{executed},{r['count']},{span:.0f},{r['samples']},{share:.1f},{top}")


if __name__ == "__main__":
    main()
