"""``tunelab quickstart``: the README's first command after installing: run the default study.

Brings up the embedded lab (two network namespaces, a real NSD server, dnsperf), runs
``designs/default.yaml`` for real (resuming if it was interrupted), tears the lab down, screens
the results (the verdict table is printed) and writes the HTML report, whose path is the last
line printed. Needs root (network namespaces) and the Debian packages that ``quickstart.sh``
installs. ``--design`` runs another design the same way.

Exit status: 0 when the study ran and the report was written (failed trials are findings, the
summary names them), 2 on errors.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import tunelab
from tunelab.cli import render
from tunelab.errors import TunelabError

DEFAULT_DESIGN = Path("designs") / "default.yaml"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("quickstart", help="run the default study on the lab, screen it, write the report",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", type=Path, default=DEFAULT_DESIGN, help=f"design file (default {DEFAULT_DESIGN})")
    parser.add_argument("--allow-design-commands", action="store_true",
                        help="let the design's target options run commands as root (see tunelab plan)")
    parser.add_argument("--no-report", action="store_true", help="stop after the screen")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    planned = tunelab.plan(args.design, allow_design_commands=args.allow_design_commands)
    summary = planned.summary
    if summary["design"]["target"] == "lab" and os.geteuid() != 0:
        raise TunelabError("the embedded lab builds network namespaces and needs root; run as root (sudo), "
                           f"or look at the plan without running it: tunelab plan {args.design}")
    rule = summary.get("sequential")
    size = (f"{summary['runs']} runs in round 1, more rounds for undecided knobs (at most {rule['max_runs']} runs, "
            f"~{rule['max_wall_s'] / 60:.0f} min)" if rule else
            f"{summary['runs']} runs, about {summary['estimated_wall_s'] / 60:.0f} min")
    print(f"quickstart: study {planned.design.name!r} on target {summary['design']['target']!r}: {size}", flush=True)
    outcome = tunelab.run(args.design, progress=not args.no_progress, allow_design_commands=args.allow_design_commands)
    print(outcome, flush=True)
    result = tunelab.screen(outcome.store_path)
    print("\nscreen (verdict per knob and metric):")
    print(render.verdict_table(result.verdicts), flush=True)
    if not args.no_report:
        print(f"\nreport: {tunelab.report(outcome.store_path).index}")
    return 0
