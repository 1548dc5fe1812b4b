"""Guards of the speed paths: where tunelab.stats computes a library's arithmetic itself (for speed,
see docs/stats-notes.md, "Screen speed"), it must give the library's numbers.

* ``tunelab.stats._studentized_range`` against ``scipy.stats.studentized_range`` (whose adaptive
  integration has ``epsabs=1e-11``) and against 30-digit mpmath values
  (tests/stats/reference/studentized_range_mpmath.py);
* ``tukey_hsd`` against statsmodels ``pairwise_tukeyhsd``, ``games_howell`` against pingouin
  ``pairwise_gameshowell``, ``anova_oneway`` (scipy ``f_oneway`` + sums of squares) against
  statsmodels ``anova_lm``;
* ``pct_change`` (numpy percentile bootstrap) against ``scipy.stats.bootstrap`` and by coverage;
* ``screen``'s tables against the public functions on the same rows;
* the numpy level encoding against the Python-object one.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy import stats as ss
from statsmodels.stats.multicomp import pairwise_tukeyhsd

from tunelab import stats
from tunelab.stats import _studentized_range as srange
from tunelab.stats._validate import encode, sorted_levels
from tunelab.stats.posthoc import POSTHOC_COLUMNS

REFERENCE_DIR = Path(__file__).parent / "reference"
_spec = importlib.util.spec_from_file_location("mpmath_reference", REFERENCE_DIR / "studentized_range_mpmath.py")
MPMATH = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MPMATH)

DATASETS = {  # (file, dv, between) from the R reference data; balanced and unbalanced, k = 2..6
    "PlantGrowth": ("weight", "group"),
    "InsectSprays": ("count", "spray"),
    "InsectSprays_unbalanced": ("count", "spray"),
    "warpbreaks_unbalanced": ("breaks", "tension"),
    "ToothGrowth": ("len", "supp"),
}


def dataset(name: str) -> tuple[pd.DataFrame, str, str]:
    dv, between = DATASETS[name]
    return pd.read_csv(REFERENCE_DIR / "datasets" / f"{name}.csv"), dv, between


def _heteroscedastic(seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sizes, sds = (9, 14, 6, 11), (1.0, 3.0, 0.5, 2.0)
    return pd.DataFrame({"k": np.repeat(list("abcd"), sizes),
                         "y": np.concatenate([rng.normal(10 + i, s, n) for i, (n, s) in enumerate(zip(sizes, sds))])})


# --- studentized range ----------------------------------------------------------------------------

@pytest.mark.parametrize("df", [1, 1.5, 3.5, 10, 27, 100, 1000, 4917, 30000, 99999, 100000, 1e6])
def test_studentized_range_cdf_matches_scipy(df: float) -> None:
    """scipy's nquad is accurate to ~1e-11 (epsabs); measured |Δ| <= 5e-12 up to df = 1e4 and
    <= 9e-11 at df 3e4-1e5, where the chi density gets narrow for nquad (the mpmath values below
    side with tunelab there)."""
    q = np.array([0.3, 1.0, 2.5, 3.6, 5.0, 8.0])
    tolerance = 1e-11 if df <= 1e4 else 2e-10
    for k in (2, 3, 5, 10):
        expected = ss.studentized_range.cdf(q, k, df)
        np.testing.assert_allclose(srange.cdf(q, k, df), expected, rtol=0, atol=tolerance, err_msg=f"k={k}")
        np.testing.assert_allclose(srange.sf(q, k, df), 1 - expected, rtol=0, atol=tolerance, err_msg=f"k={k}")


@pytest.mark.parametrize("q,k,df,expected", MPMATH.CDF_VALUES)
def test_studentized_range_cdf_matches_30_digit_values(q: float, k: int, df: float, expected: str) -> None:
    assert float(srange.cdf(q, k, df)) == pytest.approx(float(expected), rel=0, abs=1e-15)


@pytest.mark.parametrize("p,k,df,q", MPMATH.PPF_VALUES)
def test_studentized_range_ppf_is_where_the_30_digit_cdf_equals_p(p: float, k: int, df: float, q: float) -> None:
    """``q`` was computed by ``srange.ppf`` when the mpmath values were made; the 30-digit cdf at
    ``q`` is ``p`` to 1e-15 (see the reference script), so here ``ppf`` must still give that q."""
    assert float(srange.ppf(p, k, df)) == pytest.approx(q, rel=1e-13)


@pytest.mark.parametrize("df", [2, 3.5, 27, 1000, 4917, 1e6])
def test_studentized_range_ppf_matches_scipy(df: float) -> None:
    for k in (3, 10):
        for p in (0.9, 0.95, 0.99):
            assert float(srange.ppf(p, k, df)) == pytest.approx(ss.studentized_range.ppf(p, k, df), rel=1e-9)


def test_studentized_range_ppf_inverts_cdf_and_edge_values() -> None:
    p = np.array([0.001, 0.05, 0.5, 0.95, 0.999, 0.999999])
    for k in (2, 3, 7, 40):
        for df in (1, 2.7, 19, 5000, np.inf):
            np.testing.assert_allclose(srange.cdf(srange.ppf(p, k, df), k, df), p, rtol=0, atol=1e-14)
    # k = 2: the studentized range of two means is sqrt(2) |t|
    assert float(srange.ppf(0.95, 2, 12)) == pytest.approx(np.sqrt(2) * ss.t.ppf(0.975, 12), rel=1e-14)
    assert float(srange.sf(3.0, 2, 12)) == pytest.approx(2 * ss.t.sf(3.0 / np.sqrt(2), 12), rel=1e-14)
    # df < 1 is scipy's own computation
    assert float(srange.cdf(3.0, 3, 0.5)) == ss.studentized_range.cdf(3.0, 3, 0.5)
    assert srange.cdf([0.0, -1.0, np.inf], 3, 10).tolist() == [0.0, 0.0, 1.0]
    assert np.isnan(srange.sf(np.nan, 3, 10)) and np.isnan(srange.cdf(3.0, 3, np.nan))
    assert np.isnan(srange.ppf(0.95, 1, 10)) and np.isnan(srange.ppf(0.95, 3, 0))
    assert srange.ppf([0.0, 1.0], 3, 10).tolist() == [0.0, np.inf]


# --- library arithmetic repeated for speed ------------------------------------------------------

@pytest.mark.parametrize("name", sorted(DATASETS))
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_tukey_hsd_equals_statsmodels(name: str, alpha: float) -> None:
    data, dv, between = dataset(name)
    got = stats.tukey_hsd(data, dv, between, alpha=alpha)
    result = pairwise_tukeyhsd(data[dv].to_numpy(float), data[between].to_numpy(), alpha=alpha)
    i1, i2 = np.triu_indices(len(result.groupsunique), 1)
    assert got["group1"].tolist() == result.groupsunique[i1].tolist()
    assert got["group2"].tolist() == result.groupsunique[i2].tolist()
    np.testing.assert_allclose(got["estimate"], result.meandiffs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[["ci_low", "ci_high"]].to_numpy(), result.confint, rtol=1e-10)
    np.testing.assert_allclose(got["p_adj"], np.clip(result.pvalues, 0, 1), rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", sorted(DATASETS) + ["heteroscedastic"])
def test_games_howell_equals_pingouin(name: str) -> None:
    data, dv, between = dataset(name) if name != "heteroscedastic" else (_heteroscedastic(), "y", "k")
    got = stats.games_howell(data, dv, between)
    table = pg.pairwise_gameshowell(data=data, dv=dv, between=between)
    np.testing.assert_allclose(got["estimate"], -table["diff"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["statistic"], -table["T"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["p_adj"], table["pval"], rtol=0, atol=1e-10)
    k = data[between].nunique()
    critical = (ss.t.ppf(0.975, table["df"]) if k == 2
                else ss.studentized_range.ppf(0.95, k, table["df"].to_numpy()) / np.sqrt(2))
    np.testing.assert_allclose(got["ci_high"] - got["estimate"], critical * table["se"], rtol=1e-9)


@pytest.mark.parametrize("name", sorted(DATASETS) + ["heteroscedastic"])
def test_oneway_anova_equals_statsmodels_anova_lm(name: str) -> None:
    data, dv, between = dataset(name) if name != "heteroscedastic" else (_heteroscedastic(), "y", "k")
    frame = pd.DataFrame({"y": data[dv].astype(float), "g": pd.factorize(data[between], sort=True)[0]})
    expected = sm.stats.anova_lm(smf.ols("y ~ C(g)", data=frame).fit(), typ=1)
    got = stats.anova_oneway(data, dv, between)
    np.testing.assert_allclose(got["ss"], expected["sum_sq"], rtol=1e-10)
    np.testing.assert_allclose(got["df"], expected["df"])
    np.testing.assert_allclose(got["ms"], expected["mean_sq"], rtol=1e-10)
    assert got.loc[0, "F"] == pytest.approx(expected["F"].iloc[0], rel=1e-10)
    assert got.loc[0, "p"] == pytest.approx(expected["PR(>F)"].iloc[0], rel=1e-9)


def test_oneway_anova_of_constant_groups_is_exact() -> None:
    """Where statsmodels' least-squares residuals leave rounding noise (SS_within 3e-30, F 1e30),
    the group-mean sums of squares are exact: F = inf, p = 0, or NaN when nothing varies."""
    steps = pd.DataFrame({"k": list("aaabbbccc"), "y": [1.0, 1, 1, 2, 2, 2, 3, 3, 3]})
    row = stats.anova_oneway(steps, "y", "k").iloc[0]
    assert (row["ss"], row["F"], row["p"], row["eta2"]) == (6.0, np.inf, 0.0, 1.0)
    flat = stats.anova_oneway(steps.assign(y=1.0), "y", "k").iloc[0]
    assert flat["ss"] == 0.0 and np.isnan(flat["F"]) and np.isnan(flat["p"])


# --- bootstrap -----------------------------------------------------------------------------------

def test_pct_change_interval_agrees_with_scipy_bootstrap() -> None:
    """Same estimator as scipy.stats.bootstrap(method='percentile') with the two groups resampled
    independently: with 20,000 resamples each the endpoints differ by Monte Carlo error only
    (SE ~0.5 % of the interval width; allowed 3 %)."""
    rng = np.random.default_rng(11)
    base, level = 100 + 10 * rng.exponential(size=25), 104 + 10 * rng.exponential(size=35)
    data = pd.DataFrame({"k": ["base"] * 25 + ["new"] * 35, "y": np.concatenate([base, level])})
    got = stats.pct_change(data, "y", "k", "base", n_boot=20_000, seed=5).iloc[0]

    def statistic(x: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return 100 * (np.mean(x, axis=axis) / np.mean(b, axis=axis) - 1)

    expected = ss.bootstrap((level, base), statistic, n_resamples=20_000, method="percentile", vectorized=True,
                            rng=np.random.default_rng(6)).confidence_interval
    width = expected.high - expected.low
    assert got["pct_change"] == pytest.approx(statistic(level, base))
    assert abs(got["ci_low"] - expected.low) < 0.03 * width
    assert abs(got["ci_high"] - expected.high) < 0.03 * width


def test_pct_change_interval_covers_the_true_change() -> None:
    """400 seeded data sets (normal, 30 per group, true change +5 %): coverage 0.95 ± 3 SE."""
    rng = np.random.default_rng(7)
    hits = 0
    for r in range(400):
        y = np.concatenate([rng.normal(100, 10, 30), rng.normal(105, 10, 30)])
        row = stats.pct_change(pd.DataFrame({"k": ["a"] * 30 + ["b"] * 30, "y": y}), "y", "k", "a",
                               n_boot=1000, seed=r).iloc[0]
        hits += row["ci_low"] <= 5.0 <= row["ci_high"]
    assert abs(hits / 400 - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / 400)


# --- screen uses the public functions' numbers ---------------------------------------------------

def _oat(seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for rep in range(6):
        for a, b in [(1, "x"), (2, "x"), (3, "x"), (1, "y"), (1, "z")]:
            noise = rng.normal(0, 20 if b != "z" else 45)
            rows.append({"a": a, "b": b, "qps": 1000 * (1 + 0.05 * (a == 3)) + noise})
    return pd.DataFrame(rows)


def test_screen_tables_equal_the_public_functions() -> None:
    data = _oat()
    result = stats.screen(data, [{"name": "qps", "direction": "maximize", "sesoi_pct": 2}], ["a", "b"],
                          {"a": 1, "b": "x"}, n_boot=400, seed=9)
    for knob, other, base in (("a", ("b", "x"), 1), ("b", ("a", 1), "x")):
        sub = data[data[other[0]] == other[1]].reset_index(drop=True)
        for method, function in (("tukey_hsd", stats.tukey_hsd), ("games_howell", stats.games_howell),
                                 ("dunn", stats.dunn)):
            got = result.posthoc.query("knob == @knob and method == @method")[POSTHOC_COLUMNS]
            pd.testing.assert_frame_equal(got.reset_index(drop=True), function(sub, "qps", knob), check_dtype=False)
        effects = result.effects.query("knob == @knob").drop(columns=["knob", "metric"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(effects, stats.pct_change(sub, "qps", knob, base, n_boot=400, seed=9),
                                      check_dtype=False)
        omnibus = result.omnibus.query("knob == @knob").set_index("test")
        assert omnibus.loc["anova", "p"] == stats.anova_oneway(sub, "qps", knob).loc[0, "p"]
        assert omnibus.loc["welch_anova", "df2"] == stats.welch_anova(sub, "qps", knob).loc[0, "df2"]
        assert omnibus.loc["kruskal", "statistic"] == stats.kruskal(sub, "qps", knob).loc[0, "H"]
        assumptions = result.assumptions.query("knob == @knob").set_index("test")["p"]
        assert assumptions["shapiro_wilk_standardized"] == stats.normality(sub, "qps", knob, standardize=True)["p"][0]
        assert assumptions["brown_forsythe"] == stats.homoscedasticity(sub, "qps", knob)["p"][1]
        level = stats.tost(sub, "qps", knob, sub[knob].iloc[-1], base, 2)
        got = result.equivalence.query("knob == @knob and level == @level.level[0]")
        assert got["p"].tolist() == level["p"].tolist()


# --- level encoding ------------------------------------------------------------------------------

@pytest.mark.parametrize("values", [
    pd.Series([3, 1, 2, 3, 1]),
    pd.Series([0.5, -1.0, 0.5, 2.25]),
    pd.Series([True, False, True]),
    pd.Series(np.array([7, 7, 9], dtype=np.uint16)),
    pd.Series(["b", "a", "b"]),
    pd.Series([(1, 2), (0, 5), (1, 2)]),
    pd.Series([1, "x", 1, "x"], dtype=object),
])
def test_level_encoding_equals_the_python_object_path(values: pd.Series) -> None:
    levels = sorted_levels(values)
    reference_levels = list(dict.fromkeys(values.tolist()))
    assert sorted(map(repr, levels)) == sorted(map(repr, reference_levels))
    index = {level: i for i, level in enumerate(levels)}
    assert encode(values, levels).tolist() == [index[v] for v in values.tolist()]
    assert encode(values, levels[::-1]).tolist() == [len(levels) - 1 - index[v] for v in values.tolist()]
