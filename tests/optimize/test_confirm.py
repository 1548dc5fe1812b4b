"""ABBA confirmation and validate verdicts against SYNTHETIC surfaces with known truth."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy import stats as ss

from tunelab.optimize.confirm import (ValidationError, abba_order, analyse_blocks, blocks_needed, confirm,
                                      overall_verdict)
from tunelab.optimize.validation import validate
from tunelab.model import Metric
from tunelab.simulator import SimulatorEvaluator, SimulatorTarget, get_surface


def test_abba_order_interleaves_and_balances_the_arms() -> None:
    order = abba_order(3)
    assert [arm for _, _, arm in order] == list("ABBA" * 3)
    assert [b for b, _, _ in order] == [0] * 4 + [1] * 4 + [2] * 4
    with pytest.raises(ValidationError, match="at least 2 ABBA blocks"):
        abba_order(1)


def test_abba_cancels_a_linear_drift() -> None:
    # the machine slows 1 % per measurement; candidate truly equal to the baseline
    rows = [{"block": b, "arm": arm, "qps": 1000.0 * (1 - 0.01 * i)} for i, (b, _, arm) in enumerate(abba_order(4))]
    result = analyse_blocks(pd.DataFrame(rows), Metric("qps", "maximize", 5.0), bootstrap=False)
    assert abs(result["pct_change"]) < 0.02
    assert result["verdict"] == "equivalent"


def test_ci_matches_a_paired_t_interval_of_log_ratios() -> None:
    rng = np.random.default_rng(0)
    rows = [{"block": b, "arm": arm, "qps": (1100.0 if arm == "B" else 1000.0) * (1 + 0.03 * rng.standard_normal())}
            for b, _, arm in abba_order(5)]
    frame = pd.DataFrame(rows)
    result = analyse_blocks(frame, Metric("qps", "maximize", 5.0), bootstrap=False)
    means = frame.groupby(["block", "arm"])["qps"].mean().unstack()
    d = np.log(means["B"] / means["A"])
    low, high = ss.ttest_1samp(d, 0).confidence_interval(0.95)   # independent reference: scipy's one-sample t
    assert result["ci_low"] == pytest.approx(100 * math.expm1(low))
    assert result["ci_high"] == pytest.approx(100 * math.expm1(high))


@pytest.mark.parametrize("candidate, expected", [("optimum", "improve"), ("worst", "regress")])
def test_confirm_verdicts_on_the_simple_surface(simple_surface, candidate, expected) -> None:
    table = simple_surface.table()
    worst = table.loc[table["qps"].idxmin(), list(simple_surface.space)].to_dict()
    config = simple_surface.optimum() if candidate == "optimum" else worst
    verdicts = Counter(confirm(SimulatorEvaluator(simple_surface, seed=s), simple_surface.baseline, config,
                               ["qps:max:5"], blocks=6).verdict for s in range(20))
    assert verdicts[expected] >= 19


def test_null_surface_yields_equivalence_and_rarely_a_false_improvement() -> None:
    null = get_surface("null", cv=0.02)
    candidate = {**null.baseline, "net.core.somaxconn": 1024}
    verdicts = Counter(confirm(SimulatorEvaluator(null, seed=s), null.baseline, candidate, ["qps:max:5"],
                               blocks=8).verdict for s in range(100))
    assert verdicts["equivalent"] >= 80
    assert verdicts["improve"] <= 10   # nominally 2.5 % (one-sided 95 % CI)


def test_inconclusive_result_says_how_many_blocks_would_decide() -> None:
    null = get_surface("null", cv=0.08)
    result = confirm(SimulatorEvaluator(null, seed=1), null.baseline, {**null.baseline, "net.core.somaxconn": 512},
                     ["qps:max:3"], blocks=3)
    row = result.table.iloc[0]
    assert row["verdict"] == "inconclusive"
    assert row["blocks_needed"] > 3
    # equivalence decides first: t(0.95, 3) * 0.02 / 2 = 0.0235 < log(1.05) - 0.02 = 0.0288 (n=3: 0.0337)
    assert blocks_needed(0.02, 0.02, math.log(1.05)) == 4
    # only significance can decide (|mean| beyond the bound): t(0.975, 5) * 0.05 / sqrt(6) = 0.0525 < 0.06
    assert blocks_needed(0.06, 0.05, math.log(1.05)) == 6
    assert blocks_needed(0.0, 0.0, 0.05) == 2


def test_overall_verdict_precedence() -> None:
    assert overall_verdict(["equivalent", "equivalent"]) == "equivalent"
    assert overall_verdict(["improve", "inconclusive"]) == "inconclusive"
    assert overall_verdict(["improve", "regress", "inconclusive"]) == "regress"


def test_minimised_metric_improves_when_it_falls(simple_surface) -> None:
    result = confirm(SimulatorEvaluator(simple_surface, seed=2), simple_surface.baseline, simple_surface.optimum(),
                     ["latency_mean_ms:min:5"], blocks=6)
    assert result.table.iloc[0]["pct_change"] < 0
    assert result.verdict == "improve"


def test_reported_gain_is_close_to_the_truth(simple_surface) -> None:
    truth = 100 * (simple_surface.truth(simple_surface.optimum())["qps"]
                   / simple_surface.truth(simple_surface.baseline)["qps"] - 1)
    gains = [confirm(SimulatorEvaluator(simple_surface, seed=s), simple_surface.baseline, simple_surface.optimum(),
                     ["qps:max"], blocks=6).gain()["pct_change"] for s in range(40)]
    assert abs(np.mean(gains) - truth) < 1.0


def test_validate_runs_real_trials_on_the_simulator_target_and_records_them(store) -> None:
    target = SimulatorTarget("simple", cv=0.03, seed=4)
    candidate = {"net.core.somaxconn": 1024, "net.ipv4.tcp_congestion_control": "bbr"}
    result = validate(target, target.load(), "current", candidate, ["qps:max:5"], store, blocks=4,
                      profiles=("low", "overload"), warmup_s=0, measure_s=1)
    assert result.baseline == {"net.core.somaxconn": 128, "net.ipv4.tcp_congestion_control": "cubic"}
    by_profile = dict(zip(result.table["profile"], result.table["verdict"]))
    assert by_profile["overload"] == "improve"
    assert by_profile["low"] != "improve" or result.table.iloc[0]["pct_change"] < 3  # effects are 10x smaller at low load
    trials = store.trials("validate")
    assert len(trials) == 2 * 4 * 4 and set(trials["status"]) == {"ok"}
    assert store.unrestored() == []                       # every knob was put back
    assert target.current_config()["net.core.somaxconn"] == 128
    # resume: the same validation again measures nothing new
    again = validate(target, target.load(), "current", candidate, ["qps:max:5"], store, blocks=4,
                     profiles=("low", "overload"), warmup_s=0, measure_s=1)
    assert len(store.trials("validate")) == 32
    pd.testing.assert_frame_equal(again.table, result.table)
