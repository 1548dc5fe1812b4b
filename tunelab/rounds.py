"""A study's runs, in rounds: fixed designs in one round, sequential designs until every verdict is decided.

A sequential design (``replicates: {min, max, step, until: decided}``, see
:class:`tunelab.designs.SequentialSpec`) runs like this:

1. round 1 is the design's plan with ``min`` replicates (``designs.make_plan``);
2. after each round the study is screened with :func:`tunelab.stats.sequential_screen`, which
   replays every look so far at its alpha-spending level (the verdicts a report gets later are
   exactly these);
3. the knob levels still ``inconclusive`` (:func:`tunelab.stats.pending_levels`) get ``step`` more
   replicates with fresh baseline runs in randomised order (``designs.round_plan``);
4. it stops when every verdict is decided, when a level would pass ``max`` replicates, or when the
   next round would overrun ``budget_trials`` or ``budget_minutes``.

Each round is an ordinary :func:`tunelab.runner.run_design` call, so the runner's safety rules,
journal and resume hold within a round. A round's plan depends only on the design and the trials
of earlier rounds, so a resumed study plans the same rounds again and skips the trials it has.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import pandas as pd

from tunelab.designs import Design, make_plan, round_plan
from tunelab.model import level_text
from tunelab.runner import RunSummary, run_design
from tunelab.store import Store
from tunelab.targets import Target
from tunelab.tidy import design_info

if TYPE_CHECKING:                       # dask is imported only when a study runs on many testbeds
    from tunelab.cluster import Dispatcher

#: bootstrap resamples of an interim look: the decisions use p-values and TOST, never the bootstrap
INTERIM_N_BOOT = 200


@dataclass(frozen=True)
class RoundRecord:
    """One round of a sequential study: what was planned, run, and left undecided after it."""

    number: int
    planned: int
    pending: Mapping[str, tuple[Any, ...]]
    decided: int
    verdicts: int

    def line(self) -> str:
        levels = "; ".join(f"{knob}={', '.join(level_text(v) for v in values)}" for knob, values in self.pending.items())
        left = f", still inconclusive: {levels}" if levels else ""
        return f"round {self.number}: {self.planned} trials; {self.decided}/{self.verdicts} verdicts decided{left}"


@dataclass
class StudyRun:
    """What :func:`run_study` did: the runner's counts over all rounds, the rounds and why it stopped."""

    summary: RunSummary
    rounds: list[RoundRecord] = field(default_factory=list)
    stop_reason: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.summary, name)

    def __str__(self) -> str:
        return "\n".join([str(self.summary), *round_lines(self.rounds, self.stop_reason)])


def round_lines(rounds: list[RoundRecord], stop_reason: str | None) -> list[str]:
    """The run summary's lines about a sequential study: one per round, then why it stopped."""
    lines = [f"  {record.line()}" for record in rounds]
    return lines + ([f"  stopped: {stop_reason}"] if stop_reason else [])


def run_study(design: Design, target: Target | None, store: Store, *, dispatcher: Dispatcher | None = None,
              **run_options: Any) -> StudyRun:
    """Run ``design`` on ``target`` into ``store``: its plan, then for a sequential design more rounds.

    ``run_options`` go to every :func:`tunelab.runner.run_design` call (``allow_host_global``,
    ``progress``, ``retry_failed``, ``checkpoint``). With a ``dispatcher`` (many testbeds,
    :mod:`tunelab.cluster`) each round runs across its testbeds instead, and ``target`` is unused.
    """
    def run_round(plan: Any = None) -> RunSummary:
        if dispatcher is None:
            return run_design(design, target, store, plan=plan, **run_options)
        from tunelab.cluster import run_design_on_testbeds

        options = {k: v for k, v in run_options.items() if k in ("allow_host_global", "retry_failed", "load",
                                                                  "load_settings", "knob_lookup")}
        return run_design_on_testbeds(design, dispatcher, store, plan=plan, **options)

    if design.sequential is None:
        return StudyRun(run_round())
    spec = design.sequential
    plan, number, result = make_plan(design), 1, None
    study: StudyRun | None = None
    while True:
        summary = run_round(plan)
        if study is None:
            study = StudyRun(summary)
        else:
            _add(study.summary, summary)
        data = store.tidy(phase="screen", include_failed=True)
        data = data[data["round"] <= number] if "round" in data.columns else data.iloc[0:0]
        result = _look(design, data, result)
        pending = _pending(design, data, result)
        decided = 0 if result is None else int((result.verdicts["verdict"] != "inconclusive").sum())
        verdicts = 0 if result is None else len(result.verdicts)
        study.rounds.append(RoundRecord(number, len(plan), pending, decided, verdicts))
        replicates_done = spec.min + spec.step * (number - 1)
        more = min(spec.step, spec.max - replicates_done)
        if result is None:
            study.stop_reason = f"round {number} left no trials to screen (see the failures above)"
            break
        if not pending:
            study.stop_reason = "every verdict is decided"
            break
        if more <= 0:
            study.stop_reason = (f"the undecided levels reached max={spec.max} replicates; more would decide them "
                                 "(raise `max`, or accept `inconclusive`)")
            break
        next_plan = round_plan(design, pending, number + 1, first_run_id=_planned_so_far(study), replicates=more)
        reason = _over_budget(design, data, _planned_so_far(study), len(next_plan))
        if reason:
            study.stop_reason = reason
            break
        plan, number = next_plan, number + 1
    return study


