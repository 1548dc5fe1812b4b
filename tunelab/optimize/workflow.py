"""The refine workflow the CLI and notebooks use: design -> space, target, evaluator -> search (logged in the
store) -> ABBA confirmation -> exports. Each step is a small function so notebooks can run them one by one.

Which knobs are searched (``--knobs``): all of the design's, a list ``K1,K2``, ``screened`` (those the
screen found to matter in the better direction, started at their best levels), and ``+`` joins
more: ``screened+inconclusive`` adds the knobs whose verdict is still inconclusive (an effect may
hide behind an interaction), ``screened+K1,K2`` adds named knobs.

:func:`refine_study` is ``tunelab refine``'s run: under the run's owner (:mod:`tunelab.run_owner`), as every verb
that applies a knob.

A refinement on a SYNTHETIC surface without a design file is built by :func:`tunelab.simulator.refine_setup`
(the simulator sits above this package).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tunelab.designs import Design, load_design
from tunelab.errors import DesignError
from tunelab.model import USABLE_STATUSES, Metric, Verdict, level_value
from tunelab.optimize.confirm import ConfirmResult, config_digest, confirm
from tunelab.optimize.evaluators import ClusterEvaluator, RunnerEvaluator, same_config
from tunelab.optimize.driver import RefineResult, WarmPoint, check_engine, refine
from tunelab.optimize.engines import objectives_of, typed_config
from tunelab.optimize.history import StoreSearchLog, config_key
from tunelab.optimize.space import SearchSpace, dimension_from_design_knob
from tunelab.progress import StudyProgress
from tunelab.run_owner import owned_run
from tunelab.runner.binding import BoundKnob, bind_knobs
from tunelab.runner.design_access import load_of, target_spec_of
from tunelab.runner.load_setup import cleanup_load, prepare_load
from tunelab.store import Store, default_store_path
from tunelab.study_data import design_info
from tunelab.loads import Load
from tunelab.targets import Target, build_target, get_target


@dataclass
class RefineSetup:
    """Everything a refinement needs, built from a design (or a simulator surface)."""

    study: str
    space: SearchSpace
    baseline: dict[str, Any]
    knob_specs: list[BoundKnob]
    target_type: str
    target_options: dict[str, Any]
    load: Load
    load_settings: dict[str, Any]
    warmup_s: float
    measure_s: float
    goals: list[Metric]
    design_hash: str
    design_text: str
    allow_host_global: bool = False
    initial: list[dict[str, Any]] = field(default_factory=list)
    levels: dict[str, list[Any]] = field(default_factory=dict)
    #: the design's other metrics: reported by the confirmation as side effects, not judged
    side_goals: list[Metric] = field(default_factory=list)
    #: the design's knobs left out of the search, at their baseline (a warm start's points must have them so)
    fixed: dict[str, Any] = field(default_factory=dict)


def screened_knobs(store_path: str | Path, design: Design, metric: Metric,
                   include_inconclusive: bool = False) -> tuple[list[str], dict[str, Any]]:
    """Knob ids the screen found to matter for ``metric`` in the better direction, and their best levels;
    with ``include_inconclusive`` also the knobs whose verdict is inconclusive (no best level).

    Reads the study's screen trials (``store.tidy("screen")``) and runs :func:`tunelab.stats.screen`.
    """
    from tunelab.stats import screen   # deferred: about 2 s of CLI start-up (scipy, statsmodels)

    path = Path(store_path)
    if not path.exists():
        raise DesignError(f"--knobs screened needs the screen's trials in {path}; run `tunelab run` on the screen "
                          "design first, or list the knobs: --knobs K1,K2")
    store = Store(path, readonly=True)
    try:
        data = store.tidy("screen", include_failed=True)      # failed runs count in a sequential study's looks
    finally:
        store.close()
    if not data["status"].isin(USABLE_STATUSES).any():
        raise DesignError(f"{path} has no ok screen trials; run the screen first or list the knobs: --knobs K1,K2")
    # the design tells the screen its guards, profiles and, for a sequential study, the looks to replay
    result = screen(data, [metric], design.knob_ids, design.baseline, design=design_info(design))
    verdicts = result.verdicts[result.verdicts["metric"] == metric.name]
    chosen = verdicts[(verdicts["verdict"] == Verdict.MATTERS) & (verdicts["direction"] == "better")]
    best = {row.knob: level_value(row.level) for row in chosen.itertuples()}
    knobs = list(dict.fromkeys(chosen["knob"]))
    if include_inconclusive:
        knobs += [k for k in dict.fromkeys(verdicts.loc[verdicts["verdict"] == Verdict.INCONCLUSIVE, "knob"])
                  if k not in knobs]
    if not knobs:
        raise DesignError(f"the screen found no knob that makes {metric.name} better by at least its SESOI"
                          + ("" if include_inconclusive else " (try --knobs screened+inconclusive)")
                          + "; there is nothing to refine (list knobs with --knobs K1,K2 to search anyway)")
    return knobs, best


def chosen_knobs(spec: str | None, design: Design, goal: Metric,
                 store_path: str | Path) -> tuple[list[str], dict[str, Any]]:
    """The knob ids ``--knobs`` names (see the module docstring) and the screen's best levels of them."""
    if spec is None or spec == "all":
        return list(design.knob_ids), {}
    chosen: list[str] = []
    best: dict[str, Any] = {}
    parts = [p.strip() for p in spec.split("+") if p.strip()]
    if "inconclusive" in parts and "screened" not in parts:
        raise DesignError("--knobs inconclusive needs the screen's other knobs too: --knobs screened+inconclusive")
    named = [k.strip() for part in parts if part not in ("screened", "inconclusive") for k in part.split(",")
             if k.strip()]
    unknown = [k for k in named if k not in design.knob_ids]
    if unknown:        # before the screen is read: a typo costs nothing
        raise DesignError(f"--knobs {', '.join(unknown)} not in the design; its knob ids are "
                          f"{', '.join(design.knob_ids)} (or screened, screened+inconclusive)")
    if "screened" in parts:
        chosen, best = screened_knobs(store_path, design, goal, include_inconclusive="inconclusive" in parts)
    return chosen + [k for k in dict.fromkeys(named) if k not in chosen], best


