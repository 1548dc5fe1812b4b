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

Each round is one call of the study's plan runner (:func:`tunelab.study_run.plan_runner`:
:func:`tunelab.runner.run_design` on one target, its twin on many testbeds), so the runner's safety
rules, journal and resume hold within a round. A round's plan depends only on the design and the trials
of earlier rounds, so a resumed study plans the same rounds again and skips the trials it has.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import pandas as pd

from tunelab.designs import Design, make_plan, round_plan
from tunelab.display import Displayed
from tunelab.formatting import level_label
from tunelab.model import json_value
from tunelab.runner import PlanRunner, RunSummary
from tunelab.store import Store
from tunelab.study_data import design_info

if TYPE_CHECKING:
    from tunelab.calibration import Calibration

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
        levels = "; ".join(f"{knob}={', '.join(level_label(v) for v in values)}"
                           for knob, values in self.pending.items())
        left = f", still inconclusive: {levels}" if levels else ""
        return f"round {self.number}: {self.planned} trials; {self.decided}/{self.verdicts} verdicts decided{left}"


@dataclass
class StudyRun(RunSummary, Displayed):
    """What a study run did (:func:`tunelab.run`'s result): the runner's counts over all rounds, a
    sequential design's rounds and why it stopped, the orphaned labs removed first, the A/A
    calibration, and for a dry run the preview of every planned trial. In a notebook it shows as a
    short HTML summary (:mod:`tunelab.report.reprs`); ``str()`` gives the CLI's lines."""

    rounds: list[RoundRecord] = field(default_factory=list)
    stop_reason: str | None = None
    labs_removed: list[str] = field(default_factory=list)
    #: the A/A calibration before the study's trials (``noise.calibration_runs``), or None
    calibration: "Calibration | None" = None
    #: a dry run's preview lines (:meth:`tunelab.targets.dryrun.DryRunTarget.preview`); empty otherwise
    preview: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, summary: RunSummary) -> "StudyRun":
        """The study run whose counts so far are ``summary``'s."""
        return cls(**vars(summary))

    def add(self, more: RunSummary) -> None:
        """Add a later round's runner counts."""
        for name in ("planned", "skipped", "ok", "flagged", "failed", "interrupted", "repeated", "wall_s"):
            setattr(self, name, getattr(self, name) + getattr(more, name))
        self.failures += more.failures
        self.foreign_load += more.foreign_load
        self.repeats += more.repeats

    def __str__(self) -> str:
        if not self.recorded and self.preview:
            return "\n".join([*self.preview, self.preview_line()])
        lines = [super().__str__(), *round_lines(self.rounds, self.stop_reason)]
        calibration = self.calibration
        if calibration is not None:
            lines.append(f"noise: {calibration.cv_text() or 'no metric'} over {calibration.usable} A/A trials"
                         + (f"; {len(calibration.warnings)} SESOI warning(s), see above" if calibration.warnings else ""))
        return "\n".join(lines)

    def __repr__(self) -> str:
        """Two lines: the counts and the store (``str()`` has every line the CLI prints).

        >>> StudyRun("tour", "data/tour.sqlite", planned=36, ok=35, failed=1, wall_s=2.04)
        StudyRun: study tour, 35 ok of 36 planned (0 skipped, 0 flagged, 1 failed) in 2.0 s
          store data/tour.sqlite; str(result) for every line, .failures for the failed trials
        """
        where = f"store {self.store_path}" if self.recorded else "dry run: nothing recorded"
        rounds = f", {len(self.rounds)} round(s)" if self.rounds else ""
        return (f"StudyRun: study {self.study}, {self.ok} ok of {self.planned} planned ({self.skipped} skipped, "
                f"{self.flagged} flagged, {self.failed} failed{rounds}) in {self.wall_s:.1f} s\n"
                f"  {where}; str(result) for every line, .failures for the failed trials")

    def preview_line(self) -> str:
        """A dry run's last line: what was previewed and that nothing was done (its problems after it)."""
        lines = [f"dry run of study {self.study}: {self.planned} planned trial(s) previewed in {self.wall_s:.1f} s; "
                 "nothing was applied, run or recorded"]
        lines += [f"  {self.stop_reason}"] if self.stop_reason else []
        if self.failed or self.interrupted:
            lines.append(f"{self.failed + self.interrupted} trial(s) could not be previewed:")
            lines += [f"  {line}" for line in self.failures]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"study": self.study, "store": str(self.store_path), "recorded": self.recorded, "planned": self.planned,
                "skipped": self.skipped, "ok": self.ok, "flagged": self.flagged, "failed": self.failed,
                "interrupted": self.interrupted, "wall_s": self.wall_s, "failures": list(self.failures),
                "foreign_load": list(self.foreign_load), "labs_removed": list(self.labs_removed),
                "rounds": [json_value(vars(record)) for record in self.rounds], "stop_reason": self.stop_reason,
                "repeated": self.repeated, "repeats": list(self.repeats),
                "noise": self.calibration.to_json() if self.calibration is not None else None}


def round_lines(rounds: list[RoundRecord], stop_reason: str | None) -> list[str]:
    """The run summary's lines about a sequential study: one per round, then why it stopped."""
    lines = [f"  {record.line()}" for record in rounds]
    return lines + ([f"  stopped: {stop_reason}"] if stop_reason else [])


def run_study(design: Design, store: Store, run_plan: PlanRunner) -> StudyRun:
    """Run ``design`` into ``store``: its plan, then for a sequential design more rounds.

    ``run_plan(phase, plan)`` runs one round's plan (None: the design's own) on the study's target
    or testbeds (:func:`tunelab.study_run.plan_runner`) and returns its counts.
    """
    if design.sequential is None:
        return StudyRun.of(run_plan("screen", None))
    spec = design.sequential
    plan, number, result = make_plan(design), 1, None
    study: StudyRun | None = None
    while True:
        summary = run_plan("screen", plan)
        if study is None:
            study = StudyRun.of(summary)
        else:
            study.add(summary)
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
    """What the screen knows of the design (:func:`tunelab.study_data.design_info`), its looks made here."""
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
