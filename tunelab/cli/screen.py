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

A study that records kernel counters (``counter.*`` columns) gets a "mechanisms" block after the verdicts: for
each knob level that matters, the counters that changed with it under Benjamini-Hochberg FDR control across all
counters and levels (the top 3 per level; ``--mechanisms`` lists every one). Counters never drive a verdict.

Example: ``tunelab screen runs.csv --metric qps:max:5 --metric latency_mean_ms:min:10 --json screen.json``
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import tunelab
from tunelab.cli import render
from tunelab.cli.parsing import parse_metrics, parse_screen_baselines


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
    add("--mechanisms", action="store_true",
        help="list every counter that moved with a knob level that matters, not only the top 3 per level")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.json is not None:
        render.check_output_file(args.json, "--json")
    result = tunelab.screen(args.source, metrics=parse_metrics(args.metric), knobs=args.knob,
                            baselines=parse_screen_baselines(args.baseline),
                            alpha=args.alpha, correction=args.correction, n_boot=args.n_boot, seed=args.seed,
                            include_flagged=args.include_flagged, data_dir=args.data_dir)
    print(render.screen_text(result, levels=args.levels))
    if "mechanisms" in result.settings:
        print("\n" + mechanisms_text(result.mechanisms, result.settings["mechanisms"], top=None if args.mechanisms else 3))
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


def mechanisms_text(table: Any, summary: dict[str, Any], top: int | None = 3) -> str:
    """The "mechanisms" block: per knob level that matters, the counters that moved (``top`` per level, by q).

    >>> import pandas as pd
    >>> table = pd.DataFrame({"knob": ["s", "s"], "level": [16, 16], "baseline": [4096, 4096],
    ...                       "counter": ["counter.TcpExt.ListenOverflows", "counter.Udp.InErrors"],
    ...                       "difference": [12000.0, 1.0], "ci_low": [10000.0, -1.0], "ci_high": [14000.0, 3.0],
    ...                       "hedges_g": [8.2, 0.3], "q": [1e-6, 0.6], "significant": [True, False]})
    >>> print(mechanisms_text(table, {"counters": 40, "moving": 2, "tests": 2, "fdr": 0.05}))
    mechanisms (kernel counters that moved with each level that matters; 2 of 40 counters move, 2 tests, Benjamini-Hochberg q <= 0.05):
      s=16 (vs 4096):
        TcpExt.ListenOverflows  +12,000/s [+10,000, +14,000]  g +8.2  q 1e-06
    """
    from tunelab.formatting import fmt_abs, fmt_p_exact, level_label
    from tunelab.stats.mechanisms import change_text, counter_name, top_mechanisms

    lines = [f"mechanisms (kernel counters that moved with each level that matters; {summary['moving']} of "
             f"{summary['counters']} counters move, {summary['tests']} tests, Benjamini-Hochberg q <= "
             f"{summary['fdr']:g}):"]
    shown = top_mechanisms(table, top)
    for (knob, level), rows in table.groupby(["knob", table["level"].map(repr)], sort=False):
        head = f"  {knob}={level_label(rows['level'].iloc[0])} (vs {level_label(rows['baseline'].iloc[0])}):"
        picked = shown[(shown["knob"] == knob) & (shown["level"].map(repr) == level)]
        if picked.empty:
            lines.append(f"{head} no counter moved beyond FDR noise")
            continue
        lines.append(head)
        lines += [f"    {counter_name(r.counter)}  {change_text(r.difference, r.ci_low, r.ci_high)}  "
                  f"g {fmt_abs(r.hedges_g)}  q {fmt_p_exact(r.q)}" for r in picked.itertuples()]
        more = int(rows["significant"].astype(bool).sum()) - len(picked)
        if more > 0:
            lines.append(f"    ({more} more; --mechanisms lists them)")
    if table.empty:
        lines.append("  no knob level matters, or no counter moved: nothing to explain")
    return render.printable("\n".join(lines))


def _number(value: Any) -> str:
    number = float(value)
    return f"{number:.3g}" if number == number else "n/a"
