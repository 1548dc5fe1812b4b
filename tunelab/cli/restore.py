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

import tunelab


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("restore", help="roll back knob changes a crashed run left behind",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("studies", metavar="STUDY", nargs="*", help="study names (data/STUDY.sqlite) or store paths")
    parser.add_argument("--all", action="store_true", help="every store in --data-dir")
    parser.add_argument("--data-dir", default="data", type=Path, help="where stores live (default: data)")
    parser.add_argument("--allow-host-global", action="store_true",
                        help="also put back host-global knobs (vm.*, fs.*, kernel.*, most net.core.*)")
    parser.add_argument("--testbeds", metavar="FILE", type=Path,
                        help="also restore each testbed's own journal on this machine (what a lost Dask worker of a "
                             "many-testbed study left changed)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = tunelab.restore(args.studies, all_stores=args.all, data_dir=args.data_dir,
                             allow_host_global=args.allow_host_global, testbeds=args.testbeds)
    for name in result.labs_removed:
        print(f"removed orphaned lab {name} (its run had died)")
    if not result.stores:
        print(f"no stores in {args.data_dir}{' or testbed journals' if args.testbeds else ''}; nothing to restore")
    for store in result.stores:
        if store.error is not None:
            print(f"{store.path}: error: {store.error}")
        elif not store.lines:
            print(f"{store.path}: nothing to restore")
        for line in store.lines:
            print(f"{store.path}: {line}")
    return result.exit_status
