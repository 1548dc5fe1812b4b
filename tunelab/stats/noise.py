"""Measurement noise from A/A trials, and the replicates it takes to resolve a SESOI.

A/A trials (the baseline configuration, run again and again) differ only by noise: their
coefficient of variation (``CV = SD / |mean|``, :func:`noise_cv`) is the noise of one trial as a
percentage of the metric. A one-factor-at-a-time screen compares each level with the baseline,
so with ``n`` replicates per level and a smallest effect of interest of ``sesoi_pct`` %, it can

* **detect** a change of ``sesoi_pct`` (two-sided two-sample t-test, Cohen's
  ``d = sesoi_pct / cv_pct``; :func:`tunelab.stats.power.replicates_needed`, i.e. statsmodels
  ``TTestIndPower``), and
* **bound** a level that changes nothing within ±``sesoi_pct`` (two one-sided tests, TOST, at a
  true difference of 0; :func:`tost_power`),

each with the asked power. :func:`replicates_for_sesoi` is the larger of the two, since a screen
verdict is either "matters" (detected) or "no effect" (bounded). Alpha is the design's, per test,
before any multiplicity correction, so the numbers are a floor.

A duet (:mod:`tunelab.duet`) compares each run with a baseline measured at the same moment, so its noise
is the SD of the paired log ratio (:func:`paired_noise`), not the per-run CV: interference both sides
share cancels from it (:func:`paired_noise_table`).

Examples
--------
>>> replicates_for_sesoi(cv_pct=5.7, sesoi_pct=5.0)
23
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.stats.power import replicates_needed, smallest_n

#: columns of :func:`noise_cv`
NOISE_COLUMNS = ["metric", "n", "mean", "sd", "cv_pct"]
#: columns of :func:`noise_table`
NOISE_TABLE_COLUMNS = NOISE_COLUMNS + ["sesoi_pct", "detect", "bound", "needed"]
#: columns of :func:`paired_noise`
PAIRED_COLUMNS = ["metric", "pairs", "paired_cv_pct", "side_diff_pct"]
#: columns of :func:`paired_noise_table`
PAIRED_TABLE_COLUMNS = NOISE_COLUMNS + PAIRED_COLUMNS[1:] + ["sesoi_pct", "detect", "bound", "needed"]


def noise_cv(frame: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Each metric's spread over the rows of ``frame`` (A/A trials): n, mean, SD (n - 1) and CV in %.

    Missing values are left out; with fewer than 2 values, or a mean of 0, ``sd``/``cv_pct`` are NaN.

    Examples
    --------
    >>> frame = pd.DataFrame({"qps": [90.0, 100.0, 110.0]})
    >>> noise_cv(frame, ["qps"]).round(2).to_dict("records")
    [{'metric': 'qps', 'n': 3, 'mean': 100.0, 'sd': 10.0, 'cv_pct': 10.0}]
    """
    missing = [name for name in metrics if name not in frame.columns]
    if missing:
        raise DataError(f"the A/A trials have no column for metric(s) {', '.join(missing)}; "
                        f"they have {', '.join(map(str, frame.columns)) or 'no columns'}")
    rows = []
    for name in metrics:
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        mean = float(values.mean()) if len(values) else math.nan
        sd = float(values.std(ddof=1)) if len(values) >= 2 else math.nan
        cv = 100.0 * sd / abs(mean) if len(values) >= 2 and mean != 0 else math.nan
        rows.append({"metric": name, "n": int(len(values)), "mean": mean, "sd": sd, "cv_pct": cv})
    return pd.DataFrame(rows, columns=NOISE_COLUMNS)


def _check(cv_pct: float, sesoi_pct: float, alpha: float, power: float) -> None:
    if not (isinstance(cv_pct, (int, float)) and math.isfinite(cv_pct) and cv_pct > 0):
        raise DataError(f"cv_pct must be a positive percentage, got {cv_pct!r}; measure it with A/A trials")
    if not (isinstance(sesoi_pct, (int, float)) and math.isfinite(sesoi_pct) and sesoi_pct > 0):
        raise DataError(f"sesoi_pct must be a positive percentage, got {sesoi_pct!r}; e.g. 5 for ±5 %")
    if not 0 < alpha < 0.5:
        raise DataError(f"alpha must be between 0 and 0.5, got {alpha!r}")
    if not 0 < power < 1:
        raise DataError(f"power must be between 0 and 1, got {power!r}; 0.8 is the usual choice")


