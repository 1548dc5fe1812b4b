"""``tunelab lab up|status|down``: manage embedded network-namespace labs across processes."""
from __future__ import annotations

import argparse
from typing import Any

import tunelab
from tunelab.cli import render
from tunelab.errors import TargetError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("lab", help="create, list and remove network-namespace labs",
                                   description="Create, list and remove the embedded network-namespace lab.")
    sub = parser.add_subparsers(dest="lab_command", metavar="COMMAND", required=True)

    up = sub.add_parser("up", help="create a lab that stays up after this command exits")
    up.add_argument("--name", help="lab name [a-z0-9-], default: 6 random hex digits")
    up.add_argument("--bottleneck-mbit", type=float, help="router namespace with a tbf bottleneck of this rate")
    up.add_argument("--queue-limit-bytes", type=int, help="tbf queue length (default 20 ms at the rate)")
    up.add_argument("--disk-mb", type=int, help="attach a sparse file of this size as a loop device")
    up.add_argument("--records", type=int, default=1000, help="A records in the DNS zone (default 1000)")
    up.add_argument("--dns-server", default="nsd", metavar="NAME",
                    help="the DNS server the lab runs: nsd (default), bind9, knot or unbound")
    up.add_argument("--zone", metavar="ORIGIN", help="with --zone-file: the zone's origin, e.g. example.org.")
    up.add_argument("--zone-file", metavar="FILE", help="serve this zone file (yours) instead of the lab's own "
                    "tunelab.test. zone; checked by the server's own zone checker first")
    up.add_argument("--no-pin", action="store_true", help="do not pin the server and the client to separate CPUs (default: pinned when 2 or more)")
    up.set_defaults(func=cmd_up)

    status = sub.add_parser("status", help="list labs, their namespaces and whether services are alive")
    status.add_argument("--json", action="store_true", help="print JSON instead of text")
    status.set_defaults(func=cmd_status)

    down = sub.add_parser("down", help="remove a lab (or all); always removes orphans of crashed runs")
    which = down.add_mutually_exclusive_group()
    which.add_argument("--name", help="the lab to remove")
    which.add_argument("--all", action="store_true", help="remove every lab and every tl-* namespace")
    down.set_defaults(func=cmd_down)


def cmd_up(args: argparse.Namespace) -> int:
    if (args.zone is None) != (args.zone_file is None):
        raise TargetError("tunelab lab up: --zone and --zone-file go together: --zone-file FILE --zone ORIGIN "
                          "(the origin the file's relative names belong to, e.g. example.org.)")
    lab = tunelab.lab_up(args.name, bottleneck_mbit=args.bottleneck_mbit, queue_limit_bytes=args.queue_limit_bytes,
                         disk_mb=args.disk_mb, records=args.records, pin=not args.no_pin, dns_server=args.dns_server,
                         zone=args.zone, zone_file=args.zone_file)
    print(render.lab_up_text(lab))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    status = tunelab.lab_status().to_json()
    print(render.dumps(status, sort_keys=True) if args.json else render.lab_status_text(status))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    result = tunelab.lab_down(args.name, all_labs=args.all)
    print("removed: " + (", ".join(result.removed) if result.removed else "nothing"))
    if result.problems:
        raise TargetError("lab down had problems: " + "; ".join(result.problems))
    return 0
