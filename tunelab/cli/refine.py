"""``tunelab refine DESIGN``: search the screened knobs with a GA (one objective) or NSGA-II (several),
then confirm the winner against the baseline in fresh interleaved ABBA blocks.

Every measurement is a trial in the study's store (phases ``refine`` and ``confirm``). The search is seeded, so
running the same command again after a crash replays it and takes finished trials from the store.

Examples::

    tunelab refine designs/default.yaml --knobs screened --objective qps:max --budget 40
    tunelab refine designs/default.yaml --knobs K1,K2 --objective qps:max --objective latency_p99_ms:min
    tunelab refine --target simulator --surface hard512 --budget 60 --export-sysctl winner.conf

Presets: lab (population 8, 40 measurements), ioperf (adaptive rates), gembala2013 (population 80, 40 generations).
Exit status: 0 when the confirmation says improve or equivalent (or was skipped), 3 regress, 4 inconclusive, 2 errors.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import tunelab
from tunelab.cli import render


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("refine", help="GA / NSGA-II refinement of screened knobs, then ABBA confirmation",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("design", metavar="DESIGN", nargs="?", help="design file (YAML); optional with --target simulator")
    add("--knobs", metavar="screened|K1,K2", help="knobs to search: 'screened' (those the screen found to matter, "
        "seeded with their best levels) or a comma-separated list of knob ids (default: all of the design's knobs)")
    add("--objective", metavar="METRIC:max|min", action="append", default=[], help="objective; repeat for NSGA-II")
    add("--budget", type=int, metavar="N", help="measurements in the search (default: the preset's)")
    add("--preset", default="lab", help="search preset: lab, ioperf, gembala2013 (default lab)")
    add("--seed", type=int, default=0, help="search seed (keep it to resume; default 0)")
    add("--replicates", type=int, metavar="R", help="measurements per new configuration")
    add("--confirm-blocks", type=int, default=6, metavar="B", help="ABBA blocks confirming the winner (0: skip)")
    add("--target", metavar="TYPE", help="override the design's target (lab, local, ssh, simulator)")
    add("--surface", default="simple", help="SYNTHETIC simulator surface without a design: simple, null, hard512...")
    add("--cv", type=float, default=0.03, help="simulator noise CV (default 0.03)")
    add("--allow-host-global", action="store_true", help="permit host-global knobs")
    add("--allow-design-commands", action="store_true", help="let the design's target options run commands as root")
    add("--store", type=Path, metavar="PATH", help="trial store (default data/<study>.sqlite)")
    add("--json", type=Path, metavar="OUT", help="write winner, estimates and confirmation as JSON")
    add("--export-sysctl", type=Path, metavar="FILE", help="write the winner as a sysctl.d file")
    add("--export-design", type=Path, metavar="FILE", help="write a design fragment with the winner as baseline")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    outcome = tunelab.refine(args.design, knobs=args.knobs, objectives=args.objective, budget=args.budget, cv=args.cv,
                             preset=args.preset, seed=args.seed, replicates=args.replicates, surface=args.surface,
                             confirm_blocks=args.confirm_blocks, target=args.target, store=args.store,
                             allow_host_global=args.allow_host_global, allow_design_commands=args.allow_design_commands)
    print(render.refine_text(outcome))
    render.write_outputs((args.export_sysctl, "--export-sysctl", outcome.sysctl_conf),
                         (args.export_design, "--export-design", outcome.design_fragment),
                         (args.json, "--json", lambda: render.dumps(outcome.to_json())))
    return outcome.exit_status