def tost_power(n: int, cv_pct: float, sesoi_pct: float, alpha: float = 0.05) -> float:
    """Power of two one-sided two-sample t-tests (``n`` per group) to show equivalence within
    ±``sesoi_pct`` when the true difference is 0 and each trial's noise is ``cv_pct``.

    Each one-sided statistic is non-central t with ``2 n - 2`` degrees of freedom and
    non-centrality ``sesoi / (cv sqrt(2 / n))``; the power is ``1 - 2 P(T <= t_crit)``, the usual
    approximation (exact up to the small chance both tests fail at once), clipped at 0.

    Examples
    --------
    >>> round(tost_power(20, cv_pct=5.0, sesoi_pct=5.0), 3)
    0.856
    """
    _check(cv_pct, sesoi_pct, alpha, 0.5)
    if n < 2:
        raise DataError(f"n must be at least 2 per group, got {n!r}")
    df = 2 * n - 2
    ncp = sesoi_pct / (cv_pct * math.sqrt(2.0 / n))
    critical = ss.t.ppf(1 - alpha, df)
    fail_one = float(ss.nct.cdf(critical, df, ncp))
    if not math.isfinite(fail_one):          # SciPy's cdf returns NaN at some large ncp; its sf stays finite
        fail_one = 1.0 - float(ss.nct.sf(critical, df, ncp))
    return max(0.0, 1.0 - 2.0 * fail_one)


