"""Seed 004 (Wayfinder): best found against evaluations, the % change with its CI, the figure, the claim row."""
from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from scipy import stats as ss

from tunelab.errors import SeedError
from tunelab.seeds.s004_wayfinder import (_measured, best_found, best_found_figure, configuration_values,
                                          method_runs, pct_change_ci)


def test_best_found_is_the_running_best_per_method():
    runs = {"a": pd.DataFrame({"k": [1, 2, 3, 4], "y": [10.0, 30.0, 20.0, 40.0]}),
            "b": pd.DataFrame({"k": [5, 6], "y": [7.0, 3.0]})}
    curve = best_found(runs, "y", ["k"])
    assert curve[curve["method"] == "a"]["best"].tolist() == [10.0, 30.0, 30.0, 40.0]
    assert curve[curve["method"] == "b"]["best"].tolist() == [7.0, 7.0]
    assert curve["evaluation"].tolist() == [1, 2, 3, 4, 1, 2]
    assert curve.iloc[3]["best_config"] == {"k": 4}


def test_best_found_minimises_and_averages_repeated_configurations():
    # k=1 measured 2 then 10: its mean 6 is no longer the best; k=2 (4) takes over
    runs = {"m": pd.DataFrame({"k": [1, 2, 1, 3], "y": [2.0, 4.0, 10.0, 5.0]})}
    curve = best_found(runs, "y", ["k"], maximize=False)
    assert curve["best"].tolist() == [2.0, 2.0, 4.0, 4.0]
    assert curve["best_n"].tolist() == [1, 1, 1, 1]
    # maximising, the repeated configuration's mean counts once: k=1 at (2 + 10) / 2 = 6 beats k=3's 5
    up = best_found(runs, "y", ["k"], maximize=True)
    assert up["best"].tolist() == [2.0, 4.0, 6.0, 6.0]
    assert up.iloc[-1]["best_n"] == 2


def test_failed_evaluations_count_but_never_win():
    runs = {"m": pd.DataFrame({"k": [1, 2, 3], "y": [math.nan, 5.0, math.nan]})}
    curve = best_found(runs, "y", ["k"])
    assert curve["evaluation"].tolist() == [1, 2, 3]
    assert math.isnan(curve["best"].iloc[0]) and curve["best"].tolist()[1:] == [5.0, 5.0]


def test_best_found_names_a_missing_column():
    with pytest.raises(SeedError, match="lack column"):
        best_found({"m": pd.DataFrame({"k": [1]})}, "y", ["k"])


def test_pct_change_ci_matches_the_pooled_t_interval_of_scipy():
    a, b = np.array([110.0, 120.0, 115.0]), np.array([100.0, 95.0, 105.0, 101.0])
    pct, low, high = pct_change_ci(a, b)
    ci = ss.ttest_ind(np.log(a), np.log(b), equal_var=True).confidence_interval(0.95)
    assert pct == pytest.approx(100 * (math.exp(np.log(a).mean() - np.log(b).mean()) - 1), rel=1e-9)
    assert (low, high) == pytest.approx((100 * math.expm1(ci.low), 100 * math.expm1(ci.high)), rel=1e-9)


def test_pct_change_ci_of_a_single_candidate_borrows_the_reference_noise():
    # textbook pooled t with n1 = 1: SE = s_ref * sqrt(1 + 1/n2), df = n2 - 1
    a, b = np.array([120.0]), np.array([100.0, 90.0, 110.0, 105.0, 95.0])
    logs = np.log(b)
    diff = math.log(120.0) - logs.mean()
    half = ss.t.ppf(0.975, b.size - 1) * logs.std(ddof=1) * math.sqrt(1 + 1 / b.size)
    pct, low, high = pct_change_ci(a, b)
    assert (pct, low, high) == pytest.approx((100 * math.expm1(diff), 100 * math.expm1(diff - half),
                                              100 * math.expm1(diff + half)), rel=1e-9)


