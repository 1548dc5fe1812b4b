"""Duet against sequential ABBA under common-mode noise: how much the paired CI shrinks, against theory.

What it measures
----------------
The larger twin of ``tests/optimize/test_duet.py::test_the_paired_ci_shrinks_as_theory_says_under_common_mode_noise``.
On the SYNTHETIC ``simple`` surface (independent CV 0.02) with a common-mode factor of CV ``--common-cv`` per time
slot, each seed runs an A/A with sequential ABBA (6 blocks, 24 trials) and with a duet (12 pairs, 24 trials).
Theory: the root-mean-square standard errors compare as ``sqrt((cv^2 + common_cv^2) / cv^2)``. Printed: the
measured ratio, its Monte Carlo SE (delta method over the seeds), the theory and the relative difference.

Run: ``PYTHONPATH=. python benchmarks/bench_duet_ci.py [--seeds 1000] [--common-cv 0.10]``
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats as ss

from tunelab.optimize.confirm import confirm
from tunelab.optimize.duet_confirm import confirm_duet
from tunelab.simulator import InterferedEvaluator, get_surface

CV = 0.02


def squared_errors(seeds: int, common_cv: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Per seed: the squared SE of the mean log ratio, sequential ABBA and duet; the configuration's CV."""
    surface = get_surface("simple", CV)
    config = surface.baseline
    abba, duet = np.empty(seeds), np.empty(seeds)
    for seed in range(seeds):
        evaluator = InterferedEvaluator(surface, seed=seed, common_cv=common_cv)
        rows = (confirm(evaluator, config, config, ["qps:max:5"], blocks=6, key_prefix="s:").table.iloc[0],
                confirm_duet(evaluator, config, config, ["qps:max:5"], pairs=12, key_prefix="d:").table.iloc[0])
        for out, row, df in ((abba, rows[0], 5), (duet, rows[1], 10)):
            width = math.log1p(row["ci_high"] / 100) - math.log1p(row["ci_low"] / 100)
            out[seed] = (width / (2 * float(ss.t.ppf(0.975, df)))) ** 2
    return abba, duet, surface.config_cv(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--common-cv", type=float, default=0.10)
    args = parser.parse_args()
    start = time.perf_counter()
    abba, duet, cv = squared_errors(args.seeds, args.common_cv)
    ratio = math.sqrt(abba.mean() / duet.mean())
    # delta method: var(log ratio) = (var_a / mean_a^2 + var_d / mean_d^2 - 2 cov / (mean_a mean_d)) / (4 n)
    cov = np.cov(abba, duet)
    var_log = (cov[0, 0] / abba.mean() ** 2 + cov[1, 1] / duet.mean() ** 2
               - 2 * cov[0, 1] / (abba.mean() * duet.mean())) / (4 * args.seeds)
    theory = math.sqrt((cv ** 2 + args.common_cv ** 2) / cv ** 2)
    print(f"seeds {args.seeds}, independent CV {cv:.4f}, common-mode CV {args.common_cv:.3f}")
    print(f"RMS SE ratio ABBA/duet: {ratio:.3f} (Monte Carlo SE {ratio * math.sqrt(var_log):.3f}, "
          f"{100 * math.sqrt(var_log):.1f} %)")
    print(f"theory: {theory:.3f}; measured/theory - 1: {100 * (ratio / theory - 1):+.1f} %")
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
