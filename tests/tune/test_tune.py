"""``tunelab tune``: the split, the stages end to end on the simulator and on a Python evaluator, exact resume
after a kill at each stage boundary, the budget never exceeded (failed attempts counted), and a stop after a
screen that finds nothing."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tunelab
from tunelab.errors import DesignError, StoreError
from tunelab.model import DesignType
from tunelab.optimize.tune import parse_split, split_budget, stored_tune
from tunelab.optimize.tune.budget import noise_sets_split
from tunelab.simulator import SimulatorEvaluator
from tunelab.store import Store

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("calibrate", "screen", "refine", "confirm")


class Killed(Exception):
    """Stands for a crash at a stage boundary."""


class Crash(BaseException):
    """Stands for a crash inside a measurement (not an ``Exception``: tune does not take it for a failed trial)."""


def _trials(path: Path) -> Any:
    with Store(path, readonly=True) as store:
        return store.trials()


def _comparable(result: Any) -> dict[str, Any]:
    out = result.to_json()
    out.pop("store")
    return out


# ---- the split --------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget,knobs", [(30, 3), (60, 5), (75, 20), (100, 27), (250, 30), (150, 12)])
def test_the_split_fits_the_budget_and_the_design_suits_the_knob_count(budget: int, knobs: int) -> None:
    split = split_budget(budget, knobs, 5.0)
    assert split.spendable <= budget and split.refine >= 4 and split.confirm % 4 == 0
    assert split.calibrate == 4                                 # the noise is unknown: an A/A calibration
    assert split.design == ("oat" if knobs < 8 else "plackett_burman")
    assert split.screen == split.screen_runs * split.replicates and split.screen_runs > knobs
    known = split_budget(budget, knobs, 5.0, cv_pct=1.0)
    assert known.calibrate == 0 and known.spendable <= budget


def test_the_noise_is_measured_only_where_it_changes_the_split() -> None:
    # 27 knobs in 60: one Plackett-Burman replicate whatever the noise, so no A/A runs (refine gets them)
    assert not noise_sets_split(60, 27, 5.0) and not noise_sets_split(100, 27, 5.0)
    # one at a time (5 knobs), or room for more replicates (250): the noise sets the replicates, so it is measured
    assert noise_sets_split(60, 5, 5.0) and noise_sets_split(250, 27, 5.0)


def test_a_budget_too_small_for_a_screen_refines_every_knob(tmp_path: Path) -> None:
    split = split_budget(60, 27, 5.0)            # one 32-run replicate would take 53 % of 60
    assert (split.design, split.screen, split.calibrate, split.refine, split.confirm) == ("none", 0, 0, 52, 8)
    assert "no screen" in split.notes[0] and "a budget of 80 or more screens first" in split.notes[0]
    assert split_budget(80, 27, 5.0, cv_pct=5.0).screen == 32
    path = tmp_path / "small.sqlite"
    result = tunelab.tune(target="simulator", surface="wide27", allow_host_global=True, budget=60, store=path)
    trials = _trials(path)
    assert set(trials["phase"]) == {"refine", "confirm"} and len(trials) == sum(result.spent.values()) <= 60
    assert result.kept == [c.knob for c in result.calls] and {c.verdict for c in result.calls} == {"not screened"}
    assert "no screen" in result.summary() and result.refine.warm == 0


def test_more_noise_buys_more_screen_replicates_and_an_override_replaces_the_shares() -> None:
    quiet, noisy = split_budget(250, 12, 5.0, cv_pct=1.0), split_budget(250, 12, 5.0, cv_pct=6.0)
    assert noisy.replicates > quiet.replicates and noisy.refine < quiet.refine
    forced = split_budget(100, 12, 5.0, cv_pct=1.0, override=parse_split("screen=50,refine=30,confirm=20"))
    assert forced.overridden and forced.screen == 40 and forced.confirm == 20 and forced.refine == 40


@pytest.mark.parametrize("text", ["screen=40", "screen=40,refine=40,confirm=30", "screen=x,refine=50,confirm=50",
                                  "screen=40,refine=40,verify=20"])
def test_a_bad_split_is_one_error(text: str) -> None:
    with pytest.raises(DesignError, match="--split"):
        parse_split(text)


def test_a_budget_too_small_for_the_knobs_says_what_would_do() -> None:
    with pytest.raises(DesignError, match="give --budget 24 or more"):
        split_budget(20, 3, 5.0)                # the one-at-a-time screen fits, but leaves refine nothing
    with pytest.raises(DesignError, match="the confirmation takes 8 measurements.*give --budget 12 or more"):
        split_budget(10, 20, 5.0)               # no room for a screen, and too little for refine


# ---- end to end --------------------------------------------------------------------------------------


def test_tune_on_the_simulator_target_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "sim.sqlite"
    plan = tunelab.tune(target="simulator", surface="simple", budget=60, store=path, plan_only=True)
    assert not path.exists()                                    # --plan measures nothing
    result = tunelab.tune(target="simulator", surface="simple", budget=60, store=path)
    trials = _trials(path)
    assert len(trials) == result.to_json()["spent_total"] <= 60
    assert result.spent == {phase: int((trials["phase"] == phase).sum()) for phase in STAGES}
    assert result.split.design == plan.design == "oat" and result.spent["screen"] == result.split.screen
    assert set(trials["phase"]) == set(STAGES) and (trials["status"] == "ok").all()
    assert {c.knob for c in result.calls} == set(result.refine.winner) | {c.knob for c in result.calls if not c.kept}
    assert all(c.why for c in result.calls) and result.kept == list(result.refine.winner)
    refined = trials[trials["phase"] == "refine"]
    assert all(set(config) == {c.knob for c in result.calls} for config in refined["config"])   # every knob set
    assert result.confirmation is not None and result.spent["confirm"] == 4 * result.split.blocks
    with Store(path, readonly=True) as store:
        stored = stored_tune(store)                            # what a report reads back: settings, split, spend
    assert stored == {"settings": result.settings.to_json(), "split": json.loads(json.dumps(result.split.to_json())),
                      "spent": result.spent, "spent_total": len(trials),
                      "outcome": json.loads(json.dumps(result.to_json()))}       # the knobs' calls, the gain
    json.dumps(result.to_json(), allow_nan=False)


def _strong_knob(config: dict[str, Any]) -> dict[str, float]:
    """A SYNTHETIC 9-knob function: ``k0`` at 8 lifts qps by 30 %, the rest are inert; noise CV 1 %, seeded by
    the configuration (so the same configuration always measures the same)."""
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
    return {"qps": 1000.0 * (1.3 if config["k0"] == 8 else 1.0) * (1 + 0.01 * rng.standard_normal())}


NINE = {f"k{i}": {"kind": "int", "low": 1, "high": 8, "step": 1} for i in range(9)}
NINE_BASE = {f"k{i}": 1 for i in range(9)}


def test_tune_on_a_python_callable_finds_the_knob_that_matters(tmp_path: Path) -> None:
    result = tunelab.tune(evaluator=_strong_knob, space=NINE, baseline=NINE_BASE, objectives=["qps:max:5"],
                          study="nine", budget=60, store=tmp_path / "nine.sqlite")
    assert result.split.design == "plackett_burman"
    calls = {c.knob: c for c in result.calls}
    assert calls["k0"].kept and result.winner["k0"] == 8
    assert abs(calls["k0"].estimate_pct) == max(abs(c.estimate_pct) for c in result.calls)   # the largest change
    assert not any(c.verdict == "matters" for k, c in calls.items() if k != "k0")
    # refine's 40-odd measurements can search all nine: the inert ones fill its width, each said so
    assert result.split.width == 9 and all("largest estimated changes" in calls[k].why for k in NINE if k != "k0")
    assert result.verdict == "improve" and 20 < result.gain()["pct_change"] < 40
    assert result.refine.warm == result.spent["screen"] + result.spent["calibrate"]    # every knob kept: all fit


# ---- resume ------------------------------------------------------------------------------------------


def _sim_tune(path: Path, hook: Any = None) -> Any:
    return tunelab.tune(target="simulator", surface="simple", budget=60, store=path, hook=hook)


def test_an_uninterrupted_rerun_measures_nothing_and_changed_settings_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "again.sqlite"
    first = _sim_tune(path)
    before = len(_trials(path))
    assert _comparable(_sim_tune(path)) == _comparable(first) and len(_trials(path)) == before
    with pytest.raises(StoreError, match="budget changed"):
        tunelab.tune(target="simulator", surface="simple", budget=80, store=path)


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, int]:
    """The uninterrupted run the resumed ones must equal, and its trial count."""
    path = tmp_path_factory.mktemp("whole") / "whole.sqlite"
    return _sim_tune(path), len(_trials(path))


@pytest.mark.parametrize("stage", STAGES)
def test_tune_resumes_exactly_after_a_kill_at_each_stage(tmp_path: Path, stage: str,
                                                         whole_run: tuple[Any, int]) -> None:
    whole, count = whole_run

    def kill(done: str) -> None:
        if done == stage:
            raise Killed(stage)

    path = tmp_path / "killed.sqlite"
    with pytest.raises(Killed):
        _sim_tune(path, hook=kill)
    resumed = _sim_tune(path)
    assert _comparable(resumed) == _comparable(whole) and len(_trials(path)) == count


KILLED_RUN = """
import os, signal, sys
import tunelab
sys.path.insert(0, {tests!r})
from tune.test_tune import NINE, NINE_BASE, _strong_knob

