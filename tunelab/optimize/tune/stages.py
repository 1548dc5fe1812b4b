"""``tunelab tune``'s stages on one store: calibrate, screen, refine, confirm (the package docstring).

:func:`run_tune` is the sequence; each stage is a function of the store's measurements so far, so a rerun after
a crash reads back what was measured (by run key) and continues exactly where it stopped. ``hook`` is called with
each stage's name once it is done (the kill-point tests raise from it).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from tunelab.errors import StoreError
from tunelab.model import DesignType, Metric
from tunelab.optimize.confirm import ConfirmResult, config_digest, confirm
from tunelab.optimize.driver import RefineResult, refine
from tunelab.optimize.evaluators import ResumableEvaluator, same_config
from tunelab.optimize.history import StoreSearchLog
from tunelab.optimize.space import SearchSpace
from tunelab.optimize.tune.budget import (AA_RUNS, ASSUMED_CV_PCT, NOT_CALIBRATED, BudgetSplit, noise_sets_split,
                                          split_budget)
from tunelab.optimize.tune.ledger import TUNE_PHASES, Guarded, Ledger
from tunelab.optimize.tune.result import TuneResult, TuneSettings
from tunelab.optimize.tune.screening import (KnobCall, ScreenPlan, best_levels, screen_calls, screen_plan,
                                             warm_points)
from tunelab.store import Store

#: the search id (and run-key prefix) of tune's refine stage in its store
SEARCH_ID = "tune"
#: the id under which tune keeps its outcome in the store's searches table (the settings; the result's JSON as
#: the "winner" record): what a report shows without re-running the screen's analysis (:func:`stored_tune`)
OUTCOME_ID = "tune:outcome"

#: a stage's evaluator: ``(phase, what to add to its trials' provenance) -> a store-backed, resumable evaluator``
EvaluatorFor = Callable[[str, Mapping[str, Any]], ResumableEvaluator]
#: an evaluator of one phase, its provenance set
PhaseEvaluator = Callable[[str], ResumableEvaluator]
#: one measurement: the configuration, its metrics, its run key
Measured = tuple[dict[str, Any], dict[str, float], str]


@dataclass
class TuneProblem:
    """What is tuned: the knobs and their values (``space``), the baseline, the goal (its SESOI decides what
    matters) and the metrics reported beside it."""

    study: str
    space: SearchSpace
    baseline: dict[str, Any]
    goal: Metric
    side_goals: list[Metric] = field(default_factory=list)


def check_stored_settings(store: Store, settings: TuneSettings) -> None:
    """StoreError unless every tune trial in ``store`` was measured with ``settings`` (resume mixes no two runs)."""
    wanted = settings.to_json()
    for row in store.trials().itertuples(index=False):
        stored = (row.provenance or {}).get("tune")
        if stored is not None and stored != wanted:
            changed = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
            raise StoreError(f"{store.path} holds a tune run with other settings ({', '.join(changed)} changed); "
                             "rerun with the original settings to resume, or give a new --store")


def run_tune(problem: TuneProblem, settings: TuneSettings, store: Store, evaluator_for: EvaluatorFor,
             hook: Callable[[str], None] | None = None) -> TuneResult:
    """Calibrate (unless the noise is given), screen, refine the knobs that matter, confirm the winner; every
    measurement through ``evaluator_for(phase, provenance)`` (a store-backed, resumable evaluator) and within the
    budget. Each trial after the calibration carries the split in its provenance (``tune_stage``), beside the
    settings (``tune``); what each stage spent is its trials' count."""
    check_stored_settings(store, settings)
    ledger = Ledger(store, settings.budget)
    done = hook or (lambda stage: None)
    calibrated = needs_calibration(problem, settings)
    cv, source, aa = (calibrate(problem, settings, lambda phase: evaluator_for(phase, {}), ledger) if calibrated
                      else (None, None, []))
    done("calibrate")
    split = split_for(problem, settings, calibrated, cv, source)
    staged = stage_evaluators(evaluator_for, split)
    plan, frame, measured, calls = screen_stage(problem, settings, split, staged, ledger, aa)
    done("screen")
    result = TuneResult(problem.study, store.path, settings, split, calls, ledger.spent)
    kept = [c.knob for c in calls if c.kept]
    if not kept:
        counts = Counter(c.verdict for c in calls)
        result.stopped = (f"the screen found no knob that changes {problem.goal.name} by its SESOI "
                          f"({problem.goal.sesoi_pct:g} %; {', '.join(f'{n} {v}' for v, n in counts.items())}); "
                          f"tune stops and keeps {ledger.left} of its {settings.budget} measurements")
        return record_outcome(store, result)
    result.refine = run_refine(problem, settings, split, plan, calls, aa + measured, frame, staged, ledger, store)
    done("refine")
    result.winner = {**problem.baseline, **result.refine.winner}
    result.confirmation, result.note = run_confirm(problem, split, result.winner, staged, ledger)
    done("confirm")
    return record_outcome(store, result)


