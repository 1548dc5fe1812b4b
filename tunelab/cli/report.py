"""``tunelab report STUDY``: execute the analysis notebooks and publish a self-contained HTML report.

STUDY is a study name (``<data-dir>/STUDY.sqlite``) or a store path. The notebooks in
``notebooks/`` run with papermill (01 screen and 02 post-hoc always; 03 refine only when the store
holds refine trials, 04 validate only when it holds confirm or validate trials) and are rendered
with nbconvert into ``reports/<study>/`` (code hidden unless ``--show-code``), next to
``index.html``: results in plain words, the verdict table, key figures, links to the notebooks and
an automatically written methods section (design, runs, load, tests chosen and why, correction,
software and kernel versions). The path of ``index.html`` is printed last.

Examples::

    tunelab report default
    tunelab report data/abort-on-overflow.sqlite --metric latency_mean_ms --out /tmp/aoo
    tunelab report default --notebooks 01 --notebooks 02 -p some_parameter=value

Exit status: 0 when the report was written, 2 on errors (no screen trials, an unknown parameter,
a notebook that failed: the message names the cell and the executed notebook to look at).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("report", help="execute the notebooks and write reports/<study>/index.html",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", metavar="STUDY", help="a study name in --data-dir, or a store path (.sqlite)")
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="where stores live (default: data)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="output directory (default: reports/<study>/)")
    parser.add_argument("--metric", metavar="NAME[:max|:min][:SESOI]",
                        help="metric in focus for figures and details (default: the design's first metric)")
    parser.add_argument("--alpha", type=float, help="significance level (default: the design's)")
    parser.add_argument("--correction", choices=("holm", "bonferroni", "fdr_bh", "none"),
                        help="multiplicity correction (default: the design's)")
    parser.add_argument("--sesoi", type=float, metavar="PCT",
                        help="smallest effect of interest (%%) of the metric in focus (default: the design's)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for effect CIs (default 1000)")
    parser.add_argument("--include-flagged", action="store_true", help="also analyse trials the runner flagged")
    parser.add_argument("--notebooks", action="append", metavar="NAME",
                        help="run only this notebook (repeatable): 01_screen|01, 02_posthoc|02, 03_refine|03, "
                             "04_validate|04")
    parser.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                        help="a further notebook parameter (repeatable; VALUE is read as YAML, e.g. "
                             "objectives=[qps:max]); unknown names are rejected")
    parser.add_argument("--show-code", action="store_true", help="show the code cells in the HTML")
    parser.set_defaults(func=run)


def parse_parameters(items: list[str]) -> dict[str, Any]:
    """``["objectives=[qps:max]", "x=3"]`` -> ``{"objectives": ["qps:max"], "x": 3}`` (values as YAML).

    >>> parse_parameters(["objectives=[qps:max]", "n=3", "name=abc"])
    {'objectives': ['qps:max'], 'n': 3, 'name': 'abc'}
    """
    import yaml

    from tunelab.report import ReportError

    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise ReportError(f"-p {item!r} must look like NAME=VALUE with NAME a Python identifier, "
                              "e.g. -p objectives=[qps:max]")
        try:
            out[name.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ReportError(f"-p {item!r}: the value is not valid YAML ({exc})") from None
    return out


def run(args: argparse.Namespace) -> int:
    from tunelab.cli.paths import check_output_dir
    from tunelab.report import build_report

    if args.out is not None:
        check_output_dir(args.out, "--out")
    index = build_report(args.study, args.out, metric=args.metric, alpha=args.alpha, correction=args.correction,
                         sesoi_pct=args.sesoi, n_boot=args.n_boot, include_flagged=args.include_flagged,
                         notebooks=args.notebooks, parameters=parse_parameters(args.parameter),
                         data_dir=args.data_dir, show_code=args.show_code)
    print(f"report written: {index}")
    return 0
