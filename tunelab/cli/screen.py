"""``tunelab screen STUDY|FILE.csv``: which knobs matter? Prints the verdict table, writes full JSON.

SOURCE is a CSV file (e.g. from ``tunelab export``) or a study name / store path
(``data/STUDY.sqlite``). For a study the design stored with it gives the metrics (direction,
SESOI), the knobs, their baselines, alpha and the correction; flags override them.

For a CSV:
  * ``--metric NAME[:max|:min][:SESOI]`` (repeatable, required): direction defaults to max,
    SESOI (smallest effect of interest, % of the baseline mean) to 5.
  * knobs are the ``--knob`` columns, or by default every column that is neither a metric (named
    with --metric, or one tunelab's loads report) nor a bookkeeping column (study, trial_id, run_id, config_id, block, replicate, run_order,
    is_baseline, varied_knob, status, reason, started_at, duration_s, foreign_cpu_s).
  * a knob's baseline is ``--baseline COL=VALUE``, else its level in the rows with
    ``is_baseline == True`` when that column exists and agrees on one level, else its first level
    in sorted order (numbers numerically, text alphabetically).
  * rows whose ``status`` is not ok/flagged are ignored.

Example::

    tunelab screen runs.csv --metric qps:max:5 --metric latency_mean_ms:min:10 --json screen.json
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from tunelab.cli.paths import check_output_file, write_failed
from tunelab.tidy import screen_inputs

TABLE_COLUMNS = ["knob", "metric", "verdict", "test", "p_adj", "best_level", "effect_pct", "effect_ci_low",
                 "effect_ci_high", "direction", "equivalent"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("screen", help="which knobs matter: tests, effects and verdicts per knob × metric",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", metavar="STUDY|FILE.csv", help="a CSV of trials, or a study name / store path")
    parser.add_argument("--metric", action="append", default=[], metavar="NAME[:max|:min][:SESOI]",
                        help="a metric to analyse (repeatable); e.g. qps:max:5, latency_mean_ms:min:10")
    parser.add_argument("--knob", action="append", default=[], metavar="COL", help="a knob column (repeatable)")
    parser.add_argument("--baseline", action="append", default=[], metavar="COL=VALUE",
                        help="baseline level of a knob (repeatable)")
    parser.add_argument("--alpha", type=float, default=None, help="significance level (default 0.05 or the design's)")
    parser.add_argument("--correction", choices=("holm", "bonferroni", "fdr_bh", "none"), default=None,
                        help="multiplicity correction over knob × metric tests (default holm or the design's)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for effect CIs (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--include-flagged", action="store_true", help="study source: also use flagged trials")
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="where stores live (default: data)")
    parser.add_argument("--json", metavar="OUT", type=Path, help="write the full result as JSON to OUT")
    parser.set_defaults(func=run)


def verdict_table(verdicts: pd.DataFrame) -> str:
    """The verdict table as readable text (rounded numbers, no reasons)."""
    table = verdicts[TABLE_COLUMNS].copy()
    table["best_level"] = [("-" if v is None or (isinstance(v, float) and math.isnan(v)) else
                            " ".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v))
                           for v in verdicts["best_level"].tolist()]
    table["p_adj"] = table["p_adj"].map(lambda p: f"{p:.3g}" if pd.notna(p) else "-")
    for column in ("effect_pct", "effect_ci_low", "effect_ci_high"):
        table[column] = table[column].map(lambda v: f"{v:+.1f}%" if pd.notna(v) else "-")
    table = table.rename(columns={"effect_ci_low": "ci_low", "effect_ci_high": "ci_high"})
    return table.to_string(index=False)


def printable(text: Any) -> str:
    """``text`` with control characters (terminal escapes from a hostile CSV or store) shown as ``\\xNN``.

    >>> printable("ok\\x1b[2J")
    'ok\\\\x1b[2J'
    """
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in str(text))


def run(args: argparse.Namespace) -> int:
    from tunelab.stats import screen

    if args.json is not None:
        check_output_file(args.json, "--json")
    data, metrics, knobs, baseline, alpha, correction = screen_inputs(
        args.source, metrics=args.metric, knobs=args.knob, baselines=args.baseline, alpha=args.alpha,
        correction=args.correction, include_flagged=args.include_flagged, data_dir=args.data_dir)
    result = screen(data, metrics, knobs, baseline, alpha=alpha, correction=correction, n_boot=args.n_boot,
                    seed=args.seed)
    settings = result.settings
    print(printable(f"screen: {settings['n_runs']} runs, {result.design} design, alpha={alpha}, "
                    f"correction={correction}, baselines: {', '.join(f'{k}={v}' for k, v in baseline.items())}"))
    print(printable(verdict_table(result.verdicts)))
    print()
    for row in result.verdicts.itertuples(index=False):
        print(printable(f"{row.knob} × {row.metric}: {row.reason}"))
    for note in settings["notes"]:
        print(printable(f"note: {note}"))
    if args.json is not None:
        text = json.dumps(result.to_json(), indent=2, allow_nan=False, ensure_ascii=False)
        try:
            args.json.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise write_failed(exc, args.json, "--json") from None
        print(f"wrote {args.json}")
    return 0
