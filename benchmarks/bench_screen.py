"""Benchmark of :func:`tunelab.stats.screen` on a large one-at-a-time (OAT) study.

Generates ``--rows`` runs (default 100,000) over ``--knobs`` knobs (default 30) with
``--levels`` levels each (default 3, level 0 the baseline): the baseline configuration plus, for
every knob, each non-baseline level with all other knobs at baseline (61 configurations by
default), replicated evenly; one metric ``qps`` (normal noise, sd 5 % of the mean; three knobs
carry real effects of 3-10 %). Times one ``screen`` call for that metric and prints

    screen: 100000 rows x 30 knobs: X.XX s (target <= 2 s)

plus the peak memory. A benchmark, not a test: it always exits 0. ``--repeat R`` makes R calls,
reports the best and prints the median. On a 2-core machine shared with other jobs, run it when
the machine is quiet: contention easily doubles the figure.

Usage::

    .venv/bin/python benchmarks/bench_screen.py [--rows N] [--knobs K] [--levels L] [--repeat R]
                                                [--n-boot B] [--profile] [--tracemalloc]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import statistics
import sys
import time
import tracemalloc

import numpy as np
import pandas as pd

from tunelab.stats import screen

TARGET_S = 2.0


def oat_runs(n_rows: int, n_knobs: int, n_levels: int, seed: int = 0) -> tuple[pd.DataFrame, list[str], dict]:
    """A tidy OAT frame of ``n_rows`` runs: one column per knob (int levels, 0 = baseline) plus ``qps``."""
    knobs = [f"knob{j:02d}" for j in range(n_knobs)]
    configs = [np.zeros(n_knobs, dtype=np.int64)]
    for j in range(n_knobs):
        for level in range(1, n_levels):
            config = np.zeros(n_knobs, dtype=np.int64)
            config[j] = level
            configs.append(config)
    config_of_run = np.arange(n_rows) % len(configs)
    levels = np.vstack(configs)[config_of_run]
    rng = np.random.default_rng(seed)
    mean = np.full(n_rows, 10_000.0)
    for j, pct in ((0, 10.0), (1, -5.0), (2, 3.0)):    # three knobs with real effects
        if j < n_knobs:
            mean *= 1 + pct / 100 * levels[:, j] / max(n_levels - 1, 1)
    frame = pd.DataFrame(levels, columns=knobs)
    frame.insert(0, "run_id", np.arange(n_rows))
    frame["status"] = "ok"
    frame["qps"] = mean + rng.normal(0.0, 500.0, n_rows)
    return frame, knobs, {k: 0 for k in knobs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--knobs", type=int, default=30)
    parser.add_argument("--levels", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="timed calls; the best is reported")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (screen's default)")
    parser.add_argument("--profile", action="store_true", help="print the 15 costliest functions")
    parser.add_argument("--tracemalloc", action="store_true",
                        help="one extra call under tracemalloc for the peak of Python allocations (slow)")
    args = parser.parse_args(argv)

    data, knobs, baseline = oat_runs(args.rows, args.knobs, args.levels)
    metrics = [{"name": "qps", "direction": "maximize", "sesoi_pct": 2.0}]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    times = []
    for _ in range(max(1, args.repeat)):
        start = time.perf_counter()
        result = screen(data, metrics, knobs, baseline, n_boot=args.n_boot)
        times.append(time.perf_counter() - start)
    best = min(times)
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    status = "ok" if best <= TARGET_S else "SLOWER THAN TARGET"
    print(f"screen: {len(data)} rows x {len(knobs)} knobs: {best:.2f} s (target <= {TARGET_S:g} s) [{status}]")
    if len(times) > 1:
        print(f"  all calls: {', '.join(f'{t:.2f}' for t in times)} s (median {statistics.median(times):.2f} s)")
    print(f"  peak RSS: {rss_after:.0f} MiB (before the first call {rss_before:.0f} MiB; includes imports)")
    matters = result.verdicts.loc[result.verdicts["verdict"] == "matters", "knob"].tolist()
    print(f"  design {result.design}; knobs that matter: {', '.join(matters) or 'none'} (planted: knob00-02)")

    if args.tracemalloc:
        tracemalloc.start()
        screen(data, metrics, knobs, baseline, n_boot=args.n_boot)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"  peak Python allocations during screen (tracemalloc): {peak / 2**20:.0f} MiB")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        screen(data, metrics, knobs, baseline, n_boot=args.n_boot)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(15)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
