"""Mechanisms: which kernel counters change with each knob level that matters (:func:`mechanism_table`).

A study that records kernel counters has one numeric column per counter in its tidy frame, named
``counter.<Group>.<Name>`` (server side, e.g. ``counter.TcpExt.ListenOverflows``) or
``counter.client.<Group>.<Name>`` (client side), in events per second of the measured window. The
screen's verdicts say which knob levels matter; this module says which counters moved with them:

1. the counters that never move in the study (one value, usually 0, in every usable run) are dropped;
2. for each knob level that matters (every significant level, ``levels``, of a ``matters`` verdict
   row, once per knob and level however many metrics it matters for), each remaining counter is
   compared with the baseline level: one-at-a-time designs compare the level's runs with the runs
   where every knob is at its baseline, other designs compare all runs at the level with all runs at
   the knob's baseline (marginal means);
3. each comparison is the two-sample t-test with the pooled variance (Student's,
   ``scipy.stats.ttest_ind(equal_var=True)``) with its 95 % interval of the difference of the
   per-second means, and Hedges' g (the same pooled SD, small-sample correction, interval as
   ``pingouin.compute_esci``) as the standardised effect. Not Welch's test: the null hypothesis of a
   counter that is no mechanism is that its distribution does not change with the level, under which
   the pooled test is exact for normal counters, while Welch's Satterthwaite degrees of freedom are
   far too liberal in the tail that Benjamini–Hochberg uses when the groups are small and unequal,
   as in the default study (3 runs of a level against 18 baseline runs: 33 times too many p < 1e-4,
   and a false mechanism rate of 0.84 instead of 0.05 in tests/stats/test_simulation_mechanisms.py);
   a counter whose spread alone changes may therefore be reported as moved;
4. the p-values of **all** counters and levels are adjusted together by Benjamini–Hochberg
   (``multipletests(method='fdr_bh')``): ``q``; a counter is a mechanism of a level when ``q <= fdr``.

Counters never drive a verdict: they are read after the verdicts, which they do not change.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.formatting import fmt_abs, is_number
from tunelab.model import COUNTER_PREFIX, USABLE_STATUSES, counter_columns, AnalysisKind, Verdict
from tunelab.stats._validate import level_matches
from tunelab.stats.multiplicity import adjust

#: the false discovery rate the mechanism table controls
FDR = 0.05
#: the columns of :attr:`tunelab.stats.ScreenResult.mechanisms` (docs/screen-json-schema.md)
MECHANISM_COLUMNS = ["knob", "level", "baseline", "counter", "n", "baseline_n", "mean", "baseline_mean",
                     "difference", "ci_low", "ci_high", "hedges_g", "g_ci_low", "g_ci_high", "t", "df", "p", "q",
                     "significant"]


def counter_name(column: str) -> str:
    """A counter column without its prefix: ``'TcpExt.ListenOverflows'``, ``'client.Udp.InErrors'``.

    >>> counter_name("counter.TcpExt.ListenOverflows")
    'TcpExt.ListenOverflows'
    """
    return column[len(COUNTER_PREFIX):] if column.startswith(COUNTER_PREFIX) else column


def counter_values(data: pd.DataFrame, counters: Sequence[str]) -> np.ndarray:
    """The ``counters`` of ``data`` as one float matrix (runs × counters); text and infinities become NaN."""
    frame = data[list(counters)]
    numeric = frame.select_dtypes(include="number", exclude="bool").columns
    if len(numeric) < len(counters):
        frame = frame.apply(pd.to_numeric, errors="coerce")
    values = frame.to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isfinite(values), values, np.nan)


def moving_counters(data: pd.DataFrame, counters: Sequence[str]) -> list[str]:
    """The ``counters`` that take at least two distinct finite values in ``data`` (the others never move).

    >>> frame = pd.DataFrame({"counter.a": [0.0, 0.0, 0.0], "counter.b": [0.0, 2.0, 1.0]})
    >>> moving_counters(frame, ["counter.a", "counter.b"])
    ['counter.b']
    """
    values = counter_values(data, counters)
    with np.errstate(invalid="ignore"):
        spread = np.nanmax(values, axis=0, initial=-np.inf, where=~np.isnan(values)) \
            - np.nanmin(values, axis=0, initial=np.inf, where=~np.isnan(values))
    return [c for c, s in zip(counters, spread) if np.isfinite(s) and s > 0]


def levels_that_matter(verdicts: pd.DataFrame, knobs: Sequence[str]) -> list[tuple[str, Any]]:
    """``(knob, level)`` of every significant level of every ``matters`` verdict row of a knob (not an
    interaction), once each (a level that matters for several metrics counts once), in verdict order.

    A row's significant levels are its ``levels`` (the decisive ``level`` first); a row without them (a
    range design's, or a table without the column) gives its ``level``.

    >>> v = pd.DataFrame({"knob": ["s", "s", "t", "s:t"], "verdict": ["matters", "matters", "inconclusive", "matters"],
    ...                   "level": pd.Series([16, 16, 2, None], dtype=object),
    ...                   "levels": [[{"level": 16}, {"level": 128}], [{"level": 16}], [], []]})
    >>> levels_that_matter(v, ["s", "t"])
    [('s', 16), ('s', 128)]
    """
    listed = verdicts["levels"] if "levels" in verdicts.columns else [None] * len(verdicts)
    out: list[tuple[str, Any]] = []
    for knob, verdict, level, entries in zip(verdicts["knob"], verdicts["verdict"], verdicts["level"], listed):
        if verdict != Verdict.MATTERS.value or knob not in knobs:
            continue
        for value in [entry["level"] for entry in entries] if isinstance(entries, list) and entries else [level]:
            if value is not None and not (isinstance(value, float) and math.isnan(value)) and (knob, value) not in out:
                out.append((knob, value))
    return out


def comparison_masks(data: pd.DataFrame, knob: str, level: Any, knobs: Sequence[str], baseline: dict[str, Any],
                     kind: AnalysisKind) -> tuple[np.ndarray, np.ndarray]:
    """Which runs are at ``knob = level`` and which are the baseline runs they are compared with:
    one-at-a-time designs hold the other knobs at their baselines; other designs take every run
    (marginal comparison).

    >>> runs = pd.DataFrame({"a": [0, 1, 0, 0], "b": [0, 0, 1, 0]})
    >>> [m.tolist() for m in comparison_masks(runs, "a", 1, ["a", "b"], {"a": 0, "b": 0}, AnalysisKind.OAT)]
    [[False, True, False, False], [True, False, False, True]]
    """
    others = np.ones(len(data), dtype=bool)
    if kind == AnalysisKind.OAT:
        for other in knobs:
            if other != knob:
                others &= level_matches(data[other], baseline[other])
    return others & level_matches(data[knob], level), others & level_matches(data[knob], baseline[knob])


def pooled_comparisons(x: np.ndarray, y: np.ndarray, counters: Sequence[str]) -> dict[str, np.ndarray]:
    """Each counter (a column of ``x``, the runs at a level, and of ``y``, the baseline runs) against the
    baseline: the pooled-variance t-test and its 95 % interval of the difference of means
    (``scipy.stats.ttest_ind(equal_var=True)``, one call for all counters) and Hedges' g with its
    interval (the formulas of ``pingouin.compute_effsize``/``compute_esci``; NaN where the pooled SD is 0).

    Returns the columns ``counter, n, baseline_n, mean, baseline_mean, difference, ci_low, ci_high,
    hedges_g, g_ci_low, g_ci_high, t, df, p`` as arrays; a counter with fewer than two runs on either
    side has no entry.
    """
    nx, ny = np.isfinite(x).sum(axis=0), np.isfinite(y).sum(axis=0)
    keep = (nx >= 2) & (ny >= 2)
    if not keep.any():
        return {column: np.array([]) for column in MECHANISM_COLUMNS[3:-2]}
    x, y, nx, ny = x[:, keep], y[:, keep], nx[keep], ny[keep]
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        # identical values on both sides (a counter at 0 in both groups) are a valid row with p = NaN or 1
        warnings.simplefilter("ignore", RuntimeWarning)
        test = ss.ttest_ind(x, y, equal_var=True, axis=0, nan_policy="omit")
        ci = test.confidence_interval(0.95)
        mean_x, mean_y = np.nanmean(x, axis=0), np.nanmean(y, axis=0)
        pooled = np.sqrt(((nx - 1) * np.nanvar(x, axis=0, ddof=1) + (ny - 1) * np.nanvar(y, axis=0, ddof=1))
                         / (nx + ny - 2))
        g = np.where(pooled > 0, (mean_x - mean_y) / pooled, np.nan) * (1 - 3 / (4 * (nx + ny) - 9))
        g_se = np.sqrt((nx + ny) / (nx * ny) + g ** 2 / (2 * (nx + ny)))
    crit = ss.t.ppf(0.975, nx + ny - 2)
    return {"counter": np.asarray(counters, dtype=object)[keep], "n": nx, "baseline_n": ny, "mean": mean_x,
            "baseline_mean": mean_y, "difference": mean_x - mean_y, "ci_low": np.asarray(ci.low, float),
            "ci_high": np.asarray(ci.high, float), "hedges_g": g, "g_ci_low": g - crit * g_se,
            "g_ci_high": g + crit * g_se, "t": np.asarray(test.statistic, float), "df": np.asarray(test.df, float),
            "p": np.asarray(test.pvalue, float)}


def with_q_values(table: pd.DataFrame, fdr: float = FDR) -> pd.DataFrame:
    """``table`` with ``q`` (its ``p`` adjusted by Benjamini–Hochberg over every row) and
    ``significant`` (``q <= fdr``).

    The example is Benjamini & Hochberg's (1995, section 4): 15 p-values, at 0.05 the first four are
    discoveries.

    >>> p = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.324, 0.4262, 0.5719,
    ...      0.6528, 0.759, 1.0]
    >>> int(with_q_values(pd.DataFrame({"p": p}))["significant"].sum())
    4
    """
    q = adjust(table["p"].to_numpy(float), "fdr_bh") if len(table) else np.array([], dtype=float)
    return table.assign(q=q, significant=np.asarray(q <= fdr, dtype=bool))


def mechanism_table(data: pd.DataFrame, verdicts: pd.DataFrame, knobs: Sequence[str], baseline: dict[str, Any],
                    kind: AnalysisKind = AnalysisKind.OAT, fdr: float = FDR) -> pd.DataFrame:
    """The counters that change with each knob level that matters, under FDR control across all of them.

    Parameters
    ----------
    data : DataFrame
        Tidy runs with ``counter.*`` columns (per second); only ``ok``/``flagged`` rows are used when
        there is a ``status`` column.
    verdicts : DataFrame
        The screen's verdict table (``knob``, ``verdict``, ``level``).
    knobs, baseline
        The screen's knob columns and baseline levels.
    kind : AnalysisKind
        ``OAT`` compares a level with the runs where every knob is at its baseline; otherwise all runs
        at the level are compared with all runs at the knob's baseline.
    fdr : float
        The false discovery rate: ``significant`` is ``q <= fdr``.

    Returns
    -------
    DataFrame
        :data:`MECHANISM_COLUMNS`, one row per knob level that matters × counter that moves in the
        study (with at least two runs on each side): ``difference`` (level − baseline, per second) with
        its 95 % interval ``ci_low, ci_high``; ``hedges_g`` with ``g_ci_low, g_ci_high``; the pooled
        t-test's ``t, df, p``; ``q`` (Benjamini–Hochberg over every row); ``significant``. Rows by knob level in
        verdict order, then by ``p``. Empty when no counter moves or no level matters.
    """
    if "status" in data.columns:
        data = data[data["status"].isin(USABLE_STATUSES)]
    counters = moving_counters(data, counter_columns(data))
    values = counter_values(data, counters)
    pieces, keys = [], []
    for knob, level in levels_that_matter(verdicts, knobs) if counters else []:
        at_level, at_baseline = comparison_masks(data, knob, level, knobs, baseline, kind)
        columns = pooled_comparisons(values[at_level], values[at_baseline], counters)
        order = np.argsort(columns["p"], kind="stable")
        pieces.append({name: column[order] for name, column in columns.items()})
        keys += [(knob, level, baseline[knob])] * len(order)
    if not keys:
        return pd.DataFrame(columns=MECHANISM_COLUMNS)
    table = pd.DataFrame({name: np.concatenate([piece[name] for piece in pieces]) for name in pieces[0]})
    for position, name in enumerate(("knob", "level", "baseline")):
        table.insert(position, name, pd.Series([key[position] for key in keys], dtype=object))
    table["n"], table["baseline_n"] = table["n"].astype(int), table["baseline_n"].astype(int)
    return with_q_values(table, fdr)[MECHANISM_COLUMNS]


def mechanism_settings(data: pd.DataFrame, table: pd.DataFrame, fdr: float = FDR) -> dict[str, Any]:
    """What the screen's ``settings['mechanisms']`` records: counters recorded and moving, tests, the FDR.

    >>> frame = pd.DataFrame({"counter.a": [0.0, 0.0], "counter.b": [1.0, 2.0]})
    >>> mechanism_settings(frame, pd.DataFrame(columns=MECHANISM_COLUMNS))
    {'counters': 2, 'moving': 1, 'tests': 0, 'fdr': 0.05, 'method': 'fdr_bh'}
    """
    if "status" in data.columns:
        data = data[data["status"].isin(USABLE_STATUSES)]
    counters = counter_columns(data)
    return {"counters": len(counters), "moving": len(moving_counters(data, counters)), "tests": len(table),
            "fdr": fdr, "method": "fdr_bh"}


def change_text(difference: Any, low: Any, high: Any) -> str:
    """A counter's change per second with its interval: ``'+1.2e+04/s [+1e+04, +1.4e+04]'`` (numbers by
    :func:`tunelab.formatting.fmt_abs`; the interval is left out when it is not known).

    >>> change_text(12000.0, 10000.0, 14000.0), change_text(-3.25, float("nan"), 1.0)
    ('+1.2e+04/s [+1e+04, +1.4e+04]', '-3.25/s')
    """
    if not (is_number(low) and is_number(high)):
        return f"{fmt_abs(difference)}/s"
    return f"{fmt_abs(difference)}/s [{fmt_abs(low)}, {fmt_abs(high)}]"


def top_mechanisms(table: pd.DataFrame, top: int | None = 3) -> pd.DataFrame:
    """The significant rows of a mechanism table, per knob level the ``top`` smallest ``q`` (ties: the
    larger ``|hedges_g|``), knob levels in table order; ``top=None`` keeps every significant row.

    >>> t = pd.DataFrame({"knob": ["s"] * 3, "level": [16] * 3, "counter": ["a", "b", "c"], "q": [0.01, 0.001, 0.2],
    ...                   "hedges_g": [1.0, 2.0, 0.1], "significant": [True, True, False]})
    >>> top_mechanisms(t, top=1)["counter"].tolist()
    ['b']
    """
    rows = table[table["significant"].astype(bool)]
    if rows.empty:
        return rows
    order = {key: i for i, key in enumerate(dict.fromkeys(zip(rows["knob"], rows["level"].map(repr))))}
    ranked = rows.assign(_key=[order[(k, repr(lv))] for k, lv in zip(rows["knob"], rows["level"])],
                         _size=-rows["hedges_g"].astype(float).abs().fillna(0.0))
    ranked = ranked.sort_values(["_key", "q", "_size"], kind="stable")
    if top is not None:
        ranked = ranked.groupby("_key", sort=False).head(top)
    return ranked.drop(columns=["_key", "_size"])
