"""Power and sample size: how many replicates detect the smallest effect of interest?

Effects are expressed as a percent change of a mean, turned into Cohen's ``d = |delta| / sd``.
Two groups use the power of the two-sided two-sample t-test (statsmodels' ``TTestIndPower``). More
groups use one-way ANOVA's (statsmodels' ``FTestAnovaPower``) with the *least favourable*
configuration for a largest difference ``delta`` between two of ``k`` means (two means at ±delta/2,
the rest in the middle): Cohen's ``f = d / sqrt(2k)``. For k = 2 that is ``f = d / 2``, the usual
two-group relation, and the two powers are the same number.

Both are computed as SciPy's non-central F survival function with ``k - 1`` and ``k (n - 1)``
degrees of freedom and non-centrality ``f² n k`` (the t-test's ``T²`` is ``F(1, 2n - 2)``): the same
values as statsmodels, which evaluates them as ``1 - cdf`` or through the non-central t and then
returns NaN for some large effects (d = 10 at n = 8, for instance), where the survival function
stays finite.

``test="welch"`` plans for Welch's ANOVA, which the screen chooses unless equal variances are
shown (:func:`tunelab.stats.recommend`): its power under equal variances and equal group sizes is
approximated by the non-central F with ``k - 1`` and Welch's ``(k + 1) k (n - 1) / (3 (k - 1))``
denominator degrees of freedom (``2 (n - 1)`` for k = 3, against ANOVA's ``3 (n - 1)``), so it
asks for more replicates when k > 2 and the same for k = 2.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.stats._validate import check_input, grouped


def _check(alpha: float, power: float | None = None) -> None:
    if not 0 < alpha < 1:
        raise DataError(f"alpha must be between 0 and 1, got {alpha!r}")
    if power is not None and not 0 < power < 1:
        raise DataError(f"power must be between 0 and 1, got {power!r}; 0.8 is the usual choice")


TESTS = ("anova", "welch")


def _check_test(test: str) -> None:
    if test not in TESTS:
        raise DataError(f"test must be one of {', '.join(TESTS)}, got {test!r}")


def _f_power(f: float, n_per_group: float, n_groups: int, alpha: float, df2: float) -> float:
    """P(F > F_crit) for the non-central F with ``k - 1`` and ``df2`` df and non-centrality ``f² n k``."""
    df1 = n_groups - 1
    critical = ss.f.ppf(1 - alpha, df1, df2)
    return float(ss.ncf.sf(critical, df1, df2, f * f * n_per_group * n_groups))


def _welch_power(f: float, n_per_group: float, n_groups: int, alpha: float) -> float:
    k = n_groups
    return _f_power(f, n_per_group, k, alpha, (k + 1) * k * (n_per_group - 1) / (3 * (k - 1)))


#: the largest n :func:`smallest_n` tries (about 1e18: far beyond any plan, a guard against a power that never rises)
MAX_SEARCHED = 2 ** 60


def smallest_n(reaches: Callable[[int], bool], start: int = 2) -> int:
    """The smallest ``n >= 2`` with ``reaches(n)``, for a ``reaches`` that stays true once true (power
    grows with n): doubling from ``start``, then bisection. Always an integer, however small the
    effect is against the noise (the number may then be very large) or however large (then 2).

    Power functions are monotone in n, so this is exact where a root finder on the power curve has
    nothing to find below its bounds (and returns NaN).

    Examples
    --------
    >>> smallest_n(lambda n: n * n >= 50)
    8
    >>> smallest_n(lambda n: True)
    2
    """
    low, high = 1, max(2, int(start))
    while not reaches(high):
        low, high = high, high * 2
        if high > MAX_SEARCHED:
            raise DataError(f"no sample size up to {MAX_SEARCHED:.0e} per group reaches the asked power; "
                            "the effect is too small against the noise to plan for")
    while high - low > 1:
        middle = (low + high) // 2
        if middle >= 2 and reaches(middle):
            high = middle
        else:
            low = middle
    return high


def _power(d: float, n_per_group: float, n_groups: int, alpha: float, test: str = "anova") -> float:
    if test == "welch" and n_groups > 2:
        return _welch_power(d / math.sqrt(2 * n_groups), n_per_group, n_groups, alpha)
    return _f_power(d / math.sqrt(2 * n_groups), n_per_group, n_groups, alpha, n_groups * (n_per_group - 1))


def replicates_needed(
    pilot_sd: float,
    baseline_mean: float,
    pct_change: float,
    n_groups: int = 2,
    alpha: float = 0.05,
    power: float = 0.8,
    test: str = "anova",
) -> int:
    """Replicates per group needed to detect a ``pct_change`` % change with the given power.

    ``d = |pct_change / 100 · baseline_mean| / pilot_sd``; the power is ``TTestIndPower``'s for
    two groups, ``FTestAnovaPower``'s (least favourable ``f = d / sqrt(2k)``) for more, and the
    answer is the smallest ``n >= 2`` that reaches it (:func:`smallest_n`), so an effect large
    against the noise gets 2, never a solver's NaN. ``test="welch"`` plans for Welch's ANOVA
    instead (see the module docstring).

    Examples
    --------
    >>> replicates_needed(pilot_sd=10, baseline_mean=100, pct_change=10)  # d = 1
    17
    >>> replicates_needed(pilot_sd=1, baseline_mean=100, pct_change=10)   # d = 10: the minimum
    2
    """
    _check(alpha, power)
    _check_test(test)
    if not pilot_sd > 0:
        raise DataError(f"pilot_sd must be positive, got {pilot_sd!r}; estimate it from a pilot run")
    if int(n_groups) != n_groups or n_groups < 2:
        raise DataError(f"n_groups must be an integer >= 2, got {n_groups!r}")
    delta = abs(pct_change / 100.0 * baseline_mean)
    if delta == 0:
        raise DataError(f"pct_change {pct_change!r} of baseline mean {baseline_mean!r} is a zero effect; "
                        "no sample size detects it")
    d = delta / pilot_sd
    n_groups = int(n_groups)
    return smallest_n(lambda n: _power(d, n, n_groups, alpha, test) >= power)


def achieved_power(data: pd.DataFrame, dv: str, between: str, pct_change: float, alpha: float = 0.05,
                   test: str = "anova") -> pd.DataFrame:
    """Power the data's design had to detect a ``pct_change`` % difference between two levels.

    The SD is the pooled within-group SD (sqrt of the ANOVA residual mean square), the reference
    mean is the grand mean of ``dv``, and the group size is the smallest group (conservative).

    Returns
    -------
    DataFrame
        One row, columns ``[n_per_group, effect_size, power]``; ``effect_size`` is Cohen's d
        (the solver uses ``f = d / sqrt(2k)`` when there are k > 2 groups).
    """
    _check(alpha)
    _check_test(test)
    clean = check_input(data, dv, between)
    _, samples = grouped(clean, dv, between)
    k = len(samples)
    n_min = min(len(y) for y in samples)
    ss_within = sum(float(np.sum((y - y.mean()) ** 2)) for y in samples)
    sd = math.sqrt(ss_within / (len(clean) - k))
    delta = abs(pct_change / 100.0 * float(clean[dv].mean()))
    if sd == 0:
        raise DataError(f"{dv!r} has no within-group variation, so power is undefined")
    d = delta / sd
    return pd.DataFrame({"n_per_group": [n_min], "effect_size": [d], "power": [_power(d, n_min, k, alpha, test)]})
