"""Sample size and power answer for every noise level: the smallest n, never a solver's NaN.

The reference is the definition itself: the answer ``n`` reaches the asked power and ``n - 1``
does not (or ``n`` is the minimum, 2), with the power computed by statsmodels and SciPy.
"""
from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as ss
from statsmodels.stats.power import FTestAnovaPower, TTestIndPower

from tunelab.stats.noise import replicates_for_sesoi, replicates_to_bound, replicates_to_detect, tost_power
from tunelab.stats.power import replicates_needed

CV = st.floats(min_value=0.01, max_value=100.0, allow_nan=False)
SESOI = st.floats(min_value=0.1, max_value=100.0, allow_nan=False)


def reference_power(d: float, n: int, groups: int, test: str = "anova", alpha: float = 0.05) -> float:
    """The power the module docstring defines, from statsmodels; where statsmodels returns NaN (it does
    for some large effects), from SciPy's non-central t (two groups: both tails), and where that is
    NaN too, from SciPy's non-central F survival function (``T²`` is ``F(1, 2n - 2)``)."""
    f = d / math.sqrt(2 * groups)
    if groups == 2:
        power = float(TTestIndPower().power(effect_size=d, nobs1=n, alpha=alpha, ratio=1.0))
        if math.isfinite(power):
            return power
        df, ncp = 2 * n - 2, d * math.sqrt(n / 2)
        critical = ss.t.ppf(1 - alpha / 2, df)
        power = float(ss.nct.sf(critical, df, ncp) + ss.nct.cdf(-critical, df, ncp))
        if math.isfinite(power):
            return power
    df1 = groups - 1
    df2 = groups * (n - 1) if test == "anova" else (groups + 1) * groups * (n - 1) / (3 * (groups - 1))
    if test == "anova":
        power = float(FTestAnovaPower().power(effect_size=f, nobs=n * groups, alpha=alpha, k_groups=groups))
        if math.isfinite(power):
            return power
    return float(ss.ncf.sf(ss.f.ppf(1 - alpha, df1, df2), df1, df2, f * f * n * groups))


def test_the_issue_case_is_the_minimum_not_a_crash():
    # quickstart on an idle machine: d = 10, far above what 2 replicates already detect
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert replicates_needed(pilot_sd=1, baseline_mean=100, pct_change=10, n_groups=2) == 2
        assert replicates_for_sesoi(cv_pct=1.36, sesoi_pct=10.0) == 2


@settings(max_examples=60, deadline=None)
@given(cv=CV, sesoi=SESOI)
def test_detect_and_bound_are_the_smallest_n_at_every_noise_level(cv, sesoi):
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # no library warning reaches the terminal
        detect = replicates_to_detect(cv, sesoi)
        bound = replicates_to_bound(cv, sesoi)
        both = replicates_for_sesoi(cv, sesoi)
    assert isinstance(detect, int) and isinstance(bound, int) and detect >= 2 and bound >= 2
    assert both == max(detect, bound)
    d = sesoi / cv
    assert reference_power(d, detect, 2) >= 0.8
    assert detect == 2 or reference_power(d, detect - 1, 2) < 0.8
    assert tost_power(bound, cv, sesoi) >= 0.8
    assert bound == 2 or tost_power(bound - 1, cv, sesoi) < 0.8


@settings(max_examples=40, deadline=None)
@given(cv=CV, sesoi=SESOI, groups=st.integers(min_value=2, max_value=6), test=st.sampled_from(["anova", "welch"]))
def test_replicates_needed_for_k_groups_is_the_smallest_n(cv, sesoi, groups, test):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        n = replicates_needed(pilot_sd=cv, baseline_mean=100.0, pct_change=sesoi, n_groups=groups, test=test)
    d = sesoi / cv
    assert isinstance(n, int) and n >= 2
    assert reference_power(d, n, groups, test) >= 0.8
    assert n == 2 or reference_power(d, n - 1, groups, test) < 0.8


def test_where_statsmodels_returns_nan_the_power_is_still_the_t_tests():
    # d = 10, n = 8: statsmodels' TTestIndPower returns NaN (SciPy's non-central t); the power is ~1
    assert math.isnan(float(TTestIndPower().power(effect_size=10.0, nobs1=8, alpha=0.05)))
    assert reference_power(10.0, 8, 2) == pytest.approx(1.0)
    # hypothesis' case cv 1.0, sesoi 9.0: d = 9, where statsmodels is NaN already at n = 2; the
    # non-central t's two tails give 0.98 there, so 2 replicates are enough
    critical = ss.t.ppf(0.975, 2)
    two_tails = float(ss.nct.sf(critical, 2, 9.0) + ss.nct.cdf(-critical, 2, 9.0))
    assert reference_power(9.0, 2, 2) == pytest.approx(two_tails) and two_tails > 0.8
    assert replicates_to_detect(1.0, 9.0) == 2


@pytest.mark.parametrize("cv, sesoi", [(0.01, 100.0), (100.0, 0.1), (0.01, 0.1), (100.0, 100.0)])
def test_the_corners_of_the_range(cv, sesoi):
    assert replicates_for_sesoi(cv, sesoi) >= 2
