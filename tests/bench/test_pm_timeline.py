#!/usr/bin/env python3
"""bench/pm_timeline.py's layer period on synthetic DRAM-rate series: one layer's period, not a multiple of it.

A layer of a decode step is a long stretch near the steady rate with a deep trough (the attention launch). Two
layers correlate about as well as one, and with noise a multiple can edge out the period itself; period_of must
still return the period. Exits non-zero on a wrong answer.
"""
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import pm_timeline  # noqa: E402


def layer_series(period, layers, seed, drift=0.0):
    """`layers` layers of `period` samples: ~96% with a trough of 4 samples at 30-50%, small noise; every other
    layer's trough a little deeper by `drift` (which makes lag 2 * period correlate better than lag period)."""
    rng = random.Random(seed)
    out = []
    for layer in range(layers):
        for k in range(period):
            x = 96.0 + rng.uniform(-1.5, 1.5)
            if period - 6 <= k < period - 2:
                x = 40.0 + 10.0 * math.sin(k) - (drift if layer % 2 else 0.0) + rng.uniform(-3.0, 3.0)
            out.append(x)
    return out


def main():
    failures = 0
    cases = [(66, 40, 0.0), (87, 38, 0.0), (87, 38, 12.0), (88, 38, 8.0), (173, 20, 0.0)]
    for seed, (period, layers, drift) in enumerate(cases):
        got = pm_timeline.period_of(layer_series(period, layers, seed, drift))
        status = "ok" if got == period else "FAILED"
        failures += got != period
        print(f"{status}: period {period}, {layers} layers, drift {drift}: period_of -> {got}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
