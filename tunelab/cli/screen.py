"""``tunelab screen STUDY|FILE.csv``: which knobs matter? Prints the verdict table, writes full JSON.

SOURCE is a CSV file (e.g. from ``tunelab export``) or a study name / store path
(``data/STUDY.sqlite``). For a study the design stored with it gives the metrics (direction,
SESOI), the knobs, their baselines, alpha and the correction; flags override them.

For a CSV:
  * ``--metric NAME[:max|:min][:SESOI]`` (repeatable, required): direction defaults to max,
    SESOI (smallest effect of interest, % of the baseline mean) to 5.
  * knobs are the ``--knob`` columns, or by default every column that is neither a metric nor a
    bookkeeping column (study, trial_id, run_id, config_id, block, replicate, run_order,
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
from typing import Any, Sequence

import pandas as pd

from tunelab.errors import DataError, TunelabError

BOOKKEEPING = ("study", "trial_id", "run_id", "config_id", "block", "replicate", "run_order", "is_baseline",
               "varied_knob", "status", "reason", "started_at", "duration_s", "foreign_cpu_s")
DEFAULT_SESOI_PCT = 5.0
_DIRECTIONS = {"max": "maximize", "maximize": "maximize", "min": "minimize", "minimize": "minimize"}
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


def parse_metric(text: str) -> dict[str, Any]:
    """``'qps:max:5'`` -> ``{'name': 'qps', 'direction': 'maximize', 'sesoi_pct': 5.0}``.

    Direction and SESOI are optional and may come in either order; defaults maximize and 5 %.
    """
    name, *options = text.split(":")
    if not name:
        raise DataError(f"--metric {text!r} has no name; write NAME[:max|:min][:SESOI], e.g. qps:max:5")
    spec: dict[str, Any] = {"name": name, "direction": "maximize", "sesoi_pct": DEFAULT_SESOI_PCT}
    for option in options:
        if option.lower() in _DIRECTIONS:
            spec["direction"] = _DIRECTIONS[option.lower()]
            continue
        try:
            sesoi = float(option)
        except ValueError:
            raise DataError(f"--metric {text!r}: {option!r} is neither max/min nor a SESOI percentage; "
                            "write NAME[:max|:min][:SESOI], e.g. latency_mean_ms:min:10") from None
        if not (math.isfinite(sesoi) and sesoi > 0):
            raise DataError(f"--metric {text!r}: SESOI must be a positive percentage, got {option!r}")
        spec["sesoi_pct"] = sesoi
    return spec


def match_level(data: pd.DataFrame, column: str, text: str) -> Any:
    """The level of ``column`` whose text is ``text`` (``'4096'`` -> 4096, ``'True'`` -> True)."""
    from tunelab.stats._validate import sorted_levels

    levels = sorted_levels(data[column].dropna())
    for level in levels:
        shown = " ".join(map(str, level)) if isinstance(level, tuple) else str(level)
        if shown == text or str(level) == text:
            return level
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None:
        for level in levels:
            if isinstance(level, (int, float)) and not isinstance(level, bool) and float(level) == number:
                return level
    raise DataError(f"--baseline {column}={text}: {text!r} is not a level of {column!r}; its levels are {levels}")


def default_baseline(data: pd.DataFrame, knob: str) -> Any:
    """The level of ``knob`` in the ``is_baseline`` rows if they agree, else the first sorted level."""
    from tunelab.stats._validate import sorted_levels

    if "is_baseline" in data.columns:
        flags = data["is_baseline"].map(lambda v: str(v).strip().lower() in ("true", "1"))
        levels = sorted_levels(data.loc[flags, knob].dropna())
        if len(levels) == 1:
            return levels[0]
    return sorted_levels(data[knob].dropna())[0]


def _parse_baselines(data: pd.DataFrame, items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        column, sep, text = item.partition("=")
        if not sep or not column:
            raise DataError(f"--baseline {item!r} must be COL=VALUE, e.g. --baseline net.core.somaxconn=4096")
        if column not in data.columns:
            raise DataError(f"--baseline {item!r}: unknown column {column!r}; the data has: "
                            f"{', '.join(map(str, data.columns))}")
        out[column] = match_level(data, column, text)
    return out


def _from_csv(args: argparse.Namespace) -> tuple[pd.DataFrame, list[dict[str, Any]], list[str], dict[str, Any],
                                                 float, str]:
    path = Path(args.source)
    try:
        data = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"cannot read CSV {str(path)!r}: {exc}") from exc
    if not args.metric:
        numeric = [c for c in data.columns if c not in BOOKKEEPING and pd.api.types.is_numeric_dtype(data[c])]
        raise DataError(f"name the metric(s) to analyse with --metric NAME[:max|:min][:SESOI]; numeric columns in "
                        f"{path.name}: {', '.join(numeric) or '(none)'}")
    metrics = [parse_metric(m) for m in args.metric]
    names = {m["name"] for m in metrics}
    knobs = list(args.knob) or [c for c in data.columns if c not in names and c not in BOOKKEEPING]
    if not knobs:
        raise DataError(f"{path.name} has no knob columns besides the metrics and bookkeeping columns; "
                        "name them with --knob COL")
    baseline = _parse_baselines(data, args.baseline)
    for knob in knobs:
        if knob not in data.columns:
            raise DataError(f"--knob {knob!r} is not a column of {path.name}; columns: {', '.join(data.columns)}")
        baseline.setdefault(knob, default_baseline(data, knob))
    alpha = 0.05 if args.alpha is None else args.alpha
    return data, metrics, knobs, baseline, alpha, args.correction or "holm"


def _from_study(args: argparse.Namespace) -> tuple[pd.DataFrame, list[dict[str, Any]], list[str], dict[str, Any],
                                                   float, str]:
    try:
        from tunelab.designs import load_design_text
        from tunelab.store import Store, default_store_path
    except ImportError as exc:  # pragma: no cover - only while the store/designs modules are absent
        raise TunelabError(f"store support not available ({exc}); export the study to CSV and screen the CSV") from exc
    candidate = Path(args.source)
    path = candidate if candidate.suffix == ".sqlite" or candidate.exists() else default_store_path(args.source,
                                                                                                    args.data_dir)
    with Store(path, readonly=True) as store:
        data = store.tidy(phase="screen", include_flagged=args.include_flagged, include_failed=True)
        design_text = store.study.design_text if store.study else ""
    if not design_text:
        raise DataError(f"the store {str(path)!r} holds no design; screen an exported CSV with --metric instead")
    design = load_design_text(design_text, source=str(path))
    if args.metric:
        metrics = [parse_metric(m) for m in args.metric]
    else:
        metrics = [{"name": m.name, "direction": m.direction, "sesoi_pct": m.sesoi_pct} for m in design.metrics]
    knobs = list(args.knob) or design.knob_ids
    baseline = {k: v for k, v in design.baseline.items() if k in knobs}
    baseline.update(_parse_baselines(data, args.baseline))
    if data.empty:
        raise DataError(f"the store {str(path)!r} has no usable screen trials yet; run `tunelab run` first")
    alpha = design.analysis.alpha if args.alpha is None else args.alpha
    return data, metrics, knobs, baseline, alpha, args.correction or design.analysis.correction


def screen_inputs(source: str | Path, *, metrics: Sequence[str] = (), knobs: Sequence[str] = (),
                  baselines: Sequence[str] = (), alpha: float | None = None, correction: str | None = None,
                  include_flagged: bool = False, data_dir: str | Path = "data",
                  ) -> tuple[pd.DataFrame, list[dict[str, Any]], list[str], dict[str, Any], float, str]:
    """What :func:`tunelab.stats.screen` needs for a CSV or a study, as the CLI flags give it.

    Returns ``(data, metrics, knobs, baseline, alpha, correction)``; raises :class:`DataError`
    naming the problem (no such CSV, no metric named for a CSV, unknown column, empty store).
    """
    args = argparse.Namespace(source=str(source), metric=list(metrics), knob=list(knobs), baseline=list(baselines),
                              alpha=alpha, correction=correction, include_flagged=include_flagged,
                              data_dir=data_dir)
    is_csv = args.source.lower().endswith(".csv")
    if is_csv and not Path(args.source).exists():
        raise DataError(f"no such CSV file: {args.source!r}")
    return _from_csv(args) if is_csv else _from_study(args)


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


def run(args: argparse.Namespace) -> int:
    from tunelab.stats import screen

    data, metrics, knobs, baseline, alpha, correction = screen_inputs(
        args.source, metrics=args.metric, knobs=args.knob, baselines=args.baseline, alpha=args.alpha,
        correction=args.correction, include_flagged=args.include_flagged, data_dir=args.data_dir)
    result = screen(data, metrics, knobs, baseline, alpha=alpha, correction=correction, n_boot=args.n_boot,
                    seed=args.seed)
    settings = result.settings
    print(f"screen: {settings['n_runs']} runs, {result.design} design, alpha={alpha}, correction={correction}, "
          f"baselines: {', '.join(f'{k}={v}' for k, v in baseline.items())}")
    print(verdict_table(result.verdicts))
    print()
    for row in result.verdicts.itertuples(index=False):
        print(f"{row.knob} × {row.metric}: {row.reason}")
    for note in settings["notes"]:
        print(f"note: {note}")
    if args.json is not None:
        text = json.dumps(result.to_json(), indent=2, allow_nan=False, ensure_ascii=False)
        try:
            args.json.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise DataError(f"cannot write --json {str(args.json)!r}: {exc}") from exc
        print(f"wrote {args.json}")
    return 0
