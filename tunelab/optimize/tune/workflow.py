"""tune's runs under the run's owner (:func:`tunelab.run_owner.owned_run`, as every verb that may apply a knob):
on a target (a design's, or the simulator's) through :class:`tunelab.optimize.evaluators.RunnerEvaluator`, or
on any Python evaluator through :class:`tunelab.optimize.tune.ledger.CallableEvaluator`."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tunelab.errors import DesignError
from tunelab.model import Metric, level_to_json
from tunelab.optimize.confirm import goals_of
from tunelab.optimize.engines import typed_config
from tunelab.optimize.evaluators import RunnerEvaluator
from tunelab.optimize.space import SearchSpace, space_from_spec
from tunelab.optimize.tune.ledger import CallableEvaluator
from tunelab.optimize.tune.result import TuneResult, TuneSettings
from tunelab.optimize.tune.stages import TuneProblem, check_plan, run_tune
from tunelab.optimize.workflow import RefineSetup
from tunelab.run_owner import owned_run
from tunelab.runner.binding import check_host_global
from tunelab.runner.load_setup import cleanup_load, prepare_load
from tunelab.targets import build_target

Hook = Callable[[str], None]


def problem_of(setup: RefineSetup) -> TuneProblem:
    """The tune problem of a refine setup over every knob (a design's, or a simulator surface's)."""
    return TuneProblem(setup.study, setup.space, dict(setup.baseline), setup.goals[0],
                       [*setup.goals[1:], *setup.side_goals])


def tune_study(setup: RefineSetup, spec: Mapping[str, Any], path: Path, settings: TuneSettings, *,
               allow_commands: bool = False, hook: Hook | None = None) -> TuneResult:
    """``tunelab tune``'s run on the target of ``spec``: the store at ``path`` opened once under the run's owner,
    the load's files put on its host before the first apply and removed before it goes down, every trial a real
    (or simulated) one through the runner, every knob of ``setup`` applied in every trial."""
    check_host_global(setup.knob_specs, setup.allow_host_global)    # before the store opens: nothing to resume
    check_plan(problem_of(setup), settings)
    provenance = {"tune": settings.to_json()}
    with owned_run(path) as owner:
        store = owner.open_store(study=setup.study, design_hash=setup.design_hash, design_text=setup.design_text,
                                 target_spec=spec)
        with build_target(dict(spec), allow_commands=allow_commands) as live:
            prepare_load(live, setup.load, [setup.load_settings], store)

            def evaluator_for(phase: str, stage: Mapping[str, Any]) -> RunnerEvaluator:
                return RunnerEvaluator(live, setup.load, setup.knob_specs, store, phase=phase,
                                       warmup_s=setup.warmup_s, measure_s=setup.measure_s,
                                       load_settings=setup.load_settings, allow_host_global=setup.allow_host_global,
                                       fixed=setup.fixed, provenance={**provenance, "tune_stage": dict(stage)})
            try:
                return run_tune(problem_of(setup), settings, store, evaluator_for, hook)
            finally:
                cleanup_load(setup.load, live)


def evaluator_problem(study: str, space: SearchSpace | Mapping[str, Mapping[str, Any]] | None,
                      baseline: Mapping[str, Any] | None,
                      objectives: Sequence[Metric | str]) -> tuple[TuneProblem, str, str]:
    """The problem of tuning a Python evaluator, its design hash and text (the space, baseline and objectives
    as JSON: what a resumed run must give again). ``space`` is a :class:`SearchSpace` or its spec
    (:func:`tunelab.optimize.space.space_from_spec`); ``objectives`` ``NAME:max|min[:SESOI]`` or metrics."""
    if space is None or baseline is None or not objectives:
        raise DesignError("tune on an evaluator needs its space, its baseline and an objective (e.g. qps:max:5)")
    space = space if isinstance(space, SearchSpace) else space_from_spec(space)
    missing = [k for k in space.ids if k not in baseline]
    if missing:
        raise DesignError(f"the baseline has no value of {', '.join(missing[:5])}; give every knob of the space one")
    baseline = typed_config(space, {k: baseline[k] for k in space.ids})
    objectives = goals_of(objectives)
    text = json.dumps({"evaluator": study, "space": [repr(d) for d in space.dimensions],
                       "baseline": {k: level_to_json(v) for k, v in baseline.items()},
                       "objectives": [str(o) for o in objectives]},
                      sort_keys=True, default=str)
    problem = TuneProblem(study, space, dict(baseline), objectives[0], list(objectives[1:]))
    return problem, hashlib.sha256(text.encode()).hexdigest(), text


def tune_evaluator(measure: Any, problem: TuneProblem, design_hash: str, design_text: str, path: Path,
                   settings: TuneSettings, *, hook: Hook | None = None) -> TuneResult:
    """tune on a Python evaluator (``measure``: ``config -> metrics``, or an object with ``evaluate``), every
    call recorded in the store at ``path`` (opened once under the run's owner); nothing is applied to a machine
    by tunelab itself."""
    check_plan(problem, settings)
    provenance = {"tune": settings.to_json()}
    metrics = [problem.goal.name]
    with owned_run(path) as owner:
        store = owner.open_store(study=problem.study, design_hash=design_hash, design_text=design_text,
                                 target_spec={"type": "evaluator", "options": {}})

        def evaluator_for(phase: str, stage: Mapping[str, Any]) -> CallableEvaluator:
            return CallableEvaluator(measure, store, phase, metrics, {**provenance, "tune_stage": dict(stage)})

        return run_tune(problem, settings, store, evaluator_for, hook)