def record_outcome(store: Store, result: TuneResult) -> TuneResult:
    """Keep ``result``'s JSON in ``store`` (search :data:`OUTCOME_ID`; a rerun writes the same again) and return it."""
    store.begin_search(OUTCOME_ID, {"kind": "tune outcome", **result.settings.to_json()})
    store.finish_search(OUTCOME_ID, result.to_json())
    return result


def needs_calibration(problem: TuneProblem, settings: TuneSettings) -> bool:
    """Whether tune measures the noise first: it is not given and it can change the split
    (:func:`tunelab.optimize.tune.budget.noise_sets_split`)."""
    return settings.cv_pct is None and noise_sets_split(settings.budget, len(problem.space.ids),
                                                         problem.goal.sesoi_pct, design=settings.screen_design,
                                                         override=settings.split)


def screen_stage(problem: TuneProblem, settings: TuneSettings, split: BudgetSplit, staged: PhaseEvaluator,
                 ledger: Ledger, aa: list[Measured]) -> tuple[ScreenPlan | None, pd.DataFrame | None, list[Measured],
                                                          list[KnobCall]]:
    """The screen's plan, its runs as a frame, its measurements and its call on every knob; without a screen in
    the split (too small a budget) every knob is kept unscreened, and there is no plan, frame or measurement."""
    if not split.screen:
        return None, None, [], [KnobCall(k, True, "not screened", split.notes[0]) for k in problem.space.ids]
    plan, measured = run_screen(problem, settings, split, staged, ledger)
    frame = screen_frame(plan, measured, problem.goal, aa if plan.design == DesignType.OAT else [])
    return plan, frame, measured, screen_calls(plan, frame, problem.goal, settings.alpha, split.width)


def stage_evaluators(evaluator_for: EvaluatorFor, split: BudgetSplit) -> PhaseEvaluator:
    """The evaluators of the stages after the calibration: their trials record the split."""
    def staged(phase: str) -> ResumableEvaluator:
        return evaluator_for(phase, {"split": split.to_json()})
    return staged


def calibrate(problem: TuneProblem, settings: TuneSettings, evaluator_for: PhaseEvaluator,
              ledger: Ledger) -> tuple[float | None, str, list[Measured]]:
    """The noise (CV % of the goal), where it came from, and the A/A measurements: the settings' ``cv_pct`` (none
    measured), else :data:`AA_RUNS` measurements of the baseline (phase ``calibrate``, keys ``aa0``...)."""
    if settings.cv_pct is not None:
        return float(settings.cv_pct), "given", []
    evaluator = Guarded(evaluator_for("calibrate"), ledger)
    aa = [(dict(problem.baseline), evaluator.evaluate(problem.baseline, i, key=f"aa{i}"), f"calibrate:aa{i}")
          for i in range(AA_RUNS)]
    values = np.array([m.get(problem.goal.name, math.nan) for _, m, _ in aa], dtype=float)
    finite = values[np.isfinite(values)]
    if len(finite) < 2 or finite.mean() == 0:
        return None, f"the A/A calibration measured {len(finite)} usable runs of {AA_RUNS}; noise assumed", aa
    cv = float(100.0 * finite.std(ddof=1) / abs(finite.mean()))
    return cv, f"A/A calibration of {AA_RUNS} baseline runs", aa