def hook(stage):
    if stage == {stage!r}:
        os.kill(os.getpid(), signal.SIGKILL)

tunelab.tune(evaluator=_strong_knob, space=NINE, baseline=NINE_BASE, objectives=["qps:max:5"], study="nine",
             budget=60, store={store!r}, hook=hook)
"""


def test_tune_resumes_exactly_after_a_sigkill(tmp_path: Path) -> None:
    """A real SIGKILL of the process (no finally runs, the lease and the store are left as a crash leaves them)."""
    whole = tunelab.tune(evaluator=_strong_knob, space=NINE, baseline=NINE_BASE, objectives=["qps:max:5"],
                         study="nine", budget=60, store=tmp_path / "whole.sqlite")
    path = tmp_path / "killed.sqlite"
    code = KILLED_RUN.format(tests=str(ROOT / "tests"), stage="refine", store=str(path))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert set(_trials(path)["phase"]) == {"screen", "refine"}   # one PB replicate at any noise: no calibration
    resumed = tunelab.tune(evaluator=_strong_knob, space=NINE, baseline=NINE_BASE, objectives=["qps:max:5"],
                           study="nine", budget=60, store=path)
    assert _comparable(resumed) == _comparable(whole)


# ---- the budget --------------------------------------------------------------------------------------


class Flaky:
    """The strong-knob function, but every fourth call raises (a load that fails), and it can be told to crash
    the run (:class:`Crash`) after ``crash_after`` calls."""

    def __init__(self, crash_after: int | None = None) -> None:
        self.calls, self.crash_after = 0, crash_after

    def __call__(self, config: dict[str, Any]) -> dict[str, float]:
        self.calls += 1
        if self.crash_after is not None and self.calls > self.crash_after:
            raise Crash("crash")
        if self.calls % 4 == 0:
            raise RuntimeError("the load generator failed")
        return _strong_knob(config)


def test_the_budget_is_never_exceeded_counting_failed_attempts(tmp_path: Path) -> None:
    path = tmp_path / "flaky.sqlite"
    result = tunelab.tune(evaluator=Flaky(), space=NINE, baseline=NINE_BASE, objectives=["qps:max:5"],
                          study="flaky", budget=60, store=path)
    trials = _trials(path)
    assert (trials["status"] == "failed").sum() >= 12 and len(trials) <= 60
    assert result.spent["refine"] and result.spent["confirm"]             # failures in every stage
    assert result.to_json()["spent_total"] == len(trials)
    failed = trials[trials["status"] == "failed"]
    assert failed["reason"].str.contains("RuntimeError: the load generator failed").all()


def test_a_crash_mid_stage_counts_its_attempts_and_the_resumed_run_stays_within_the_budget(tmp_path: Path) -> None:
    """A run killed mid-refine (the evaluator raises something tune does not catch) and resumed twice: every
    trial row ever recorded counts, and there are never more than the budget."""
    path = tmp_path / "crash.sqlite"
    for crash_after in (25, 3):
        with pytest.raises(Crash):
            tunelab.tune(evaluator=Flaky(crash_after), space=NINE, baseline=NINE_BASE, objectives=["qps:max:5"],
                         study="crash", budget=48, store=path)
    result = tunelab.tune(evaluator=Flaky(), space=NINE, baseline=NINE_BASE, objectives=["qps:max:5"],
                          study="crash", budget=48, store=path)
    trials = _trials(path)
    assert len(trials) <= 48 and result.to_json()["spent_total"] == len(trials)
    assert (trials["status"] == "interrupted").sum() == 2       # the two crashes' unfinished attempts, counted


# ---- nothing matters ---------------------------------------------------------------------------------


def test_a_screen_that_finds_nothing_stops_and_keeps_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "null.sqlite"
    result = tunelab.tune(target="simulator", surface="null", budget=60, seed=2, store=path)
    trials = _trials(path)
    assert result.stopped and "keeps" in result.stopped and result.kept == [] and result.refine is None
    assert set(trials["phase"]) == {"calibrate", "screen"} and len(trials) == result.split.calibrate + result.split.screen
    assert result.verdict == "stopped" and f"keeps {60 - len(trials)}" in result.stopped


def test_an_inert_python_evaluator_stops_after_a_plackett_burman_screen(tmp_path: Path) -> None:
    inert = SimulatorEvaluator("null", seed=5, cv=0.01)
    space = {f"k{i}": {"kind": "choice", "values": [0, 1]} for i in range(10)}

    def measure(config: dict[str, Any]) -> dict[str, float]:
        return inert.evaluate({"net.core.somaxconn": 128}, 0, key=json.dumps(config, sort_keys=True) + str(
            measure.calls)) if not setattr(measure, "calls", measure.calls + 1) else {}

    measure.calls = 0
    result = tunelab.tune(evaluator=measure, space=space, baseline={k: 0 for k in space}, objectives=["qps:max:5"],
                          study="inert", budget=60, store=tmp_path / "inert.sqlite")
    assert result.split.design == DesignType.PLACKETT_BURMAN.value and result.stopped


@pytest.mark.parametrize("stage", ["screen", "refine"])
def test_a_run_without_a_screen_resumes_exactly(tmp_path: Path, stage: str) -> None:
    """27 knobs in 60 measurements: no screen; a kill after the (empty) screen or after refine resumes to the
    uninterrupted run (the random engine keeps it quick: resuming is the driver's, whatever the engine)."""
    def tune(path: Path, hook: Any = None) -> Any:
        return tunelab.tune(target="simulator", surface="wide27", allow_host_global=True, budget=60, engine="random",
                            store=path, hook=hook)

    def kill(done: str) -> None:
        if done == stage:
            raise Killed(stage)

    whole = tune(tmp_path / "whole.sqlite")
    with pytest.raises(Killed):
        tune(tmp_path / "killed.sqlite", kill)
    resumed = tune(tmp_path / "killed.sqlite")
    assert resumed.split.screen == 0 and _comparable(resumed) == _comparable(whole)
    assert len(_trials(tmp_path / "killed.sqlite")) == len(_trials(tmp_path / "whole.sqlite"))