def replicates_to_bound(cv_pct: float, sesoi_pct: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Replicates per group for TOST to bound a null change within ±``sesoi_pct`` (:func:`tost_power`)."""
    _check(cv_pct, sesoi_pct, alpha, power)
    z = ss.norm.ppf(1 - alpha) + ss.norm.ppf(1 - (1 - power) / 2)
    guess = int(2 * z * z * (cv_pct / sesoi_pct) ** 2)       # the normal approximation, a little low
    return smallest_n(lambda n: tost_power(n, cv_pct, sesoi_pct, alpha) >= power, guess)


def replicates_to_detect(cv_pct: float, sesoi_pct: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Replicates per group for a two-sided two-sample t-test to detect a ``sesoi_pct`` % change
    (:func:`tunelab.stats.power.replicates_needed` with ``d = sesoi_pct / cv_pct``)."""
    _check(cv_pct, sesoi_pct, alpha, power)
    return replicates_needed(pilot_sd=cv_pct, baseline_mean=100.0, pct_change=sesoi_pct, n_groups=2,
                             alpha=alpha, power=power)


def replicates_for_sesoi(cv_pct: float, sesoi_pct: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Replicates per level (and of the baseline) to both detect a ``sesoi_pct`` % change and bound a
    null one within ±``sesoi_pct``, each with ``power``, at a trial noise of ``cv_pct`` (module docstring)."""
    return max(replicates_to_detect(cv_pct, sesoi_pct, alpha, power),
               replicates_to_bound(cv_pct, sesoi_pct, alpha, power))


def sesoi_advice(table: pd.DataFrame, cv_pct: Sequence[float], alpha: float, power: float) -> pd.DataFrame:
    """``table`` (with ``sesoi_pct``) plus the replicates per level it takes to ``detect`` and to ``bound`` each
    row's SESOI at the trial noise ``cv_pct`` (one per row), and the ``needed`` larger one (NaN when unknown)."""
    detect, bound = [], []
    for cv, pct in zip(cv_pct, table["sesoi_pct"]):
        usable = math.isfinite(cv) and cv > 0 and math.isfinite(pct) and pct > 0
        detect.append(replicates_to_detect(cv, pct, alpha, power) if usable else math.nan)
        bound.append(replicates_to_bound(cv, pct, alpha, power) if usable else math.nan)
    table = table.assign(detect=detect, bound=bound)
    return table.assign(needed=table[["detect", "bound"]].max(axis=1, skipna=False))


def noise_table(frame: pd.DataFrame, metrics: Sequence[Mapping[str, Any]], alpha: float = 0.05,
                power: float = 0.8) -> pd.DataFrame:
    """:func:`noise_cv` of each metric (``{"name", "sesoi_pct"}``) plus the replicates per level it takes
    to ``detect`` and to ``bound`` its SESOI, and the ``needed`` larger one (NaN when the CV is unknown)."""
    table = noise_cv(frame, [m["name"] for m in metrics])
    table["sesoi_pct"] = [float(m.get("sesoi_pct") or math.nan) for m in metrics]
    return sesoi_advice(table, table["cv_pct"].tolist(), alpha, power)[NOISE_TABLE_COLUMNS]


def paired_noise(frame: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Each metric's noise as a duet's analysis sees it, from A/A duet pairs (tidy columns ``duet_pair``,
    ``duet_side``, ``duet_arm``; :mod:`tunelab.stats.duet_route`): the ``pairs`` with a positive value on both
    sides, the residual SD of their log ratios ``log(B / A)`` after the crossover fit removes a fixed side
    difference (:func:`~tunelab.stats.duet_route.crossover_fit`), in % (``paired_cv_pct``: the A/A CV of the
    paired ratio, the SD each pair's log ratio has in the duet's analysis), and that ``side_diff_pct`` (side 1
    against side 0). NaN with fewer than 3 pairs or pairs of one orientation only.

    Examples
    --------
    >>> d = np.array([0.12, 0.08, 0.09, 0.11])            # log ratios; A on sides 0 1 1 0
    >>> frame = pd.DataFrame({"duet_pair": np.repeat(range(4), 2), "duet_side": [0, 1, 1, 0, 1, 0, 0, 1],
    ...                       "duet_arm": ["A", "B"] * 4, "qps": np.ravel(np.column_stack([np.full(4, 100.0),
    ...                                                                                   100 * np.exp(d)]))})
    >>> paired_noise(frame, ["qps"]).round(2).to_dict("records")
    [{'metric': 'qps', 'pairs': 4, 'paired_cv_pct': 0.71, 'side_diff_pct': 1.51}]
    """
    from tunelab.stats.duet_route import MIN_PAIRS, crossover_fit, paired_runs

    missing = [name for name in metrics if name not in frame.columns]
    if missing:
        raise DataError(f"the A/A pairs have no column for metric(s) {', '.join(missing)}")
    rows = []
    for name in metrics:
        pairs = paired_runs(frame, name)                  # it reads the metric as numbers itself
        fit = {"sd": math.nan, "delta": math.nan}
        if len(pairs) >= MIN_PAIRS and pairs["orientation"].nunique() == 2:
            fit = crossover_fit(pairs["d"].to_numpy(float), pairs["orientation"].to_numpy(float))
        rows.append({"metric": name, "pairs": int(len(pairs)), "paired_cv_pct": 100 * fit["sd"],
                     "side_diff_pct": 100 * math.expm1(fit["delta"])})
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


def paired_noise_table(frame: pd.DataFrame, metrics: Sequence[Mapping[str, Any]], alpha: float = 0.05,
                       power: float = 0.8) -> pd.DataFrame:
    """:func:`noise_table` of A/A duet pairs: each metric's per-run CV and :func:`paired_noise`, with the pairs
    per level a duet needs: the advice at ``paired_cv_pct / sqrt(2)``, the per-run CV at which two groups of
    ``n`` runs give a level's change the standard error ``n`` pairs give it (``sd_pair / sqrt(n)``). The
    duet's t test has ``n - 2`` degrees of freedom, not ``2 n - 2``, so at a few pairs this is a little low."""
    table = noise_cv(frame, [m["name"] for m in metrics]).merge(paired_noise(frame, [m["name"] for m in metrics]),
                                                                 on="metric", how="left")
    table["sesoi_pct"] = [float(m.get("sesoi_pct") or math.nan) for m in metrics]
    advised = sesoi_advice(table, (table["paired_cv_pct"] / math.sqrt(2)).tolist(), alpha, power)
    return advised[PAIRED_TABLE_COLUMNS]


__all__ = ["NOISE_COLUMNS", "NOISE_TABLE_COLUMNS", "PAIRED_COLUMNS", "PAIRED_TABLE_COLUMNS", "noise_cv", "noise_table",
           "paired_noise", "paired_noise_table", "replicates_for_sesoi", "replicates_to_bound", "replicates_to_detect",
           "sesoi_advice", "tost_power"]
