"""The refine workflow the CLI and notebooks use: design or simulator -> space, target, evaluator ->
search -> ABBA confirmation -> exports. Each step is a small function so notebooks can run them one by one.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from tunelab.errors import DesignError
from tunelab.optimize.confirm import ConfirmResult, MetricGoal, config_digest, confirm
from tunelab.optimize.evaluators import RunnerEvaluator
from tunelab.optimize.search import Objective, RefineResult, refine
from tunelab.optimize.space import SearchSpace, _canonical, dimension_from_design_knob  # noqa: F401


@dataclass
class RefineSetup:
    """Everything a refinement needs, built from a design (or a simulator surface)."""

    study: str
    space: SearchSpace
    baseline: dict[str, Any]
    knob_specs: list[Any]
    target_type: str
    target_options: dict[str, Any]
    load: Any
    load_settings: dict[str, Any]
    warmup_s: float
    measure_s: float
    goals: list[MetricGoal]
    design_hash: str
    design_text: str
    allow_host_global: bool = False
    initial: list[dict[str, Any]] = field(default_factory=list)
    levels: dict[str, list[Any]] = field(default_factory=dict)
    #: the design's other metrics: reported by the confirmation as side effects, not judged
    side_goals: list[MetricGoal] = field(default_factory=list)


def screened_knobs(store_path: str | Path, design: Any, metric: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Knob ids the screen found to matter for ``metric`` in the better direction, and their best levels.

    Reads the study's screen trials (``store.tidy("screen")``) and runs :func:`tunelab.stats.screen`.
    """
    from tunelab.stats import screen
    from tunelab.store import Store

    path = Path(store_path)
    if not path.exists():
        raise DesignError(f"--knobs screened needs the screen's trials in {path}; run `tunelab run` on the screen "
                          "design first, or list the knobs: --knobs K1,K2")
    store = Store(path, readonly=True)
    try:
        data = store.tidy("screen")
    finally:
        store.close()
    if data.empty:
        raise DesignError(f"{path} has no ok screen trials; run the screen first or list the knobs: --knobs K1,K2")
    result = screen(data, [dict(metric)], design.knob_ids, design.baseline)
    verdicts = result.verdicts
    chosen = verdicts[(verdicts["metric"] == metric["name"]) & (verdicts["verdict"] == "matters")
                      & (verdicts["direction"] == "better")]
    if chosen.empty:
        raise DesignError(f"the screen found no knob that makes {metric['name']} better by at least its SESOI; "
                          "there is nothing to refine (list knobs with --knobs K1,K2 to search anyway)")
    return list(chosen["knob"]), {row.knob: _canonical(row.best_level) for row in chosen.itertuples()}


def setup_from_design(design_path: str | Path, *, knobs: str | None = None, target_type: str | None = None,
                      objectives: Sequence[Objective] = (), store_path: str | Path | None = None,
                      allow_host_global: bool = False) -> RefineSetup:
    """Build a :class:`RefineSetup` from a design file; ``knobs`` is ``None`` (all), ``"screened"`` or ``"K1,K2"``."""
    from tunelab.designs import load_design
    from tunelab.runner import knob_specs_from_design, load_of, target_spec_of
    from tunelab.store import default_store_path

    design = load_design(design_path)
    metrics = {m.name: {"name": m.name, "direction": m.direction, "sesoi_pct": m.sesoi_pct} for m in design.metrics}
    objs = list(objectives) or [Objective(design.metrics[0].name, design.metrics[0].direction)]
    initial: list[dict[str, Any]] = []
    if knobs is None or knobs == "all":
        chosen = design.knob_ids
    elif knobs == "screened":
        first = metrics.get(objs[0].metric, {"name": objs[0].metric, "direction": objs[0].direction, "sesoi_pct": 5.0})
        chosen, best = screened_knobs(store_path or default_store_path(design.name), design, first)
        initial.append({kid: best.get(kid, design.baseline[kid]) for kid in chosen})
    else:
        chosen = [k.strip() for k in knobs.split(",") if k.strip()]
        unknown = [k for k in chosen if k not in design.knob_ids]
        if unknown:
            raise DesignError(f"--knobs {', '.join(unknown)} not in the design; its knob ids are "
                              f"{', '.join(design.knob_ids)}")
    by_id = {k.id: k for k in design.knobs}
    space = SearchSpace([dimension_from_design_knob(by_id[kid]) for kid in chosen])
    spec = target_spec_of(design)
    if target_type and target_type != spec["type"]:
        spec = {"type": target_type, "options": {}, "allow_host_global": spec["allow_host_global"]}
    all_specs = {s.id: s for s in knob_specs_from_design(design)}
    if spec["type"] == "simulator":
        from tunelab.simulator import SimulatorLoad, get_surface

        load: Any = SimulatorLoad(get_surface(spec["options"].get("surface", "simple"), spec["options"].get("cv", 0.03)))
        settings = load.settings(design.load.profile if design.load.profile in load.profiles else "overload")
    else:
        load, settings = load_of(design)
    goals = [MetricGoal(o.metric, o.direction, float(metrics.get(o.metric, {}).get("sesoi_pct", 5.0))) for o in objs]
    side_goals = [MetricGoal(m.name, m.direction, float(m.sesoi_pct)) for m in design.metrics
                  if m.name not in {g.name for g in goals}]
    return RefineSetup(
        study=design.name, space=space, baseline={kid: design.baseline[kid] for kid in chosen},
        knob_specs=[all_specs[kid] for kid in chosen], target_type=spec["type"], target_options=spec["options"],
        load=load, load_settings=settings, warmup_s=design.warmup_s, measure_s=design.measure_s, goals=goals,
        design_hash=design.design_hash, design_text=Path(design_path).read_text(),
        allow_host_global=allow_host_global or spec["allow_host_global"], initial=initial,
        levels={kid: list(by_id[kid].levels) for kid in chosen}, side_goals=side_goals)