def _target_load(spec: dict[str, Any]) -> Load | None:
    """The load a target brings when it synthesises its own measurements (the simulator's
    ``load()``), else ``None`` (the design's load generator measures)."""
    target_class = get_target(spec["type"])
    if not callable(getattr(target_class, "load", None)):
        return None
    return target_class(**spec["options"]).load()


def _design_goals(design: Design, objectives: Sequence[Metric]) -> tuple[list[Metric], list[Metric]]:
    """The goals a confirmation judges (each objective with the design's SESOI of that metric, else
    5 %) and the side goals it reports (the design's other metrics)."""
    sesoi = {m.name: float(m.sesoi_pct) for m in design.metrics}
    goals = [Metric(o.name, o.direction, sesoi.get(o.name, 5.0)) for o in objectives]
    side_goals = [Metric(m.name, m.direction, float(m.sesoi_pct)) for m in design.metrics
                  if m.name not in {g.name for g in goals}]
    return goals, side_goals


def setup_from_design(design_path: str | Path, *, knobs: str | None = None, target_type: str | None = None,
                      objectives: Sequence[Metric | str] = (), store_path: str | Path | None = None,
                      allow_host_global: bool = False) -> RefineSetup:
    """Build a :class:`RefineSetup` from a design file; ``knobs`` as ``--knobs`` (see the module docstring).

    A target that synthesises its own measurements (``tunelab.simulator``; its package must be
    imported so the target is registered) is measured with its own load instead of the design's.
    """
    design = load_design(design_path)
    first_metric = design.metrics[0]
    objs = objectives_of(objectives) or [Metric(first_metric.name, first_metric.direction)]
    goals, side_goals = _design_goals(design, objs)
    chosen, best = chosen_knobs(knobs, design, goals[0], store_path or default_store_path(design.name))
    initial = [{kid: best.get(kid, design.baseline[kid]) for kid in chosen}] if best else []
    by_id = {k.id: k for k in design.knobs}
    space = SearchSpace([dimension_from_design_knob(by_id[kid]) for kid in chosen])
    spec = target_spec_of(design)
    if target_type and target_type != spec["type"]:
        spec = {"type": target_type, "options": {}, "allow_host_global": spec["allow_host_global"]}
    all_specs = {s.id: s for s in bind_knobs(design)}
    load = _target_load(spec)
    if load is not None:
        settings = load.settings(design.load.profile if design.load.profile in load.profiles else "overload")
    else:
        load, settings = load_of(design)
    return RefineSetup(
        study=design.name, space=space, baseline={kid: design.baseline[kid] for kid in chosen},
        knob_specs=[all_specs[kid] for kid in chosen], target_type=spec["type"], target_options=spec["options"],
        load=load, load_settings=settings, warmup_s=design.warmup_s, measure_s=design.measure_s, goals=goals,
        design_hash=design.design_hash, design_text=Path(design_path).read_text(),
        allow_host_global=allow_host_global or spec["allow_host_global"], initial=initial,
        levels={kid: list(by_id[kid].levels) for kid in chosen}, side_goals=side_goals,
        fixed={kid: design.baseline[kid] for kid in design.knob_ids if kid not in chosen})


