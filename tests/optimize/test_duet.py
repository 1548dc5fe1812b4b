"""Duet measurement on the simulator: pairing, crossover, the paired CI against theory, the threaded runner.

The SYNTHETIC machine adds a common-mode factor ``exp(common_cv z)`` per time slot (shared by both sides of
a pair, its own slot for each sequential trial) to the surface's independent noise (CV ``cv``). Sequential
ABBA with ``B`` blocks and a duet with ``2 B`` pairs measure the same number of trials; theory gives
``E[se_abba^2] = var_total / B`` (each block's log ratio has variance ``var_total = cv^2 + common_cv^2``) and
``E[se_duet^2] = 2 cv^2 / (2 B) = var_independent / B`` (a pair's log ratio has variance ``2 cv^2``), so the
root-mean-square standard errors compare as ``sqrt(var_total / var_independent)``.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats as ss

import tunelab
from tunelab.duet import DuetError, PairSetup, SideTrial, crossover_sides, run_pair, side_options
from tunelab.errors import TargetError
from tunelab.optimize.confirm import ValidationError, confirm
from tunelab.optimize.duet_confirm import confirm_duet, pair_log_ratios
from tunelab.stats.duet_route import crossover_fit
from tunelab.runner.binding import bind_knob_ids
from tunelab.simulator import InterferedEvaluator, SimulatorTarget, get_surface
from tunelab.store import Store
from tunelab.model import MeasurementKind

CV, COMMON_CV = 0.02, 0.10


def standard_error(row: pd.Series, df: int) -> float:
    """The standard error of the mean log ratio behind a table row's 95 % interval (df degrees of freedom)."""
    width = math.log1p(row["ci_high"] / 100) - math.log1p(row["ci_low"] / 100)
    return width / (2 * float(ss.t.ppf(0.975, df)))


