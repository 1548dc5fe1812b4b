"""A/A noise of sequential ABBA and duet measurements on the lab, quiet and beside a noisy neighbour.

Run as root on an otherwise quiet machine (the figures mean nothing while other work runs)::

    .venv/bin/python benchmarks/bench_noise.py --pairs 12 --warmup 2 --window 5

Every method measures the same configuration on both arms (an A/A comparison), ``--pairs`` pairs each:

* ``sequential``: one lab, trials in ABBA order (pair k = trials 2k and 2k+1), analysed as ``tunelab
  validate`` does (ABBA blocks of 2 pairs);
* ``duet/shared``, ``duet/split``: two labs measuring at the same moment, sides swapped per
  :func:`tunelab.duet.crossover_sides`, analysed by the crossover fit (:mod:`tunelab.optimize.duet_confirm`);
  ``shared`` puts both servers on one CPU and both clients on the other, ``split`` gives each lab its own CPU;

each once quiet and once beside the neighbour: ``stress-ng --cpu W --cpu-load P`` (default one worker at
50 %), started before and always stopped after the method's trials (:func:`noisy_neighbour`).

Printed per metric (``--metrics``, default qps; the CPU-time metric too when the load reports one): the
per-run CV (unpaired), the SD of the paired log ratio ``log(B/A)`` (the A/A CV of the paired ratio; ``pair
SD``), for a duet also after the crossover fit removes the side difference (``fit SD``, from 3 pairs), the
95 % CI half-width of the % change after the pairs (what validate would report: ABBA from 2 blocks = 4 pairs,
duet from 4 pairs), the duet's side difference (side 1 against side 0), and the wall time.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from tunelab.duet import CPU_LAYOUTS, side_options
from tunelab.formatting import fmt_number
from tunelab.loads import get_load
from tunelab.model import Metric
from tunelab.optimize.confirm import abba_order, analyse_blocks
from tunelab.optimize.duet_confirm import MIN_PAIRS, RunnerDuetEvaluator, analyse_pairs, pair_log_ratios
from tunelab.stats.duet_route import crossover_fit
from tunelab.optimize.evaluators import RunnerEvaluator
from tunelab.runner import bind_knob_ids, cleanup_load
from tunelab.store import Store
from tunelab.targets.lab import LabTarget

#: the A/A configuration: a per-namespace knob at its default, so nothing is written
KNOB, LEVEL = "net.ipv4.tcp_fin_timeout", 60


@contextmanager
def noisy_neighbour(workers: int, load_pct: int, timeout_s: float) -> Iterator[subprocess.Popen[bytes] | None]:
    """``stress-ng --cpu workers --cpu-load load_pct`` for at most ``timeout_s`` s in its own process group;
    always stopped (SIGTERM, then SIGKILL) when the block ends. ``workers == 0``: no neighbour."""
    if workers <= 0:
        yield None
        return
    if shutil.which("stress-ng") is None:
        sys.exit("bench_noise: stress-ng is missing; install the Debian package (scripts/install.sh does)")
    argv = ["stress-ng", "--cpu", str(workers), "--cpu-load", str(load_pct), "--timeout", f"{math.ceil(timeout_s)}s",
            "--quiet"]
    proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)                                   # let its workers reach their load
        yield proc
    finally:
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            if proc.poll() is not None:
                break
            os.killpg(proc.pid, sig)                      # its own group: stress-ng and its workers only
            try:
                proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue


def sequential(args: argparse.Namespace, store: Store, settings: dict[str, Any], layout: str = "") -> pd.DataFrame:
    """``2 * pairs`` A/A trials on one lab in ABBA order: one row per trial (``block, pair, arm`` + metrics)."""
    load = get_load("dnsperf")()
    rows = []
    with LabTarget(services=("dns",)) as lab:
        evaluator = RunnerEvaluator(lab, load, bind_knob_ids([KNOB]), store, phase="validate", warmup_s=args.warmup,
                                    measure_s=args.window, load_settings=settings)
        order = abba_order(max(2, math.ceil(args.pairs / 2)))[: 2 * args.pairs]
        prefix = f"seq:{time.time_ns()}:"
        for index, (block, position, arm) in enumerate(order):
            values = evaluator.evaluate({KNOB: LEVEL}, index, key=f"{prefix}{index}")
            rows.append({"block": block, "pair": index // 2, "arm": arm, **values})
        cleanup_load(load, lab)
    return pd.DataFrame(rows)


def duet(args: argparse.Namespace, store: Store, settings: dict[str, Any], layout: str) -> pd.DataFrame:
    """``pairs`` A/A duet pairs on two labs pinned by ``layout``: one row per trial (``pair, side, arm`` + metrics)."""
    loads = [get_load("dnsperf")(), get_load("dnsperf")()]
    rows = []
    with ExitStack() as stack:
        labs = [stack.enter_context(LabTarget(services=("dns",), **options))
                for options in side_options("lab", {}, layout)]
        evaluator = RunnerDuetEvaluator(labs, loads, bind_knob_ids([KNOB]), store, warmup_s=args.warmup,
                                        measure_s=args.window, load_settings=settings)
        prefix = f"duet:{layout}:{time.time_ns()}:"
        for pair in range(args.pairs):
            for side, arm, _, values in evaluator.evaluate_pair(pair, {"A": {KNOB: LEVEL}, "B": {KNOB: LEVEL}}, prefix):
                rows.append({"pair": pair, "side": side, "arm": arm, **values})
        for lab, load in zip(labs, loads):
            cleanup_load(load, lab)
    return pd.DataFrame(rows)


#: method name -> ``(args, store, settings, layout) -> measurements``
METHODS = {"sequential": sequential, "duet": duet}


def summary(measurements: pd.DataFrame, metric: str, direction: str, paired_by_side: bool) -> dict[str, float]:
    """Per-run CV, the paired log ratios' SD (raw, and for a duet after the crossover fit), the CI half-width
    (all in %) and the side difference of one method."""
    values = measurements[metric].dropna() if metric in measurements else pd.Series(dtype=float)
    goal = Metric(metric, direction, 5)
    wide = measurements.pivot_table(index="pair", columns="arm", values=metric, aggfunc="first").dropna()
    d = np.log(wide["B"] / wide["A"]) if {"A", "B"} <= set(wide.columns) else pd.Series(dtype=float)
    out = {"runs": len(values), "mean": values.mean(),
           "run_cv_pct": 100 * values.std(ddof=1) / values.mean() if len(values) > 1 else math.nan,
           "pair_sd_pct": 100 * d.std(ddof=1) if len(d) > 1 else math.nan}
    if not paired_by_side:
        judged = analyse_blocks(measurements, goal, bootstrap=False)
        return {**out, "fit_sd_pct": math.nan, "side_diff_pct": math.nan,
                "ci_half_pct": (judged["ci_high"] - judged["ci_low"]) / 2}
    ratios = pair_log_ratios(measurements, metric)
    usable = len(ratios) >= MIN_PAIRS and ratios["orientation"].nunique() == 2
    fit = crossover_fit(ratios["d"].to_numpy(float), ratios["orientation"].to_numpy(float)) if usable else {"sd": math.nan}
    judged = analyse_pairs(measurements, goal)
    return {**out, "fit_sd_pct": 100 * fit["sd"], "side_diff_pct": judged.get("side_diff_pct", math.nan),
            "ci_half_pct": (judged["ci_high"] - judged["ci_low"]) / 2}


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (f"{'method':<14}{'neighbour':<11}{'metric':<17}{'runs':>5}{'mean':>11}{'run CV %':>10}"
              f"{'pair SD %':>11}{'fit SD %':>10}{'CI ±%':>8}{'side %':>8}{'wall s':>8}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['method']:<14}{r['neighbour']:<11}{r['metric']:<17}{r['runs']:>5}{fmt_number(r['mean'], 1):>11}"
              f"{fmt_number(r['run_cv_pct'], 2):>10}{fmt_number(r['pair_sd_pct'], 2):>11}"
              f"{fmt_number(r['fit_sd_pct'], 2):>10}"
              f"{fmt_number(r['ci_half_pct'], 2):>8}{fmt_number(r['side_diff_pct'], 1):>8}{r['wall_s']:>8.0f}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=12, help="pairs per method (default 12)")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per trial (default 2)")
    parser.add_argument("--window", type=float, default=5.0, help="measured seconds per trial (default 5)")
    parser.add_argument("--profile", default="overload", help="dnsperf profile (default overload: TCP overload)")
    parser.add_argument("--methods", default="sequential,duet/shared,duet/split",
                        help="comma-separated: sequential, duet/LAYOUT (layouts: " + ", ".join(CPU_LAYOUTS.names()) + ")")
    parser.add_argument("--neighbour", choices=("off", "on", "both"), default="both",
                        help="without, with, or both (default) a stress-ng neighbour")
    parser.add_argument("--neighbour-workers", type=int, default=1, help="stress-ng CPU workers (default 1)")
    parser.add_argument("--neighbour-load", type=int, default=50, help="each worker's CPU load in %% (default 50)")
    parser.add_argument("--metrics", default="qps", help="comma-separated metrics of dnsperf (default qps)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.pairs < 2:
        sys.exit("bench_noise: --pairs must be at least 2")
    load = get_load("dnsperf")()
    settings = load.settings(args.profile, {})
    metrics = [m for m in args.metrics.split(",") if m]
    methods = [m for m in args.methods.split(",") if m]
    wrong = [m for m in methods if m.partition("/")[0] not in METHODS
             or (m.startswith("duet/") and m.partition("/")[2] not in CPU_LAYOUTS)]
    if wrong:
        sys.exit(f"bench_noise: unknown method {wrong[0]!r}; use sequential or duet/LAYOUT "
                 f"(layouts: {', '.join(CPU_LAYOUTS.names())})")
    unknown = [m for m in metrics if m not in load.metrics]
    if unknown:
        sys.exit(f"bench_noise: dnsperf does not report {', '.join(unknown)}; it reports {', '.join(load.metrics)}")
    neighbours = {"off": [0], "on": [args.neighbour_workers], "both": [0, args.neighbour_workers]}[args.neighbour]
    trial_s = args.warmup + args.window + 3            # the load plus a generous reset/apply/record
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-noise-") as tmp, \
            Store.open(Path(tmp) / "noise.sqlite", study="bench-noise", design_hash="bench", design_text="bench") as store:
        for workers in neighbours:
            for method in methods:
                started = time.monotonic()
                name, _, layout = method.partition("/")
                with noisy_neighbour(workers, args.neighbour_load, 2 * args.pairs * trial_s + 60):
                    data = METHODS[name](args, store, settings, layout or "shared")
                wall = time.monotonic() - started
                label = f"{workers}x{args.neighbour_load}%" if workers else "quiet"
                for metric in metrics:
                    row = summary(data, metric, load.metrics[metric].direction, method != "sequential")
                    rows.append({"method": method, "neighbour": label, "metric": metric, "wall_s": wall, **row})
    print(f"A/A, dnsperf {args.profile}, {args.pairs} pairs, {args.warmup:g} s warm-up + {args.window:g} s per trial, "
          f"{os.cpu_count()} CPUs; quiet means no neighbour started (other work on the machine still counts)")
    print_table(rows)


if __name__ == "__main__":
    main()
