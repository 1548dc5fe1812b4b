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

import pandas as pd

from tunelab.designs import check_design_commands, load_design, make_plan, plan_records, plan_summary


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("plan", help="validate a design file and print its run plan",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("design", metavar="DESIGN", help="design file (YAML), e.g. designs/default.yaml")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table",
                        help="output format (default: table)")
    parser.add_argument("--allow-design-commands", action="store_true",
                        help="accept a design whose target options run commands as root, and print each of them")
    parser.set_defaults(func=run)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def _value_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def format_table(summary: dict[str, Any], plan: pd.DataFrame) -> str:
    """Human-readable summary followed by the plan."""
    d = summary["design"]
    lines = [
        f"design      {d['name']} ({d['type']}) from {d['source']}",
        f"hash        {d['hash']}",
        f"target      {d['target']}; load {d['load']['generator']} profile {d['load']['profile']}",
        f"runs        {summary['runs']} = {summary['runs_per_replicate']} per replicate x {d['replicates']} "
        f"replicates in {d['blocks']} block(s); {summary['configs']} configurations, "
        f"{summary['baseline_runs']} baseline runs; seed {d['seed']}",
        f"wall time   ~{_duration(summary['estimated_wall_s'])} (runs x (warmup {summary['timing']['warmup_s']:g} s + "
        f"measure {summary['timing']['measure_s']:g} s + {summary['timing']['run_overhead_s']:g} s) + "
        f"{summary['restarts']} restarts x {summary['timing']['restart_s']:g} s)",
        "",
    ]
    knobs = pd.DataFrame([{
        "knob": k["id"], "family": k["family"], "scope": k["scope"], "host": k["host"],
        "restart": "yes" if k["requires_restart"] else "no",
        "levels": ", ".join(_value_text(v) for v in k["levels"]), "baseline": _value_text(k["baseline"]),
    } for k in summary["knobs"]])
    lines += [knobs.to_string(index=False), ""]
    for command in summary.get("commands", []):
        lines.append(f"command (runs as root) {command}")
    for warning in summary["warnings"]:
        lines.append(f"warning: {warning}")
    frac = summary["fractional"]
    if frac:
        res = frac["resolution"]
        lines.append(f"resolution  {res if res is not None else 'full factorial'}; generators "
                     f"{', '.join(frac['generators']) or '(none)'}")
        lines.append("letters     " + ", ".join(f"{letter}={knob}" for letter, knob in frac["letters"].items()))
        lines.append("defining relation: I = " + " = ".join(frac["defining_relation"]))
        lines.append("aliases of order <= 2 (main effects, then 2FI classes without a main effect):")
        for effect, partners in frac["aliases"].items():
            bare = [p.lstrip("-") for p in partners]
            if partners and (len(effect) == 1 or all(len(p) == 2 for p in bare)):
                if len(effect) == 2 and any(p < effect for p in bare):
                    continue  # this 2FI class was printed under its first member
                lines.append(f"  {effect} = {' = '.join(partners)}")
        lines.append("")
    shown = plan.copy()
    for column in shown.columns[7:]:
        shown[column] = shown[column].map(_value_text)
    lines.append(shown.to_string(index=False))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    design = load_design(args.design)
    commands = check_design_commands(design, args.allow_design_commands)
    plan = make_plan(design)
    if args.format == "csv":
        for command in commands:
            print(f"command (runs as root) {command}", file=sys.stderr)
        shown = plan.copy()
        for column in shown.columns[7:]:
            shown[column] = shown[column].map(_value_text)
        sys.stdout.write(shown.to_csv(index=False))
    elif args.format == "json":
        summary = plan_summary(design, plan)
        summary["plan"] = plan_records(plan)
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        sys.stdout.write(format_table(plan_summary(design, plan), plan) + "\n")
    return 0
