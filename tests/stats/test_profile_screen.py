"""The screen with the load profile as a factor (seed 001: a knob may matter under overload only).

1. Recorded-style data: the 24 trials of data/examples/abort-on-overflow.sqlite (somaxconn x
   tcp_abort_on_overflow, recorded under dnsperf TCP ``overload``) are the ``overload`` profile of a
   profile-crossed study; its ``low`` profile is SYNTHETIC: one run per recorded run, at the same
   knob levels, drawn so that no knob has any effect (dnsperf ``low`` is 2000 qps of UDP: the accept
   queue these knobs size is never used; seed 001 found the defaults fine at low load). The study is
   written to a store with its design, as ``tunelab run`` would, and screened through
   ``study_data.screen_inputs`` + ``design_info`` like ``tunelab screen``. The truth is then known:
   somaxconn's effect (-93 % qps at 128, -99.8 % at 16 on the recorded runs) exists at ``overload``
   only, so the somaxconn x profile interaction is real and the knob matters ``only when`` overload.
2. Simulation with a known interaction, one-at-a-time and factorial (24 runs each, CV 4 %): a knob
   with +20 % qps at ``overload`` and none at ``low``, another with -30 % at both, over 20 seeds:
   the interaction is found, the null interaction keeps its error rate, and the per-profile effects
   are unbiased.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunelab.designs import load_design_text, make_plan
from tunelab.stats import screen
from tunelab.stats.model_screen import profile_effects
from tunelab.store import Store
from tunelab.study_data import design_info, screen_inputs

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "data" / "examples" / "abort-on-overflow.sqlite"
SOMAXCONN, ABORT = "net.core.somaxconn", "net.ipv4.tcp_abort_on_overflow"
DESIGN = """\
name: profiles-recorded
description: recorded overload runs of abort-on-overflow plus SYNTHETIC low-load runs
target: {type: lab}
load: {generator: dnsperf, profile: [low, overload], settings: {}}
warmup_s: 2
measure_s: 6
metrics:
  - {name: qps, direction: maximize, sesoi_pct: 5}
  - {name: latency_mean_ms, direction: minimize, sesoi_pct: 10}
knobs:
  - {name: net.core.somaxconn, levels: [4096, 128, 16]}
  - {name: net.ipv4.tcp_abort_on_overflow, levels: [0, 1]}
design: {type: full_factorial, replicates: 4, blocks: 4, seed: 1001}
analysis: {alpha: 0.05, correction: holm}
"""


def _low_profile_metrics(rng: np.random.Generator) -> dict[str, float]:
    """A SYNTHETIC dnsperf ``low`` run: 2000 qps requested and answered (CV 0.5 %), ~0.2 ms latency
    (CV 5 %), whatever the knobs (no knob effect at low load)."""
    return {"qps": 2000.0 * math.exp(rng.normal(0, 0.005)), "latency_mean_ms": 0.2 * math.exp(rng.normal(0, 0.05))}


@pytest.fixture(scope="module")
def profile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    design = load_design_text(DESIGN, source="profiles-recorded.yaml")
    with Store(RECORDED, readonly=True) as recorded:
        trials = recorded.trials("screen")
    trials = trials[trials["status"] == "ok"]
    rng = np.random.default_rng(2024)
    path = tmp_path_factory.mktemp("profiles") / "profiles-recorded.sqlite"
    with Store.open(path, study=design.name, design_hash=design.design_hash, design_text=DESIGN) as store:
        run_id = 0
        for config, plan, knobs_read, metrics in zip(trials["config"], trials["plan"], trials["knobs_read"],
                                                     trials["metrics"]):
            for profile, values in (("overload", {k: metrics[k] for k in ("qps", "latency_mean_ms")}),
                                    ("low", _low_profile_metrics(rng))):
                info = {**{k: plan[k] for k in ("config_id", "block", "replicate", "is_baseline")},
                        "run_id": run_id, "run_order": run_id, "profile": profile}
                trial = store.begin_trial(f"screen:{run_id}", "screen", config, plan=info)
                store.finish_trial(trial, "ok", None, knobs_read, values)
                run_id += 1
    return path


@pytest.fixture(scope="module")
def recorded_result(profile_store: Path):
    inputs = screen_inputs(profile_store, data_dir=profile_store.parent)
    with Store(profile_store, readonly=True) as store:
        assert inputs.design == design_info(load_design_text(store.study.design_text))   # the stored design, read once
    return inputs.data, inputs.screen(n_boot=200)


def test_the_tidy_table_names_each_runs_profile(recorded_result) -> None:
    data, _ = recorded_result
    assert data.groupby("profile").size().to_dict() == {"low": 24, "overload": 24}


def test_recorded_study_reports_the_knob_by_load_interaction(recorded_result) -> None:
    _, result = recorded_result
    verdicts = result.verdicts.set_index(["metric", "knob"])
    assert not any("profile" == k for k in result.verdicts["knob"])           # the profile is not a knob
    interaction = verdicts.loc[("qps", f"{SOMAXCONN}:profile")]
    assert interaction["significant"] and interaction["verdict"] == "matters"
    assert interaction["only_when"] == "profile=overload"
    main = verdicts.loc[("qps", SOMAXCONN)]
    assert main["verdict"] == "matters" and main["only_when"] == "profile=overload"
    assert result.settings["profiles"] == ["low", "overload"]
    assert any("load profiles low, overload" in note for note in result.settings["notes"])


def test_recorded_per_profile_effects_match_the_cell_means(recorded_result) -> None:
    """Each knob's effect at a profile, against the geometric means of the runs themselves: in a
    balanced design the model (with the knob x profile term) reproduces the knob x profile margins."""
    data, result = recorded_result
    effects = profile_effects(result.contrasts)
    qps = effects[(effects["metric"] == "qps") & (effects["knob"] == SOMAXCONN)].set_index(["profile", "level"])
    assert set(qps.index) == {(p, v) for p in ("low", "overload") for v in (128, 16)}
    logs = data.assign(log=np.log(data["qps"]))
    cells = logs.groupby(["profile", SOMAXCONN, ABORT])["log"].mean().groupby(["profile", SOMAXCONN]).mean()
    for profile in ("low", "overload"):
        for level in (128, 16):
            expected = 100 * math.expm1(cells[(profile, level)] - cells[(profile, 4096)])
            assert qps.loc[(profile, level), "effect_pct"] == pytest.approx(expected, rel=1e-6, abs=1e-6)
    overload = qps.loc[("overload", 16)]
    assert overload["effect_ci_high"] < -90                                     # recorded: -99.8 %
    for level in (128, 16):                                                    # SYNTHETIC low: no effect
        low = qps.loc[("low", level)]
        assert low["effect_ci_low"] < 0 < low["effect_ci_high"] and abs(low["effect_pct"]) < 5


# ---- simulation with a known interaction ------------------------------------------------------------

#: truth: qps 1000 at low, 5000 at overload; abort_on_overflow=1 +20 % at overload only; somaxconn=128 -30 % at both
EFFECT_OVERLOAD = 20.0
SOMAXCONN_EFFECT = -30.0
CV = 0.04
SIM_DESIGN = """\
name: sim
load: {{generator: dnsperf, profile: [low, overload]}}
metrics: [{{name: qps, sesoi_pct: 5}}]
knobs:
  - {{name: net.core.somaxconn, levels: [4096, 128]}}
  - {{name: net.ipv4.tcp_abort_on_overflow, levels: [0, 1]}}
