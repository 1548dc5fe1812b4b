"""``tunelab lab up|status|down``: manage embedded network-namespace labs across processes."""
from __future__ import annotations

import argparse
import json
from typing import Any

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
    up.add_argument("--no-pin", action="store_true", help="do not pin server/client to CPUs 0/1")
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
    from tunelab.targets.lab import LabTarget

    cpus = {"server_cpu": None, "client_cpu": None} if args.no_pin else {}
    lab = LabTarget(name=args.name, bottleneck_mbit=args.bottleneck_mbit, queue_limit_bytes=args.queue_limit_bytes,
                    records=args.records, disk_mb=args.disk_mb, **cpus)
    lab.up()
    disk = lab.resolve_device("@disk") if args.disk_mb else None
    up_s = lab.timings.get("up_s", 0.0)
    lab.detach()
    print(f"lab {lab.lab_name} is up in {up_s * 1000:.0f} ms")
    for role, ns in lab.namespaces.items():
        print(f"  {role:<7} {ns}" + (f"  {lab.addresses[role]}" if role in lab.addresses else ""))
    if disk:
        print(f"  disk    /dev/{disk}")
    print(f"remove it with: tunelab lab down --name {lab.lab_name}")
    return 0


def lab_status() -> dict[str, Any]:
    """Every lab's namespaces (existing or not), service liveness, disk and owner, plus orphans."""
    from tunelab.targets import netns, services
    from tunelab.targets.lab import _pid_in_lab, list_states, orphan_namespaces

    labs = []
    for state in list_states():
        labs.append({
            "name": state.name,
            "namespaces": {role: {"name": ns, "exists": netns.namespace_exists(ns)}
                           for role, ns in state.namespaces.items()},
            "addresses": state.addresses,
            "services": {name: {"pid": pid, "alive": services.pid_alive(pid) and _pid_in_lab(pid, state)}
                         for name, pid in state.services.items()},
            "disk": state.disk_device,
            "detached": state.detached,
            "owner_pid": state.owner_pid,
            "orphan": state.is_orphan(),
            "options": state.options,
        })
    return {"labs": labs, "orphan_namespaces": orphan_namespaces(min_age_s=0.0)}


def cmd_status(args: argparse.Namespace) -> int:
    status = lab_status()
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
        return 0
    if not status["labs"]:
        print("no labs")
    for lab in status["labs"]:
        flags = ["detached" if lab["detached"] else f"owned by pid {lab['owner_pid']}"]
        if lab["orphan"]:
            flags.append("ORPHAN (owner died; `tunelab lab down` removes it)")
        print(f"{lab['name']}: {', '.join(flags)}")
        for role, ns in lab["namespaces"].items():
            print(f"  {role:<7} {ns['name']:<22} {'ok' if ns['exists'] else 'MISSING'}")
        for name, svc in lab["services"].items():
            print(f"  service {name:<7} pid {svc['pid']:<8} {'alive' if svc['alive'] else 'DEAD'}")
        if lab["disk"]:
            print(f"  disk    {lab['disk']}")
    if status["orphan_namespaces"]:
        print("namespaces without a lab: " + ", ".join(status["orphan_namespaces"]))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from tunelab.targets import netns
    from tunelab.targets.lab import NS_PREFIX, destroy, list_states, load_state, orphan_namespaces

    problems: list[str] = []
    removed: list[str] = []
    if args.name is not None:
        state = load_state(args.name)          # validates the name before it becomes a path
        problems += destroy(state)
        removed.append(state.name)
    targets = list_states() if args.all else [s for s in list_states() if s.is_orphan()]
    for state in targets:
        problems += destroy(state)
        removed.append(state.name)
    namespaces = netns.list_namespaces(NS_PREFIX) if args.all else orphan_namespaces()
    for ns in namespaces:
        try:
            netns.delete_namespace(ns)
            removed.append(ns)
        except TargetError as exc:
            problems.append(str(exc))
    print("removed: " + (", ".join(removed) if removed else "nothing"))
    if problems:
        raise TargetError("lab down had problems: " + "; ".join(problems))
    return 0
