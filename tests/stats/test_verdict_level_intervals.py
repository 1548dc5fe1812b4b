"""Intervals at the verdict's level (issue 37, item 2), against independent expectations.

The expectations are SciPy's own two-sample t intervals and tests (``scipy.stats.ttest_ind``) and
pingouin's Games–Howell on data built by hand, never the screen's own output: the interval beside a
verdict is at ``1 - alpha`` of the look that decided it (a sequential look's nominal alpha), it is the
deciding test's interval, and it excludes 0 exactly when that test rejects.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as ss

from tunelab.cli.render import screen_text, verdict_table
from tunelab.stats import screen
from tunelab.stats.rounds import look_alphas, screen_in_rounds

METRIC = [{"name": "y", "direction": "maximize", "sesoi_pct": 5}]
BASE = [100.0, 100.6, 99.4, 100.3, 99.7, 100.0]


def _two_levels(shift: float, spread: float = 6.0) -> pd.DataFrame:
    """Baseline ``a`` (SD ~0.4) and a much noisier level ``b`` centred ``shift`` % away: Welch + Games–Howell."""
    noise = np.array([-1.0, 0.8, -0.6, 1.2, -1.4, 0.0]) * spread
    return pd.DataFrame({"k": ["a"] * 6 + ["b"] * 6, "y": BASE + list(100.0 + shift + noise)})


def _welch(data: pd.DataFrame, alpha: float) -> tuple[float, float, float]:
    """SciPy's Welch test of b - a and its 1 - alpha interval: (p, low, high)."""
    b, a = (data.loc[data["k"] == g, "y"].to_numpy() for g in ("b", "a"))
    test = ss.ttest_ind(b, a, equal_var=False)
    interval = test.confidence_interval(confidence_level=1 - alpha)
    return float(test.pvalue), float(interval.low), float(interval.high)


def _sequential(data: pd.DataFrame, max_replicates: int):
    return screen_in_rounds(data.assign(round=1), METRIC, ["k"], {"k": "a"}, max_replicates=max_replicates,
                            n_boot=400)


def test_a_sequential_looks_interval_is_at_its_nominal_level() -> None:
    """One look after 6 of at most 36 replicates: linear spending gives it alpha 0.05/6 = 0.0083, so the row's
    interval is Welch's 1 - 0.0083 interval (scipy.stats.t), as % of the baseline mean, and ci_level says so."""
    data = _two_levels(-8.0)
    result = _sequential(data, max_replicates=36)
    row = result.verdicts.iloc[0]
    nominal = look_alphas([6 / 36], 0.05)[0]
    assert nominal == pytest.approx(0.05 / 6) and row["alpha_nominal"] == pytest.approx(nominal)
    assert row["test"] == "welch+games_howell"
    _, low, high = _welch(data, nominal)
    base_mean = float(np.mean(BASE))
    assert row["ci_level"] == pytest.approx(1 - nominal)
    assert (row["effect_ci_low"], row["effect_ci_high"]) == pytest.approx((100 * low / base_mean, 100 * high / base_mean),
                                                                          rel=1e-6)
    # wider than the 95 % interval a reader saw before (the issue: a 95 % interval beside a 0.0083 verdict)
    _, low95, high95 = _welch(data, 0.05)
    assert low < low95 and high > high95
    assert "99.17 %" in verdict_table(result.verdicts)


@pytest.mark.parametrize("shift", [-12.0, -7.0, -4.0, -1.0, 3.0, 9.0])
def test_the_interval_excludes_zero_exactly_when_the_verdicts_test_rejects(shift: float) -> None:
    """Two levels, one knob, one metric: the family is one row, Welch's ANOVA is Welch's t test and
    Games–Howell's pair is Welch's interval. At alpha = 0.01 the row is significant, its interval excludes 0
    and SciPy's Welch p is below alpha, all three together or none (the shifts give both outcomes)."""
    alpha = 0.01
    data = _two_levels(shift)
    row = screen(data, METRIC, ["k"], {"k": "a"}, alpha=alpha, n_boot=400).verdicts.iloc[0]
    p, low, high = _welch(data, alpha)
    excludes = bool(row["effect_ci_low"] > 0 or row["effect_ci_high"] < 0)
    assert row["p"] == pytest.approx(p, rel=1e-6)
    assert excludes == bool(row["significant"]) == (p < alpha) == (low > 0 or high < 0)


