"""``tunelab refine DESIGN``: search the screened knobs with an ask/tell engine, race its leaders for the
winner, then confirm the winner against the baseline in fresh interleaved ABBA blocks.

Every measurement is a trial in the study's store (phases ``refine`` and ``confirm``) and every batch of the
search is stored with the engine's state, so running the same command again after a crash resumes from the
last stored batch (no measurement is repeated, the search is not re-run). Running a finished search again with
a larger --budget (and nothing else changed) continues it; --warm-start counts the screen's measurements.

Examples::

    tunelab refine designs/default.yaml --knobs screened+inconclusive --objective qps:max --budget 40
    tunelab refine designs/default.yaml --knobs K1,K2 --objective qps:max --objective latency_p99_ms:min
    tunelab refine designs/default.yaml --engine ga --preset gembala2013
    tunelab refine designs/default.yaml --knobs screened+inconclusive --budget 30 --warm-start
    tunelab refine --target simulator --surface hard512 --budget 60 --engine tpe --export-sysctl winner.conf

Engines: tunelab (default: model of main effects and pairwise interactions, then a race), ga and nsga2 (pymoo;
presets lab, ioperf, gembala2013, nsga2-crowding), tpe, gp, cmaes, optuna-nsga2 (Optuna), model, random.
Exit status: 0 when the confirmation says improve or equivalent (or was skipped), 3 regress, 4 inconclusive,
5 untestable (too few usable blocks, e.g. every confirming trial failed), 2 errors, 130 when interrupted by
Ctrl-C or SIGTERM (the trial in flight is put back and one line says which knobs were restored; rerun to resume).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import tunelab
from tunelab.errors import TunelabError
from tunelab.cli import render
from tunelab.cli.parsing import add_target_options


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("refine", help="search the screened knobs (ask/tell engines), then ABBA confirmation",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("design", metavar="DESIGN", nargs="?", help="design file (YAML); optional with --target simulator")
    add("--knobs", metavar="SPEC", help="knobs to search: 'screened' (those the screen found to matter, started at "
        "their best levels), 'screened+inconclusive' (also those still inconclusive), a comma-separated list of "
        "knob ids, or 'screened+K1,K2' (default: all of the design's knobs)")
    add("--objective", metavar="METRIC:max|min", action="append", default=[], help="objective; repeat for several")
    add("--engine", default="tunelab", help="search engine: tunelab (default), ga, nsga2, tpe, gp (needs torch: "
        "pip install 'tunelab[gp]'), cmaes, optuna-nsga2, model, random")
    add("--preset", help="a preset of the engine: lab, ioperf, gembala2013 (ga), nsga2-crowding (nsga2)")
    add("--option", metavar="KEY=VALUE", action="append", default=[], help="an engine option, e.g. pop_size=20")
    add("--budget", type=int, metavar="N", help="measurements in the search and its race (default: the preset's, "
        "else 60)")
    add("--seed", type=int, default=0, help="search seed (keep it to resume; default 0)")
    add("--warm-start", nargs="?", const=True, default=False, metavar="STORE",
        help="count the screen's measurements as made: those in the refinement's store (where the screen "
             "recorded), or in STORE; told to the engine before it asks, never measured again, outside --budget")
    add("--confirm-blocks", type=int, default=6, metavar="B", help="ABBA blocks confirming the winner (0: skip)")
    add_target_options(parser)
    add("--json", type=Path, metavar="OUT", help="write winner, estimates and confirmation as JSON")
    add("--export-sysctl", type=Path, metavar="FILE", help="write the winner as a sysctl.d file")
    add("--export-design", type=Path, metavar="FILE", help="write a design fragment with the winner as baseline")
    parser.add_argument("--testbeds", metavar="FILE", type=Path,
                        help="measure each asked batch in parallel across the testbeds this file names (Dask); "
                             "the confirmation's blocks are spread over them, each block on one testbed")
    parser.add_argument("--scheduler", metavar="tcp://HOST:8786",
                        help="with --testbeds: use this running Dask scheduler (workers named after the testbeds)")
    parser.set_defaults(func=run)


def engine_options(pairs: list[str]) -> dict[str, Any]:
    """``--option KEY=VALUE`` pairs as a dict, each value read as YAML (numbers, booleans, lists).

    >>> engine_options(["pop_size=20", "crossover=[0.9, 0.7]"])
    {'pop_size': 20, 'crossover': [0.9, 0.7]}
    """
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise TunelabError(f"--option {pair!r} must look like KEY=VALUE, e.g. --option pop_size=20")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise TunelabError(f"--option {pair!r}: {value!r} is not a number, boolean, word or list") from None
    return out


def run(args: argparse.Namespace) -> int:
    outcome = tunelab.refine(args.design, knobs=args.knobs, objectives=args.objective, budget=args.budget, cv=args.cv,
                             engine=args.engine, preset=args.preset, options=engine_options(args.option),
                             seed=args.seed, surface=args.surface,
                             confirm_blocks=args.confirm_blocks, target=args.target, store=args.store,
                             allow_host_global=args.allow_host_global, allow_design_commands=args.allow_design_commands,
                             testbeds=args.testbeds, scheduler=args.scheduler, warm_start=args.warm_start)
    if args.warm_start and not outcome.result.warm:
        print("note: --warm-start found no screen measurement that fits this search (its knobs at their baseline "
              "or in the searched values, the same load, settings and durations): it started cold", file=sys.stderr)
    print(render.refine_text(outcome))
    render.write_outputs((args.export_sysctl, "--export-sysctl", outcome.sysctl_conf),
                         (args.export_design, "--export-design", outcome.design_fragment),
                         (args.json, "--json", lambda: render.dumps(outcome.to_json())))
    return outcome.exit_status
