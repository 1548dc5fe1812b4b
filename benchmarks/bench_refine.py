"""Benchmark of refinement and confirmation on SYNTHETIC surfaces (prints figures; no pass/fail).

Figures, measured in one run:

1. Search quality on ``hard512`` (512 configurations, only the optimum within 2 % of it, CV 3 %):
   share of seeds whose RECOMMENDED configuration is truly within 2 % of the optimum, at budgets
   30 / 60 / 100 measurements, for
   * ``ga``          tunelab's GA (preset ``lab``), initial population = baseline + random;
   * ``ga+screen``   the same, seeded with the best level of each knob from a simulated one-at-a-time
                     screen (2 replicates per level; its measurements are NOT counted in the budget,
                     they are reported separately: that is the screen a study runs before refining);
   * ``random``      random search, the best single measurement wins.
   Goal: >= 90 % at 30, >= 3x random search.
2. Honesty of the confirmed gain (GA at budget 60, winner vs baseline in 6 fresh ABBA blocks):
   mean bias of the reported % gain vs the true % gain (goal within ±0.5 pp) and coverage of its
   95 % CI (goal >= 93 %).
3. Null surface: share of refine + confirm runs that claim an improvement (goal <= 5 %).

Usage::

    .venv/bin/python benchmarks/bench_refine.py           # 100 seeds, about a minute or two
    .venv/bin/python benchmarks/bench_refine.py --quick   # 20 seeds, smoke test
"""
from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from tunelab.optimize.confirm import confirm
from tunelab.optimize.search import random_search, refine
from tunelab.simulator import SimulatorEvaluator, get_surface

BUDGETS = (30, 60, 100)
SCREEN_REPLICATES = 2


def screen_best_levels(surface: Any, seed: int) -> tuple[dict[str, Any], int]:
    """Best level of each knob in a noisy one-at-a-time screen around the baseline, and its cost."""
    evaluator = SimulatorEvaluator(surface, seed=10_000 + seed)
    metric = next(iter(surface.metrics))
    base = surface.baseline
    cost = 0

    def mean_of(config: dict[str, Any], tag: str) -> float:
        nonlocal cost
        cost += SCREEN_REPLICATES
        return float(np.mean([evaluator.evaluate(config, r, key=f"screen:{tag}:r{r}")[metric]
                              for r in range(SCREEN_REPLICATES)]))

    base_mean = mean_of(dict(base), "baseline")
    best = {}
    space = surface.search_space()
    for dim in space.dimensions:
        candidates = {repr(base[dim.id]): (base[dim.id], base_mean)}
        values = getattr(dim, "values", None) or [dim.value_at(i) for i in range(dim.sizes[0])]
        for value in values:
            if value == base[dim.id]:
                continue
            candidates[repr(value)] = (value, mean_of({**base, dim.id: value}, f"{dim.id}={value!r}"))
        best[dim.id] = max(candidates.values(), key=lambda pair: pair[1])[0]
    return best, cost


def search_quality(seeds: int) -> None:
    surface = get_surface("hard512", cv=0.03)
    space = surface.search_space()
    print(f"1. hard512: {space.size} configurations, "
          f"{int(sum(surface.within(c) for c in space.all_configs()))} within 2 % of the optimum; "
          f"CV 3 % (heteroscedastic 1.5-6 %); {seeds} seeds")
    screens = [screen_best_levels(surface, s) for s in range(seeds)]
    print(f"   simulated OAT screen: {screens[0][1]} measurements each (not in the budget); its best-levels "
          f"config is within 2 % in {np.mean([surface.within(b) for b, _ in screens]):.0%} of seeds")
    print(f"   {'budget':>6}  {'ga':>6}  {'ga+screen':>9}  {'random':>6}  {'ga/random':>9}   time")
    for budget in BUDGETS:
        started = time.perf_counter()
        ga = [surface.within(refine(space, SimulatorEvaluator(surface, seed=s), ["qps:max"], budget=budget, seed=s,
                                    baseline=surface.baseline).winner) for s in range(seeds)]
        gas = [surface.within(refine(space, SimulatorEvaluator(surface, seed=s), ["qps:max"], budget=budget, seed=s,
                                     baseline=surface.baseline, initial=[screens[s][0]]).winner)
               for s in range(seeds)]
        rnd = [surface.within(random_search(space, SimulatorEvaluator(surface, seed=s), "qps:max", budget, seed=s,
                                            baseline=surface.baseline).winner) for s in range(seeds)]
        ratio = np.mean(ga) / np.mean(rnd) if np.mean(rnd) else float("inf")
        print(f"   {budget:>6}  {np.mean(ga):>6.0%}  {np.mean(gas):>9.0%}  {np.mean(rnd):>6.0%}  {ratio:>8.1f}x"
              f"   {time.perf_counter() - started:.1f} s")


