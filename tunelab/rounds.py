"""A study's runs, in rounds: fixed designs in one round, sequential designs until every verdict is decided.

A sequential design (``replicates: {min, max, step, until: decided}``, see
:class:`tunelab.designs.RoundsSpec`) runs like this:

1. round 1 is the design's plan with ``min`` replicates (``designs.make_plan``);
2. after each round the study is screened with :func:`tunelab.stats.screen_in_rounds`, which
   replays every look so far at its alpha-spending level (the verdicts a report gets later are
   exactly these);
3. the knob levels still ``inconclusive`` (:func:`tunelab.stats.pending_levels`) get ``step`` more
   replicates with fresh baseline runs in randomised order (``designs.round_plan``);
4. it stops when every verdict is decided, when a level would pass ``max`` replicates, or when the
   next round would overrun ``budget_trials`` or ``budget_minutes``.

``budget_minutes`` is held by a :class:`StudyBudget`: it counts the run's wall time (every attempt:
busy repeats, failed trials, warm-ups, and the overheads between them; the A/A calibration too, and
the attempts of earlier runs of a resumed study). Before a round starts, its cost is predicted from
the measured time per attempt and the share of attempts repeated because the machine was busy; a
round that does not fit is trimmed to the trials that do (in run order) or not started, with a line
saying why; and the runner asks the budget before every attempt, so a run ends within its budget
(at most one attempt's time over it). When busy repeats eat the budget, the first round says so.

Each round is one call of the study's plan runner (:func:`tunelab.study_run.plan_runner`:
:func:`tunelab.runner.run_design` on one target, its twin on many testbeds), so the runner's safety
rules, journal and resume hold within a round. A round's plan depends only on the design and the trials
of earlier rounds, so a resumed study plans the same rounds again and skips the trials it has.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd

from tunelab.designs import Design, make_plan, round_plan
from tunelab.formatting import fmt_pct
from tunelab.model import Verdict
from tunelab.runner.plans import PlanRunner
from tunelab.store import Store
from tunelab.study_data import design_info
from tunelab.study_result import RoundRecord, StudyRun

#: bootstrap resamples of an interim look: the decisions use p-values and TOST, never the bootstrap
INTERIM_N_BOOT = 200


#: the phases a study's budget counts (its rounds and its A/A calibration; not a later refine or validate)
STUDY_PHASES = ("screen", "calibrate")
#: the busy share above which a prediction no longer trusts it (every attempt repeated would be infinite cost)
MOST_BUSY_SHARE = 0.95


@dataclass
class StudyBudget:
    """A sequential study's ``budget_minutes``, held (module docstring).

    ``clock`` gives seconds (default :func:`time.monotonic`; tests inject a simulated one);
    ``spent_before_s`` is the time earlier runs of the study spent (its recorded attempts).
    :meth:`may_start` is the runner's ``may_start``: asked before every attempt, it says whether
    one more attempt, at the time attempts have taken so far, still ends within the budget.
    """

    minutes: float
    clock: Callable[[], float] = time.monotonic
    spent_before_s: float = 0.0
    #: the clock when the run started (the first question asked)
    started: float | None = None
    #: attempts this run started (busy repeats and failed trials included)
    attempts: int = 0
    #: True once an attempt was refused: the budget is spent
    refused: bool = False

    @property
    def limit_s(self) -> float:
        return 60 * self.minutes

    def spent_s(self) -> float:
        """Seconds spent: earlier runs' attempts, and this run's wall time."""
        if self.started is None:
            self.started = self.clock()
        return self.spent_before_s + self.clock() - self.started

    def per_attempt_s(self) -> float | None:
        """This run's wall time per attempt so far (overheads included); None before the first attempt."""
        if not self.attempts or self.started is None:
            return None
        return (self.clock() - self.started) / self.attempts

    def may_start(self) -> bool:
        """Whether one more attempt fits in the budget; counts it when it does."""
        spent = self.spent_s()
        if spent + (self.per_attempt_s() or 0.0) > self.limit_s:
            self.refused = True
            return False
        self.attempts += 1
        return True

    def trials_that_fit(self, busy_share: float) -> int | None:
        """How many more kept trials the rest of the budget buys at the measured time per attempt,
        each needing ``1 / (1 - busy_share)`` attempts; None before any attempt was timed."""
        per_attempt = self.per_attempt_s()
        if per_attempt is None or per_attempt <= 0:
            return None
        per_trial = per_attempt / (1 - min(busy_share, MOST_BUSY_SHARE))
        return max(0, math.floor((self.limit_s - self.spent_s()) / per_trial))


