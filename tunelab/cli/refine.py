"""``tunelab refine DESIGN``: search the screened knobs with a GA (one objective) or NSGA-II (several),
then confirm the winner against the baseline in fresh interleaved ABBA blocks.

Every measurement is a trial in the study's store (phase ``refine``, run keys
``refine:<event>:r<replicate>``; confirmation: phase ``confirm``). The search is seeded, so
running the same command again after a crash replays it and takes finished trials from the store
instead of measuring them again.

Examples::

    tunelab refine designs/default.yaml --knobs screened --objective qps:max --budget 40
    tunelab refine designs/default.yaml --knobs net.core.somaxconn,net.ipv4.tcp_abort_on_overflow \\
        --objective qps:max --objective latency_p99_ms:min --preset lab
    tunelab refine --target simulator --surface hard512 --budget 60 --export-sysctl winner.conf

Presets: lab (population 8, 40 measurements), ioperf (adaptive rates, seed 002),
gembala2013 (population 80, 40 generations, seed 000).

Exit status: 0 when the confirmation says improve or equivalent (or was skipped), 3 regress,
4 inconclusive, 2 on errors.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("refine", help="GA / NSGA-II refinement of screened knobs, then ABBA confirmation",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("design", metavar="DESIGN", nargs="?",
                        help="design file (YAML); optional with --target simulator (then --surface picks the knobs)")
    parser.add_argument("--knobs", metavar="screened|K1,K2",
                        help="knobs to search: 'screened' (those the screen found to matter, seeded with their best "
                             "levels) or a comma-separated list of knob ids (default: all of the design's knobs)")
    parser.add_argument("--objective", metavar="METRIC:max|min", action="append", default=[],
                        help="objective; repeat for NSGA-II (default: the design's first metric)")
    parser.add_argument("--budget", type=int, metavar="N", help="measurements in the search (default: the preset's)")
    parser.add_argument("--preset", default="lab", help="search preset: lab, ioperf, gembala2013 (default lab)")
    parser.add_argument("--seed", type=int, default=0, help="search seed (keep it to resume; default 0)")
    parser.add_argument("--replicates", type=int, metavar="R", help="measurements per new configuration")
    parser.add_argument("--confirm-blocks", type=int, default=6, metavar="B",
                        help="ABBA blocks confirming the winner vs the baseline (0: skip; default 6)")
    parser.add_argument("--target", metavar="TYPE", help="override the design's target (lab, local, ssh, simulator)")
    parser.add_argument("--surface", default="simple", help="simulator surface without a design (simple, null, "
                                                             "hard512, tradeoff); SYNTHETIC")
    parser.add_argument("--cv", type=float, default=0.03, help="simulator noise CV (default 0.03)")
    parser.add_argument("--allow-host-global", action="store_true", help="permit host-global knobs")
    parser.add_argument("--allow-design-commands", action="store_true",
                        help="let the design's target options run commands as root (see tunelab plan)")
    parser.add_argument("--store", type=Path, metavar="PATH", help="trial store (default data/<study>.sqlite)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write winner, estimates and confirmation as JSON")
    parser.add_argument("--export-sysctl", type=Path, metavar="FILE", help="write the winner as a sysctl.d file")
    parser.add_argument("--export-design", type=Path, metavar="FILE",
                        help="write a design fragment (knobs: with the winner as baseline)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tunelab.errors import DesignError
    from tunelab.optimize.confirm import EXIT_STATUS
    from tunelab.optimize.export import design_fragment, sysctl_conf
    from tunelab.optimize.search import Objective
    from tunelab.optimize.workflow import run_refinement, setup_from_design, setup_from_surface
    from tunelab.store import Store, default_store_path
    from tunelab.targets import build_target, check_target_spec
    from tunelab.signals import sigterm_interrupts

    objectives = [Objective.parse(o) for o in args.objective]
    if args.design:
        setup = setup_from_design(args.design, knobs=args.knobs, target_type=args.target, objectives=objectives,
                                  store_path=args.store, allow_host_global=args.allow_host_global)
    elif args.target == "simulator":
        if args.knobs not in (None, "all"):
            raise DesignError("--knobs needs a design; on the simulator without one every surface knob is searched")
        setup = setup_from_surface(args.surface, cv=args.cv, seed=args.seed, objectives=objectives)
    else:
        raise DesignError("give a DESIGN file (or --target simulator to refine on a SYNTHETIC surface)")
    objectives = objectives or [Objective(g.name, g.direction) for g in setup.goals]
    target_spec = {"type": setup.target_type, "options": setup.target_options}
    check_target_spec(target_spec, allow_commands=args.allow_design_commands)   # before the store is opened
    path = args.store or default_store_path(setup.study)
    with sigterm_interrupts():
        with Store.open(path, study=setup.study, design_hash=setup.design_hash, design_text=setup.design_text,
                        target_spec={"type": setup.target_type, "options": setup.target_options}) as store:
            with build_target(target_spec, allow_commands=args.allow_design_commands) as target:
                outcome = run_refinement(setup, target, store, objectives, budget=args.budget, preset=args.preset,
                                         seed=args.seed, replicates=args.replicates,
                                         confirm_blocks=args.confirm_blocks)

    result, confirmation = outcome.result, outcome.confirmation
    if setup.target_type == "simulator":
        print("NOTE: SYNTHETIC results from the simulator target; no real kernel was measured")
    print(f"study {setup.study}: {result.evaluations} measurements ({outcome.reused} taken from the store, "
          f"{outcome.measured} new), preset {result.preset}, seed {result.seed}; store {path}")
    if not result.generations.empty:
        cols = ["generation", "evaluations", "best", "mean", "worst", "baseline"]
        print(result.generations[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("winner (by pessimistic bound, not best draw):")
    for kid, value in result.winner.items():
        print(f"  {kid} = {value}")
    if result.pareto is not None:
        print(f"Pareto set ({len(result.pareto)} configurations by mean estimates):")
        print(result.pareto.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    gain = None
    if outcome.note:
        print(outcome.note)
    if confirmation is not None:
        print(confirmation.summary())
        gain = confirmation.gain()
    if args.export_sysctl:
        args.export_sysctl.write_text(sysctl_conf(result.winner, gain=gain, metric=objectives[0].metric,
                                                  verdict=confirmation.verdict if confirmation else None,
                                                  study=setup.study))
        print(f"wrote {args.export_sysctl}")
    if args.export_design:
        args.export_design.write_text(design_fragment(result.winner, setup.levels))
        print(f"wrote {args.export_design}")
    if args.json:
        payload = {
            "study": setup.study, "winner": _jsonable(result.winner), "evaluations": result.evaluations,
            "preset": result.preset, "seed": result.seed,
            "estimates": json.loads(result.estimates.to_json(orient="records", default_handler=str)),
            "generations": json.loads(result.generations.to_json(orient="records")),
            "pareto": None if result.pareto is None else json.loads(result.pareto.to_json(orient="records",
                                                                                           default_handler=str)),
            "confirmation": None if confirmation is None else {
                "verdict": confirmation.verdict,
                "table": json.loads(confirmation.table.to_json(orient="records"))},
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.json}")
    return EXIT_STATUS[confirmation.verdict] if confirmation is not None else 0


def _jsonable(config: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in config.items()}