def run_screen(problem: TuneProblem, settings: TuneSettings, split: BudgetSplit, evaluator_for: PhaseEvaluator,
               ledger: Ledger) -> tuple[ScreenPlan, list[Measured]]:
    """Measure every screen run (key ``<run_id>``); returns the plan and ``(config, metrics, key)`` per run."""
    plan = screen_plan(problem.space, problem.baseline, DesignType(split.design), split.screen_runs,
                       split.replicates, settings.seed)
    evaluator = Guarded(evaluator_for("screen"), ledger)
    measured = []
    for row in plan.runs.to_dict(orient="records"):
        config = plan.config(row)
        key = str(row["run_id"])
        measured.append((config, evaluator.evaluate(config, int(row["replicate"]), key=key), f"screen:{key}"))
    return plan, measured


def screen_frame(plan: ScreenPlan, measured: list[Measured], goal: Metric,
                 baseline_runs: list[Measured] = ()) -> pd.DataFrame:
    """The screen's runs as a tidy frame (plan columns, knobs, ``status``, the goal; a failed run is ``failed``),
    with ``baseline_runs`` (one at a time: the A/A runs, measured alike) as more runs of the baseline."""
    extra = pd.DataFrame([{"run_id": len(plan.runs) + i, "config_id": 0, "replicate": i, "is_baseline": True,
                           "varied_knob": None, **plan.baseline} for i in range(len(baseline_runs))],
                         columns=plan.runs.columns)
    frame = pd.concat([plan.runs, extra], ignore_index=True) if len(extra) else plan.runs.copy()
    values = [metrics.get(goal.name, math.nan) for _, metrics, _ in [*measured, *baseline_runs]]
    frame[goal.name] = values
    frame["status"] = ["ok" if math.isfinite(v) else "failed" for v in values]
    return frame


def run_refine(problem: TuneProblem, settings: TuneSettings, split: BudgetSplit, plan: ScreenPlan | None,
               calls: list[KnobCall], measured: list[Measured], frame: pd.DataFrame | None,
               evaluator_for: PhaseEvaluator, ledger: Ledger, store: Store) -> RefineResult:
    """Refine over the kept knobs (the dropped ones at their baselines), warm-started with every calibration and
    screen measurement that fits (:func:`tunelab.optimize.tune.screening.warm_points`), each kept knob at its
    best level in the screen (``frame``, :func:`tunelab.optimize.tune.screening.best_levels`) as the first
    configuration asked."""
    kept = [c.knob for c in calls if c.kept]
    space = SearchSpace([problem.space.dimensions[problem.space.ids.index(k)] for k in kept])
    fixed = {k: v for k, v in problem.baseline.items() if k not in kept}
    warm = warm_points(space, fixed, measured, projected=settings.warm == "projected")
    screened = best_levels(plan, frame, problem.goal) if plan is not None and frame is not None else {}
    better = {k: v for k, v in screened.items() if k in kept}
    start = {k: better.get(k, problem.baseline[k]) for k in kept}
    initial = [start] if better else []
    evaluator = Guarded(evaluator_for("refine"), ledger, fixed)
    return refine(space, evaluator, [problem.goal], engine=settings.engine, budget=split.refine, seed=settings.seed,
                  baseline={k: problem.baseline[k] for k in kept}, initial=initial,
                  log=StoreSearchLog(store, SEARCH_ID), key_prefix=f"{SEARCH_ID}/", warm=warm)


