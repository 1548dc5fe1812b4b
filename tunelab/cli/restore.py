"""``tunelab restore [STUDY ...|--all]``: put back every knob a crashed or interrupted run left changed.

First, labs whose run died (kill -9, power cut) are removed: their namespaces, servers, loop
device and files. Then each unrestored journal entry's old value is validated by the knob
catalogue, written back through the study's target, read back and compared, and marked restored.

What is never replayed:

- an entry written on another machine (the journal records each host's machine id): a store
  copied from elsewhere is data, not instructions for this machine;
- a host-global knob (vm.*, fs.*, kernel.*, most net.core.*) unless ``--allow-host-global``;
- commands: the target is rebuilt from the store without any design commands.

An entry made before the machine last rebooted is moot (the kernel reset the runtime value). On
the lab target, whose namespaces are gone after a crash, per-namespace knobs have nothing left to
restore and are resolved with that note.

Exit status: 0 when everything is back, 1 when some entry was refused or failed (listed, and
left in the journal), 2 on errors.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tunelab.errors import StoreError, TunelabError
from tunelab.leases import sweep
from tunelab.journal import remove_orphan_labs, restore_journal
from tunelab.store import Store, store_path_for


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("restore", help="roll back knob changes a crashed run left behind",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("studies", metavar="STUDY", nargs="*", help="study names (data/STUDY.sqlite) or store paths")
    parser.add_argument("--all", action="store_true", help="every store in --data-dir")
    parser.add_argument("--data-dir", default="data", type=Path, help="where stores live (default: data)")
    parser.add_argument("--allow-host-global", action="store_true",
                        help="also put back host-global knobs (vm.*, fs.*, kernel.*, most net.core.*)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.all == bool(args.studies):
        raise StoreError("name the studies to restore, or pass --all (not both)")
    for name in remove_orphan_labs():
        print(f"removed orphaned lab {name} (its run had died)")
    paths = sorted(args.data_dir.glob("*.sqlite")) if args.all else [store_path_for(s, args.data_dir) for s in args.studies]
    if not paths:
        print(f"no stores in {args.data_dir}; nothing to restore")
        return 0
    status = 0
    for path in paths:
        try:
            status |= _restore_one(path, args.allow_host_global)
        except TunelabError as exc:
            if not args.all:
                raise
            print(f"{path}: error: {exc}")         # one bad store must not stop the others
            status = 1
    sweep()                                        # leases of dead runs whose stores are now clean
    return status


def _restore_one(path: Path, allow_host_global: bool) -> int:
    with Store(path) as store:
        report = restore_journal(store, allow_host_global=allow_host_global, remove_orphans=False)
    if not report.lines():
        print(f"{path}: nothing to restore")
    for line in report.lines():
        print(f"{path}: {line}")
    return 0 if report.ok else 1
