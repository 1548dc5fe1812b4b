"""Effect sizes: standardized differences and percent change against the baseline.

eta², omega² and partial eta² are reported by the omnibus functions in :mod:`tunelab.stats.omnibus`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.stats._validate import check_input, grouped


def _sample(levels: list[Any], samples: list[np.ndarray], between: str, level: Any, role: str) -> np.ndarray:
    for candidate, y in zip(levels, samples):
        if candidate == level:
            return y
    raise DataError(f"{role} {level!r} is not a level of {between!r}; levels are {levels}")


def cohens_d(data: pd.DataFrame, dv: str, between: str, group1: Any, group2: Any) -> pd.DataFrame:
    """Cohen's d and Hedges' g of ``group2 - group1`` (pingouin ``compute_effsize``/``compute_esci``).

    ``d`` uses the pooled SD; ``g`` is d times the small-sample correction. The CI is for ``g``:
    ``g ± t(0.975, n1 + n2 - 2) · sqrt((n1 + n2) / (n1 n2) + g² / (2 (n1 + n2)))`` (pingouin,
    R ``effsize::cohen.d(hedges.correction = TRUE, noncentral = FALSE)`` up to its SE formula).
    pingouin rounds the interval to 2 decimals by default; we ask for full precision.

    Returns
    -------
    DataFrame
        One row, columns ``[group1, group2, d, g, ci_low, ci_high]``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"k": list("aaabbb"), "y": [1.0, 2, 3, 2, 3, 4]})
    >>> float(cohens_d(df, "y", "k", "a", "b")["d"].iloc[0])
    1.0
    """
    clean = check_input(data, dv, between)
    levels, samples = grouped(clean, dv, between)
    x1 = _sample(levels, samples, between, group1, "group1")
    x2 = _sample(levels, samples, between, group2, "group2")
    d = float(pg.compute_effsize(x2, x1, paired=False, eftype="cohen"))
    g = float(pg.compute_effsize(x2, x1, paired=False, eftype="hedges"))
    ci = pg.compute_esci(stat=g, nx=len(x2), ny=len(x1), eftype="hedges", decimals=15)
    return pd.DataFrame({"group1": [group1], "group2": [group2], "d": [d], "g": [g],
                         "ci_low": [float(ci[0])], "ci_high": [float(ci[1])]})


def _pct_statistic(x: np.ndarray, base: np.ndarray, axis: int = -1) -> np.ndarray:
    return 100.0 * (np.mean(x, axis=axis) / np.mean(base, axis=axis) - 1.0)


def pct_change(
    data: pd.DataFrame,
    dv: str,
    between: str,
    baseline: Any,
    n_boot: int = 2000,
    seed: int = 0,
    ci: float = 0.95,
) -> pd.DataFrame:
    """Percent change of each level's mean against the baseline level's mean, with bootstrap CI.

    ``pct_change = 100 (mean(level) / mean(baseline) - 1)``. The interval is a percentile
    bootstrap (``scipy.stats.bootstrap``, ``method='percentile'``) that resamples each group
    independently (within groups), ``n_boot`` times, seeded by ``seed``.

    Returns
    -------
    DataFrame
        One row per non-baseline level (sorted order), columns
        ``[level, baseline, mean, baseline_mean, pct_change, ci_low, ci_high]``.

    Raises
    ------
    DataError
        Unknown baseline level, a baseline mean of zero, or bad ``n_boot``/``ci``.
    """
    if not 0 < ci < 1:
        raise DataError(f"ci must be between 0 and 1, got {ci!r}; 0.95 is the usual choice")
    if int(n_boot) < 100:
        raise DataError(f"n_boot must be at least 100 for a percentile interval, got {n_boot!r}")
    clean = check_input(data, dv, between)
    levels, samples = grouped(clean, dv, between)
    base = _sample(levels, samples, between, baseline, "baseline")
    base_mean = float(np.mean(base))
    if base_mean == 0:
        raise DataError(f"the baseline {between}={baseline!r} has mean 0 for {dv!r}, so a percent change is "
                        "undefined; report absolute differences (tukey_hsd estimate) instead")
    rows = []
    rng = np.random.default_rng(seed)
    for level, y in zip(levels, samples):
        if y is base:
            continue
        if np.ptp(y) == 0 and np.ptp(base) == 0:
            low = high = float(_pct_statistic(y, base))
        else:
            result = ss.bootstrap((y, base), _pct_statistic, n_resamples=int(n_boot), method="percentile",
                                  confidence_level=ci, vectorized=True, rng=rng)
            low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        rows.append({"level": level, "baseline": baseline, "mean": float(np.mean(y)), "baseline_mean": base_mean,
                     "pct_change": float(_pct_statistic(y, base)), "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=["level", "baseline", "mean", "baseline_mean", "pct_change",
                                       "ci_low", "ci_high"])
