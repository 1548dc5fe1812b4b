"""``tunelab gallery``: the seed studies' claims against what the lab measured, as one HTML gallery.

Builds ``reports/seeds/index.html`` (one row per source paper: its claim and numbers, the effect tunelab
measured with its 95 % CI, the verdict, agreement and why, and the data's provenance) and one page per study
from the recorded stores in ``--stores`` (default ``data/examples/seeds``). See docs/gallery.md.

Examples::

    tunelab gallery --quick                      # the gallery from the recorded stores only (seconds)
    tunelab gallery                              # ... plus each store's full report (notebooks; minutes)
    tunelab gallery --record --only 001 --stores data/seeds-dev --scale 0.25   # record on the lab, then build

Exit status: 0 when the gallery was written, 2 on errors (unknown study, missing stores, a failed step).
"""
from __future__ import annotations

import argparse
from typing import Any

from tunelab.cli.paths import check_output_dir
from tunelab.seeds.arguments import add_arguments


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("gallery", help="the seed papers' claims against the lab: reports/seeds/index.html",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check --out, record if asked, build the gallery, print the index path last."""
    from tunelab.seeds.gallery import gallery_command   # the studies, pandas, matplotlib: only when building

    check_output_dir(args.out, "--out")
    index = gallery_command(args)
    print(f"gallery written: {index}")
    return 0
