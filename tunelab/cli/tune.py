"""``tunelab tune DESIGN --budget N``: one budget from many knobs to a confirmed winner, in one store.

An A/A calibration of the baseline (unless --noise gives the noise or it cannot change the split), a screen of
every knob (one at a time below 8 knobs, Plackett-Burman from 8 over each knob's range; replicates from the
noise), refine over the knobs the screen finds to matter and as many more, by estimated change, as its
measurements can search (the others at their baselines; warm-started with the measurements that fit), then the
winner against the baseline in ABBA blocks. The budget counts every attempt, failed ones too, and is never exceeded; --plan shows
its split between the stages and measures nothing, --split overrides it. When the screen finds nothing that
matters, tune stops there and says so, keeping the rest of the budget. Rerun the same command after a crash to
resume exactly (every measurement is read back from the store).

Examples::

    tunelab tune designs/default.yaml --budget 100 --plan
    tunelab tune designs/default.yaml --budget 100
    tunelab tune --target simulator --surface wide27 --allow-host-global --budget 100 --split screen=40,refine=40,confirm=20

Exit status: 0 when the confirmation says improve or equivalent, or tune stopped after the screen, or there was
nothing to confirm; 3 regress, 4 inconclusive, 5 untestable, 2 errors, 130 when interrupted (rerun to resume).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import tunelab
from tunelab.cli import render
from tunelab.cli.parsing import add_target_options


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("tune", help="screen, refine and confirm in one budget of measurements",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("design", metavar="DESIGN", nargs="?", help="design file (YAML); optional with --target simulator")
    add("--budget", type=int, required=True, metavar="N", help="measurements in all, every attempt counted")
    add("--plan", action="store_true", help="show the split between the stages and measure nothing")
    add("--split", metavar="STAGE=PCT,...", help="override the split, percent of the budget: "
        "screen=40,refine=40,confirm=20 (the screen's share includes the A/A calibration)")
    add("--noise", type=float, metavar="CV_PCT", help="the noise (CV %%) if known: no A/A calibration")
    add("--screen-design", choices=("auto", "oat", "plackett_burman", "fractional_factorial"), default="auto",
        help="the screening design (default: one at a time below 8 knobs, else Plackett-Burman)")
    add("--objective", metavar="METRIC:max|min[:SESOI]", action="append", default=[],
        help="the goal (default the design's first metric); more are reported beside it")
    add("--engine", default="tunelab", help="refine's engine (default tunelab; see tunelab refine --help)")
    add("--warm", choices=("fit", "projected"), default="fit", help="which screen measurements refine counts: "
        "fit (the dropped knobs at their baselines; default) or projected (every one)")
    add("--seed", type=int, default=0, help="seed of the screen's order and refine's engine (keep it to resume)")
    add_target_options(parser)
    add("--format", choices=("text", "json"), default="text", help="print text (default) or JSON")
    add("--json", type=Path, metavar="OUT", help="also write the result (or with --plan the split) as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tunelab.optimize.confirm import EXIT_STATUS     # deferred: `tunelab --help` imports nothing heavy

    outcome = tunelab.tune(args.design, budget=args.budget, objectives=args.objective, target=args.target,
                           surface=args.surface, cv=args.cv, seed=args.seed, noise_pct=args.noise, split=args.split,
                           screen_design=args.screen_design, engine=args.engine, warm=args.warm, store=args.store,
                           allow_host_global=args.allow_host_global, allow_design_commands=args.allow_design_commands,
                           plan_only=args.plan)
    print(render.dumps(outcome.to_json()) if args.format == "json" else
          (outcome.text() if args.plan else outcome.summary()))
    render.write_outputs((args.json, "--json", lambda: render.dumps(outcome.to_json())))
    if args.plan or outcome.confirmation is None:
        return 0
    return EXIT_STATUS[outcome.confirmation.verdict]