def setup_from_surface(surface_name: str, *, cv: float = 0.03, seed: int = 0,
                       objectives: Sequence[Objective] = ()) -> RefineSetup:
    """A :class:`RefineSetup` on a SYNTHETIC simulator surface (no design file needed)."""
    from tunelab.runner import knob_specs_from_design
    from tunelab.store import parse_knob_id
    from tunelab.simulator import SimulatorLoad, get_surface

    surface = get_surface(surface_name, cv)
    objs = list(objectives) or [Objective(m, d) for m, d in list(surface.metrics.items())[:1]]
    specs = knob_specs_from_design({"knobs": [dict(zip(("name", "host", "device"), parse_knob_id(k)), id=k)
                                              for k in surface.space]})
    text = json.dumps({"surface": surface_name, "cv": cv, "space": {k: dict(v) for k, v in surface.space.items()}},
                      sort_keys=True, default=str)
    load = SimulatorLoad(surface)
    return RefineSetup(
        study=f"sim-{surface_name}", space=surface.search_space(), baseline=dict(surface.baseline), knob_specs=specs,
        target_type="simulator", target_options={"surface": surface_name, "cv": cv, "seed": seed}, load=load,
        load_settings=load.settings("overload"), warmup_s=0.0, measure_s=1.0,
        goals=[MetricGoal(o.metric, o.direction, 5.0) for o in objs],
        design_hash=hashlib.sha256(text.encode()).hexdigest(), design_text=text)


@dataclass
class RefineOutcome:
    """What a refinement did: the search result, its confirmation (None when skipped), counts of
    new and reused measurements, and ``note`` saying why a confirmation was skipped."""

    result: RefineResult
    confirmation: ConfirmResult | None
    measured: int
    reused: int
    note: str | None = None


def run_refinement(setup: RefineSetup, target: Any, store: Any, objectives: Sequence[Objective], *,
                   budget: int | None, preset: str, seed: int, replicates: int | None,
                   confirm_blocks: int) -> RefineOutcome:
    """Search with real (or simulated) trials recorded in ``store`` (phase ``refine``), then confirm the
    winner against the baseline in ABBA blocks (phase ``confirm``). Re-running resumes both."""
    provenance = {"refine": {"preset": preset, "seed": seed, "budget": budget}}
    evaluator = RunnerEvaluator(target, setup.load, setup.knob_specs, store, phase="refine", warmup_s=setup.warmup_s,
                                measure_s=setup.measure_s, load_settings=setup.load_settings,
                                allow_host_global=setup.allow_host_global, provenance=provenance)
    result = refine(setup.space, evaluator, objectives, budget=budget, preset=preset, seed=seed,
                    baseline=setup.baseline, initial=setup.initial, replicates=replicates)
    confirmation, note = None, None
    measured, reused = evaluator.measured, evaluator.reused
    if confirm_blocks and _same(result.winner, setup.baseline):
        note = ("the winner is the baseline configuration: no tested configuration beat the defaults, "
                "so there is no change to confirm")
    elif confirm_blocks:
        checker = RunnerEvaluator(target, setup.load, setup.knob_specs, store, phase="confirm",
                                  warmup_s=setup.warmup_s, measure_s=setup.measure_s,
                                  load_settings=setup.load_settings, allow_host_global=setup.allow_host_global,
                                  provenance=provenance)
        confirmation = confirm(checker, setup.baseline, result.winner, setup.goals, blocks=confirm_blocks,
                               key_prefix=f"{config_digest(setup.baseline, result.winner)}:",
                               side_metrics=setup.side_goals)
        measured, reused = measured + checker.measured, reused + checker.reused
    return RefineOutcome(result, confirmation, measured, reused, note)


def _same(winner: Mapping[str, Any], baseline: Mapping[str, Any]) -> bool:
    from tunelab.optimize.space import _canonical

    return all(k in baseline and _canonical(baseline[k]) == _canonical(v) for k, v in winner.items())
