"""Assumption checks for one-way comparisons: normality of residuals, equal variances, summaries."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.stats._validate import Groups, check_input, grouped
from tunelab.stats.numerics import centred, origin, quietly


def normality(data: pd.DataFrame, dv: str, between: str, standardize: bool = False) -> pd.DataFrame:
    """Shapiro–Wilk test on the residuals from the group means (pooled over groups).

    Testing residuals rather than each group uses all observations at once, which matters with
    the 3-5 replicates typical of kernel tuning (R: ``shapiro.test(residuals(aov(dv ~ between)))``).

    Parameters
    ----------
    standardize : bool
        Divide each residual by its group's standard deviation first. Pooled raw residuals of
        normal groups with unequal variances form a scale mixture that Shapiro–Wilk rejects as
        heavy-tailed; standardised residuals test the *shape* of the errors only, which is what
        the choice between Welch's ANOVA and Kruskal–Wallis needs (a constant group contributes
        zeros).

    Returns
    -------
    DataFrame
        One row, columns ``[test, statistic, p, n]``; ``test`` is ``'shapiro_wilk'`` (or
        ``'shapiro_wilk_standardized'``). ``statistic`` and ``p`` are NaN when the residuals are
        all zero (no variation).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"k": list("aaabbb"), "y": [1.0, 2, 3, 5, 6, 8]})
    >>> normality(df, "y", "k").columns.tolist()
    ['test', 'statistic', 'p', 'n']
    """
    clean = check_input(data, dv, between)
    return pd.DataFrame([normality_row(Groups.of(clean, dv, between), dv, standardize)])


def normality_row(groups: Groups, dv: str, standardize: bool = False) -> dict[str, Any]:
    """:func:`normality`'s row on already grouped values (residuals kept in row order)."""
    values = groups.centred_y                       # exact residuals with a large constant offset
    means = np.array([np.mean(y) for y in groups.centred])
    residuals = values - means[groups.codes]
    if standardize:
        with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # a one-value group has no SD: residual 0
            spread = np.array([np.std(y, ddof=1) for y in groups.centred])[groups.codes]
            residuals = np.where(spread > 0, residuals / spread, 0.0)
    n = len(residuals)
    if n < 3:
        raise DataError(f"Shapiro–Wilk needs at least 3 observations of {dv!r}, got {n}; add replicates")
    if np.allclose(residuals, 0.0):
        statistic, p = np.nan, np.nan
    else:
        result, _ = quietly(ss.shapiro, residuals)  # SciPy warns for n > 5000 (p approximate; `n` says so)
        statistic, p = float(result.statistic), float(result.pvalue)
    test = "shapiro_wilk_standardized" if standardize else "shapiro_wilk"
    return {"test": test, "statistic": statistic, "p": p, "n": n}


def sd_ratio(data: pd.DataFrame, dv: str, between: str) -> float:
    """Largest over smallest group standard deviation (``ddof=1``); inf if some group is constant.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"k": list("aaabbb"), "y": [1.0, 2, 3, 2, 4, 6]})
    >>> sd_ratio(df, "y", "k")
    2.0
    """
    clean = check_input(data, dv, between)
    return samples_sd_ratio(grouped(clean, dv, between)[1])


def samples_sd_ratio(samples: list[np.ndarray]) -> float:
    sds = np.array([np.std(y, ddof=1) for y in centred(samples)])
    if (sds == 0).all():
        return float("nan")
    return float(sds.max() / sds.min()) if sds.min() > 0 else float("inf")


def homoscedasticity(data: pd.DataFrame, dv: str, between: str) -> pd.DataFrame:
    """Levene (center = mean) and Brown–Forsythe (center = median) tests of equal variances.

    Same as R ``car::leveneTest(dv ~ between, center = mean)`` and ``center = median``.

    Returns
    -------
    DataFrame
        Two rows, ``test`` = ``'levene'`` and ``'brown_forsythe'``; columns
        ``[test, statistic, df1, df2, p]`` with ``df1 = k - 1`` and ``df2 = N - k``.
        ``statistic`` and ``p`` are NaN when every group is constant.
    """
    clean = check_input(data, dv, between)
    return pd.DataFrame(homoscedasticity_rows(grouped(clean, dv, between)[1]),
                        columns=["test", "statistic", "df1", "df2", "p"])


def homoscedasticity_rows(samples: list[np.ndarray]) -> list[dict[str, Any]]:
    """:func:`homoscedasticity`'s rows on already grouped values."""
    k, n = len(samples), sum(len(y) for y in samples)
    rows = []
    for name, center in (("levene", "mean"), ("brown_forsythe", "median")):
        with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = ss.levene(*centred(samples), center=center)
        rows.append({"test": name, "statistic": float(result.statistic), "df1": k - 1, "df2": n - k,
                     "p": float(result.pvalue)})
    return rows


def group_summary(data: pd.DataFrame, dv: str, between: str) -> pd.DataFrame:
    """Per-group descriptive statistics, groups in sorted order.

    Returns
    -------
    DataFrame
        Columns ``[group, n, mean, sd, median, iqr, cv]``: ``sd`` with ``ddof=1``, ``iqr`` from
        linearly interpolated quartiles (R ``IQR()``, type 7), ``cv = sd / mean`` (NaN if mean is 0).
    """
    clean = check_input(data, dv, between)
    levels, samples = grouped(clean, dv, between)
    rows = []
    for level, y in zip(levels, samples):
        c = origin(y)
        mean, sd = c + float(np.mean(y - c)), float(np.std(y - c, ddof=1))
        rows.append({"group": level, "n": len(y), "mean": mean, "sd": sd, "median": float(np.median(y)),
                     "iqr": float(ss.iqr(y - c)), "cv": sd / mean if mean != 0 else np.nan})
    return pd.DataFrame(rows, columns=["group", "n", "mean", "sd", "median", "iqr", "cv"])
