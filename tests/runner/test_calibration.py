"""The A/A calibration (design ``noise: {calibration_runs: N}``) on the SYNTHETIC simulator target,
whose noise CV at the baseline configuration is known (18 % here): recorded in its own phase, resumable, and
its CV and replicate warning follow the known noise. Under a duet, with injected common-mode noise, the
paired ratio's CV is the one the theory says (the common-mode noise cancels), well below the per-run CV."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats as ss

from tunelab.calibration import CALIBRATE, assess_noise, run_calibration
from tunelab.study_run import RunOptions, plan_runner
from tunelab.designs import load_design_text
from tunelab.simulator import SimulatorTarget
from tunelab.simulator.load import SimulatorLoad
from tunelab.simulator.surfaces import get_surface
from tunelab.stats.noise import replicates_for_sesoi
from tunelab.store import Store
from simulator_helpers import CONGESTION_KNOB, SOMAXCONN_KNOB, simulator_design  # tests/ is on sys.path

CV = 0.12
DESIGN = simulator_design("calib-sim", cv=CV, knobs=(SOMAXCONN_KNOB, CONGESTION_KNOB), replicates="REPLICATES",
                          extra="noise: {calibration_runs: 30}\n")


def calibrate(store_path: Path, replicates: int = 3, checkpoint=None):
    text = DESIGN.replace("REPLICATES", str(replicates))
    design = load_design_text(text, source="calib-sim.yaml")
    load = SimulatorLoad(get_surface("simple", CV))
    with Store.open(store_path, study=design.name, design_hash=design.design_hash, design_text=text) as store:
        run_plan = plan_runner(design, store, load, load.settings("overload"),
                               RunOptions(progress=False, checkpoint=checkpoint),
                               target=SimulatorTarget("simple", cv=CV, seed=11))
        calibration = run_calibration(design, store, run_plan)
        return design, calibration, store.trials(), store.tidy(CALIBRATE)


def test_calibration_runs_baseline_trials_in_their_own_phase_and_measures_the_known_noise(tmp_path: Path) -> None:
    design, calibration, trials, tidy = calibrate(tmp_path / "c.sqlite")
    assert trials["phase"].unique().tolist() == [CALIBRATE]
    assert sorted(trials["run_key"]) == sorted(f"calibrate:{i}" for i in range(30))
    assert all(config == design.baseline for config in trials["config"])
    # the surface's noise CV at the configuration the baseline trials ran (its other knobs at their defaults)
    at_baseline = {**SimulatorTarget("simple", cv=CV).current_config(), **design.baseline}
    truth = 100 * get_surface("simple", CV).config_cv(at_baseline)
    measured = calibration.table.set_index("metric").loc["qps", "cv_pct"]
    assert measured == pytest.approx(100 * np.std(tidy["qps"], ddof=1) / np.mean(tidy["qps"]))
    # 30 runs: the CV's standard error is about truth / sqrt(58), 13 % of it
    assert measured == pytest.approx(truth, rel=0.35)
    assert calibration.usable == 30 and calibration.lines()[0].startswith("calibration: 30 of 30 A/A trials usable")
    # 3 replicates cannot resolve ±5 % at a CV near 18 %; the warning says how many would
    needed = replicates_for_sesoi(measured, 5.0)
    assert needed > 3
    assert len(calibration.warnings) == 1 and f": {needed} would" in calibration.warnings[0]


def test_enough_replicates_give_no_warning(tmp_path: Path) -> None:
    _, calibration, _, _ = calibrate(tmp_path / "c.sqlite", replicates=400)
    assert calibration.warnings == []


def test_an_interrupted_calibration_resumes_where_it_stopped(tmp_path: Path) -> None:
    begins = []

    def ctrl_c_at_the_fifth(name: str) -> None:
        if name == "begin":
            begins.append(name)
            if len(begins) == 5:
                raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        calibrate(tmp_path / "c.sqlite", checkpoint=ctrl_c_at_the_fifth)
    _, calibration, trials, tidy = calibrate(tmp_path / "c.sqlite")
    assert calibration.summary.skipped == 4 and calibration.summary.ok == 26
    assert len(tidy) == 30 and trials["status"].tolist().count("interrupted") == 1
    _, again, trials_after, _ = calibrate(tmp_path / "c.sqlite")
    assert again.summary.skipped == 30 and len(trials_after) == len(trials)


def test_assess_noise_reports_too_few_trials(tmp_path: Path) -> None:
    design, _, _, tidy = calibrate(tmp_path / "c.sqlite")
    one = assess_noise(tidy.head(1), design, runs=30)
    assert one.lines() == ["calibration: 1 of 30 A/A trials usable; at least 2 are needed for a noise CV"]
    assert one.warnings == []


def test_a_quiet_machine_needs_the_minimum_replicates_and_does_not_crash(tmp_path: Path) -> None:
    # the quickstart on an idle machine: qps CV 2.98 % against a ±5 % SESOI, no solver NaN
    design, _, _, tidy = calibrate(tmp_path / "c.sqlite")
    quiet = tidy.head(4).copy()
    quiet["qps"] = [1000.0, 1029.8, 970.2, 1000.0]          # sample SD 24.33 on a mean of 1000: CV 2.43 %
    calibration = assess_noise(quiet, design, runs=4)
    row = calibration.table.set_index("metric").loc["qps"]
    assert row["cv_pct"] == pytest.approx(100 * np.std(quiet["qps"], ddof=1) / 1000.0)
    assert row["needed"] == replicates_for_sesoi(row["cv_pct"], 5.0) and row["needed"] >= 2
    assert calibration.lines()[0].startswith("calibration: 4 of 4 A/A trials usable; noise qps CV 2.4 %")


def test_the_server_cpu_per_query_cv_is_reported_beside_the_designs_metrics(tmp_path: Path) -> None:
    """A metric the design does not name but the A/A trials measured (from their counters): its CV, no advice."""
    design, _, _, tidy = calibrate(tmp_path / "c.sqlite")
    frame = tidy.head(3).copy()
    frame["server_cpu_per_query"] = [10.0, 12.0, 14.0]        # mean 12, sample SD 2: CV 16.67 %
    calibration = assess_noise(frame, design, runs=3)
    row = calibration.table.set_index("metric").loc["server_cpu_per_query"]
    assert row["cv_pct"] == pytest.approx(100 * 2 / 12)
    assert np.isnan(row["needed"])
    assert "server_cpu_per_query CV 16.7 %" in calibration.lines()[0]
    assert not [w for w in calibration.warnings if "server_cpu_per_query" in w]
    assert "server_cpu_per_query" not in assess_noise(tidy.head(3), design, runs=3).table["metric"].tolist()



# ---- under a duet: the paired ratio's CV ---------------------------------------------------------------------

#: the surface's noise and the common-mode noise both sides of a pair share (SYNTHETIC, tunelab.simulator.noise)
DUET_CV, COMMON_CV, PAIRS = 0.02, 0.20, 16


def duet_calibrate(store_path: Path):
    text = simulator_design("calib-duet", cv=DUET_CV, knobs=(SOMAXCONN_KNOB,), replicates="4",
                            extra=f"measurement: duet\nnoise: {{calibration_runs: {PAIRS}}}\n")
    design = load_design_text(text, source="calib-duet.yaml")
    sides = [SimulatorTarget("simple", cv=DUET_CV, seed=11, common_cv=COMMON_CV) for _ in range(2)]
    loads = [SimulatorLoad(get_surface("simple", DUET_CV)) for _ in range(2)]
    with Store.open(store_path, study=design.name, design_hash=design.design_hash, design_text=text) as store:
        run_plan = plan_runner(design, store, loads[0], loads[0].settings("overload"), RunOptions(progress=False),
                               target=sides[0], partner=(sides[1], loads[1]))
        return design, run_calibration(design, store, run_plan), store.tidy(CALIBRATE)


def chi_band(sd: float, df: int) -> tuple[float, float]:
    """The 99.9 % range of a sample SD on ``df`` degrees of freedom around the true ``sd``."""
    return sd * math.sqrt(ss.chi2.ppf(0.0005, df) / df), sd * math.sqrt(ss.chi2.ppf(0.9995, df) / df)


def test_a_duet_calibration_reports_the_paired_ratio_s_cv_smaller_than_the_per_run_cv_as_theory_says(tmp_path):
    """Each trial: truth x (1 + cv z) x exp(common_cv w_pair). The per-run CV carries the common-mode factor,
    sqrt((1 + cv^2) exp(common_cv^2) - 1); the pair's log ratio cancels it: SD sqrt(2) cv (to first order in cv)."""
    design, calibration, tidy = duet_calibrate(tmp_path / "d.sqlite")
    assert len(tidy) == 2 * PAIRS and sorted(tidy["duet_arm"].value_counts()) == [PAIRS, PAIRS]
    at_baseline = {**SimulatorTarget("simple", cv=DUET_CV).current_config(), **design.baseline}
    cv = get_surface("simple", DUET_CV).config_cv(at_baseline)
    row = calibration.table.set_index("metric").loc["qps"]
    # the paired figure is the residual SD of the crossover fit of log(B / A) (statsmodels' OLS as the reference)
    wide = tidy.pivot_table(index="duet_pair", columns="duet_arm", values=["qps", "duet_side"])
    d = np.log(wide[("qps", "B")] / wide[("qps", "A")]).to_numpy()
    orientation = np.where(wide[("duet_side", "B")] == 1, 1.0, -1.0)
    reference = sm.OLS(d, sm.add_constant(orientation)).fit()
    assert row["pairs"] == PAIRS and row["paired_cv_pct"] == pytest.approx(100 * math.sqrt(reference.mse_resid))
    low, high = chi_band(100 * math.sqrt(2) * cv, PAIRS - 2)
    assert low <= row["paired_cv_pct"] <= high
    low, high = chi_band(100 * math.sqrt((1 + cv ** 2) * math.exp(COMMON_CV ** 2) - 1), PAIRS - 1)
    assert low <= row["cv_pct"] <= high
    assert row["paired_cv_pct"] < row["cv_pct"] / 2            # theory: 4.2 % against 20.3 %
    # the advice counts pairs per level at the paired noise
    assert row["needed"] == replicates_for_sesoi(row["paired_cv_pct"] / math.sqrt(2), 5.0)
    head = calibration.lines()[0]
    assert head.startswith(f"calibration: {2 * PAIRS} of {2 * PAIRS} A/A trials usable (duet: ")
    assert f"qps CV {row['cv_pct']:.1f} % per run, paired ratio CV {row['paired_cv_pct']:.1f} % ({PAIRS} pairs)" in head
