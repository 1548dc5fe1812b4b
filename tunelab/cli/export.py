"""``tunelab export STUDY``: write a study's tidy trial table (one row per usable trial) to a file.

STUDY is a study name (the store ``data/STUDY.sqlite``) or a path to a store. Columns follow the
tidy contract: bookkeeping (run_id, config_id, block, replicate, ...), one column per knob id with
the value as read back, one per metric. Only ok trials are exported unless --include-flagged.
In CSV, triplet values (tcp_rmem and friends) are written as the kernel prints them: "4096 87380 6291456".
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from tunelab.cli.paths import check_output_file, confined, write_failed
from tunelab.errors import StoreError
from tunelab.store import PHASES, Store, check_study_name, store_path_for


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("export", help="export a study's tidy trial table as CSV or Parquet",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", metavar="STUDY", help="study name (data/STUDY.sqlite) or path to a store")
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv", help="file format (default: csv)")
    parser.add_argument("--out", metavar="PATH", help="output file, '-' for stdout (CSV only); "
                                                      "default data/STUDY-PHASE.FORMAT")
    parser.add_argument("--phase", choices=PHASES, default="screen", help="which trials (default: screen)")
    parser.add_argument("--include-flagged", action="store_true", help="also export flagged trials")
    parser.add_argument("--data-dir", default="data", type=Path, help="where stores live (default: data)")
    parser.set_defaults(func=run)


def to_csv_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """Tuples (triplet knobs) as space-separated text, so the CSV cell reads like the sysctl."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object and out[col].map(lambda v: isinstance(v, tuple)).any():
            out[col] = out[col].map(lambda v: " ".join(map(str, v)) if isinstance(v, tuple) else v)
    return out


def output_path(args: argparse.Namespace, study: str) -> Path:
    """``--out`` after :func:`~tunelab.cli.paths.check_output_file`, else ``<data-dir>/<study>-<phase>.<format>``
    confined to the data directory (the study name comes from the store, which may be hostile)."""
    if args.out:
        return check_output_file(args.out, "--out")
    return confined(args.data_dir, f"{check_study_name(study, 'the study name in the store')}-{args.phase}.{args.format}")


def run(args: argparse.Namespace) -> int:
    path = store_path_for(args.study, args.data_dir)
    with Store(path, readonly=True) as store:
        tidy = store.tidy(phase=args.phase, include_flagged=args.include_flagged)
        study = store.study.name if store.study else path.stem
    if args.out == "-":
        if args.format != "csv":
            raise StoreError("--out - (stdout) works only with --format csv; give a file name for parquet")
        to_csv_ready(tidy).to_csv(sys.stdout, index=False)
        return 0
    out = output_path(args, study)
    flag = "--out" if args.out else "the export file"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if args.format == "csv":
            to_csv_ready(tidy).to_csv(out, index=False)
        else:
            tidy.to_parquet(out, index=False)
    except OSError as exc:
        raise write_failed(exc, out, flag) from None
    print(f"wrote {len(tidy)} {args.phase} trials of {study} to {out}")
    return 0