def test_pct_change_ci_refuses_what_cannot_give_a_ci():
    with pytest.raises(SeedError, match="cannot give a CI"):
        pct_change_ci([1.0], [2.0])
    with pytest.raises(SeedError, match="positive"):
        pct_change_ci([0.0], [2.0, 3.0])


def _trial(tid, phase, key, status, k, qps):
    return {"trial_id": tid, "phase": phase, "run_key": key, "status": status, "config": {"k": k},
            "metrics": {"qps": qps, "latency_mean_ms": 1.0} if status == "ok" else None}


def test_method_runs_splits_the_screen_and_each_search_in_measurement_order():
    trials = pd.DataFrame([_trial(3, "screen", "screen:1", "ok", 2, 20.0),
                           _trial(1, "screen", "screen:0", "ok", 1, 10.0),
                           _trial(4, "refine", "refine:random-s7/b0:c0:r0", "ok", 1, 11.0),
                           _trial(5, "refine", "refine:tpe-s8/b0:c0:r0", "failed", 3, None),
                           _trial(6, "refine", "refine:random-s7/b0:c1:r0", "ok", 4, 40.0)])
    runs = method_runs(SimpleNamespace(trials=trials), ["k"])
    assert list(runs) == ["lhs", "random", "tpe"]
    assert runs["lhs"]["qps"].tolist() == [10.0, 20.0]
    assert runs["random"]["k"].tolist() == [1, 4]
    assert math.isnan(runs["tpe"]["qps"].iloc[0])
    assert sorted(configuration_values(runs, {"k": 1}, "qps")) == [10.0, 11.0]


def test_the_figure_draws_one_line_per_method_and_the_default():
    curve = best_found({"a": pd.DataFrame({"k": [1, 2], "y": [1.0, 2.0]}),
                        "b": pd.DataFrame({"k": [1, 3], "y": [1.0, 3.0]})}, "y", ["k"])
    fig = best_found_figure(curve, "y", default_mean=1.5)
    try:
        ax = fig.axes[0]
        assert len(ax.get_lines()) == 3
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b", "default (mean)"]
    finally:
        plt.close(fig)


def _finals(values):
    return pd.DataFrame({"key": list(values), "best qps": list(values.values()), "evaluations": 16})


def test_claim_row_agrees_only_when_tpe_leads_beyond_noise_and_a_gain_is_clear():
    row = _measured(_finals({"lhs": 100.0, "random": 101.0, "ga": 102.0, "tpe": 130.0}), (12.0, 4.0, 20.0), "k=1",
                    1, 8, 100.0, 10.0, ["k (qps)"])
    assert row.agreement == "agrees" and "TPE" in row.why
    within = _measured(_finals({"lhs": 100.0, "random": 101.0, "ga": 102.0, "tpe": 103.0}), (2.0, -5.0, 9.0),
                       "k=1", 1, 8, 100.0, 10.0, [])
    assert within.agreement == "differs" and "cannot rank them" in within.why
    gain_only = _measured(_finals({"random": 101.0, "tpe": 103.0}), (12.0, 4.0, 20.0), "k=1", 1, 8, 100.0, 10.0, [])
    assert gain_only.agreement == "partly"


def test_range_extremes_finds_the_lowest_and_highest_change_per_knob():
    from tunelab.seeds.s004_wayfinder import range_extremes

    response = pd.DataFrame({"knob": ["s"] * 3 + ["m"] * 2, "metric": "qps", "x": [16, 256, 4096, 500, 9000],
                             "effect_pct": [-99.0, 5.0, 0.0, -3.0, 2.0]})
    table = range_extremes(response).set_index("knob")
    assert table.loc["s", ["lowest_pct", "lowest_at", "highest_pct", "highest_at"]].tolist() == [-99.0, 16, 5.0, 256]
    assert table.loc["m", ["lowest_at", "highest_at"]].tolist() == [500, 9000]
    assert range_extremes(None).empty
