"""``tunelab plan DESIGN [--format table|csv|json]``: validate a design file and print its plan.

Nothing is written or run. A design whose target options name commands (e.g. ``service_commands``,
run as root) is refused, exactly as ``tunelab run`` would refuse it, unless ``--allow-design-commands``
is given: then every such command is printed, one line each (``table``: ``command`` lines;
``json``: the ``commands`` list; ``csv``: on stderr). ``table`` shows the summary (runs, knobs with family/scope/host/restart,
estimated wall time, resolution and aliases for fractional designs) and then the plan; ``csv``
prints only the plan; ``json`` prints the summary plus ``"plan": [rows]`` (schema in
designs/README.md).

A design with ``constraints.exclude`` says how many runs were left out and which entry matched them
(``table``: after the summary; ``json``: ``excluded``; ``csv``: on stderr). The knobs' write order
(``apply_order``, lowest rank first; restored in reverse) is ``apply_order`` in the JSON.

``--probe`` also applies each distinct planned configuration on the design's target (or
``--target``), reads it back and restores it (journalled first, as ``tunelab run`` does; host-global
knobs need ``--allow-host-global`` or the design's permission), then reports the combinations the
kernel refuses with the ``exclude:`` entries to paste (``json``: ``probe``). Its journal is
``data/<study>.probe.sqlite``: after a crash, ``tunelab restore data/<study>.probe.sqlite``.
The command exits 3 when the probe found refused combinations.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import tunelab
from tunelab.cli import render

#: exit status of ``--probe`` when the target refused planned combinations
EXIT_REFUSED = 3


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("plan", help="validate a design file and print its run plan",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("design", metavar="DESIGN", help="design file (YAML), e.g. designs/default.yaml")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table",
                        help="output format (default: table)")
    parser.add_argument("--allow-design-commands", action="store_true",
                        help="accept a design whose target options run commands as root, and print each of them")
    parser.add_argument("--probe", action="store_true",
                        help="apply, read back and restore each planned configuration on the target, and report "
                             "the combinations the kernel refuses (with the exclude: entries to paste)")
    parser.add_argument("--target", metavar="TYPE", help="the target to probe (default: the design's)")
    parser.add_argument("--allow-host-global", action="store_true",
                        help="let the probe change host-global knobs (each change is journalled and restored)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tunelab.designs.plan import excluded_lines   # pandas and the catalogue: not on the --help path

    result = tunelab.plan(args.design, allow_design_commands=args.allow_design_commands, probe=args.probe,
                          target=args.target, allow_host_global=args.allow_host_global)
    notes = [*excluded_lines(result.summary), *result.summary.get("probe", {}).get("lines", []),
             *preflight_lines(result.summary.get("preflight") or {})]
    if args.format == "csv":
        for command in result.commands:
            print(f"command (runs as root) {command}", file=sys.stderr)
        for line in notes:
            print(line, file=sys.stderr)
        sys.stdout.write(render.plan_frame(result.plan).to_csv(index=False))
    elif args.format == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(render.plan_table(result.summary, result.plan) + "\n")
        sys.stdout.write("".join(f"{line}\n" for line in notes))
    return EXIT_REFUSED if result.summary.get("probe", {}).get("refusals") else 0


def preflight_lines(preflight: dict[str, Any]) -> list[str]:
    """The pre-flight's lines for the plan (from :meth:`tunelab.preflight.Preflight.to_json`)."""
    findings = preflight.get("findings") or []
    if not findings:
        return []
    if preflight.get("refused"):
        head = ("pre-flight: REFUSED: `tunelab run` stops before anything is applied (fix the design, declare the "
                "knob a negative control with preflight: {controls: [ID]}, or pass --force)")
    else:
        head = "pre-flight: every knob can act under this load; notes (the server's own limits are read at run start):"
    where = lambda f: f" [profile {f['profile']}]" if f.get("profile") else ""  # noqa: E731
    return [head] + [f"  {f['subject']}{where(f)}: {f['severity']}: {f['reason']}" for f in findings]
