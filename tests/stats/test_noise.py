"""tunelab.stats.noise against numpy, statsmodels, textbook sample sizes and a TOST simulation."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.power import TTestIndPower
from statsmodels.stats.weightstats import ttost_ind

from tunelab.errors import DataError
from tunelab.stats.noise import (noise_cv, noise_table, replicates_for_sesoi, replicates_to_bound, replicates_to_detect,
                                 tost_power)


def test_cv_is_the_sample_sd_over_the_mean_per_metric():
    rng = np.random.default_rng(3)
    qps = rng.normal(20000, 1400, size=12)
    latency = rng.normal(2.0, 0.3, size=12)
    frame = pd.DataFrame({"qps": qps, "latency_mean_ms": latency})
    frame.loc[4, "latency_mean_ms"] = np.nan                      # a missing value is left out
    table = noise_cv(frame, ["qps", "latency_mean_ms"]).set_index("metric")
    assert table.loc["qps", "cv_pct"] == pytest.approx(100 * np.std(qps, ddof=1) / np.mean(qps))
    kept = np.delete(latency, 4)
    assert table.loc["latency_mean_ms", "n"] == 11
    assert table.loc["latency_mean_ms", "cv_pct"] == pytest.approx(100 * np.std(kept, ddof=1) / np.mean(kept))


def test_cv_of_one_run_is_unknown_and_a_missing_metric_is_one_error():
    assert math.isnan(noise_cv(pd.DataFrame({"qps": [5.0]}), ["qps"])["cv_pct"].iloc[0])
    with pytest.raises(DataError, match="no column for metric"):
        noise_cv(pd.DataFrame({"qps": [5.0, 6.0]}), ["latency_mean_ms"])


@pytest.mark.parametrize("cv, sesoi", [(5.7, 5.0), (12.0, 5.0), (3.0, 10.0), (10.0, 10.0)])
def test_replicates_to_detect_match_statsmodels(cv, sesoi):
    n = TTestIndPower().solve_power(effect_size=sesoi / cv, alpha=0.05, power=0.8, ratio=1.0)
    assert replicates_to_detect(cv, sesoi) == max(2, math.ceil(float(n) - 1e-9))


def test_replicates_to_detect_a_one_sd_change_is_the_textbook_17():
    # Cohen (1988), table 2.4.1: d = 1, two-sided alpha 0.05, power 0.80 -> n = 17 per group
    assert replicates_to_detect(cv_pct=10, sesoi_pct=10) == 17


@pytest.mark.parametrize("n, cv", [(10, 5.0), (20, 5.0), (23, 5.7)])
def test_tost_power_matches_a_simulation_of_the_two_one_sided_tests(n, cv):
    rng = np.random.default_rng(20240501 + n)
    reps = 3000
    hits = 0
    for _ in range(reps):
        a, b = rng.normal(100, cv, n), rng.normal(100, cv, n)
        hits += ttost_ind(a, b, -5.0, 5.0, usevar="pooled")[0] < 0.05
    simulated = hits / reps
    # 3000 replications: the standard error of a power near 0.5 is below 0.01
    assert tost_power(n, cv, 5.0) == pytest.approx(simulated, abs=0.03)


def test_replicates_to_bound_is_the_smallest_n_with_the_power():
    for cv, sesoi in [(5.7, 5.0), (12.0, 5.0), (4.0, 10.0)]:
        n = replicates_to_bound(cv, sesoi)
        assert tost_power(n, cv, sesoi) >= 0.8
        assert n == 2 or tost_power(n - 1, cv, sesoi) < 0.8


def test_the_issue_figures_quiet_and_busy_machine():
    # 5.7 % CV on a quiet machine, 12 % with other processes, against a ±5 % SESOI
    quiet, busy = replicates_for_sesoi(5.7, 5.0), replicates_for_sesoi(12.0, 5.0)
    assert 18 <= quiet <= 30 and busy > 3 * quiet
    assert busy == max(replicates_to_detect(12.0, 5.0), replicates_to_bound(12.0, 5.0))


def test_noise_table_gives_each_metric_its_own_sesoi():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"qps": rng.normal(100, 6, 10), "latency_mean_ms": rng.normal(2, 0.1, 10)})
    table = noise_table(frame, [{"name": "qps", "sesoi_pct": 5}, {"name": "latency_mean_ms", "sesoi_pct": 10}])
    row = table.set_index("metric").loc["qps"]
    assert row["needed"] == replicates_for_sesoi(row["cv_pct"], 5.0)
    assert table["needed"].tolist() == table[["detect", "bound"]].max(axis=1).tolist()


@pytest.mark.parametrize("args", [(0.0, 5.0), (5.0, -1.0), (float("nan"), 5.0)])
def test_bad_inputs_are_one_data_error(args):
    with pytest.raises(DataError):
        replicates_for_sesoi(*args)
