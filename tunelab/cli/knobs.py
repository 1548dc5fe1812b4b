"""``tunelab knobs list|show|check``: the knob catalogue and what a target offers.

``list [--target local|lab|dry-run] [--host server|client] [--family F] [--device D] [--link-device L]
[--format table|csv|json]`` probes every catalogue knob on the target read-only (nothing is written) and reports
which ones exist, are writable, their current values, and which catalogue entries are missing there.
``show NAME`` prints one knob's type, valid values, unit, scope and description. ``check NAME VALUE`` validates
a value and prints its canonical form and kernel text.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

import tunelab
from tunelab.cli import render


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("knobs", help="list, show and check catalogue knobs", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="knobs_verb", metavar="ACTION", required=True)

    listing = verbs.add_parser("list", help="probe the catalogue on a target (read-only)")
    add = listing.add_argument
    add("--target", choices=("dry-run", "lab", "local"), default="local", help="where to look (lab: a temporary lab)")
    add("--host", choices=("server", "client"), default="server", help="host of the target")
    add("--family", action="append", metavar="{sysctl,block,link}", help="only this family (repeatable; default: all)")
    add("--device", help="block device for block.* knobs (e.g. vda; lab: @disk)")
    add("--link-device", help="interface for link.* knobs (e.g. lo; lab default: @link)")
    add("--format", choices=("table", "csv", "json"), default="table", help="output format")
    listing.set_defaults(func=run_list)
    show = verbs.add_parser("show", help="describe one knob")
    show.add_argument("name", help="catalogue name, e.g. net.core.somaxconn")
    show.set_defaults(func=run_show)
    check = verbs.add_parser("check", help="validate a value for a knob")
    check.add_argument("name", help="catalogue name, e.g. net.ipv4.tcp_rmem")
    check.add_argument("value", nargs="+", help="the value; several words form a triplet or pair")
    check.set_defaults(func=run_check)


def run_list(args: argparse.Namespace) -> int:
    listing = tunelab.api.knob_list(args.target, host=args.host, families=args.family, device=args.device,
                                    link_device=args.link_device)
    sys.stdout.write(render.knob_list(listing, args.format))
    return 0


def run_show(args: argparse.Namespace) -> int:
    print(render.knob_info(tunelab.api.knob_info(args.name)))
    return 0


def run_check(args: argparse.Namespace) -> int:
    checked = tunelab.api.knob_check(args.name, args.value)
    print(f"{checked['name']}: ok; canonical {checked['value']!r}; kernel text {checked['text']!r}")
    return 0
