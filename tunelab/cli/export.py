"""``tunelab export STUDY``: write a study's tidy trial table (one row per usable trial) to a file.

STUDY is a study name (the store ``data/STUDY.sqlite``) or a path to a store. Columns follow the
tidy contract: bookkeeping (run_id, config_id, block, replicate, ...), one column per knob id with
the value as read back, one per metric, then one per kernel counter that moved (counter.GROUP.NAME,
per second; docs/counters.md). Only ok trials are exported unless --include-flagged.
In CSV, triplet values (tcp_rmem and friends) are written as the kernel prints them: "4096 87380 6291456".
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import tunelab
from tunelab.cli.paths import check_output_file, confined, write_failed
from tunelab.errors import StoreError
from tunelab.model import PHASES


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("export", help="export a study's tidy trial table as CSV or Parquet",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", metavar="STUDY", help="study name (data/STUDY.sqlite) or path to a store")
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv", help="file format (default: csv)")
    parser.add_argument("--out", metavar="PATH", help="output file, '-' for stdout (CSV only); "
                                                      "default data/STUDY-PHASE.FORMAT")
    parser.add_argument("--phase", choices=[str(p) for p in PHASES], default="screen", help="which trials")
    parser.add_argument("--include-flagged", action="store_true", help="also export flagged trials")
    parser.add_argument("--data-dir", default="data", type=Path, help="where stores live (default: data)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = tunelab.api.export(args.study, phase=args.phase, include_flagged=args.include_flagged,
                                data_dir=args.data_dir)
    if args.out == "-" and args.format != "csv":
        raise StoreError("--out - (stdout) works only with --format csv; give a file name for parquet")
    if args.out == "-":
        result.csv_ready().to_csv(sys.stdout, index=False)
        return 0
    # --out is checked; a name derived from the store (which may be hostile) stays inside the data directory
    out = check_output_file(args.out, "--out") if args.out else confined(args.data_dir, result.file_name(args.format))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if args.format == "csv":
            result.csv_ready().to_csv(out, index=False)
        else:
            result.tidy.to_parquet(out, index=False)
    except OSError as exc:
        raise write_failed(exc, out, "--out" if args.out else "the export file") from None
    print(f"wrote {len(result.tidy)} {args.phase} trials of {result.study} to {out}")
    return 0
