"""Per-workload improvement over the defaults (Dunnett) and the share improved (Clopper-Pearson).

References:
- Dunnett, C. W. (1955), "A multiple comparison procedure for comparing several treatments with a
  control", JASA 50:1096-1121: the blood-count example (control n=6, drug A n=4, drug B n=5; 12 df),
  whose two-sided 95 % critical value for 2 comparisons and 12 df is tabled as 2.50. The same data
  are the example of scipy.stats.dunnett's documentation, which prints p = [0.62004941, 0.0059035].
- Clopper-Pearson exact 95 % intervals as tabled (e.g. Newcombe 1998, Stat Med 17:857, method 5):
  0/10 -> [0, 0.3085]; 5/10 -> [0.1871, 0.8129].
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tunelab.errors import DataError
from tunelab.stats.workloads import share_improved, workload_improvements

CONTROL = [7.40, 8.50, 7.20, 8.24, 9.84, 8.32]
DRUG_A = [9.76, 8.80, 7.68, 9.36]
DRUG_B = [12.80, 9.68, 12.16, 9.20, 10.55]
DUNNETT_D = 2.50   # Dunnett (1955), two-sided table, 2 treatments, 12 df


def blood_counts() -> pd.DataFrame:
    """Dunnett's data as a tidy frame; the metric is exp(count) so that its log is the published count."""
    rows = [("control", v) for v in CONTROL] + [("A", v) for v in DRUG_A] + [("B", v) for v in DRUG_B]
    return pd.DataFrame({"profile": "w", "drug": [d for d, _ in rows], "y": np.exp([v for _, v in rows])})


def pooled_sd() -> float:
    groups = [np.array(g) for g in (CONTROL, DRUG_A, DRUG_B)]
    return float(np.sqrt(sum(((g - g.mean()) ** 2).sum() for g in groups) / (15 - 3)))


def test_dunnett_1955_best_treatment_ci_and_p():
    row = workload_improvements(blood_counts(), ["drug"], "y", "maximize", {"drug": "control"}).iloc[0]
    assert row["best_config"] == "drug=B" and row["n_configs"] == 2 and row["n_baseline"] == 6
    diff = np.mean(DRUG_B) - np.mean(CONTROL)            # 10.878 - 8.25 = 2.628 on the log scale
    half = DUNNETT_D * pooled_sd() * np.sqrt(1 / 5 + 1 / 6)
    assert np.log1p(row["pct_change"] / 100) == pytest.approx(diff)
    assert np.log1p(row["ci_low"] / 100) == pytest.approx(diff - half, abs=0.01)
    assert np.log1p(row["ci_high"] / 100) == pytest.approx(diff + half, abs=0.01)
    assert row["p_adj"] == pytest.approx(0.0059035, abs=5e-4)
    assert row["verdict"] == "improve"


def test_minimize_picks_the_lowest_and_is_inconclusive_when_the_ci_spans_zero():
    row = workload_improvements(blood_counts(), ["drug"], "y", "min", {"drug": "control"}).iloc[0]
    assert row["best_config"] == "drug=A"
    diff = np.mean(DRUG_A) - np.mean(CONTROL)
    half = DUNNETT_D * pooled_sd() * np.sqrt(1 / 4 + 1 / 6)
    assert np.log1p(row["ci_low"] / 100) == pytest.approx(diff - half, abs=0.01)
    assert row["p_adj"] == pytest.approx(0.62004941, abs=5e-3)
    assert row["verdict"] == "inconclusive"


def frame(effects: dict[str, float], sigma: float, n: int, workloads: int, seed: int) -> pd.DataFrame:
    """Lognormal data: configuration -> true ratio to the defaults, per workload."""
    rng = np.random.default_rng(seed)
    rows = [{"profile": w, "sched": c, "ra": 128, "iops": 1000 * ratio * np.exp(rng.normal(0, sigma))}
            for w in range(workloads) for c, ratio in effects.items() for _ in range(n)]
    return pd.DataFrame(rows)


BASE = {"sched": "none", "ra": 128}


def test_verdicts_improve_regress_and_no_effect():
    up = workload_improvements(frame({"none": 1, "mq": 1.5, "bfq": 1.2}, 0.02, 3, 1, 1), ["sched", "ra"], "iops",
                               "maximize", BASE)
    assert up[["best_config", "verdict"]].values.tolist() == [["sched=mq", "improve"]]
    down = workload_improvements(frame({"none": 1, "mq": 0.6, "bfq": 0.7}, 0.02, 3, 1, 2), ["sched", "ra"], "iops",
                                 "maximize", BASE)
    assert down[["best_config", "verdict"]].values.tolist() == [["sched=bfq", "regress"]]
    flat = workload_improvements(frame({"none": 1, "mq": 1, "bfq": 1}, 0.005, 4, 1, 3), ["sched", "ra"], "iops",
                                 "maximize", BASE)
    assert flat["verdict"].tolist() == ["no effect"]
    assert -5 < flat["ci_low"].iloc[0] < flat["ci_high"].iloc[0] < 5


def test_improve_rate_under_no_effect_stays_at_most_alpha():
    # 300 workloads (datasets), 3 configurations + defaults, 3 replicates, no true effect anywhere
    table = workload_improvements(frame({"none": 1, "a": 1, "b": 1, "c": 1}, 0.05, 3, 300, 11),
                                  ["sched", "ra"], "iops", "maximize", BASE)
    rate = (table["verdict"] == "improve").mean()
    assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 300)
    # and the test can see a real 30 % gain (the same design has power)
    real = workload_improvements(frame({"none": 1, "a": 1, "b": 1.3, "c": 1}, 0.05, 3, 50, 12),
                                 ["sched", "ra"], "iops", "maximize", BASE)
    assert (real["verdict"] == "improve").mean() >= 0.8 and set(real["best_config"]) <= {"sched=b", "sched=a",
                                                                                         "sched=c"}


def test_a_workload_without_defaults_is_untestable_with_a_reason():
    data = frame({"none": 1, "mq": 1.2}, 0.02, 3, 2, 4)
    data = data[~((data["profile"] == 1) & (data["sched"] == "none"))]
    table = workload_improvements(data, ["sched", "ra"], "iops", "maximize", BASE)
    assert table["verdict"].tolist() == ["improve", "untestable"]
    assert "no iops measured at the defaults" in table["reason"].iloc[1]
    share = share_improved(table).iloc[0]
    assert (share["k"], share["n"]) == (1, 1)


def test_bad_input_is_one_data_error():
    data = frame({"none": 1, "mq": 1.2}, 0.02, 3, 1, 5)
    with pytest.raises(DataError, match="baseline has no level for ra"):
        workload_improvements(data, ["sched", "ra"], "iops", "max", {"sched": "none"})
    with pytest.raises(DataError, match="unknown column 'qps'"):
        workload_improvements(data, ["sched"], "qps", "max", BASE)
    with pytest.raises(DataError, match="direction 'up'"):
        workload_improvements(data, ["sched"], "iops", "up", BASE)


@pytest.mark.parametrize("k, n, low, high", [(0, 10, 0.0, 0.3085), (5, 10, 0.1871, 0.8129), (10, 10, 0.6915, 1.0)])
def test_share_improved_clopper_pearson_against_published_table(k, n, low, high):
    table = pd.DataFrame({"verdict": ["improve"] * k + ["inconclusive"] * (n - k) + ["untestable"]})
    share = share_improved(table).iloc[0]
    assert (share["k"], share["n"], share["share"]) == (k, n, pytest.approx(k / n))
    assert (share["ci_low"], share["ci_high"]) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))