def test_both_outcomes_are_covered() -> None:
    """The parametrised shifts above include a rejection and a non-rejection (else the test proves nothing)."""
    outcomes = {_welch(_two_levels(shift), 0.01)[0] < 0.01 for shift in (-12.0, -7.0, -4.0, -1.0, 3.0, 9.0)}
    assert outcomes == {True, False}


def test_each_significant_levels_interval_is_the_games_howell_interval() -> None:
    """Three levels with unequal variances: every level the row lists has pingouin's Games–Howell p below alpha,
    and its interval is the Games–Howell interval of the difference (pingouin's, at 1 - alpha) as % of the
    baseline mean; a level Games–Howell does not separate is not listed."""
    import pingouin

    alpha = 0.01
    data = pd.DataFrame({"k": ["a"] * 6 + ["b"] * 6 + ["c"] * 6,
                         "y": BASE + [60.0, 170, 80, 150, 95, 135] + [107.5, 108.4, 107.9, 108.2, 108.0, 108.0]})
    result = screen(data, METRIC, ["k"], {"k": "a"}, alpha=alpha, n_boot=400)
    row = result.verdicts.iloc[0]
    assert row["test"] == "welch+games_howell" and row["ci_level"] == pytest.approx(0.99)
    reference = pingouin.pairwise_gameshowell(data, dv="y", between="k").set_index(["A", "B"])
    assert reference.loc[("a", "b"), "pval"] > alpha > reference.loc[("a", "c"), "pval"]
    assert [entry["level"] for entry in row["levels"]] == ["c"]
    means = data.groupby("k")["y"].mean()
    diff, se, df = means["c"] - means["a"], reference.loc[("a", "c"), "se"], reference.loc[("a", "c"), "df"]
    half = ss.studentized_range.ppf(1 - alpha, 3, df) / np.sqrt(2) * se
    expected = (100 * (diff - half) / means["a"], 100 * (diff + half) / means["a"])
    entry = row["levels"][0]
    assert (entry["ci_low"], entry["ci_high"]) == pytest.approx(expected, rel=1e-4)
    assert (row["effect_ci_low"], row["effect_ci_high"]) == pytest.approx(expected, rel=1e-4)


def test_when_the_family_decides_the_row_says_so() -> None:
    """The issue's case: a look of nominal alpha 0.0083 and a huge change (-40 %) whose own Games–Howell pair
    (two levels: Welch's t, SciPy p 0.0053) is below alpha while Holm over the two knobs' rows (2 p = 0.011) is
    not. The row is inconclusive, its interval (at 99.17 %) excludes 0, and the row says the family decides."""
    rows = []
    for knob, values in (("m", 60.0 + 0.75 * np.array([-30.0, 25.0, -20.0, 28.0, -26.0, 22.0])),
                         ("n", 100.0 + np.array([-0.3, 0.2, 0.1, -0.2, 0.3, -0.1]))):
        rows += [{"m": "x", "n": "x", "y": value} for value in BASE]
        rows += [{"m": "x", "n": "x", knob: "z", "y": value} for value in values]
    data = pd.DataFrame(rows)
    result = screen_in_rounds(data.assign(round=1), METRIC, ["m", "n"], {"m": "x", "n": "x"}, max_replicates=36,
                              n_boot=400)
    row = result.verdicts[result.verdicts["knob"] == "m"].iloc[0]
    nominal = float(row["alpha_nominal"])
    b = data.loc[data["m"] == "z", "y"].to_numpy()
    a = data.loc[(data["m"] == "x") & (data["n"] == "x"), "y"].to_numpy()
    p = float(ss.ttest_ind(b, a, equal_var=False).pvalue)
    assert nominal == pytest.approx(0.05 / 6) and p < nominal < 2 * p
    assert row["test"] == "welch+games_howell" and row["verdict"] == "inconclusive" and not row["significant"]
    assert row["effect_ci_high"] < 0 and row["ci_level"] == pytest.approx(1 - nominal)
    assert row["posthoc_note"].startswith("the family's test decides")
    text = screen_text(result)
    assert "99.17 %" in text and "the family's test decides" in text
