"""Range regression and Morris elementary effects (``tunelab.stats.response``) on known truths.

The range regression is checked against statsmodels' OLS of the same coded model (F tests and
coefficient intervals), on a simulated Latin hypercube with one curved active knob and one null
knob, and for its false-positive rate under the null. Morris effects are checked against
``SALib.analyze.morris.analyze`` on the same points and against exact elementary effects of a
linear function.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from SALib.analyze import morris as salib_morris
from SALib.sample import latin as salib_latin
from SALib.sample import morris as salib_morris_sample

from tunelab.errors import DataError
from tunelab.stats.response import CURVE_COLUMNS, MORRIS_COLUMNS, TERMS_COLUMNS, morris_effects, range_effects

N_SIM = 400
Z99 = 2.58


def truth(x1: np.ndarray) -> np.ndarray:
    """log of 100 · exp(0.1 c - 0.05 c²) with c = x1 coded from [0, 100] to [-1, 1]."""
    c = (np.asarray(x1, dtype=float) - 50) / 50
    return np.log(100) + 0.1 * c - 0.05 * c ** 2


def lhs_runs(n: int, seed: int, cv: float = 0.01) -> pd.DataFrame:
    """A Latin hypercube of ``n`` runs over x1, x2 in [0, 100] (integers); x2 does nothing."""
    rng = np.random.default_rng(seed)
    unit = salib_latin.sample({"num_vars": 2, "names": ["x1", "x2"], "bounds": [[0, 1], [0, 1]]}, n, seed=rng)
    frame = pd.DataFrame({"x1": np.rint(unit[:, 0] * 100).astype(int), "x2": np.rint(unit[:, 1] * 100).astype(int)})
    return frame.assign(qps=np.exp(truth(frame["x1"]) + rng.normal(0, cv, n)))


BASELINE = {"x1": 50, "x2": 50}


# --------------------------------------------------------------------------------------------
# range_effects


def test_the_active_knob_is_found_and_the_null_knob_is_not() -> None:
    terms, curves = range_effects(lhs_runs(30, seed=3), "qps", ["x1", "x2"], BASELINE, log_y=True)
    assert list(terms.columns) == TERMS_COLUMNS and list(curves.columns) == CURVE_COLUMNS
    by = terms.set_index("knob")
    assert terms["knob"].tolist() == ["x1", "x2"] and terms["rank"].tolist() == [1, 2]
    assert (terms["shape"] == "quadratic").all() and (terms["df1"] == 2).all() and (terms["df2"] == 25).all()
    assert by.at["x1", "p"] < 1e-10
    assert by.at["x1", "x_at_min"] == by.at["x1", "x_min"]                     # the fall is at the low end
    assert by.at["x1", "change_min"] == pytest.approx(truth(by.at["x1", "x_min"]) - truth(50), abs=0.02)
    assert by.at["x1", "change_min_high"] < -0.1
    assert by.at["x2", "p"] > 0.2
    null = curves[curves["knob"] == "x2"]
    assert ((null["ci_low"] <= 0) & (null["ci_high"] >= 0)).all()
    assert by.at["x2", "max_abs_ci"] < math.log(1.05)                          # equivalent at a 5 % SESOI
    assert by.at["x1", "max_abs_ci"] > math.log(1.05)


def test_the_curve_covers_the_true_response_of_the_active_knob() -> None:
    _, curves = range_effects(lhs_runs(40, seed=5), "qps", ["x1", "x2"], BASELINE, log_y=True, grid=11)
    curve = curves[curves["knob"] == "x1"]
    assert len(curve) == 11 and curve["x"].is_monotonic_increasing
    true_change = truth(curve["x"]) - truth(50)
    assert ((curve["ci_low"] <= true_change) & (true_change <= curve["ci_high"])).all()
    at_baseline = curve.loc[(curve["x"] - 50).abs().idxmin()]
    assert abs(at_baseline["estimate"]) < 0.01


def test_f_tests_and_coefficients_match_statsmodels_ols() -> None:
    runs = lhs_runs(25, seed=8, cv=0.03)
    terms, _ = range_effects(runs, "qps", ["x1", "x2"], BASELINE, log_y=True, alpha=0.1)
    coded = runs.assign(y=np.log(runs["qps"]),
                        c1=2 * (runs["x1"] - runs["x1"].min()) / (runs["x1"].max() - runs["x1"].min()) - 1,
                        c2=2 * (runs["x2"] - runs["x2"].min()) / (runs["x2"].max() - runs["x2"].min()) - 1)
    fit = smf.ols("y ~ c1 + I(c1**2) + c2 + I(c2**2)", coded).fit()
    ci = fit.conf_int(alpha=0.1)
    by = terms.set_index("knob")
    for knob, c in (("x1", "c1"), ("x2", "c2")):
        test = fit.f_test(f"{c} = 0, I({c} ** 2) = 0")
        assert by.at[knob, "statistic"] == pytest.approx(float(np.squeeze(test.fvalue)), rel=1e-9)
        assert by.at[knob, "p"] == pytest.approx(float(test.pvalue), rel=1e-6)
        assert by.at[knob, "linear"] == pytest.approx(fit.params[c], rel=1e-9)
        assert (by.at[knob, "linear_low"], by.at[knob, "linear_high"]) == pytest.approx(tuple(ci.loc[c]), rel=1e-9)
        assert (by.at[knob, "quadratic_low"], by.at[knob, "quadratic_high"]) == pytest.approx(
            tuple(ci.loc[f"I({c} ** 2)"]), rel=1e-9)


def test_few_runs_give_a_linear_model_and_say_so() -> None:
    runs = lhs_runs(6, seed=2)                                  # 6 runs: 6 - (1 + 2 + 2) < 3 residual df
    terms, curves = range_effects(runs, "qps", ["x1", "x2"], BASELINE, log_y=True)
    assert (terms["shape"] == "linear").all() and (terms["df1"] == 1).all() and (terms["df2"] == 3).all()
    assert terms["quadratic"].isna().all() and terms["p"].notna().all()
    assert len(curves) == 2 * 21


def test_a_two_valued_knob_stays_linear_beside_a_curved_one() -> None:
    runs = lhs_runs(24, seed=4).assign(flag=[0, 1] * 12)
    terms, _ = range_effects(runs, "qps", ["x1", "flag"], {"x1": 50, "flag": 0}, log_y=True)
    assert terms.set_index("knob")["shape"].to_dict() == {"x1": "quadratic", "flag": "linear"}


def test_a_log_scale_knob_is_regressed_on_log_x_with_a_geometric_grid() -> None:
    rng = np.random.default_rng(6)
    x = np.rint(np.exp(rng.uniform(np.log(16), np.log(65536), 20))).astype(int)
    runs = pd.DataFrame({"backlog": x, "qps": 1000 + 50 * np.log2(x) + rng.normal(0, 1, 20)})
    terms, curves = range_effects(runs, "qps", ["backlog"], {"backlog": 4096}, x_scale={"backlog": "log"})
    assert terms["shape"].iloc[0] == "quadratic" and abs(terms["quadratic"].iloc[0]) < 2
    grid = curves["x"].to_numpy()
    ratios = grid[1:] / grid[:-1]
    assert ratios == pytest.approx(np.full(len(ratios), ratios.mean()), rel=1e-6)
    # +50 per doubling: from 4096 up to the largest value observed
    assert terms["change_max"].iloc[0] == pytest.approx(50 * math.log2(x.max() / 4096), abs=3)


def test_failed_runs_are_left_out() -> None:
    runs = lhs_runs(20, seed=1)
    with_failures = pd.concat([runs, runs.head(3).assign(qps=np.nan)], ignore_index=True)
    a, _ = range_effects(runs, "qps", ["x1", "x2"], BASELINE, log_y=True)
    b, _ = range_effects(with_failures, "qps", ["x1", "x2"], BASELINE, log_y=True)
    pd.testing.assert_frame_equal(a, b)


def test_the_null_knob_is_rejected_at_the_nominal_rate() -> None:
    """x2 does nothing: its F test rejects in at most alpha + 2.58 Monte-Carlo SE of null data sets."""
    rejections = sum(
        range_effects(lhs_runs(16, seed=1000 + i), "qps", ["x1", "x2"], BASELINE, log_y=True)[0]
        .set_index("knob").at["x2", "p"] < 0.05
        for i in range(N_SIM))
    rate = rejections / N_SIM
    assert rate <= 0.05 + Z99 * math.sqrt(0.05 * 0.95 / N_SIM), f"null knob rejected in {rate:.3f} of data sets"


@pytest.mark.parametrize(("mutate", "kwargs", "expected"), [
    (lambda d: d.head(3), {}, "3 usable runs of 'qps' are too few for 2 knob(s): the linear model has 3 parameters"),
    (lambda d: d.assign(x2=7), {}, "knob 'x2' takes the single value 7 in the 20 usable runs"),
    (lambda d: d.assign(x2=d["x1"] * 2 + 1), {}, "knob 'x2' is confounded with 'x1' in these runs"),
    (lambda d: d.assign(x2=["a", "b"] * 10), {}, "knob column 'x2' is not numeric (values like 'a')"),
    (lambda d: d, {"baseline": {"x1": 50}}, "baseline has no value for knob 'x2'"),
    (lambda d: d, {"x_scale": {"x3": "log"}}, "x_scale names 'x3', which is not one of knobs"),
    (lambda d: d, {"x_scale": {"x1": "log"}}, "knob 'x1' has values <= 0"),
    (lambda d: d.assign(qps=d["qps"] - 1000), {"log_y": True}, "cannot be analysed on the log scale"),
    (lambda d: d, {"alpha": 0.6}, "alpha must be a number between 0 and 0.5"),
    (lambda d: d, {"grid": 1}, "grid must be a whole number from 2"),
    (lambda d: d.rename(columns={"qps": "rate"}), {}, "unknown column 'qps'"),
], ids=["too-few-runs", "single-value", "confounded", "words", "no-baseline", "unknown-scale", "log-of-zero",
        "log-y-negative", "alpha", "grid", "unknown-dv"])
def test_bad_input_is_one_clear_data_error(mutate, kwargs, expected: str) -> None:
    runs = mutate(lhs_runs(20, seed=9).assign(x1=lambda d: d["x1"].clip(lower=0)))
    if "x_scale" in kwargs and kwargs["x_scale"].get("x1") == "log":
        runs = runs.assign(x1=np.arange(20) * 5)              # includes 0
    args = {"baseline": BASELINE, **kwargs}
    with pytest.raises(DataError) as info:
        range_effects(runs, "qps", ["x1", "x2"], args.pop("baseline"), **args)
    assert expected in str(info.value) and "\n" not in str(info.value)


# --------------------------------------------------------------------------------------------
# morris_effects

PROBLEM = {"num_vars": 3, "names": ["a", "b", "c"], "bounds": [[0, 10], [100, 200], [1, 5]]}
BOUNDS = {"a": (0, 10), "b": (100, 200), "c": (1, 5)}


def morris_points(trajectories: int = 12, seed: int = 3) -> pd.DataFrame:
    return pd.DataFrame(salib_morris_sample.sample(PROBLEM, trajectories, num_levels=4, seed=seed),
                        columns=["a", "b", "c"])


def test_linear_effects_give_exact_mu_star_ranked_largest_first() -> None:
    points = morris_points()
    # per whole range: a +30 (3 per unit over 10), b -50 (-0.5 per unit over 100), c 0
    runs = points.assign(y=3 * points["a"] - 0.5 * points["b"] + 0 * points["c"])
    out = morris_effects(points, runs, "y", ["a", "b", "c"], BOUNDS)
    assert list(out.columns) == MORRIS_COLUMNS
    assert out["knob"].tolist() == ["b", "a", "c"]
    np.testing.assert_allclose(out["mu_star"], [50, 30, 0], atol=1e-9)
    np.testing.assert_allclose(out["mu"], [-50, 30, 0], atol=1e-9)
    np.testing.assert_allclose(out["sigma"], [0, 0, 0], atol=1e-9)


def test_matches_salib_on_a_nonlinear_function_with_an_interaction() -> None:
    points = morris_points(trajectories=20, seed=7)
    a, b, c = (points[k] for k in "abc")
    y = (a / 10) ** 2 * 40 + np.sin(b / 100 * math.pi) * 5 + (a / 10) * (c - 1)
    runs = points.assign(y=y)
    out = morris_effects(points, runs, "y", ["a", "b", "c"], BOUNDS, seed=4, num_resamples=500)
    ref = salib_morris.analyze(PROBLEM, points.to_numpy(), y.to_numpy(), num_resamples=500, num_levels=4, seed=4)
    by = out.set_index("knob")
    for column in ("mu", "mu_star", "sigma", "mu_star_conf"):
        np.testing.assert_allclose(by.loc[["a", "b", "c"], column], ref[column], rtol=1e-12, atol=1e-12)
    assert out["knob"].iloc[0] == "a" and by.at["c", "sigma"] > 0                # c acts only through a


def test_each_points_response_is_the_mean_of_its_runs_and_log_y_uses_logs() -> None:
    points = morris_points(trajectories=4)
    y = np.exp(0.02 * points["a"])
    noisy = pd.concat([points.assign(y=y * 1.01), points.assign(y=y / 1.01)], ignore_index=True)
    out = morris_effects(points, noisy, "y", ["a", "b", "c"], BOUNDS, log_y=True).set_index("knob")
    assert out.at["a", "mu_star"] == pytest.approx(0.2, abs=1e-9)                 # log change over [0, 10]
    assert out.at["b", "mu_star"] == pytest.approx(0.0, abs=1e-9)


def test_a_point_without_a_usable_run_names_its_configuration() -> None:
    points = pd.DataFrame({"a": [0, 10, 10, 5, 5, 10], "b": [100, 100, 200, 100, 200, 200]})
    runs = points.assign(y=[1.0, 2, 3, 4, np.nan, 6])
    with pytest.raises(DataError) as info:
        morris_effects(points, runs, "y", ["a", "b"], {"a": (0, 10), "b": (100, 200)}, levels=2)
    message = str(info.value)
    assert "configuration a=5, b=200 (point 4, trajectory 1 of the Morris design) has no usable run of 'y'" in message
    assert "\n" not in message


@pytest.mark.parametrize(("points", "bounds", "kwargs", "expected"), [
    ({"a": [0, 10, 10, 0, 0, 0], "b": [100, 200, 200, 200, 100, 200]}, None, {},
     "points 0 and 1 differ in 2 knobs"),
    ({"a": [0, 10, 10, 0, 0], "b": [100, 100, 200, 200, 100]}, None, {}, "5 points do not make two or more whole"),
    ({"a": [0, 10, 10, 0, 0, 20], "b": [100, 100, 200, 200, 100, 100]}, None, {},
     "point 5 has a=20, outside bounds [0, 10]"),
    ({"a": [0, 10, 10, 0, 0, 10], "b": [100, 100, 200, 200, 100, 100]}, {"a": (0, 10)}, {},
     "bounds has no (low, high) for knob 'b'"),
    ({"a": [0, 10, 10, 0, 0, 10], "b": [100, 100, 200, 200, 100, 100]}, {"a": (10, 0), "b": (100, 200)}, {},
     "`low < high` must hold"),
    ({"a": [0, 10, 10, 0, 0, 10], "b": [100, 100, 200, 200, 100, 100]}, None, {"levels": 3}, "levels must be even"),
    ({"a": [0, 10, 10, 0, 0, 10]}, None, {}, "points have no column 'b'"),
], ids=["two-moves", "partial-trajectory", "outside-bounds", "no-bounds", "bad-bounds", "odd-levels", "no-column"])
def test_bad_morris_input_is_one_clear_data_error(points, bounds, kwargs, expected: str) -> None:
    frame = pd.DataFrame(points)
    runs = pd.DataFrame({"a": [0, 10, 0, 10], "b": [100, 100, 200, 200], "y": [1.0, 2, 3, 4]})
    with pytest.raises(DataError) as info:
        morris_effects(frame, runs, "y", ["a", "b"], bounds or {"a": (0, 10), "b": (100, 200)},
                       **{"levels": 2, **kwargs})
    assert expected in str(info.value) and "\n" not in str(info.value)
