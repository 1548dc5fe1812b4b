"""``tunelab plan DESIGN [--format table|csv|json]``: validate a design file and print its plan.

Nothing is written or run. A design whose target options name commands (e.g. ``service_commands``,
run as root) is refused, exactly as ``tunelab run`` would refuse it, unless ``--allow-design-commands``
is given: then every such command is printed, one line each (``table``: ``command`` lines;
``json``: the ``commands`` list; ``csv``: on stderr). ``table`` shows the summary (runs, knobs with family/scope/host/restart,
estimated wall time, resolution and aliases for fractional designs) and then the plan; ``csv``
prints only the plan; ``json`` prints the summary plus ``"plan": [rows]`` (schema in
designs/README.md).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import tunelab
from tunelab.cli import render


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("plan", help="validate a design file and print its run plan",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("design", metavar="DESIGN", help="design file (YAML), e.g. designs/default.yaml")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table",
                        help="output format (default: table)")
    parser.add_argument("--allow-design-commands", action="store_true",
                        help="accept a design whose target options run commands as root, and print each of them")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = tunelab.plan(args.design, allow_design_commands=args.allow_design_commands)
    if args.format == "csv":
        for command in result.commands:
            print(f"command (runs as root) {command}", file=sys.stderr)
        sys.stdout.write(render.plan_frame(result.plan).to_csv(index=False))
    elif args.format == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(render.plan_table(result.summary, result.plan) + "\n")
    return 0