design: {{type: {kind}, replicates: {replicates}, seed: 3}}
"""


def _truth(row: pd.Series) -> float:
    qps = 5000.0 if row["profile"] == "overload" else 1000.0
    if row[ABORT] and row["profile"] == "overload":
        qps *= 1 + EFFECT_OVERLOAD / 100
    if row[SOMAXCONN] == 128:
        qps *= 1 + SOMAXCONN_EFFECT / 100
    return qps


@pytest.mark.parametrize("kind, replicates, runs", [("oat", 4, 24), ("full_factorial", 3, 24)])
def test_simulated_interaction_is_found_and_the_null_one_is_not(kind: str, replicates: int, runs: int) -> None:
    design = load_design_text(SIM_DESIGN.format(kind=kind, replicates=replicates))
    plan = make_plan(design)
    assert len(plan) == runs
    truth = plan.apply(_truth, axis=1).to_numpy()
    info = design_info(design)
    sims = 20
    found, null_hits, only_overload, at_low, at_overload = 0, 0, 0, [], []
    for seed in range(sims):
        data = plan.assign(qps=truth * np.exp(np.random.default_rng(seed).normal(0, CV, len(plan))))
        result = screen(data, [{"name": "qps", "sesoi_pct": 5}], [SOMAXCONN, ABORT],
                        {SOMAXCONN: 4096, ABORT: False}, n_boot=100, design=info)
        verdicts = result.verdicts.set_index("knob")
        found += bool(verdicts.loc[f"{ABORT}:profile", "significant"])
        null_hits += bool(verdicts.loc[f"{SOMAXCONN}:profile", "significant"])
        only_overload += verdicts.loc[ABORT, "only_when"] == "profile=overload"
        effects = profile_effects(result.contrasts).set_index(["knob", "profile"])
        at_low.append(effects.loc[(ABORT, "low"), "effect_pct"])
        at_overload.append(effects.loc[(ABORT, "overload"), "effect_pct"])
    assert found >= 0.8 * sims and only_overload >= 0.8 * sims      # the interaction's t is about 5 here
    assert null_hits <= 4          # alpha 0.05 (Holm over the family): P(>= 5 of 20 | 5 %) < 0.01
    # unbiased per-profile effects (one run's SE is about 3 %, so the mean of 20 has about 0.7 %)
    assert abs(np.mean(at_low)) < 2.0
    assert np.mean(at_overload) == pytest.approx(EFFECT_OVERLOAD, abs=2.0)


def test_single_profile_data_screens_as_before() -> None:
    """A profile column with one value (or none) changes nothing: same verdicts, no profile notes."""
    design = load_design_text(SIM_DESIGN.format(kind="full_factorial", replicates=3).replace(
        "profile: [low, overload]", "profile: overload"))
    plan = make_plan(design).assign(profile="overload")
    data = plan.assign(qps=plan.apply(_truth, axis=1) * np.exp(np.random.default_rng(1).normal(0, CV, len(plan))))
    args = ([{"name": "qps", "sesoi_pct": 5}], [SOMAXCONN, ABORT], {SOMAXCONN: 4096, ABORT: False})
    with_column = screen(data, *args, n_boot=100, design=design_info(design))
    without = screen(data.drop(columns="profile"), *args, n_boot=100, design=design_info(design))
    pd.testing.assert_frame_equal(with_column.verdicts, without.verdicts)
    assert "profiles" not in with_column.settings and with_column.settings["notes"] == without.settings["notes"]
    assert not any("profile" in knob for knob in with_column.verdicts["knob"])
