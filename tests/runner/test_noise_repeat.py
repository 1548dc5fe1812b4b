"""Busy trials measured again (design ``noise: {repeat_busy_pct, max_repeats}``), with the real runner
and store on the file-backed fake target, whose foreign CPU per measurement is scripted."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pytest
from runner_fakes import FakeLoad, FileTarget, fake_design, make_knobs, oat_plan

from tunelab.designs import Design
from tunelab.designs.schema import NoiseSpec
from tunelab.runner.plans import run_design
from tunelab.store import Store

#: CPUs the fake machine reports; with measure_s = 1 a trial's machine has 4 CPU seconds
NPROC = 4


class BusyTarget(FileTarget):
    """A FileTarget whose n-th measurement saw ``busy[n]`` of the machine used by other processes."""

    def __init__(self, root: Path, busy: Sequence[float] = ()) -> None:
        super().__init__(root)
        self.busy = list(busy)
        self.windows = 0

    def describe(self) -> dict[str, Any]:
        return {"target": "busy-fake", "nproc": NPROC}

    def foreign_cpu_s(self) -> float:
        self.windows += 1
        if self.windows % 2:                  # the call that opens a trial's window
            return 0.0
        share = self.busy.pop(0) if self.busy else 0.0
        return share * NPROC * 1.0            # CPU seconds over a 1 s trial


@pytest.fixture
def busy_target(target: FileTarget) -> BusyTarget:
    """The seeded fake machine (conftest ``target``) with a scripted foreign CPU."""
    return BusyTarget(target.root)


def design_with(noise: dict[str, Any] | None) -> Design:
    return fake_design(noise=NoiseSpec(**noise) if noise is not None else None)


def run(target: BusyTarget, store: Store, noise: dict[str, Any] | None, **kwargs: Any):
    return run_design(design_with(noise), target, store, plan=oat_plan(), progress=False, load=FakeLoad(),
                      knob_lookup=make_knobs(), **kwargs)


def test_a_busy_trial_is_kept_set_aside_and_its_run_measured_again(busy_target: BusyTarget, store: Store) -> None:
    busy_target.busy = [0.05, 0.34]            # the second run's first attempt is busy
    summary = run(busy_target, store, {"repeat_busy_pct": 20, "max_repeats": 2})
    planned = len(oat_plan())
    assert (summary.ok, summary.repeated, summary.failed) == (planned, 1, 0)
    trials = store.trials()
    assert len(trials) == planned + 1
    busy, again = trials.iloc[1], trials.iloc[2]
    assert busy["run_key"] == again["run_key"]
    assert busy["status"] == "interrupted"
    assert busy["reason"] == "repeated: other processes used 34 % of the machine (threshold 20 %)"
    assert busy["provenance"]["repeated"] is True and busy["provenance"]["busy_pct"] == pytest.approx(34.0)
    assert busy["metrics"]["qps"] > 0          # the busy measurement is not lost
    assert again["status"] == "ok" and again["provenance"]["repeat_of"] == busy["trial_id"]
    # the analysis sees one trial per run, the final attempt; resume counts every run as done
    tidy = store.tidy()
    assert sorted(tidy["run_id"]) == sorted(oat_plan()["run_id"])
    assert busy["trial_id"] not in set(tidy["trial_id"]) and again["trial_id"] in set(tidy["trial_id"])
    assert store.completed_run_keys("screen") == {f"screen:{i}" for i in oat_plan()["run_id"]}
    assert "1 trial(s) measured again" in str(summary)


def test_a_run_busy_every_time_keeps_its_last_attempt(busy_target: BusyTarget, store: Store) -> None:
    busy_target.busy = [0.5, 0.5, 0.5]
    summary = run(busy_target, store, {"repeat_busy_pct": 20, "max_repeats": 2})
    trials = store.trials()
    first_key = trials["run_key"].iloc[0]
    attempts = trials[trials["run_key"] == first_key]
    assert attempts["status"].tolist() == ["interrupted", "interrupted", "ok"]
    assert attempts["provenance"].iloc[2]["attempt"] == 3
    assert summary.repeated == 2 and any("still busy (50 %) after 2 repeat(s)" in line for line in summary.repeats)
    assert len(store.tidy()) == len(oat_plan())


def test_without_the_rule_or_below_the_threshold_nothing_is_repeated(busy_target: BusyTarget, store: Store) -> None:
    busy_target.busy = [0.34, 0.19]
    summary = run(busy_target, store, None)
    assert summary.repeated == 0 and len(store.trials()) == len(oat_plan())
    busy_target.busy = [0.19]
    summary = run(busy_target, store, {"repeat_busy_pct": 20}, retry_failed=True)
    assert summary.skipped == len(oat_plan())


def test_a_crash_before_the_repeat_is_measured_resumes_that_run(busy_target: BusyTarget, store: Store) -> None:
    busy_target.busy = [0.0, 0.6]
    begins = []

    def ctrl_c_at_the_repeat(name: str) -> None:
        if name == "begin":
            begins.append(name)
            if len(begins) == 3:               # run 1, run 2 (busy), run 2 again
                raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run(busy_target, store, {"repeat_busy_pct": 20}, checkpoint=ctrl_c_at_the_repeat)
    busy_key = store.trials()["run_key"].iloc[1]
    assert busy_key not in store.completed_run_keys("screen")
    summary = run(busy_target, store, {"repeat_busy_pct": 20})
    assert summary.skipped == 1 and summary.ok == len(oat_plan()) - 1
    statuses = store.trials().query("run_key == @busy_key")["status"].tolist()
    assert statuses == ["interrupted", "interrupted", "ok"]
    assert len(store.tidy()) == len(oat_plan())