def budget_of(design: Design, store: Store, clock: Callable[[], float] = time.monotonic) -> StudyBudget | None:
    """The :class:`StudyBudget` of a sequential design with ``budget_minutes`` (None otherwise), timed from
    now; a resumed study starts with the time its recorded attempts (:data:`STUDY_PHASES`) took."""
    spec = design.rounds
    if spec is None or spec.budget_minutes is None:
        return None
    trials = store.trials()
    trials = trials[trials["phase"].isin(STUDY_PHASES)]
    started = pd.to_datetime(trials["started_at"], utc=True, errors="coerce")
    ended = pd.to_datetime(trials["ended_at"], utc=True, errors="coerce")
    spent = float((ended - started).dt.total_seconds().fillna(0).sum()) if len(trials) else 0.0
    return StudyBudget(spec.budget_minutes, clock=clock, spent_before_s=spent, started=clock())


def run_study(design: Design, store: Store, run_plan: PlanRunner, budget: StudyBudget | None = None) -> StudyRun:
    """Run ``design`` into ``store``: its plan, then for a sequential design more rounds.

    ``run_plan(phase, plan)`` runs one round's plan (None: the design's own) on the study's target
    or testbeds (:func:`tunelab.study_run.plan_runner`) and returns its counts. ``budget`` holds a
    ``budget_minutes`` (default: :func:`budget_of`, timed from here); give ``run_plan`` its
    ``may_start`` too, so the runner stops within a round when the budget is spent.
    """
    if design.rounds is None:
        return StudyRun.of(run_plan("screen", None))
    budget = budget if budget is not None else budget_of(design, store)
    plan, number, result = make_plan(design), 1, None
    study = StudyRun(design.name, store.path, 0)
    next_run_id, first_round = len(plan), len(plan)
    while True:
        plan, study.stop_reason = _fit_in_budget(plan, number, budget, study)
        if study.stop_reason:
            break
        study.add(run_plan("screen", plan))
        if budget is not None:     # across testbeds the runner does not ask the budget: count the round's attempts
            budget.attempts = max(budget.attempts, study.attempts)
        result = _round(design, store, study, number, plan, result)
        if number == 1:
            _warn_if_busy(design, study, budget, first_round)
        study.stop_reason, next_plan = _next_round(design, study, number, result, budget, next_run_id)
        if study.stop_reason:
            break
        plan, number, next_run_id = next_plan, number + 1, next_run_id + len(next_plan)
    study.attempt_s = budget.per_attempt_s() if budget is not None else None
    return study


def _round(design: Design, store: Store, study: StudyRun, number: int, plan: pd.DataFrame, previous: Any) -> Any:
    """Look at the rounds so far (the sequential screen) and record round ``number``; returns the look."""
    data = store.tidy(phase="screen", include_failed=True)
    data = data[data["round"] <= number] if "round" in data.columns else data.iloc[0:0]
    result = _look(design, data, previous)
    pending = _pending(design, data, result)
    decided = 0 if result is None else int((result.verdicts["verdict"] != Verdict.INCONCLUSIVE).sum())
    verdicts = 0 if result is None else len(result.verdicts)
    study.rounds.append(RoundRecord(number, len(plan), pending, decided, verdicts))
    return result


def _next_round(design: Design, study: StudyRun, number: int, result: Any, budget: StudyBudget | None,
                next_run_id: int) -> tuple[str | None, pd.DataFrame | None]:
    """Why the study stops after round ``number``, or the next round's plan."""
    spec, pending = design.rounds, study.rounds[-1].pending
    more = min(spec.step, spec.max - (spec.min + spec.step * (number - 1)))
    if budget is not None and budget.refused:          # a round cut short: its look is not the design's
        return (f"budget_minutes={budget.minutes:g} reached during round {number} ({budget.spent_s() / 60:.1f} min "
                "spent, every attempt and overhead counted); the rest of the round was not started"), None
    if result is None:
        return f"round {number} left no trials to screen (see the failures above)", None
    if not pending:
        return "every verdict is decided", None
    if more <= 0:
        return (f"the undecided levels reached max={spec.max} replicates; more would decide them "
                "(raise `max`, or accept `inconclusive`)"), None
    next_plan = round_plan(design, pending, number + 1, first_run_id=next_run_id, replicates=more)
    return _over_budget(design, _planned_so_far(study), len(next_plan)), next_plan


