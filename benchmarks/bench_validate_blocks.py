"""Sequential ABBA blocks of ``tunelab validate`` (``blocks: {min, max, until: decided}``): error rates and blocks used.

What it measures
----------------
SYNTHETIC validations through the real decision function
(:func:`tunelab.optimize.sequential_blocks.confirm_in_rounds`, no bootstrap): one profile, one metric
``qps = 1000 (1 + effect) exp(e)`` with lognormal noise of CV ``--cv``, SESOI ``--sesoi`` %, alpha 0.05,
blocks ``{min, max, step}`` with the screen's default (linear) alpha spending, against the fixed design of
``max`` blocks (one look at the full alpha). Each truth runs ``--runs`` seeded validations:

* ``A/A`` (no effect): false decision = ``improve`` or ``regress``;
* ``SESOI`` (+SESOI): ``improve`` is right, ``equivalent`` is a false equivalence;
* ``2x SESOI``: power = share ``improve``.

Figures are shares with one Monte-Carlo SE, and the mean blocks per validation.

Run: ``PYTHONPATH=. python benchmarks/bench_validate_blocks.py [--runs 2000]``
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from tunelab.designs.change import BlockRule
from tunelab.optimize.sequential_blocks import confirm_in_rounds
from tunelab.simulator.known_effect import BASELINE, CANDIDATE, KnownEffectEvaluator


def simulate(effect_pct: float, rule: BlockRule, runs: int, cv: float, sesoi: float) -> dict[str, float]:
    verdicts, blocks = [], []
    for seed in range(runs):
        evaluator = KnownEffectEvaluator(effect_pct, cv, seed)
        result = confirm_in_rounds({"p": evaluator}, BASELINE, CANDIDATE, [f"qps:max:{sesoi:g}"], rule,
                                   bootstrap=False)
        verdicts.append(result.verdict)
        blocks.append(evaluator.calls / 4)
    share = {v: verdicts.count(v) / runs for v in ("improve", "regress", "equivalent", "inconclusive")}
    return {**share, "blocks": float(np.mean(blocks))}


def line(label: str, share: float, runs: int) -> str:
    return f"{label} {100 * share:5.2f} % +- {100 * math.sqrt(share * (1 - share) / runs):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--cv", type=float, default=0.05)
    parser.add_argument("--sesoi", type=float, default=5.0)
    parser.add_argument("--min", type=int, default=4)
    parser.add_argument("--max", type=int, default=16)
    parser.add_argument("--step", type=int, default=4)
    args = parser.parse_args()
    rules = {"sequential": BlockRule(args.min, args.max, args.step), "fixed max": BlockRule.fixed(args.max)}
    print(f"{args.runs} SYNTHETIC validations per row; CV {args.cv:g}, SESOI {args.sesoi:g} %, alpha 0.05, "
          f"blocks {args.min}..{args.max} step {args.step} (linear spending) vs fixed {args.max}")
    for name, rule in rules.items():
        start = time.perf_counter()
        null = simulate(0.0, rule, args.runs, args.cv, args.sesoi)
        edge = simulate(args.sesoi, rule, args.runs, args.cv, args.sesoi)
        big = simulate(2 * args.sesoi, rule, args.runs, args.cv, args.sesoi)
        print(f"{name:10s} A/A: {line('false improve/regress', null['improve'] + null['regress'], args.runs)}, "
              f"equivalent {100 * null['equivalent']:.1f} %, mean blocks {null['blocks']:.2f}")
        print(f"{'':10s} SESOI: {line('false equivalent', edge['equivalent'], args.runs)}, improve "
              f"{100 * edge['improve']:.1f} %, mean blocks {edge['blocks']:.2f}")
        print(f"{'':10s} 2x SESOI: {line('power (improve)', big['improve'], args.runs)}, mean blocks "
              f"{big['blocks']:.2f}   ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