def honesty(seeds: int, blocks: int = 6) -> None:
    surface = get_surface("hard512", cv=0.03)
    space = surface.search_space()
    errors, covered, widths = [], [], []
    for s in range(seeds):
        result = refine(space, SimulatorEvaluator(surface, seed=s), ["qps:max"], budget=60, seed=s,
                        baseline=surface.baseline)
        true_gain = 100 * (surface.truth(result.winner)["qps"] / surface.truth(surface.baseline)["qps"] - 1)
        search_claim = 100 * (result.estimates.iloc[0]["qps_mean"] / surface.truth(surface.baseline)["qps"] - 1)
        check = confirm(SimulatorEvaluator(surface, seed=50_000 + s), surface.baseline, result.winner, ["qps:max:5"],
                        blocks=blocks).gain()
        errors.append((check["pct_change"] - true_gain, search_claim - true_gain))
        covered.append(check["ci_low"] <= true_gain <= check["ci_high"])
        widths.append(check["ci_high"] - check["ci_low"])
    errors = np.array(errors)
    print(f"2. confirmed gain (GA budget 60, {blocks} ABBA blocks, {seeds} seeds):")
    print(f"   mean bias of the confirmed gain  {errors[:, 0].mean():+.2f} pp (goal within ±0.5 pp); "
          f"RMSE {np.sqrt((errors[:, 0] ** 2).mean()):.2f} pp")
    print(f"   for contrast, the search's own estimate of the winner: bias {errors[:, 1].mean():+.2f} pp "
          "(winner's curse)")
    print(f"   95 % CI coverage {np.mean(covered):.1%} (goal >= 93 %); mean CI width {np.mean(widths):.1f} pp")


def null_claims(seeds: int, blocks: int = 6) -> None:
    null = get_surface("null", cv=0.03)
    space = null.search_space()
    verdicts = []
    for s in range(seeds):
        result = refine(space, SimulatorEvaluator(null, seed=s), ["qps:max"], budget=40, seed=s,
                        baseline=null.baseline)
        verdicts.append(confirm(SimulatorEvaluator(null, seed=70_000 + s), null.baseline, result.winner,
                                ["qps:max:5"], blocks=blocks).verdict)
    counts = {v: verdicts.count(v) / len(verdicts) for v in ("improve", "equivalent", "inconclusive", "regress")}
    print(f"3. null surface ({seeds} refine+confirm runs, {blocks} blocks, SESOI 5 %): claims improvement "
          f"{counts['improve']:.1%} (goal <= 5 %); equivalent {counts['equivalent']:.0%}, inconclusive "
          f"{counts['inconclusive']:.0%}, regress {counts['regress']:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 seeds instead of 100 (smoke test)")
    parser.add_argument("--seeds", type=int, help="number of seeds (overrides --quick)")
    args = parser.parse_args()
    seeds = args.seeds or (20 if args.quick else 100)
    started = time.perf_counter()
    print("SYNTHETIC benchmark: simulated surfaces, no real kernel measured")
    search_quality(seeds)
    honesty(seeds)
    null_claims(seeds)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