def _fit_in_budget(plan: pd.DataFrame, number: int, budget: StudyBudget | None,
                   study: StudyRun) -> tuple[pd.DataFrame, str | None]:
    """Round ``number``'s plan trimmed (in run order) to the trials the time budget still buys, at the
    measured time per attempt and busy share (a line in ``study.budget_lines`` says so), and why it
    must not start at all (fewer than half of it fits), or None."""
    fits = budget.trials_that_fit(study.busy_share()) if budget is not None else None
    if fits is None or fits >= len(plan):
        return plan, None
    per_attempt, share = budget.per_attempt_s() or 0.0, study.busy_share()
    busy = f" with {fmt_pct(100 * share, signed=False, decimals=0)} of attempts repeated (busy)" if share else ""
    cost = f"~{len(plan) * per_attempt / (1 - min(share, MOST_BUSY_SHARE)) / 60:.1f} min at {per_attempt:.1f} s per attempt{busy}"
    spent = f"{budget.spent_s() / 60:.1f} of budget_minutes={budget.minutes:g} spent"
    if fits < math.ceil(len(plan) / 2):    # a round of a few trials would buy little evidence
        return plan, (f"round {number} ({len(plan)} trials, {cost}) would not finish in the budget ({spent}; "
                      f"{fits} would)")
    line = f"round {number} trimmed to {fits} of {len(plan)} trials ({cost}); the rest would not finish in the budget ({spent})"
    print(line, file=sys.stderr)
    study.budget_lines.append(line)
    order = plan.sort_values("run_order") if "run_order" in plan.columns else plan
    return order.iloc[:fits], None


def _warn_if_busy(design: Design, study: StudyRun, budget: StudyBudget | None, first_round: int) -> None:
    """After round 1: when busy repeats mean the time budget cannot buy the trials the design plans,
    say so (stderr and the summary) with the measured busy share."""
    fits = budget.trials_that_fit(study.busy_share()) if budget is not None else None
    spec = design.rounds
    planned = first_round * spec.max // spec.min
    planned = min(planned, spec.budget_trials) if spec.budget_trials is not None else planned
    buys = study.ok + study.flagged + study.failed + (fits or 0)
    if not study.repeated or fits is None or buys >= planned:
        return
    line = (f"busy machine: {fmt_pct(100 * study.busy_share(), signed=False, decimals=0)} of attempts repeated; at "
            f"this rate the budget buys ~{buys} of the up to {planned} trials planned; consider measurement: duet, "
            "a quieter machine, or a larger budget")
    print(line, file=sys.stderr)
    study.budget_lines.append(line)


def _planned_so_far(study: StudyRun) -> int:
    return sum(record.planned for record in study.rounds)


def _look(design: Design, data: pd.DataFrame, previous: Any = None) -> Any:
    """The sequential screen of the rounds so far (a ``stats.ScreenResult``; None without data).

    ``previous`` (the look after the last round) lets it screen only the newest round.
    """
    from tunelab.stats import screen_in_rounds   # deferred: scipy/statsmodels, ~2 s

    if data.empty:
        return None
    return screen_in_rounds(data, [m.to_json() for m in design.metrics], design.knob_ids, design.baseline,
                             max_replicates=design.rounds.max, alpha=design.analysis.alpha,
                             correction=design.analysis.correction, n_boot=INTERIM_N_BOOT,
                             design=design_info(design), previous=previous, **_spending(design))


def _pending(design: Design, data: pd.DataFrame, result: Any) -> dict[str, tuple[Any, ...]]:
    """Knob id -> the levels the next round must run (none when every verdict is decided)."""
    from tunelab.stats import pending_levels

    if result is None:
        return {}
    levels = pending_levels(result, data, design.knob_ids, design.baseline)
    return {knob: tuple(values) for knob, values in levels.items() if values}


def _spending(design: Design) -> dict[str, Any]:
    return {"spending": design.rounds.spending} if design.rounds.spending else {}


def _over_budget(design: Design, planned: int, next_trials: int) -> str | None:
    """Why the next round must not start (its trials overrun ``budget_trials``), or None; the minutes
    are held by the :class:`StudyBudget` (:func:`_fit_in_budget`)."""
    spec = design.rounds
    if spec.budget_trials is not None and planned + next_trials > spec.budget_trials:
        return (f"the next round ({next_trials} trials) would pass budget_trials={spec.budget_trials} "
                f"({planned} planned so far)")
    return None


__all__ = ["StudyBudget", "budget_of", "run_study"]
