"""``tunelab restore [STUDY ...|--all]``: put back every knob a crashed or interrupted run left changed.

Each unrestored journal entry's old value is written back through the study's target, read back
and compared, then marked restored. On the lab target, whose namespaces are gone after a crash,
per-namespace knobs have nothing left to restore and are resolved with that note. Entries that
cannot be restored stay in the journal and are listed; the exit status is then 1.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tunelab.errors import StoreError
from tunelab.safety import restore_journal
from tunelab.store import Store, store_path_for


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("restore", help="roll back knob changes a crashed run left behind",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("studies", metavar="STUDY", nargs="*", help="study names (data/STUDY.sqlite) or store paths")
    parser.add_argument("--all", action="store_true", help="every store in --data-dir")
    parser.add_argument("--data-dir", default="data", type=Path, help="where stores live (default: data)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.all == bool(args.studies):
        raise StoreError("name the studies to restore, or pass --all (not both)")
    paths = sorted(args.data_dir.glob("*.sqlite")) if args.all else [store_path_for(s, args.data_dir) for s in args.studies]
    if not paths:
        print(f"no stores in {args.data_dir}; nothing to restore")
        return 0
    status = 0
    for path in paths:
        with Store(path) as store:
            report = restore_journal(store)
        if not report.lines():
            print(f"{path}: nothing to restore")
        for line in report.lines():
            print(f"{path}: {line}")
        status |= 0 if report.ok else 1
    return status
