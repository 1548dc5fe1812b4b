"""``tunelab report STUDY``: execute the analysis notebooks and publish a self-contained HTML report.

STUDY is a study name (``<data-dir>/STUDY.sqlite``) or a store path. The notebooks in ``notebooks/`` run with
papermill (01 screen and 02 post-hoc always; 03 refine only when the store holds refine trials, 04 validate only
when it holds confirm or validate trials) and are rendered with nbconvert into ``reports/<study>/`` (code hidden
unless ``--show-code``) next to ``index.html``: results in plain words, the verdict table, key figures, links to
the notebooks and a methods section (design, runs, load, tests chosen and why, correction, software and kernel
versions). The path of ``index.html`` is printed last.

Examples::

    tunelab report data/abort-on-overflow.sqlite --metric latency_mean_ms --out /tmp/aoo
    tunelab report default --notebooks 01 --notebooks 02 -p some_parameter=value

Exit status: 0 when the report was written, 2 on errors (a failed notebook: the message names the cell).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import tunelab
from tunelab.cli.parsing import parse_parameters
from tunelab.cli.paths import check_output_dir


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("report", help="execute the notebooks and write reports/<study>/index.html",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("study", metavar="STUDY", help="a study name in --data-dir, or a store path (.sqlite)")
    add("--data-dir", type=Path, default=Path("data"), help="where stores live (default: data)")
    add("--out", type=Path, metavar="DIR", help="output directory (default: reports/<study>/)")
    add("--metric", metavar="NAME[:max|:min][:SESOI]", help="metric in focus (default: the design's first metric)")
    add("--alpha", type=float, help="significance level (default: the design's)")
    add("--correction", choices=("holm", "bonferroni", "fdr_bh", "none"), help="multiplicity correction")
    add("--sesoi", type=float, metavar="PCT", help="smallest effect of interest (%%) of the metric in focus")
    add("--n-boot", type=int, default=1000, help="bootstrap resamples for effect CIs (default 1000)")
    add("--include-flagged", action="store_true", help="also analyse trials the runner flagged")
    add("--notebooks", action="append", metavar="NAME", help="run only this notebook (repeatable): 01, 02_posthoc...")
    add("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE", help="a further notebook parameter "
        "(repeatable; VALUE is read as YAML, e.g. objectives=[qps:max]); unknown names are rejected")
    add("--show-code", action="store_true", help="show the code cells in the HTML")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check --out, build the report, print its path. ``-p`` values are YAML:

    >>> parse_parameters(["objectives=[qps:max]", "n=3"])
    {'objectives': ['qps:max'], 'n': 3}
    """
    if args.out is not None:
        check_output_dir(args.out, "--out")
    result = tunelab.report(args.study, args.out, metric=args.metric, alpha=args.alpha, correction=args.correction,
                            sesoi_pct=args.sesoi, n_boot=args.n_boot, include_flagged=args.include_flagged,
                            notebooks=args.notebooks, parameters=parse_parameters(args.parameter),
                            data_dir=args.data_dir, show_code=args.show_code)
    print(f"report written: {result.index}")
    return 0
