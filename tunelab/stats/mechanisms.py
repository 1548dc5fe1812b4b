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

Memory is bounded by design: the tests need, per counter, only the count, mean and sum of squared
deviations of each compared group (and its smallest and largest value), so the runs are first summarised
per *cell*, one combination of the knob columns and ``status`` (:class:`CounterCells`, counter by counter:
one column of floats at a time), and every group is a union of cells whose summaries merge exactly (Chan,
Golub & LeVeque's pairwise update). A CSV too large to hold with its counters is summarised chunk by chunk
while it is read (:meth:`CounterCells.merge`, :func:`tunelab.study_data.read_csv_summarising_counters`);
``benchmarks/bench_memory.py`` measures the peak.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
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
    """The ``counters`` of ``data`` as one float matrix (runs × counters); text and infinities become NaN.

    One copy of every counter: for a few runs (a seed's tables); the screen summarises counters one column at a
    time (:func:`summarise_counters`)."""
    frame = data[list(counters)]
    numeric = frame.select_dtypes(include="number", exclude="bool").columns
    if len(numeric) < len(counters):
        frame = frame.apply(pd.to_numeric, errors="coerce")
    values = frame.to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isfinite(values), values, np.nan)


def column_values(column: pd.Series) -> np.ndarray:
    """One counter column as floats; text and infinities become NaN (:func:`counter_values` of one column)."""
    if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        column = pd.to_numeric(column, errors="coerce")
    values = column.to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isfinite(values), values, np.nan)