def run_confirm(problem: TuneProblem, split: BudgetSplit, winner: Mapping[str, Any], evaluator_for: PhaseEvaluator,
                ledger: Ledger) -> tuple[ConfirmResult | None, str | None]:
    """The winner against the baseline in ABBA blocks (as many of the split's as the budget has left), or why not."""
    if same_config(problem.baseline, winner):
        return None, "the winner is the baseline: no configuration refine measured beat it, so nothing to confirm"
    evaluator = evaluator_for("confirm")
    prefix = f"{config_digest(problem.baseline, winner)}:"
    recorded = sum(1 for key in evaluator.done if key.startswith(f"confirm:{prefix}"))
    blocks = min(split.blocks, (ledger.left + recorded) // 4)
    if blocks < 2:
        return None, f"{ledger.left} measurements left: too few for two ABBA blocks, the winner is not confirmed"
    return confirm(Guarded(evaluator, ledger), problem.baseline, winner, [problem.goal], blocks=blocks,
                   key_prefix=prefix, side_metrics=problem.side_goals), None



def split_for(problem: TuneProblem, settings: TuneSettings, calibrated: bool, cv_pct: float | None = None,
              cv_source: str | None = None) -> BudgetSplit:
    """The split of ``problem``'s budget at the given noise (``settings.cv_pct``), else at the A/A calibration's
    (``calibrated``: ``cv_pct`` from ``cv_source``, None before it is measured), else at the assumed noise, which
    cannot change the split (:data:`tunelab.optimize.tune.budget.NOT_CALIBRATED`)."""
    if settings.cv_pct is not None:
        cv_pct, cv_source = settings.cv_pct, "given"
    elif not calibrated:
        cv_pct, cv_source = ASSUMED_CV_PCT, NOT_CALIBRATED
    return split_budget(settings.budget, len(problem.space.ids), problem.goal.sesoi_pct, cv_pct=cv_pct,
                        cv_source=cv_source, calibrated=calibrated, design=settings.screen_design,
                        override=settings.split)


def tune_plan(problem: TuneProblem, settings: TuneSettings) -> BudgetSplit:
    """The split ``--plan`` shows before anything is measured (the noise assumed unless given: when it can change
    the screen's replicates, the A/A calibration's measurement may change them, and so refine's share)."""
    return split_for(problem, settings, needs_calibration(problem, settings))


def check_plan(problem: TuneProblem, settings: TuneSettings) -> BudgetSplit:
    """:func:`tune_plan`, and (the noise to be calibrated) the split at the worst noise the calibration could
    measure (the most screen replicates): a budget too small for any of them is one error before the store opens."""
    if needs_calibration(problem, settings):
        split_budget(settings.budget, len(problem.space.ids), problem.goal.sesoi_pct, cv_pct=99.0,
                     calibrated=True, design=settings.screen_design, override=settings.split)
    return tune_plan(problem, settings)


def stored_tune(store: Store) -> dict[str, Any] | None:
    """What a store says of its tune run (None if it holds none): the settings, the split (once the calibration
    was done), the attempts each stage spent (every trial row, whatever its status) and, once tune finished or
    stopped, its ``outcome`` (:meth:`TuneResult.to_json`: the screen's call on every knob and why, the winner,
    the confirmed gain), for a report."""
    trials = store.trials()
    if trials.empty:
        return None
    tuned = [(row.provenance or {}) for row in trials.itertuples(index=False) if (row.provenance or {}).get("tune")]
    if not tuned:
        return None
    splits = [p["tune_stage"]["split"] for p in tuned if (p.get("tune_stage") or {}).get("split")]
    spent = {phase: int((trials["phase"] == phase).sum()) for phase in TUNE_PHASES}
    return {"settings": tuned[-1]["tune"], "split": splits[-1] if splits else None, "spent": spent,
            "spent_total": sum(spent.values()), "outcome": outcome_of(store.searches())}


def outcome_of(searches: pd.DataFrame) -> dict[str, Any] | None:
    """tune's outcome among a store's searches (:meth:`tunelab.store.Store.searches`), None when there is none."""
    rows = searches[searches["search_id"] == OUTCOME_ID] if len(searches) else searches
    return dict(rows.iloc[0]["winner"]) if len(rows) and rows.iloc[0]["winner"] is not None else None
