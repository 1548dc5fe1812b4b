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


def noise_table(frame: pd.DataFrame, metrics: Sequence[Mapping[str, Any]], alpha: float = 0.05,
                power: float = 0.8) -> pd.DataFrame:
    """:func:`noise_cv` of each metric (``{"name", "sesoi_pct"}``) plus the replicates per level it takes
    to ``detect`` and to ``bound`` its SESOI, and the ``needed`` larger one (NaN when the CV is unknown)."""
    table = noise_cv(frame, [m["name"] for m in metrics])
    sesoi = [float(m.get("sesoi_pct") or math.nan) for m in metrics]
    table["sesoi_pct"] = sesoi
    detect, bound = [], []
    for cv, pct in zip(table["cv_pct"], sesoi):
        usable = math.isfinite(cv) and cv > 0 and math.isfinite(pct) and pct > 0
        detect.append(replicates_to_detect(cv, pct, alpha, power) if usable else math.nan)
        bound.append(replicates_to_bound(cv, pct, alpha, power) if usable else math.nan)
    table["detect"], table["bound"] = detect, bound
    table["needed"] = table[["detect", "bound"]].max(axis=1, skipna=False)
    return table[NOISE_TABLE_COLUMNS]


__all__ = ["NOISE_COLUMNS", "NOISE_TABLE_COLUMNS", "noise_cv", "noise_table", "replicates_for_sesoi",
           "replicates_to_bound", "replicates_to_detect", "tost_power"]
