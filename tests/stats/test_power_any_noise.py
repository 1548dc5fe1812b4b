"""Sample size and power answer for every noise level: the smallest n, never a solver's NaN.

The reference is the definition itself: the answer ``n`` reaches the asked power and ``n - 1``
does not (or ``n`` is the minimum, 2), with the power computed by statsmodels and SciPy.
"""
from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunelab.stats.noise import replicates_for_sesoi, replicates_to_bound, replicates_to_detect, tost_power
from tunelab.stats.power import replicates_needed

import math

from scipy import stats as ss
from statsmodels.stats.power import FTestAnovaPower, TTestIndPower


def reference_power(d: float, n: int, groups: int, test: str = "anova", alpha: float = 0.05) -> float:
    """The power the module docstring defines, computed here from statsmodels and SciPy directly."""
    if groups == 2:
        return float(TTestIndPower().power(effect_size=d, nobs1=n, alpha=alpha, ratio=1.0))
    f = d / math.sqrt(2 * groups)
    if test == "anova":
        return float(FTestAnovaPower().power(effect_size=f, nobs=n * groups, alpha=alpha, k_groups=groups))
    df1, df2 = groups - 1, (groups + 1) * groups * (n - 1) / (3 * (groups - 1))
    return float(ss.ncf.sf(ss.f.ppf(1 - alpha, df1, df2), df1, df2, f * f * n * groups))

CV = st.floats(min_value=0.01, max_value=100.0, allow_nan=False)
SESOI = st.floats(min_value=0.1, max_value=100.0, allow_nan=False)


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


@pytest.mark.parametrize("cv, sesoi", [(0.01, 100.0), (100.0, 0.1), (0.01, 0.1), (100.0, 100.0)])
def test_the_corners_of_the_range(cv, sesoi):
    assert replicates_for_sesoi(cv, sesoi) >= 2
