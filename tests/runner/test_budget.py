"""``budget_minutes`` held on a busy machine: every attempt counts, busy repeats included (issue 27, item 5).

The simulator target reports a busy machine on a seeded share of its measurements (option ``busy_p``),
so the runner's busy rule sets those attempts aside and measures again. Time is simulated: the
clock reads 30 s per measurement the simulator has made, so every attempt costs exactly 30 s and
nothing here depends on how fast or loaded the test machine is.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tunelab.designs import load_design_text
from tunelab.errors import TargetError
from tunelab.formatting import fmt_pct
from tunelab.rounds import StudyBudget, budget_of, run_study
from tunelab.simulator import SimulatorTarget
from tunelab.simulator.load import SimulatorLoad
from tunelab.simulator.surfaces import get_surface
from tunelab.store import Store
from tunelab.study_run import RunOptions, plan_runner
from simulator_helpers import CONGESTION_KNOB, SOMAXCONN_KNOB, simulator_design  # tests/ is on sys.path

#: simulated seconds per attempt
ATTEMPT_S = 30.0
BUSY_RULE = "noise: {repeat_busy_pct: 20, max_repeats: 2}\n"


def design_text(budget: str = ", budget_minutes: 10") -> str:
    return simulator_design("budget-sim", cv=0.03, knobs=(SOMAXCONN_KNOB, CONGESTION_KNOB), sesoi_pct=10,
                            replicates="{min: 3, max: 18, step: 3, until: decided" + budget + "}", extra=BUSY_RULE)


def run(tmp_path: Path, text: str, busy_p: float):
    """The study on a simulator whose measurements are busy with probability ``busy_p``, timed by the
    simulated clock; returns its StudyRun and every attempt recorded."""
    design = load_design_text(text, source="budget-sim.yaml")
    load = SimulatorLoad(get_surface("simple", 0.03))
    target = SimulatorTarget("simple", cv=0.03, seed=11, busy_p=busy_p)
    clock = lambda: ATTEMPT_S * target.measurements  # noqa: E731 - simulated time
    with Store.open(tmp_path / "budget-sim.sqlite", study=design.name, design_hash=design.design_hash,
                    design_text=text) as store:
        budget = budget_of(design, store, clock)
        outcome = run_study(design, store, plan_runner(design, store, load, load.settings("overload"),
                                                       RunOptions(progress=False), target=target, budget=budget),
                            budget)
        attempts = store.trials()
    assert len(attempts) == target.measurements          # one measurement per attempt: the clock is exact
    return outcome, attempts


def repeated(attempts) -> int:
    return int(attempts["reason"].fillna("").str.startswith("repeated:").sum())


def in_round(attempts, number: int):
    return attempts[[plan.get("round") == number for plan in attempts["plan"]]]


def test_the_budget_holds_with_busy_repeats_counted(tmp_path: Path) -> None:
    unbudgeted, all_attempts = run(tmp_path / "free", design_text(budget=""), busy_p=0.4)
    assert len(all_attempts) * ATTEMPT_S > 10 * 60 + ATTEMPT_S   # without the budget the study runs longer
    outcome, attempts = run(tmp_path / "held", design_text(), busy_p=0.4)
    assert repeated(attempts) > 0
    assert len(attempts) * ATTEMPT_S <= 10 * 60 + ATTEMPT_S, str(outcome)
    assert "would not finish in the budget" in outcome.stop_reason, str(outcome)


def test_a_round_is_trimmed_to_what_the_rest_of_the_budget_buys(tmp_path: Path) -> None:
    outcome, attempts = run(tmp_path, design_text(), busy_p=0.4)
    first, second = in_round(attempts, 1), in_round(attempts, 2)
    share = repeated(first) / len(first)
    left_s = 10 * 60 - ATTEMPT_S * len(first)
    fits = int(left_s // (ATTEMPT_S / (1 - share)))        # kept trials at 1 / (1 - share) attempts each
    assert 3 <= fits < 6                                    # the scenario: half of round 2's 6 trials fit, not all
    assert f"round 2 trimmed to {fits} of 6 trials" in str(outcome), str(outcome)
    assert len(second) - repeated(second) == fits


def test_round_one_says_what_busy_repeats_cost_and_the_summary_counts_them(tmp_path: Path) -> None:
    outcome, attempts = run(tmp_path, design_text(), busy_p=0.4)
    first = in_round(attempts, 1)
    share = fmt_pct(100 * repeated(first) / len(first), signed=False, decimals=0)
    warning = outcome.budget_lines[0]
    assert warning.startswith(f"busy machine: {share} of attempts repeated; at this rate the budget buys ~"), warning
    assert "consider measurement: duet, a quieter machine, or a larger budget" in warning
    n = repeated(attempts)
    assert f"noise cost: ~{n * ATTEMPT_S / 60:.1f} min on {n} busy repeat(s)" in str(outcome), str(outcome)


def test_a_quiet_machine_gets_no_busy_warning(tmp_path: Path) -> None:
    outcome, attempts = run(tmp_path, design_text(), busy_p=0.0)
    assert repeated(attempts) == 0
    assert not any(line.startswith("busy machine") for line in outcome.budget_lines)
    assert "noise cost" not in str(outcome)


def test_a_round_that_cannot_finish_is_not_started() -> None:
    now = [0.0]
    budget = StudyBudget(1.0, clock=lambda: now[0])
    assert budget.may_start()                        # the first attempt: nothing measured yet
    now[0] = 25.0
    assert budget.may_start()                        # 25 s spent + 25 s per attempt <= 60 s
    now[0] = 50.0
    assert not budget.may_start() and budget.refused  # 50 s + 25 s would pass the minute
    assert budget.trials_that_fit(busy_share=0.0) == 0
    assert StudyBudget(10.0, clock=lambda: now[0], started=0.0, attempts=2).trials_that_fit(busy_share=0.5) == 11


def test_a_bad_busy_option_is_one_clear_error() -> None:
    with pytest.raises(TargetError, match="busy_p must be a number between 0 and 1"):
        SimulatorTarget("simple", busy_p=1.5)


def test_no_attempt_starts_once_the_budget_is_spent_not_even_a_busy_repeat(tmp_path: Path) -> None:
    # every measurement busy, max_repeats 2, 2 minutes = 4 attempts of 30 s: the first run takes 3 attempts
    # (still busy, kept), the second run's first attempt fits, its repeat would not
    outcome, attempts = run(tmp_path, design_text(budget=", budget_minutes: 2"), busy_p=1.0)
    assert len(attempts) == 4 and list(attempts["status"]) == ["interrupted", "interrupted", "ok", "ok"]
    assert "budget_minutes=2 reached during round 1" in outcome.stop_reason
    assert any("and the time budget is spent, after 0 repeat(s)" in line for line in outcome.repeats)
    assert outcome.budget_lines[0].startswith("busy machine: 50 % of attempts repeated; at this rate the budget "
                                              "buys ~2 of the up to 54 trials planned")


def test_a_resumed_study_starts_with_the_time_its_recorded_attempts_took(tmp_path: Path) -> None:
    text = design_text()
    design = load_design_text(text, source="budget-sim.yaml")

    def attempt(key: str, phase: str, seconds: int, status: str = "ok") -> dict:
        return {"run_key": key, "phase": phase, "config": "{}", "plan": "{}", "status": status,
                "reason": None if status == "ok" else "repeated: other processes used 60 % of the machine",
                "metrics": '{"qps": 1.0}', "started_at": "2026-01-01T10:00:00+00:00",
                "ended_at": f"2026-01-01T10:00:{seconds:02d}+00:00"}

    with Store.open(tmp_path / "resumed.sqlite", study=design.name, design_hash=design.design_hash,
                    design_text=text) as store:
        for record in (attempt("calibrate:0", "calibrate", 20), attempt("screen:0", "screen", 30, "interrupted"),
                       attempt("screen:0", "screen", 45), attempt("refine:b0:c0:r0", "refine", 50)):
            store.add_trial_record(record)
        budget = budget_of(design, store, clock=lambda: 0.0)
    assert budget.spent_before_s == 20 + 30 + 45          # the study's attempts, busy ones too; not a refine's
