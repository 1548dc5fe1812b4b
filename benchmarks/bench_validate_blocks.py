"""Sequential ABBA blocks and duet pairs of ``tunelab validate`` (``blocks: {min, max, until: decided}``): error rates and units used.

What it measures
----------------
SYNTHETIC validations through the real decision functions (no bootstrap): one profile, one metric
``qps = 1000 (1 + effect) exp(e)`` with lognormal noise of CV ``--cv`` per trial, SESOI ``--sesoi`` %, alpha
0.05, with the screen's default (linear) alpha spending:

* ``sequential`` / ``fixed max``: ABBA blocks ``{min, max, step}`` against the fixed design of ``max`` blocks
  (one look at the full alpha), :func:`tunelab.optimize.blocks_in_rounds.confirm_in_rounds`;
* ``duet rounds`` / ``duet fixed``: duet pairs (:func:`tunelab.optimize.duet_confirm.confirm_duet_in_rounds`)
  in rounds of twice as many pairs (``{2 min, 2 max, 2 step}``: a pair is 2 trials, a block 4, so every look
  has as many trials as the ABBA look) against the fixed ``2 max`` pairs. Each pair also shares a common-mode
  factor ``exp(N(0, --common-cv))`` and side 1 is ``--side-bias`` % off (:class:`KnownEffectPairEvaluator`):
  both cancel (within the pair, and through the crossover), so the error rates must hold despite them. The
  ABBA rows have no common-mode noise (it would widen their intervals, not the duet's).

Each truth runs ``--runs`` seeded validations:

* ``A/A`` (no effect): false decision = ``improve`` or ``regress``;
* ``SESOI`` (+SESOI): ``improve`` is right, ``equivalent`` is a false equivalence;
* ``2x SESOI``: power = share ``improve``.

Figures are shares with one Monte-Carlo SE, and the mean blocks (pairs) per validation.

Run: ``PYTHONPATH=. python benchmarks/bench_validate_blocks.py [--runs 2000] [--methods duet]``
"""
from __future__ import annotations

import argparse
import math
import time
from typing import Any, Callable

import numpy as np

from tunelab.designs.change import BlockRule
from tunelab.optimize.duet_confirm import confirm_duet_in_rounds
from tunelab.optimize.blocks_in_rounds import confirm_in_rounds
from tunelab.simulator.known_effect import BASELINE, CANDIDATE, KnownEffectEvaluator, KnownEffectPairEvaluator


def abba_run(effect_pct: float, rule: BlockRule, seed: int, args: argparse.Namespace) -> tuple[str, float]:
    """One ABBA validation: its verdict and the blocks it measured."""
    evaluator = KnownEffectEvaluator(effect_pct, args.cv, seed)
    result = confirm_in_rounds({"p": evaluator}, BASELINE, CANDIDATE, [f"qps:max:{args.sesoi:g}"], rule,
                               bootstrap=False)
    return result.verdict, evaluator.calls / 4


def duet_run(effect_pct: float, rule: BlockRule, seed: int, args: argparse.Namespace) -> tuple[str, float]:
    """One duet validation: its verdict and the pairs it measured."""
    evaluator = KnownEffectPairEvaluator(effect_pct, args.cv, seed, args.common_cv, args.side_bias)
    result = confirm_duet_in_rounds({"p": evaluator}, BASELINE, CANDIDATE, [f"qps:max:{args.sesoi:g}"], rule)
    return result.verdict, evaluator.calls / 2


def simulate(run: Callable[..., tuple[str, float]], effect_pct: float, rule: BlockRule,
             args: argparse.Namespace) -> dict[str, float]:
    verdicts, units = [], []
    for seed in range(args.runs):
        verdict, used = run(effect_pct, rule, seed, args)
        verdicts.append(verdict)
        units.append(used)
    share = {v: verdicts.count(v) / args.runs for v in ("improve", "regress", "equivalent", "inconclusive")}
    return {**share, "units": float(np.mean(units))}


def line(label: str, share: float, runs: int) -> str:
    return f"{label} {100 * share:5.2f} % +- {100 * math.sqrt(share * (1 - share) / runs):.2f}"


def rows(args: argparse.Namespace) -> dict[str, tuple[Callable[..., Any], BlockRule, str]]:
    """Each printed method: its run function, its rule and its unit."""
    abba = {"sequential": (abba_run, BlockRule(args.min, args.max, args.step), "blocks"),
            "fixed max": (abba_run, BlockRule.fixed(args.max), "blocks")}
    duet = {"duet rounds": (duet_run, BlockRule(2 * args.min, 2 * args.max, 2 * args.step), "pairs"),
            "duet fixed": (duet_run, BlockRule.fixed(2 * args.max), "pairs")}
    return {**(abba if args.methods in ("all", "abba") else {}), **(duet if args.methods in ("all", "duet") else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--cv", type=float, default=0.05)
    parser.add_argument("--sesoi", type=float, default=5.0)
    parser.add_argument("--min", type=int, default=4)
    parser.add_argument("--max", type=int, default=16)
    parser.add_argument("--step", type=int, default=4)
    parser.add_argument("--common-cv", type=float, default=0.10, help="duet rows: common-mode noise per pair")
    parser.add_argument("--side-bias", type=float, default=-10.0, help="duet rows: side 1 this %% off")
    parser.add_argument("--methods", choices=("all", "abba", "duet"), default="all")
    args = parser.parse_args()
    print(f"{args.runs} SYNTHETIC validations per row; CV {args.cv:g} per trial, SESOI {args.sesoi:g} %, alpha 0.05, "
          f"blocks {args.min}..{args.max} step {args.step} (linear spending) vs fixed {args.max}; duet pairs twice "
          f"those, common-mode CV {args.common_cv:g}, side bias {args.side_bias:g} %")
    for name, (run, rule, unit) in rows(args).items():
        start = time.perf_counter()
        null, edge, big = (simulate(run, effect, rule, args) for effect in (0.0, args.sesoi, 2 * args.sesoi))
        print(f"{name:11s} A/A: {line('false improve/regress', null['improve'] + null['regress'], args.runs)}, "
              f"equivalent {100 * null['equivalent']:.1f} %, mean {unit} {null['units']:.2f}")
        print(f"{'':11s} SESOI: {line('false equivalent', edge['equivalent'], args.runs)}, improve "
              f"{100 * edge['improve']:.1f} %, mean {unit} {edge['units']:.2f}")
        print(f"{'':11s} 2x SESOI: {line('power (improve)', big['improve'], args.runs)}, mean {unit} "
              f"{big['units']:.2f}   ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
