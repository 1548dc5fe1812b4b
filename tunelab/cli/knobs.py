"""``tunelab knobs``: the knob catalogue and what a target offers.

``tunelab knobs list [--target local|lab|dry-run] [--host server|client] [--family F] [--device D]
[--link-device L] [--format table|csv|json]`` probes every catalogue knob on the target read-only
(nothing is written) and reports which ones exist, are writable, their current values, and which
catalogue entries are missing there.

``tunelab knobs show NAME`` prints one knob's type, valid values, unit, scope and description.

``tunelab knobs check NAME VALUE`` validates a value and prints its canonical form and kernel text.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import pandas as pd

from tunelab.knobs import FAMILIES, discover, get_knob
from tunelab.targets import get_target

#: longest note shown by the table format (csv and json keep the full text)
NOTE_WIDTH = 80

#: targets `knobs list` can probe, with the link device used when none is given
LIST_TARGETS = {"local": None, "lab": "@link", "dry-run": None}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("knobs", help="list, show and check catalogue knobs", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="knobs_verb", metavar="ACTION", required=True)

    listing = verbs.add_parser("list", help="probe the catalogue on a target (read-only)")
    listing.add_argument("--target", choices=sorted(LIST_TARGETS), default="local",
                         help="where to look (default: local; lab creates a temporary lab)")
    listing.add_argument("--host", choices=("server", "client"), default="server", help="host of the target")
    listing.add_argument("--family", action="append", choices=FAMILIES.names(),
                         help="only this family (repeatable; default: all)")
    listing.add_argument("--device", help="block device for block.* knobs (e.g. vda; lab: @disk)")
    listing.add_argument("--link-device", help="interface for link.* knobs (e.g. lo; lab default: @link)")
    listing.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    listing.set_defaults(func=run_list)

    show = verbs.add_parser("show", help="describe one knob")
    show.add_argument("name", help="catalogue name, e.g. net.core.somaxconn")
    show.set_defaults(func=run_show)

    check = verbs.add_parser("check", help="validate a value for a knob")
    check.add_argument("name", help="catalogue name, e.g. net.ipv4.tcp_rmem")
    check.add_argument("value", nargs="+", help="the value; several words form a triplet or pair")
    check.set_defaults(func=run_check)


def knob_record(name: str) -> dict[str, Any]:
    """A JSON-ready description of one knob."""
    knob = get_knob(name)
    return {"name": knob.name, "family": knob.family, "type": knob.type, "valid": knob.describe_range(),
            "minimum": knob.minimum, "maximum": knob.maximum, "choices": list(knob.choices or []),
            "unit": knob.unit, "scope": knob.scope, "requires_restart": knob.requires_restart,
            "needs_device": knob.needs_device, "description": knob.description}


def missing_summary(frame: pd.DataFrame) -> str:
    """One line naming the catalogue entries that were checked and not found."""
    checked = frame[~frame["note"].str.startswith("not checked")]
    missing = checked.loc[~checked["exists"], "name"].tolist()
    unchecked = len(frame) - len(checked)
    text = f"{int(checked['exists'].sum())} of {len(checked)} checked knobs exist"
    text += f"; missing here: {', '.join(missing)}" if missing else "; none missing"
    if unchecked:
        text += f"; {unchecked} not checked (need --device / --link-device)"
    return text


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def run_list(args: argparse.Namespace) -> int:
    link_device = args.link_device or LIST_TARGETS[args.target]
    options = {"quiet": True} if args.target == "dry-run" else {}
    with get_target(args.target)(**options) as target:
        frame = discover(target, host=args.host, device=args.device, link_device=link_device, families=args.family)
    if args.format == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        json.dump(json.loads(frame.to_json(orient="records")), sys.stdout, indent=2)
        print()
    else:
        shown = frame.assign(exists=frame["exists"].map({True: "yes", False: "no"}),
                             writable=frame["writable"].map({True: "yes", False: "no"}),
                             current=frame["current"].fillna("-"),
                             note=frame["note"].map(lambda text: shorten(text, NOTE_WIDTH)))
        print(shown.to_string(index=False, justify="left"))
        print()
        print(missing_summary(frame))
    return 0


def run_show(args: argparse.Namespace) -> int:
    record = knob_record(args.name)
    width = max(len(key) for key in record)
    for key, value in record.items():
        if key in ("minimum", "maximum", "choices") and value in (None, []):
            continue
        print(f"{key:<{width}}  {value}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    knob = get_knob(args.name)
    value = knob.validate(" ".join(args.value) if len(args.value) > 1 or knob.length else args.value[0])
    print(f"{knob.name}: ok; canonical {value!r}; kernel text {knob.to_text(value)!r}")
    return 0
