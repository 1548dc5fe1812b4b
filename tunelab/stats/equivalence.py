"""Equivalence testing: is a level's effect smaller than the smallest effect size of interest?"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from statsmodels.stats.weightstats import ttost_ind

from tunelab.errors import DataError
from tunelab.stats._validate import check_input, grouped
from tunelab.stats.effects import level_sample


def tost(
    data: pd.DataFrame,
    dv: str,
    between: str,
    level: Any,
    baseline: Any,
    sesoi_pct: float,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Two one-sided Welch t-tests (TOST) of ``mean(level) - mean(baseline)`` against ±SESOI.

    The equivalence bounds are ``±sesoi_pct / 100 · |mean(baseline)|`` in the units of ``dv``
    (statsmodels ``ttost_ind(level, baseline, low, upp, usevar='unequal')``; R
    ``TOSTER::t_TOST(var.equal = FALSE)``). The level is equivalent to the baseline when both
    one-sided tests reject, i.e. ``p = max(p_lower, p_upper) < alpha`` (equivalently, the
    ``1 - 2 alpha`` Welch interval lies inside the bounds).

    Returns
    -------
    DataFrame
        One row, columns ``[level, baseline, pct_change, lower_bound, upper_bound, p_lower,
        p_upper, p, equivalent]``; ``pct_change = 100 (mean(level) / mean(baseline) - 1)``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"k": ["a"] * 4 + ["b"] * 4, "y": [100.0, 101, 99, 100, 100, 100.5, 99.5, 100]})
    >>> bool(tost(df, "y", "k", "b", "a", sesoi_pct=5)["equivalent"].iloc[0])
    True
    """
    _check_tost(sesoi_pct, alpha)
    clean = check_input(data, dv, between)
    levels, samples = grouped(clean, dv, between)
    x = level_sample(levels, samples, between, level, "level")
    base = level_sample(levels, samples, between, baseline, "baseline")
    return pd.DataFrame([tost_row(x, base, level, baseline, sesoi_pct, alpha, between, dv)])


def _check_tost(sesoi_pct: float, alpha: float) -> None:
    if not sesoi_pct > 0:
        raise DataError(f"sesoi_pct must be a positive percentage, got {sesoi_pct!r}; e.g. 5 for ±5 %")
    if not 0 < alpha < 1:
        raise DataError(f"alpha must be between 0 and 1, got {alpha!r}")


def tost_row(x: np.ndarray, base: np.ndarray, level: Any, baseline: Any, sesoi_pct: float, alpha: float,
              between: str, dv: str) -> dict[str, Any]:
    """:func:`tost`'s row on the two groups' values."""
    _check_tost(sesoi_pct, alpha)
    base_mean = float(np.mean(base))
    if base_mean == 0:
        raise DataError(f"the baseline {between}={baseline!r} has mean 0 for {dv!r}; a percentage SESOI is "
                        "undefined")
    margin = sesoi_pct / 100.0 * abs(base_mean)
    if np.ptp(x) == 0 and np.ptp(base) == 0:
        diff = float(np.mean(x) - base_mean)
        p_lower = 0.0 if diff > -margin else 1.0
        p_upper = 0.0 if diff < margin else 1.0
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            _, lower, upper = ttost_ind(x, base, -margin, margin, usevar="unequal")
        p_lower, p_upper = float(lower[1]), float(upper[1])
    p = max(p_lower, p_upper)
    return {"level": level, "baseline": baseline, "pct_change": 100.0 * (float(np.mean(x)) / base_mean - 1.0),
            "lower_bound": -margin, "upper_bound": margin, "p_lower": p_lower, "p_upper": p_upper, "p": p,
            "equivalent": bool(p < alpha)}