#: the phases whose trials a warm start counts: the screen's and its A/A calibration's (the baseline)
WARM_PHASES = ("screen", "calibrate")


def warm_points(setup: RefineSetup, store: Store) -> list[WarmPoint]:
    """The measurements in ``store`` a refinement of ``setup`` may count as made (warm start): usable
    screen and A/A trials of a configuration in the search space, every other knob at its baseline,
    measured by the same load with the same settings and durations, with each goal's metric."""
    out: list[WarmPoint] = []
    for row in store.trials().itertuples(index=False):
        if row.phase not in WARM_PHASES or row.status not in USABLE_STATUSES:
            continue
        metrics = row.metrics or {}
        config = _in_space(setup, row.config or {})
        if config is not None and _same_measurement(setup, row.provenance or {}) and all(
                isinstance(metrics.get(g.name), (int, float)) and math.isfinite(metrics[g.name]) for g in setup.goals):
            out.append((config, dict(metrics), str(row.run_key)))
    return out


def _in_space(setup: RefineSetup, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """``config``'s searched knobs (typed) when they are values of the search space and every other knob is at
    its baseline (``setup.fixed``); else None."""
    if any(kid not in config for kid in setup.space.ids) or any(
            kid not in setup.space.ids and (kid not in setup.fixed or level_value(v) != level_value(setup.fixed[kid]))
            for kid, v in config.items()):
        return None
    try:
        typed = typed_config(setup.space, {kid: config[kid] for kid in setup.space.ids})
        on_grid = setup.space.decode(setup.space.encode(typed))
    except DesignError:
        return None
    return typed if config_key(on_grid) == config_key(typed) else None


def _same_measurement(setup: RefineSetup, provenance: Mapping[str, Any]) -> bool:
    """Whether a trial was measured as the refinement measures: load, its settings (profile), durations."""
    def plain(value: Any) -> Any:
        return json.loads(json.dumps(value, default=str))

    settings = provenance.get("load_settings") or {}
    return (provenance.get("load") == getattr(setup.load, "name", None)
            and all(k == "key" or plain(settings.get(k)) == plain(v) for k, v in setup.load_settings.items())
            and provenance.get("warmup_s") == float(setup.warmup_s or 0)
            and provenance.get("measure_s") == float(setup.measure_s))


def check_warm_start(source: bool | str | Path | None) -> None:
    """DesignError unless ``source`` is no warm start, True (the refinement's own store) or an existing file."""
    if source and source is not True and not Path(source).is_file():
        raise DesignError(f"--warm-start {source}: no such store; give the screen's store (data/<study>.sqlite) "
                          "or --warm-start alone for the refinement's own")


def warm_points_from(setup: RefineSetup, store: Store, source: bool | str | Path | None) -> list[WarmPoint]:
    """The warm start's points (:func:`warm_points`) from ``source``: True, the refinement's own store (where
    the screen recorded by default); a path, that screen store (read only); None or False, none."""
    if not source:
        return []
    if source is True or Path(source).resolve() == Path(store.path).resolve():
        return warm_points(setup, store)
    check_warm_start(source)
    screen = Store(Path(source), readonly=True)
    try:
        return warm_points(setup, screen)
    finally:
        screen.close()


@dataclass
class RefineOutcome:
    """What a refinement did: the search result, its confirmation (None when skipped), counts of
    new and reused measurements, and ``note`` saying why a confirmation was skipped."""

    result: RefineResult
    confirmation: ConfirmResult | None
    measured: int
    reused: int
    note: str | None = None


def search_name(engine: str, preset: str | None, seed: int) -> str:
    """How a search is named in the store (and its trials' run keys): engine, preset and seed, so searches by
    other engines (or seeds) can share a study's store and be compared in its report.

    >>> search_name("tunelab", None, 0), search_name("ga", "gembala2013", 3)
    ('tunelab', 'ga-gembala2013-s3')
    """
    return "-".join([engine, *([preset] if preset else []), *([f"s{seed}"] if seed else [])])


def run_refinement(setup: RefineSetup, target: Target | None, store: Store, objectives: Sequence[Metric | str], *,
                   budget: int | None, engine: str = "tunelab", preset: str | None = None, seed: int = 0,
                   options: dict[str, Any] | None = None, confirm_blocks: int = 6,
                   dispatcher: Any = None, warm_start: bool | str | Path | None = None,
                   progress: bool = True) -> RefineOutcome:
    """Search with real (or simulated) trials recorded in ``store`` (phase ``refine``, every batch logged as
    search :func:`search_name`), then confirm the winner against the baseline in ABBA blocks (phase ``confirm``).
    Re-running resumes both: the search from its last stored batch, measurements from their trials.

    With a ``dispatcher`` (:class:`tunelab.cluster.Dispatcher`, many testbeds) each asked batch and race
    round is measured in parallel and the confirmation's blocks are spread over the testbeds, each block
    on one testbed; ``target`` is then unused. ``warm_start`` (:func:`warm_points_from`) counts the screen's
    measurements as made: told to the engine before it asks, never measured again, outside the budget.
    Rerunning a finished search with a larger ``budget`` continues it (:func:`tunelab.optimize.driver.refine`).
    With ``progress`` the search (at most its budget) and the confirmation show as two rounds of a
    :class:`tunelab.progress.StudyProgress` on stderr."""
    provenance = {"refine": {"engine": engine, "preset": preset, "seed": seed, "budget": budget}}

    def evaluator_for(phase: str) -> RunnerEvaluator | ClusterEvaluator:
        settings = dict(phase=phase, warmup_s=setup.warmup_s, measure_s=setup.measure_s,
                        load_settings=setup.load_settings, allow_host_global=setup.allow_host_global,
                        provenance=provenance)
        if dispatcher is not None:
            return ClusterEvaluator(dispatcher, setup.load, setup.knob_specs, store, **settings)
        return RunnerEvaluator(target, setup.load, setup.knob_specs, store, **settings)

    evaluator = evaluator_for("refine")
    search_id = search_name(engine, preset, seed)
    with StudyProgress(f"{setup.study} refine", enabled=progress and dispatcher is None) as tracker:  # testbeds: theirs
        evaluator.progress = tracker
        done = evaluator.recorded(f"refine:{search_id}/")             # a resumed or continued search's
        tracker.start_round(max(check_engine(engine, preset, budget), len(done)), done_statuses=done,
                            label="search")                           # at most its budget
        result = refine(setup.space, evaluator, objectives, engine=engine, budget=budget, preset=preset, seed=seed,
                        baseline=setup.baseline, initial=setup.initial, options=options,
                        log=StoreSearchLog(store, search_id), key_prefix=f"{search_id}/",
                        warm=warm_points_from(setup, store, warm_start))
        tracker.end_round(shrink=True)
        outcome = _confirmed(setup, result, evaluator, evaluator_for, confirm_blocks, tracker)
    return outcome


def _confirmed(setup: RefineSetup, result: RefineResult, evaluator: Any, evaluator_for: Callable[[str], Any],
               confirm_blocks: int, tracker: StudyProgress) -> RefineOutcome:
    """The search's outcome with the winner confirmed against the baseline in ABBA blocks (phase ``confirm``,
    a round of ``tracker``), unless there are no blocks or the winner is the baseline."""
    confirmation, note = None, None
    # what the search did not measure now came from the store (the stored batches, or the trials of a batch cut short)
    measured, reused = evaluator.measured, result.evaluations - evaluator.measured
    if confirm_blocks and same_config(setup.baseline, result.winner):
        note = ("the winner is the baseline configuration: no tested configuration beat the defaults, "
                "so there is no change to confirm")
    elif confirm_blocks:
        checker = evaluator_for("confirm")
        checker.progress = tracker
        tracker.start_round(4 * confirm_blocks, label="confirm")     # ABBA: four trials a block
        confirmation = confirm(checker, setup.baseline, result.winner, setup.goals, blocks=confirm_blocks,
                               key_prefix=f"{config_digest(setup.baseline, result.winner)}:",
                               side_metrics=setup.side_goals)
        measured, reused = measured + checker.measured, reused + checker.reused
    return RefineOutcome(result, confirmation, measured, reused, note)


def refine_study(setup: RefineSetup, spec: Mapping[str, Any], path: Path, objectives: Sequence[Metric], *,
                 testbeds: list[Any] | None = None, warnings: Sequence[str] = (), scheduler: str | None = None,
                 allow_commands: bool = False, **settings: Any) -> RefineOutcome:
    """``tunelab refine``'s run under the run's owner (:func:`tunelab.run_owner.owned_run`: orphaned labs, crashed
    runs, the run lease, SIGTERM as Ctrl-C, one line saying what an interrupt restored, the leases swept): the store
    at ``path`` opened once, then :func:`run_refinement` on the target of ``spec`` (the load's files put on its host
    before the first apply and removed before it goes down) or across the checked ``testbeds`` (``warnings``: their
    shared-machine lines; ``scheduler``: an existing Dask cluster). ``settings``: :func:`run_refinement`'s."""
    with owned_run(path) as owner:
        store = owner.open_store(study=setup.study, design_hash=setup.design_hash, design_text=setup.design_text,
                                 target_spec=spec)
        if testbeds is not None:
            return _refine_on_testbeds(testbeds, list(warnings), scheduler, setup, store, objectives, **settings)
        with build_target(dict(spec), allow_commands=allow_commands) as live:
            prepare_load(live, setup.load, [setup.load_settings], store)
            try:
                return run_refinement(setup, live, store, objectives, **settings)
            finally:
                cleanup_load(setup.load, live)


def _refine_on_testbeds(beds: list[Any], warnings: list[str], scheduler: str | None, setup: RefineSetup,
                        store: Store, objectives: Sequence[Metric], **settings: Any) -> RefineOutcome:
    """:func:`run_refinement` with each batch measured across the testbeds."""
    from tunelab.study_run import dispatcher_on

    if settings["engine"] in ("tunelab", "model") and "batch" not in (settings.get("options") or {}):
        # one asked configuration per testbed (the engine's default asks 2 at a time)
        settings["options"] = {**(settings.get("options") or {}), "batch": max(2, len(beds))}
    with dispatcher_on(beds, scheduler, store, warnings) as dispatcher:
        return run_refinement(setup, None, store, objectives, dispatcher=dispatcher, **settings)
