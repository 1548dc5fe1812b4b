"""``tunelab screen STUDY|FILE.csv``: which knobs matter? Prints the verdict table, writes full JSON.

SOURCE is a CSV file (e.g. from ``tunelab export``) or a study name / store path (``data/STUDY.sqlite``). For a
study the design stored with it gives the metrics (direction, SESOI), the knobs, their baselines, alpha and the
correction; flags override them.

For a CSV:
  * ``--metric NAME[:max|:min][:SESOI]`` (repeatable, required): direction defaults to max, SESOI (smallest
    effect of interest, % of the baseline mean) to 5; ``abs=N`` gives it in the metric's units instead
    (counts whose baseline is 0, e.g. lost:min:abs=10), ``:log``/``:linear`` the scale of the model.
  * knobs are the ``--knob`` columns, or by default every column that is neither a metric (named with
    --metric, or one tunelab's loads report) nor a bookkeeping column (study, trial_id, run_id, config_id,
    block, replicate, run_order, is_baseline, varied_knob, status, reason, started_at, duration_s, foreign_cpu_s).
  * a knob's baseline is ``--baseline COL=VALUE``, else its level in the rows with ``is_baseline == True`` when
    that column exists and agrees on one level, else its first level in sorted order (numbers numerically, text
    alphabetically).
  * rows whose ``status`` is not ok/flagged are ignored.

A study run on several testbeds (a ``testbed`` column with two or more values) is screened with the testbed
as a blocking factor; a "testbeds" block after the verdicts gives each metric's between-testbed spread.

Example: ``tunelab screen runs.csv --metric qps:max:5 --metric latency_mean_ms:min:10 --json screen.json``
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import tunelab
from tunelab.cli import render


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("screen", help="which knobs matter: tests, effects and verdicts per knob × metric",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("source", metavar="STUDY|FILE.csv", help="a CSV of trials, or a study name / store path")
    add("--metric", action="append", default=[], metavar="NAME[:max|:min][:SESOI]",
        help="a metric to analyse (repeatable); e.g. qps:max:5, latency_mean_ms:min:10, lost:min:abs=10")
    add("--knob", action="append", default=[], metavar="COL", help="a knob column (repeatable)")
    add("--baseline", action="append", default=[], metavar="COL=VALUE", help="baseline level of a knob (repeatable)")
    add("--alpha", type=float, default=None, help="significance level (default 0.05 or the design's)")
    add("--correction", choices=("holm", "bonferroni", "fdr_bh", "none"), default=None,
        help="multiplicity correction over knob × metric tests (default holm or the design's)")
    add("--n-boot", type=int, default=1000, help="bootstrap resamples for effect CIs (default 1000)")
    add("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    add("--include-flagged", action="store_true", help="study source: also use flagged trials")
    add("--data-dir", type=Path, default=Path("data"), help="where stores live (default: data)")
    add("--json", metavar="OUT", type=Path, help="write the full result as JSON to OUT")
    add("--levels", action="store_true",
        help="list every significant level of a row (its effect, interval and adjusted p), not only the decisive one")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.json is not None:
        render.check_output_file(args.json, "--json")
    result = tunelab.screen(args.source, metrics=args.metric, knobs=args.knob, baselines=args.baseline,
                            alpha=args.alpha, correction=args.correction, n_boot=args.n_boot, seed=args.seed,
                            include_flagged=args.include_flagged, data_dir=args.data_dir)
    print(render.screen_text(result, levels=args.levels))
    if len(result.testbeds):
        print(spread_text(result.testbeds))
    if args.json is not None:
        render.write_text(args.json, render.dumps(result.to_json()) + "\n", "--json")
        print(f"wrote {args.json}")
    return 0


def spread_text(spread: Any) -> str:
    """The "testbeds" block: one line per metric with the testbed block's F test and each testbed's offset.

    >>> import pandas as pd
    >>> spread = pd.DataFrame({"metric": ["qps", "qps"], "testbed": ["lab1", "lab2"], "statistic": [31.2, 31.2],
    ...                        "p": [2.1e-5, 2.1e-5], "offset": [-50.0, 50.0], "offset_pct": [-4.95, 4.95],
    ...                        "spread_pct": [4.95, 4.95]})
    >>> print(spread_text(spread))
    testbeds:
      qps: testbed block: 2 testbeds, F=31.2, p=2.1e-05, between-testbed spread ±5.0 % of the mean (lab1 -5.0 %, \
lab2 +5.0 %)
    """
    from tunelab.stats.blocking import spread_phrase

    lines = ["testbeds:"]
    for metric, rows in spread.groupby("metric", sort=False):
        first = rows.iloc[0]
        lines.append(f"  {metric}: testbed block: {len(rows)} testbeds, F={_number(first['statistic'])}, "
                     f"p={_number(first['p'])}, between-testbed spread {spread_phrase(rows)}")
    return render.printable("\n".join(lines))


def _number(value: Any) -> str:
    number = float(value)
    return f"{number:.3g}" if number == number else "n/a"