def test_crossover_fit_is_the_least_squares_fit_statsmodels_gives():
    rng = np.random.default_rng(5)
    orientation = np.array([1.0, -1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
    d = 0.05 + 0.02 * orientation + rng.normal(0, 0.03, len(orientation))
    fit = crossover_fit(d, orientation)
    reference = sm.OLS(d, sm.add_constant(orientation)).fit()
    assert fit["mu"] == pytest.approx(reference.params[0], abs=1e-12)
    assert fit["delta"] == pytest.approx(reference.params[1], abs=1e-12)
    assert fit["se"] == pytest.approx(reference.bse[0], rel=1e-10)
    assert fit["df"] == reference.df_resid == 5


def test_crossover_alternates_sides_so_each_orientation_is_half_the_pairs():
    assert crossover_sides(8) == [0, 1, 1, 0, 0, 1, 1, 0]
    with pytest.raises(DuetError, match="at least 1 pair"):
        crossover_sides(0)


def test_the_paired_ci_shrinks_as_theory_says_under_common_mode_noise():
    surface = get_surface("simple", CV)
    config = surface.baseline
    cv = surface.config_cv(config)                 # this configuration's independent CV
    squares = {"abba": [], "duet": []}
    for seed in range(60):       # benchmarks/bench_duet_ci.py runs 1,000 seeds and prints the figures
        evaluator = InterferedEvaluator(surface, seed=seed, common_cv=COMMON_CV)
        abba = confirm(evaluator, config, config, ["qps:max:5"], blocks=6, key_prefix="s:").table.iloc[0]
        duet = confirm_duet(evaluator, config, config, ["qps:max:5"], pairs=12, key_prefix="d:").table.iloc[0]
        squares["abba"].append(standard_error(abba, 5) ** 2)
        squares["duet"].append(standard_error(duet, 10) ** 2)
    ratio = math.sqrt(np.mean(squares["abba"]) / np.mean(squares["duet"]))
    theory = math.sqrt((cv ** 2 + COMMON_CV ** 2) / cv ** 2)
    assert theory > 2.5                            # the noise is mostly common-mode here
    assert ratio == pytest.approx(theory, rel=0.12)   # Monte Carlo SE of the ratio 4.6 %: 2.6 SE (seeded)


def test_a_side_bias_cancels_exactly_through_the_crossover():
    surface = get_surface("simple", CV)
    base, best = surface.baseline, surface.optimum()
    fair = confirm_duet(InterferedEvaluator(surface, seed=7, common_cv=COMMON_CV), base, best, ["qps:max:5"], pairs=12)
    biased_evaluator = InterferedEvaluator(surface, seed=7, common_cv=COMMON_CV, side_bias_pct=-20)
    biased = confirm_duet(biased_evaluator, base, best, ["qps:max:5"], pairs=12)
    for column in ("pct_change", "ci_low", "ci_high", "tost_p"):
        assert biased.table.iloc[0][column] == pytest.approx(fair.table.iloc[0][column], rel=1e-9)
    fair_side = 1 + fair.table.iloc[0]["side_diff_pct"] / 100
    assert 1 + biased.table.iloc[0]["side_diff_pct"] / 100 == pytest.approx(0.8 * fair_side, rel=1e-9)
    # the bias is there in the raw pairs: each orientation's log ratios move by log(0.8) in opposite directions
    shift = pair_log_ratios(biased.measurements, "qps")["d"] - pair_log_ratios(fair.measurements, "qps")["d"]
    orientation = pair_log_ratios(fair.measurements, "qps")["orientation"]
    assert np.allclose(shift, math.log(0.8) * orientation)


def test_duet_validate_runs_both_simulator_targets_through_the_runner(tmp_path):
    path = tmp_path / "duet.sqlite"
    run = tunelab.validate("simulator", {"net.core.somaxconn": 1024}, baseline={"net.core.somaxconn": 128},
                           metrics=["qps:max:5"], target_options={"common_cv": COMMON_CV, "side_bias_pct": -10},
                           store=path, measurement="duet", pairs=4, write_sysctl=False)
    measured = run.confirmation.measurements
    assert list(measured["pair"]) == [0, 0, 1, 1, 2, 2, 3, 3]
    a_sides = measured[measured["arm"] == "A"].sort_values("pair")["side"].tolist()
    assert a_sides == [0, 1, 1, 0]
    with Store(path, readonly=True) as store:
        trials = store.trials("validate")
    assert len(trials) == 8 and set(trials["status"]) == {"ok"}
    plans = pd.DataFrame(list(trials["plan"]))
    assert sorted(zip(plans["duet_pair"], plans["duet_side"])) == [(p, s) for p in range(4) for s in (0, 1)]
    assert all(row["duet"]["pair"] == plan["duet_pair"] for row, plan in zip(trials["provenance"], trials["plan"]))
    assert run.confirmation.table.iloc[0]["measurement"] == "duet"
    again = tunelab.validate("simulator", {"net.core.somaxconn": 1024}, baseline={"net.core.somaxconn": 128},
                             metrics=["qps:max:5"], target_options={"common_cv": COMMON_CV, "side_bias_pct": -10},
                             store=path, measurement="duet", pairs=4, write_sysctl=False)
    with Store(path, readonly=True) as store:
        assert len(store.trials("validate")) == 8            # resumed: every pair read back, none measured again
    assert again.confirmation.table.iloc[0]["pct_change"] == run.confirmation.table.iloc[0]["pct_change"]


class BrokenReset(SimulatorTarget):
    """A side whose fresh state cannot be made: it stops before its load."""

    def reset(self) -> None:
        raise TargetError("reset failed on purpose")


def test_a_side_that_stops_before_its_load_fails_its_partner_with_a_reason(tmp_path):
    specs = bind_knob_ids(["net.core.somaxconn"])
    sides = [SimulatorTarget(), BrokenReset()]
    config = {"net.core.somaxconn": 128}
    with Store.open(tmp_path / "s.sqlite", study="s", design_hash="h", design_text="x") as store:
        setup = PairSetup(loads=(sides[0].load(), sides[1].load()), specs=specs, store=store, warmup_s=0,
                          measure_s=1, barrier_timeout_s=30)
        trials = [SideTrial(f"validate:p0:s{side}", config, {}, {"duet_pair": 0, "duet_side": side}) for side in (0, 1)]
        with pytest.raises(TargetError, match="reset failed on purpose"):
            run_pair(sides, trials, setup)
        recorded = store.trials("validate")
    assert list(recorded["run_key"]) == ["validate:p0:s0"]
    assert recorded.iloc[0]["status"] == "failed" and "stopped before its load" in recorded.iloc[0]["reason"]


def test_bad_duet_requests_are_one_error_before_anything_runs(tmp_path):
    with pytest.raises(DuetError, match="measurement must be one of sequential, duet"):
        tunelab.validate("simulator", {"net.core.somaxconn": 1024}, measurement="trio", store=tmp_path / "x.sqlite")
    with pytest.raises(ValidationError, match="at least 4 pairs"):
        tunelab.validate("simulator", {"net.core.somaxconn": 1024}, measurement="duet", pairs=2,
                         store=tmp_path / "x.sqlite")
    assert not (tmp_path / "x.sqlite").exists()
    assert side_options("lab", {}, "split", cpus=[0, 1]) == ({"server_cpu": 0, "client_cpu": 0},
                                                            {"server_cpu": 1, "client_cpu": 1})
    with pytest.raises(DuetError, match="needs 2 CPUs"):
        side_options("lab", {}, "shared", cpus=[0])
    with pytest.raises(DuetError, match="unknown|no duet CPU layout|triple"):
        side_options("lab", {}, "triple", cpus=[0, 1])


# ---- the one-at-a-time screen as a duet ---------------------------------------------------------------


def duet_screen_design(name: str, replicates: int, side_bias_pct: float = 0.0) -> str:
    from simulator_helpers import CONGESTION_KNOB, SOMAXCONN_KNOB, simulator_design

    text = simulator_design(name, cv=CV, knobs=(SOMAXCONN_KNOB, CONGESTION_KNOB), replicates=str(replicates),
                            extra="measurement: duet\n")
    return text.replace(f"cv: {CV}}}", f"cv: {CV}, common_cv: {COMMON_CV}, side_bias_pct: {side_bias_pct}}}")


def test_a_duet_screen_pairs_every_planned_run_with_a_concurrent_baseline(tmp_path):
    path = tmp_path / "duet-screen.yaml"
    path.write_text(duet_screen_design("duet-screen", 4, side_bias_pct=-15))
    store = tmp_path / "duet-screen.sqlite"
    run = tunelab.run(path, store=store, progress=False)
    assert (run.planned, run.ok) == (24, 24)                     # 12 planned runs, each with its concurrent baseline
    frame = tunelab.screen(store).verdicts
    with Store(store, readonly=True) as opened:
        tidy = opened.tidy()
    b_rows, a_rows = tidy[tidy["duet_arm"] == "B"], tidy[tidy["duet_arm"] == "A"]
    assert len(a_rows) == len(b_rows) and set(a_rows["duet_pair"]) == set(b_rows["duet_pair"])
    assert a_rows["is_baseline"].all()
    for _, rows in tidy.groupby("duet_pair"):
        assert sorted(rows["duet_side"]) == [0, 1]                 # the two arms of a pair on both sides
    varied = b_rows[b_rows["varied_knob"].notna()]
    by_level = varied.groupby("varied_knob")["duet_side"].apply(lambda s: sorted(s.tolist()))
    assert all(sides == [0, 0, 1, 1] for sides in by_level)       # 4 replicates: the crossover halves them
    assert set(frame["test"]) == {"duet+paired_t"}
    somaxconn = frame[frame["knob"] == "net.core.somaxconn"].iloc[0]
    truth = get_surface("simple", CV)
    base = truth.baseline
    expected = 100 * (truth.truth({**base, "net.core.somaxconn": 16})["qps"] / truth.truth(base)["qps"] - 1)
    assert somaxconn["effect_ci_low"] <= expected <= somaxconn["effect_ci_high"]     # seeded: the same every run
    again = tunelab.run(path, store=store, progress=False)
    assert again.skipped == 24 and again.ok == 0                  # resumed: every pair finished


@pytest.mark.parametrize(("pattern", "replacement", "words"), [
    ("measurement: duet", "measurement: trio", "must be one of sequential, duet"),
    ("type: oat", "type: full_factorial", "needs `design: {type: oat}`"),
    ("target: .*", "target: {type: local}", "duet runs two targets of one spec at once on this machine"),
    ("replicates: 4", "replicates: 2", "it needs at least 3 replicates per level"),
])
def test_a_design_s_measurement_is_checked_before_anything_runs(pattern, replacement, words):
    from tunelab.designs import load_design_text
    from tunelab.errors import DesignError

    text = re.sub(pattern, replacement, duet_screen_design("bad-duet", 4))
    with pytest.raises(DesignError, match=re.escape(words)):
        load_design_text(text, source="bad.yaml")


def test_a_duet_design_hashes_apart_from_its_sequential_twin():
    from tunelab.designs import load_design_text

    duet = load_design_text(duet_screen_design("twin", 4), source="a.yaml")
    sequential = load_design_text(duet_screen_design("twin", 4).replace("measurement: duet\n", ""), source="b.yaml")
    assert duet.measurement is MeasurementKind.DUET and sequential.measurement is MeasurementKind.SEQUENTIAL
    assert duet.design_hash != sequential.design_hash
    assert "measurement" not in sequential.to_dict()          # a sequential design keeps its old hash