def _add(total: RunSummary, more: RunSummary) -> None:
    """Add a round's runner counts to the study's."""
    for name in ("planned", "skipped", "ok", "flagged", "failed", "interrupted", "repeated", "wall_s"):
        setattr(total, name, getattr(total, name) + getattr(more, name))
    total.failures += more.failures
    total.foreign_load += more.foreign_load
    total.repeats += more.repeats


def _planned_so_far(study: StudyRun) -> int:
    return sum(record.planned for record in study.rounds)


def _look(design: Design, data: pd.DataFrame, previous: Any = None) -> Any:
    """The sequential screen of the rounds so far (a ``stats.ScreenResult``; None without data).

    ``previous`` (the look after the last round) lets it screen only the newest round.
    """
    from tunelab.stats import sequential_screen   # deferred: scipy/statsmodels, ~2 s

    if data.empty:
        return None
    return sequential_screen(data, [m.to_json() for m in design.metrics], design.knob_ids, design.baseline,
                             max_replicates=design.sequential.max, alpha=design.analysis.alpha,
                             correction=design.analysis.correction, n_boot=INTERIM_N_BOOT,
                             design=_screen_design(design), previous=previous, **_spending(design))


def _screen_design(design: Design) -> dict[str, Any]:
    """What the screen knows of the design (:func:`tunelab.tidy.design_info`), its looks made here."""
    return {key: value for key, value in design_info(design).items() if key != "sequential"}


def _pending(design: Design, data: pd.DataFrame, result: Any) -> dict[str, tuple[Any, ...]]:
    """Knob id -> the levels the next round must run (none when every verdict is decided)."""
    from tunelab.stats import pending_levels

    if result is None:
        return {}
    levels = pending_levels(result, data, design.knob_ids, design.baseline)
    return {knob: tuple(values) for knob, values in levels.items() if values}


def _spending(design: Design) -> dict[str, Any]:
    return {"spending": design.sequential.spending} if design.sequential.spending else {}


def _over_budget(design: Design, trials: pd.DataFrame, planned: int, next_trials: int) -> str | None:
    """Why the next round must not start (its trials or its expected minutes, judged from ``trials`` so
    far, overrun a budget), or None."""
    spec = design.sequential
    if spec.budget_trials is not None and planned + next_trials > spec.budget_trials:
        return (f"the next round ({next_trials} trials) would pass budget_trials={spec.budget_trials} "
                f"({planned} planned so far)")
    durations = trials["duration_s"].dropna()
    if spec.budget_minutes is not None and len(durations):
        spent, per_trial = durations.sum() / 60, durations.mean() / 60
        if spent + per_trial * next_trials > spec.budget_minutes:
            return (f"the next round ({next_trials} trials, ~{per_trial * next_trials:.1f} min) would pass "
                    f"budget_minutes={spec.budget_minutes:g} ({spent:.1f} min of trials so far)")
    return None


__all__ = ["RoundRecord", "StudyRun", "round_lines", "run_study"]
