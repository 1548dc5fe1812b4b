"""Output shape and statistical properties of the one-way tests, post-hocs, effects, TOST and power.

Expected values come from independent routes (two-group identities with scipy's t-tests,
hand arithmetic), never from the function under test. R reference values live in
tests/stats/test_reference_*.py.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as ss
from statsmodels.stats.multitest import multipletests

from tunelab.errors import DataError
from tunelab.stats import (achieved_power, adjust, anova_factorial, anova_oneway, cohens_d, compact_letters, dunn,
                           games_howell, group_summary, homoscedasticity, kruskal, lenth_effects, normality,
                           pct_change, replicates_needed, to_matrix, tost, tukey_hsd, welch_anova)

POSTHOC = ["group1", "group2", "estimate", "ci_low", "ci_high", "statistic", "p", "p_adj"]


def _groups(means: list[float], sds: list[float], n: int = 8, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "k": np.repeat([f"L{i}" for i in range(len(means))], n),
        "y": np.concatenate([rng.normal(m, s, n) for m, s in zip(means, sds)]),
    })


@pytest.fixture
def three() -> pd.DataFrame:
    return _groups([10, 11, 15], [1, 1.5, 2])


@pytest.fixture
def two() -> pd.DataFrame:
    return _groups([10, 12], [1, 3], n=7, seed=4)


def test_output_columns(three: pd.DataFrame) -> None:
    assert normality(three, "y", "k").columns.tolist() == ["test", "statistic", "p", "n"]
    assert homoscedasticity(three, "y", "k")["test"].tolist() == ["levene", "brown_forsythe"]
    assert group_summary(three, "y", "k").columns.tolist() == ["group", "n", "mean", "sd", "median", "iqr", "cv"]
    assert anova_oneway(three, "y", "k").columns.tolist() == ["source", "ss", "df", "ms", "F", "p", "eta2", "omega2"]
    assert welch_anova(three, "y", "k").columns.tolist() == ["source", "F", "df1", "df2", "p"]
    assert kruskal(three, "y", "k").columns.tolist() == ["source", "H", "df", "p", "epsilon2"]
    for function in (tukey_hsd, games_howell, dunn):
        table = function(three, "y", "k")
        assert table.columns.tolist() == POSTHOC
        assert len(table) == 3


def test_two_groups_match_scipy_t_tests(two: pd.DataFrame) -> None:
    a, b = two.loc[two.k == "L0", "y"], two.loc[two.k == "L1", "y"]
    pooled, welch = ss.ttest_ind(b, a), ss.ttest_ind(b, a, equal_var=False)
    aov = anova_oneway(two, "y", "k")
    assert aov.loc[0, "F"] == pytest.approx(pooled.statistic ** 2)
    assert aov.loc[0, "p"] == pytest.approx(pooled.pvalue)
    assert welch_anova(two, "y", "k").loc[0, "p"] == pytest.approx(welch.pvalue, rel=1e-6)
    tk = tukey_hsd(two, "y", "k").iloc[0]
    assert tk["statistic"] == pytest.approx(pooled.statistic)
    assert tk["p"] == pytest.approx(pooled.pvalue) and tk["p_adj"] == pytest.approx(pooled.pvalue, rel=1e-4)
    gh = games_howell(two, "y", "k").iloc[0]
    assert gh["statistic"] == pytest.approx(welch.statistic)
    assert gh["p_adj"] == pytest.approx(welch.pvalue, rel=1e-4)
    ci = welch.confidence_interval(0.95)
    assert (gh["ci_low"], gh["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-6)
    mw = ss.mannwhitneyu(b, a, use_continuity=False, method="asymptotic")
    assert dunn(two, "y", "k").loc[0, "p"] == pytest.approx(mw.pvalue)


def test_estimate_is_group2_minus_group1_and_ci_covers_it(three: pd.DataFrame) -> None:
    means = three.groupby("k")["y"].mean()
    for function in (tukey_hsd, games_howell):
        table = function(three, "y", "k")
        for row in table.itertuples():
            assert row.estimate == pytest.approx(means[row.group2] - means[row.group1])
            assert row.ci_low < row.estimate < row.ci_high
            assert row.p <= row.p_adj <= 1


def test_anova_effect_sizes_by_hand() -> None:
    df = pd.DataFrame({"k": list("aaabbbccc"), "y": [1.0, 2, 3, 2, 3, 4, 6, 7, 8]})
    row = anova_oneway(df, "y", "k").iloc[0]
    # group means 2, 3, 7; grand mean 4: SS_b = 3*(4+1+9) = 42, SS_w = 6 * 1 = 6
    assert (row["ss"], row["F"]) == pytest.approx((42.0, 21.0))
    assert row["eta2"] == pytest.approx(42 / 48)
    assert row["omega2"] == pytest.approx((42 - 2 * 1) / (48 + 1))


def test_kruskal_epsilon2_is_h_over_n_minus_1(three: pd.DataFrame) -> None:
    row = kruskal(three, "y", "k").iloc[0]
    assert row["epsilon2"] == pytest.approx(row["H"] / (len(three) - 1))


def test_dunn_estimate_is_mean_rank_difference_and_adjust_matches(three: pd.DataFrame) -> None:
    ranks = three.assign(r=ss.rankdata(three["y"])).groupby("k")["r"].mean()
    table = dunn(three, "y", "k", p_adjust="bonferroni")
    for row in table.itertuples():
        assert row.estimate == pytest.approx(ranks[row.group2] - ranks[row.group1])
        assert np.sign(row.statistic) == np.sign(row.estimate)
    assert table["p_adj"].to_numpy() == pytest.approx(np.minimum(table["p"].to_numpy() * 3, 1))
    assert table[["ci_low", "ci_high"]].isna().all().all()


@pytest.mark.parametrize("value,diagonal,sign", [("p_adj", 1.0, 1), ("p", 1.0, 1), ("estimate", 0.0, -1)])
def test_to_matrix_symmetry(three: pd.DataFrame, value: str, diagonal: float, sign: int) -> None:
    matrix = to_matrix(tukey_hsd(three, "y", "k"), value=value)
    assert matrix.index.tolist() == matrix.columns.tolist() == ["L0", "L1", "L2"]
    assert np.diag(matrix.to_numpy()).tolist() == [diagonal] * 3
    np.testing.assert_allclose(matrix.to_numpy(), sign * matrix.to_numpy().T)


def test_compact_letters_on_separated_groups() -> None:
    # a and b overlap, c is far above both, d overlaps c only
    long = pd.DataFrame({"group1": ["a", "a", "a", "b", "b", "c"], "group2": ["b", "c", "d", "c", "d", "d"],
                         "p_adj": [0.6, 0.001, 0.002, 0.001, 0.003, 0.4]})
    letters = compact_letters(long).set_index("group")["letters"].to_dict()
    assert letters == {"a": "a", "b": "a", "c": "b", "d": "b"}
    assert compact_letters(long, order=["c", "d", "a", "b"])["letters"].tolist() == ["a", "a", "b", "b"]


def test_compact_letters_overlapping_chain() -> None:
    # a~b, b~c, but a differs from c: b shares a letter with each
    long = pd.DataFrame({"group1": ["a", "a", "b"], "group2": ["b", "c", "c"], "p_adj": [0.3, 0.01, 0.3]})
    assert compact_letters(long)["letters"].tolist() == ["a", "ab", "b"]


def test_compact_letters_property_on_random_tables() -> None:
    rng = np.random.default_rng(0)
    groups = list("abcdef")
    for _ in range(20):
        pairs = list(itertools.combinations(groups, 2))
        long = pd.DataFrame({"group1": [p[0] for p in pairs], "group2": [p[1] for p in pairs],
                             "p_adj": rng.choice([0.001, 0.5], size=len(pairs))})
        letters = compact_letters(long).set_index("group")["letters"]
        for row in long.itertuples():
            share = bool(set(letters[row.group1]) & set(letters[row.group2]))
            assert share == (row.p_adj >= 0.05)


def test_anova_factorial_balanced_types_agree_with_oneway() -> None:
    rng = np.random.default_rng(2)
    df = pd.DataFrame(list(itertools.product([1, 2, 3], ["x", "y"], range(3))), columns=["a.b", "c[d]@client", "r"])
    df["y"] = 5 * (df["a.b"] == 3) + 2 * (df["c[d]@client"] == "y") + rng.normal(0, 1, len(df))
    t2 = anova_factorial(df, "y", ["a.b", "c[d]@client"], typ=2)
    t3 = anova_factorial(df, "y", ["a.b", "c[d]@client"], typ=3)
    assert t2["source"].tolist() == ["a.b", "c[d]@client", "a.b:c[d]@client", "Residual"]
    assert t2.columns.tolist() == ["source", "ss", "df", "F", "p", "partial_eta2"]
    np.testing.assert_allclose(t2["ss"], t3["ss"], rtol=1e-8)  # balanced: type II == type III
    assert t2.loc[0, "ss"] == pytest.approx(anova_oneway(df, "y", "a.b").loc[0, "ss"])
    main = anova_factorial(df, "y", ["a.b", "c[d]@client"], interactions=False)
    assert main["source"].tolist() == ["a.b", "c[d]@client", "Residual"]


def test_anova_factorial_without_residual_df_says_what_to_do() -> None:
    df = pd.DataFrame(list(itertools.product([0, 1], [0, 1], [0, 1])), columns=["a", "b", "c"])
    df["y"] = np.arange(8.0) ** 1.5
    with pytest.raises(DataError, match="no residual degrees of freedom.*lenth_effects"):
        anova_factorial(df, "y", ["a", "b", "c"])


def test_lenth_by_hand() -> None:
    df = pd.DataFrame(list(itertools.product([-1, 1], repeat=3)), columns=["a", "b", "c"])
    noise = np.array([0.1, -0.2, 0.15, 0.05, -0.1, 0.2, -0.05, 0.0])
    df["y"] = 50 + 10 * df["a"] + noise
    table = lenth_effects(df, "y", ["a", "b", "c"])
    assert table["term"].tolist() == ["a", "b", "c", "a:b", "a:c", "b:c", "a:b:c"]
    x = {t: np.prod([df[f] for f in t.split(":")], axis=0) for t in table["term"]}
    effects = np.array([df["y"][x[t] > 0].mean() - df["y"][x[t] < 0].mean() for t in table["term"]])
    np.testing.assert_allclose(table["effect"], effects)
    s0 = 1.5 * np.median(np.abs(effects))
    pse = 1.5 * np.median(np.abs(effects)[np.abs(effects) < 2.5 * s0])
    assert table.loc[0, "pse"] == pytest.approx(pse)
    assert table["significant_me"].tolist() == [True] + [False] * 6
    assert table.loc[0, "t"] == pytest.approx(effects[0] / pse)


def test_lenth_refuses_three_level_factor() -> None:
    df = pd.DataFrame({"a": [1, 2, 3, 1, 2, 3], "b": [0, 0, 0, 1, 1, 1], "y": np.arange(6.0)})
    with pytest.raises(DataError, match="two-level factors.*'a' has 3 levels"):
        lenth_effects(df, "y", ["a", "b"])


def test_cohens_d_by_hand() -> None:
    df = pd.DataFrame({"k": list("aaabbb"), "y": [1.0, 2, 3, 2, 3, 4]})
    row = cohens_d(df, "y", "k", "a", "b").iloc[0]
    assert row["d"] == pytest.approx(1.0)  # means 2 and 3, pooled SD 1
    assert row["g"] == pytest.approx(1.0 * (1 - 3 / (4 * 6 - 9)))
    assert row["ci_low"] < row["g"] < row["ci_high"]
    assert cohens_d(df, "y", "k", "b", "a").loc[0, "d"] == pytest.approx(-1.0)
    with pytest.raises(DataError, match="'z' is not a level of 'k'"):
        cohens_d(df, "y", "k", "a", "z")


def test_pct_change_estimate_ci_and_seed(three: pd.DataFrame) -> None:
    table = pct_change(three, "y", "k", baseline="L0", n_boot=500, seed=3)
    means = three.groupby("k")["y"].mean()
    assert table["level"].tolist() == ["L1", "L2"]
    assert table.loc[1, "pct_change"] == pytest.approx(100 * (means["L2"] / means["L0"] - 1))
    assert (table["ci_low"] < table["pct_change"]).all() and (table["pct_change"] < table["ci_high"]).all()
    pd.testing.assert_frame_equal(table, pct_change(three, "y", "k", baseline="L0", n_boot=500, seed=3))
    with pytest.raises(DataError, match="baseline 'nope' is not a level"):
        pct_change(three, "y", "k", baseline="nope")


def test_holm_matches_statsmodels_and_nan_is_kept() -> None:
    rng = np.random.default_rng(5)
    p = rng.uniform(0, 0.2, 12)
    for method in ("holm", "bonferroni", "fdr_bh"):
        np.testing.assert_allclose(adjust(p, method), multipletests(p, method=method)[1])
    out = adjust([0.01, np.nan, 0.02], "holm")
    assert np.isnan(out[1]) and out[[0, 2]] == pytest.approx([0.02, 0.02])
    with pytest.raises(DataError, match="unknown p-value adjustment 'BH'"):
        adjust(p, "BH")


def test_tost_equivalent_and_not() -> None:
    base = [100.0, 101, 99, 100.5, 99.5]
    close = pd.DataFrame({"k": ["a"] * 5 + ["b"] * 5, "y": base + [100.2, 100.8, 99.6, 100.1, 99.9]})
    far = pd.DataFrame({"k": ["a"] * 5 + ["b"] * 5, "y": base + [108.0, 109, 107, 108.5, 107.5]})
    row = tost(close, "y", "k", "b", "a", sesoi_pct=5).iloc[0]
    assert row["equivalent"] and row["p"] == max(row["p_lower"], row["p_upper"])
    assert (row["lower_bound"], row["upper_bound"]) == pytest.approx((-5.0, 5.0))
    assert not tost(far, "y", "k", "b", "a", sesoi_pct=5).loc[0, "equivalent"]


def test_power() -> None:
    assert replicates_needed(pilot_sd=10, baseline_mean=100, pct_change=10) == 17  # d = 1: textbook n = 17
    assert replicates_needed(10, 100, 5) > replicates_needed(10, 100, 10)
    assert replicates_needed(10, 100, 10, n_groups=4) > replicates_needed(10, 100, 10, n_groups=2)
    small = achieved_power(_groups([10, 11], [1, 1], n=4), "y", "k", pct_change=10)
    large = achieved_power(_groups([10, 11], [1, 1], n=40), "y", "k", pct_change=10)
    assert small.columns.tolist() == ["n_per_group", "effect_size", "power"]
    assert 0 < small.loc[0, "power"] < large.loc[0, "power"] <= 1
    with pytest.raises(DataError, match="pilot_sd must be positive"):
        replicates_needed(0, 100, 10)