def cell_codes(data: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """Each run's cell (one combination of the ``keys`` columns' values, missing values included) and the
    cells' key values, one row per cell in order of first appearance.

    >>> codes, cells = cell_codes(pd.DataFrame({"a": [1, 2, 1], "b": ["x", "x", "x"]}), ["a", "b"])
    >>> codes.tolist(), cells.to_dict("list")
    ([0, 1, 0], {'a': [1, 2], 'b': ['x', 'x']})
    """
    if not keys or data.empty:
        return np.zeros(len(data), dtype=np.intp), data[list(keys)].head(1).reset_index(drop=True)
    try:
        codes = data.groupby(list(keys), dropna=False, sort=False).ngroup().to_numpy(dtype=np.intp)
    except TypeError:      # an unhashable level (a list): every run is its own cell
        codes = np.arange(len(data), dtype=np.intp)
    _, first = np.unique(codes, return_index=True)
    return codes, data[list(keys)].iloc[first].reset_index(drop=True)


@dataclass(frozen=True)
class CounterCells:
    """Summaries of counters per cell: what the mechanism tests need of the runs, in cells × counters arrays.

    ``cells`` holds each cell's key values (the knob columns and ``status``); ``n`` the finite values of
    each counter in each cell, ``mean`` their mean (NaN when ``n`` is 0), ``m2`` the sum of their squared
    deviations from it, ``low``/``high`` the smallest and largest (±inf when ``n`` is 0).
    """

    cells: pd.DataFrame
    counters: list[str]
    n: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def select(self, mask: np.ndarray) -> CounterCells:
        """The cells where ``mask`` is true."""
        return CounterCells(self.cells[mask].reset_index(drop=True), self.counters, self.n[mask], self.mean[mask],
                            self.m2[mask], self.low[mask], self.high[mask])

    def usable(self) -> CounterCells:
        """The cells of usable runs (``ok``/``flagged``; all cells when there is no ``status`` key)."""
        if "status" not in self.cells.columns:
            return self
        return self.select(self.cells["status"].isin(USABLE_STATUSES).to_numpy(dtype=bool))

    def moving(self) -> list[str]:
        """The counters with at least two distinct finite values over these cells (:func:`moving_counters`)."""
        with np.errstate(invalid="ignore"):
            spread = self.high.max(axis=0, initial=-np.inf) - self.low.min(axis=0, initial=np.inf)
        return [c for c, s in zip(self.counters, spread) if np.isfinite(s) and s > 0]

    def group(self, mask: np.ndarray, counters: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``n``, ``mean`` and ``m2`` of ``counters`` over the runs of the cells where ``mask`` is true."""
        index = [self.counters.index(c) for c in counters]
        merged = merge_summaries(np.zeros(int(mask.sum()), dtype=np.intp), self.n[mask][:, index],
                                 self.mean[mask][:, index], self.m2[mask][:, index], 1)
        return merged[0][0], merged[1][0], merged[2][0]

    @classmethod
    def merge(cls, parts: Sequence[CounterCells]) -> CounterCells:
        """One summary of the runs of ``parts`` (e.g. the chunks of a CSV; every part has the same counters)."""
        codes, cells = cell_codes(pd.concat([part.cells for part in parts], ignore_index=True),
                                  list(parts[0].cells.columns))
        stacked = {name: np.concatenate([getattr(part, name) for part in parts]) for name in ("n", "mean", "m2",
                                                                                               "low", "high")}
        n, mean, m2 = merge_summaries(codes, stacked["n"], stacked["mean"], stacked["m2"], len(cells))
        low = np.full(n.shape, np.inf)
        high = np.full(n.shape, -np.inf)
        np.minimum.at(low, codes, stacked["low"])
        np.maximum.at(high, codes, stacked["high"])
        return cls(cells, list(parts[0].counters), n, mean, m2, low, high)


def merge_summaries(codes: np.ndarray, n: np.ndarray, mean: np.ndarray, m2: np.ndarray,
                    groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge the rows of ``n, mean, m2`` (rows × counters) into ``groups`` rows by ``codes``: counts add up,
    the mean is the count-weighted mean, ``m2`` adds each row's ``n (mean_row - mean)²`` (Chan et al.'s update).

    >>> [a.tolist() for a in merge_summaries(np.array([0, 0]), np.array([[2], [1]]), np.array([[1.0], [4.0]]),
    ...                                      np.array([[2.0], [0.0]]), 1)]
    [[[3]], [[2.0]], [[8.0]]]
    """
    if len(codes) == groups and np.bincount(codes, minlength=groups).max() == 1:   # nothing to merge: as given
        order = np.argsort(codes)
        return n[order].astype(np.int64), mean[order], m2[order]
    count = np.zeros((groups, n.shape[1]), dtype=np.int64)
    np.add.at(count, codes, n)
    total = np.zeros(count.shape)
    np.add.at(total, codes, np.where(n > 0, n * np.nan_to_num(mean), 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        merged_mean = np.where(count > 0, total / count, np.nan)
    spread = np.zeros(count.shape)
    deviation = np.where(n > 0, m2 + n * (np.nan_to_num(mean) - np.nan_to_num(merged_mean[codes])) ** 2, 0.0)
    np.add.at(spread, codes, deviation)
    return count, merged_mean, spread


def summarise_counters(data: pd.DataFrame, keys: Sequence[str], counters: Sequence[str] | None = None) -> CounterCells:
    """The :class:`CounterCells` of ``data``'s ``counters`` (by default every ``counter.*`` column) per cell of
    the ``keys`` columns, one counter column at a time (memory: a few arrays of one float per run).

    >>> runs = pd.DataFrame({"a": [0, 0, 1], "counter.x": [1.0, 3.0, 5.0]})
    >>> s = summarise_counters(runs, ["a"])
    >>> s.n.tolist(), s.mean.tolist(), s.m2.tolist()
    ([[2], [1]], [[2.0], [5.0]], [[2.0], [0.0]])
    """
    counters = counter_columns(data) if counters is None else list(counters)
    codes, cells = cell_codes(data, keys)
    shape = (len(cells), len(counters))
    n, mean, m2 = np.zeros(shape, dtype=np.int64), np.full(shape, np.nan), np.zeros(shape)
    low, high = np.full(shape, np.inf), np.full(shape, -np.inf)
    for j, column in enumerate(counters):
        values = column_values(data[column])
        finite = ~np.isnan(values)
        where, x = codes[finite], values[finite]
        n[:, j] = np.bincount(where, minlength=shape[0])
        with np.errstate(invalid="ignore", divide="ignore"):
            mean[:, j] = np.bincount(where, weights=x, minlength=shape[0]) / n[:, j]
        m2[:, j] = np.bincount(where, weights=(x - mean[where, j]) ** 2, minlength=shape[0])
        np.minimum.at(low[:, j], where, x)
        np.maximum.at(high[:, j], where, x)
    return CounterCells(cells, counters, n, mean, m2, low, high)


def cell_keys(data: pd.DataFrame | pd.Index, knobs: Sequence[str]) -> list[str]:
    """The columns whose combinations are the cells of the mechanism tests: the knobs and ``status``."""
    columns = data.columns if isinstance(data, pd.DataFrame) else data
    return list(dict.fromkeys([*knobs, *(["status"] if "status" in columns else [])]))


def moving_counters(data: pd.DataFrame, counters: Sequence[str]) -> list[str]:
    """The ``counters`` that take at least two distinct finite values in ``data`` (the others never move).

    >>> frame = pd.DataFrame({"counter.a": [0.0, 0.0, 0.0], "counter.b": [0.0, 2.0, 1.0]})
    >>> moving_counters(frame, ["counter.a", "counter.b"])
    ['counter.b']
    """
    return summarise_counters(data, [], counters).moving()


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
    baseline: :func:`pooled_from_summaries` of the two samples' counts, means and squared deviations.

    Returns the columns ``counter, n, baseline_n, mean, baseline_mean, difference, ci_low, ci_high,
    hedges_g, g_ci_low, g_ci_high, t, df, p`` as arrays; a counter with fewer than two runs on either
    side has no entry.
    """
    def summary(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)       # a column without values has no mean
            mean = np.nanmean(values, axis=0)
        return np.isfinite(values).sum(axis=0), mean, np.nansum((values - mean) ** 2, axis=0)

    return pooled_from_summaries(summary(x), summary(y), counters)


def pooled_from_summaries(x: tuple[np.ndarray, np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray, np.ndarray],
                          counters: Sequence[str]) -> dict[str, np.ndarray]:
    """Each counter at a level against the baseline from the two groups' ``(n, mean, m2)`` (per counter:
    count, mean and sum of squared deviations): the pooled-variance t-test
    (``scipy.stats.ttest_ind_from_stats(equal_var=True)``, what ``ttest_ind(equal_var=True)`` computes from
    the runs) with its 95 % interval of the difference of means, and Hedges' g with its interval (the
    formulas of ``pingouin.compute_effsize``/``compute_esci``; NaN where the pooled SD is 0).

    Returns the columns of :func:`pooled_comparisons`; a counter with fewer than two runs on either side
    has no entry.
    """
    (nx, mean_x, m2_x), (ny, mean_y, m2_y) = x, y
    keep = (nx >= 2) & (ny >= 2)
    if not keep.any():
        return {column: np.array([]) for column in MECHANISM_COLUMNS[3:-2]}
    nx, ny, mean_x, mean_y = nx[keep].astype(float), ny[keep].astype(float), mean_x[keep], mean_y[keep]
    var_x, var_y = m2_x[keep] / (nx - 1), m2_y[keep] / (ny - 1)
    df = nx + ny - 2
    with np.errstate(divide="ignore", invalid="ignore"):
        # identical values on both sides (a counter at 0 in both groups) are a valid row with p = NaN or 1
        test = ss.ttest_ind_from_stats(mean_x, np.sqrt(var_x), nx, mean_y, np.sqrt(var_y), ny, equal_var=True)
        pooled = np.sqrt(((nx - 1) * var_x + (ny - 1) * var_y) / df)
        g = np.where(pooled > 0, (mean_x - mean_y) / pooled, np.nan) * (1 - 3 / (4 * (nx + ny) - 9))
        g_se = np.sqrt((nx + ny) / (nx * ny) + g ** 2 / (2 * (nx + ny)))
    crit = ss.t.ppf(0.975, df)
    half = crit * pooled * np.sqrt(1 / nx + 1 / ny)
    difference = mean_x - mean_y
    return {"counter": np.asarray(counters, dtype=object)[keep], "n": nx.astype(int), "baseline_n": ny.astype(int),
            "mean": mean_x,
            "baseline_mean": mean_y, "difference": difference, "ci_low": difference - half,
            "ci_high": difference + half, "hedges_g": g, "g_ci_low": g - crit * g_se, "g_ci_high": g + crit * g_se,
            "t": np.asarray(test.statistic, float), "df": df, "p": np.asarray(test.pvalue, float)}


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
                    kind: AnalysisKind = AnalysisKind.OAT, fdr: float = FDR,
                    counters: CounterCells | None = None) -> pd.DataFrame:
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
    counters : CounterCells, optional
        The runs' counters already summarised per cell of (at least) the ``knobs`` and ``status``
        (a CSV summarised while it was read); by default ``data``'s counter columns, one at a time.

    Returns
    -------
    DataFrame
        :data:`MECHANISM_COLUMNS`, one row per knob level that matters × counter that moves in the
        study (with at least two runs on each side): ``difference`` (level − baseline, per second) with
        its 95 % interval ``ci_low, ci_high``; ``hedges_g`` with ``g_ci_low, g_ci_high``; the pooled
        t-test's ``t, df, p``; ``q`` (Benjamini–Hochberg over every row); ``significant``. Rows by knob level in
        verdict order, then by ``p``. Empty when no counter moves or no level matters.
    """
    cells = (counters if counters is not None else summarise_counters(data, cell_keys(data, knobs))).usable()
    moving = cells.moving()
    pieces, keys = [], []
    for knob, level in levels_that_matter(verdicts, knobs) if moving else []:
        at_level, at_baseline = comparison_masks(cells.cells, knob, level, knobs, baseline, kind)
        columns = pooled_from_summaries(cells.group(at_level, moving), cells.group(at_baseline, moving), moving)
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


def mechanism_settings(data: pd.DataFrame, table: pd.DataFrame, fdr: float = FDR,
                       counters: CounterCells | None = None) -> dict[str, Any]:
    """What the screen's ``settings['mechanisms']`` records: counters recorded and moving, tests, the FDR
    (``counters``: the runs' summary when ``data`` holds no counter columns, as for :func:`mechanism_table`).

    >>> frame = pd.DataFrame({"counter.a": [0.0, 0.0], "counter.b": [1.0, 2.0]})
    >>> mechanism_settings(frame, pd.DataFrame(columns=MECHANISM_COLUMNS))
    {'counters': 2, 'moving': 1, 'tests': 0, 'fdr': 0.05, 'method': 'fdr_bh'}
    """
    cells = counters if counters is not None else summarise_counters(data, cell_keys(data, []))
    return {"counters": len(cells.counters), "moving": len(cells.usable().moving()), "tests": len(table),
            "fdr": fdr, "method": "fdr_bh"}


def change_text(difference: Any, low: Any, high: Any) -> str:
    """A counter's change per second with its interval: ``'+1.2e+04/s [+1e+04, +1.4e+04]'`` (numbers by
    :func:`tunelab.formatting.fmt_abs`; the interval is left out when it is not known).

    >>> change_text(12000.0, 10000.0, 14000.0), change_text(-3.25, float("nan"), 1.0)
    ('+12,000/s [+10,000, +14,000]', '-3.25/s')
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
