"""The Python API: one function per CLI verb, with the same defaults and the same safety rules.

Every ``tunelab`` verb is *parse -> this module -> print*: a notebook or a script calling these
functions gets exactly what the command prints, as a result object with ``to_json()`` (strict
JSON: ``json.dumps(result.to_json())`` always works). Arguments are typed values (the CLI parses
strings, :mod:`tunelab.cli.parsing`); a study run's sequence is :mod:`tunelab.study_run`'s, the
knob and lab verbs live in :mod:`tunelab.knobs.discovery` and :mod:`tunelab.labs`.

========================  ==========================================  ===========================
function                  does                                        returns
========================  ==========================================  ===========================
:func:`plan`              validate a design, build its plan           :class:`PlanResult`
:func:`run`               run the plan, record trials in the store    :class:`StudyRun`
:func:`screen`            which knobs matter (a study or a CSV)       ``stats.ScreenResult``
:func:`refine`            GA / NSGA-II search, ABBA confirmation      :class:`RefineRun`
:func:`validate`          candidate vs baseline in ABBA blocks        :class:`ValidateRun`
:func:`tune`              screen, refine, confirm in one budget       :class:`TuneResult`
:func:`report`            notebooks -> ``reports/<study>/index.html`` :class:`ReportResult`
:func:`restore`           roll back what a crashed run left changed   :class:`RestoreResult`
:func:`export`            a study's tidy trial table                  :class:`ExportResult`
:func:`knob_list` ...     the knob catalogue and a target's knobs     :class:`KnobList` ...
:func:`lab_up` ...        detached network-namespace labs             :class:`LabUp` ...
========================  ==========================================  ===========================

Examples
--------
>>> import tunelab
>>> result = tunelab.plan("designs/default.yaml")                      # doctest: +SKIP
>>> result.summary["runs"], result.summary["estimated_wall_s"]          # doctest: +SKIP
(45, 422.0)
>>> outcome = tunelab.run("designs/default.yaml")                      # doctest: +SKIP
>>> result = tunelab.screen("default")                                 # doctest: +SKIP
>>> result.verdicts[["knob", "metric", "verdict"]]                     # doctest: +SKIP
>>> tunelab.report("default").index                                    # doctest: +SKIP
PosixPath('reports/default/index.html')
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd

from tunelab import testbeds as testbeds_mod
from tunelab.display import Displayed
from tunelab.designs import Design, check_design_commands, load_design, make_plan, plan_records, plan_summary
from tunelab.errors import DesignError, StoreError
from tunelab.formatting import fmt_config
from tunelab.knobs.discovery import KnobList, knob_check, knob_info, knob_list
from tunelab.labs import LabDown, LabStatus, LabUp, lab_down, lab_status, lab_up
from tunelab.model import Metric, json_value, level_to_json
from tunelab.optimize import objectives_of
from tunelab.optimize.driver import check_engine
from tunelab.optimize.confirm import EXIT_STATUS, check_confirm_blocks
from tunelab.optimize.export import design_fragment, sysctl_conf
from tunelab.optimize.confirm import goals_of
from tunelab.optimize.tune import (TuneResult, TuneSettings, evaluator_problem, problem_of, tune_evaluator,
                                   tune_plan, tune_study)
from tunelab.optimize.validation import ValidateRun, flags_request, run_validate
from tunelab.optimize.workflow import check_warm_start, refine_study, setup_from_design
from tunelab.preflight import plan_preflight
from tunelab.probe_run import probe_plan
from tunelab.recovery import RestoreResult, restore_stores
from tunelab.report import build_report
from tunelab.study_result import StudyRun
from tunelab.runner import Checkpoint
from tunelab.simulator import refine_setup        # importing it registers the SYNTHETIC "simulator" target
from tunelab.store import Store, check_study_name, default_store_path, store_path_for
from tunelab.study_run import RunOptions, checked_testbeds, run_study_of, with_busy_rule
from tunelab.targets import check_target_spec
from tunelab.study_data import screen_inputs

PathLike = str | os.PathLike[str]


def _frame_json(frame: pd.DataFrame | None) -> list[dict[str, Any]] | None:
    """A DataFrame as strict-JSON records (:func:`tunelab.model.json_value` of each row)."""
    if frame is None:
        return None
    return [json_value(row) for row in frame.to_dict(orient="records")]


# ---- plan -----------------------------------------------------------------------------------------


@dataclass
class PlanResult(Displayed):
    """A validated design and its plan; unpacks as ``design, plan, summary`` (the old return value).

    ``summary`` is :func:`tunelab.designs.plan_summary`'s dict (runs, knobs, restarts, wall time);
    ``commands`` the commands the design's target options would run as root (allowed only with
    ``allow_design_commands``).
    """

    design: Design
    plan: pd.DataFrame
    summary: dict[str, Any]
    commands: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.design, self.plan, self.summary))

    def __repr__(self) -> str:
        """Two lines: the design, its runs, knobs and estimated wall time; where the plan is."""
        info, summary = self.summary.get("design", {}), self.summary
        return (f"PlanResult: design {info.get('name')} ({info.get('type')}, seed {info.get('seed')}) on "
                f"{info.get('target')}: {summary.get('runs')} runs, {summary.get('configs')} configurations, "
                f"{len(summary.get('knobs', []))} knobs, about {summary.get('estimated_wall_s', 0):.0f} s\n"
                "  .plan (one row per run), .summary (dict), .design")

    def to_json(self) -> dict[str, Any]:
        """The summary plus ``"plan": [rows]`` (the JSON of ``tunelab plan --format json``)."""
        return {**self.summary, "plan": plan_records(self.plan)}


def plan(design_path: PathLike, *, allow_design_commands: bool = False, probe: bool = False,
         target: str | None = None, allow_host_global: bool = False, store: PathLike | None = None) -> PlanResult:
    """Validate a design file and build its plan; with ``probe``, also try its configurations on the target.

    Parameters
    ----------
    design_path : the design file (YAML)
    allow_design_commands : accept target options that run commands as root (``service_commands``);
        without it such a design is refused exactly as :func:`run` would refuse it
    probe : apply each distinct planned configuration on the design's target (or ``target``) in
        write order, read it back and restore it (:func:`tunelab.probe_run.probe_plan`); the
        combinations the kernel refuses and the ``exclude:`` entries to paste go to
        ``summary["probe"]``. Without it no machine is touched.
    allow_host_global : let the probe change host-global knobs (as ``tunelab run --allow-host-global``)
    store : the probe's journal (default ``data/<study>.probe.sqlite``; ``tunelab restore`` takes its path)

    Returns
    -------
    PlanResult
    """
    design = load_design(design_path)
    commands = check_design_commands(design, allow_design_commands)
    frame = make_plan(design)
    summary = plan_summary(design, frame)
    summary["preflight"] = plan_preflight(design).to_json()
    if probe:
        summary["probe"] = probe_plan(design, design_path, frame, target=target, allow_host_global=allow_host_global,
                                      allow_design_commands=allow_design_commands, store=store).to_json()
    return PlanResult(design, frame, summary, list(commands))


# ---- run ------------------------------------------------------------------------------------------


def run(design_path: PathLike, *, target: str | None = None, store: PathLike | None = None,
        allow_host_global: bool = False, progress: bool = True, retry_failed: bool = False,
        allow_design_commands: bool = False, checkpoint: Checkpoint | None = None,
        repeat_busy_pct: float | None = None, testbeds: PathLike | None = None,
        scheduler: str | None = None, force: bool = False) -> StudyRun:
    """Run a design's plan on its target (or ``target``) and record every trial in the store.

    Resumes: trials already recorded are skipped. Target options that run commands (e.g.
    ``service_commands``) are refused unless ``allow_design_commands``. Orphaned labs are removed
    first (named on stderr); a crash of another study that left knobs changed stops the run. A
    dry run (``target="dry-run"``) records into a throw-away store: the study's store is untouched,
    and the result's ``preview`` shows what every planned trial would write and run.
    ``checkpoint`` is passed to :func:`tunelab.runner.run_design` (the kill-point tests use it).
    ``repeat_busy_pct`` overrides the design's ``noise.repeat_busy_pct`` (measure a trial again when
    other processes used more than this % of the machine). With ``noise.calibration_runs`` the
    study's A/A calibration runs first (:mod:`tunelab.calibration`); its lines go to stderr.
    With ``testbeds`` (a testbeds file, :mod:`tunelab.testbeds`) the plan runs across them at once
    on Dask (:mod:`tunelab.cluster`): a LocalCluster here, or the cluster at ``scheduler``; a
    ``measurement: duet`` design runs on the file's two testbeds instead, one side each, without Dask
    (:func:`tunelab.duet.sides_on_testbeds`). The sequence is :mod:`tunelab.study_run`'s; see ``tunelab run --help`` for the safety rules.
    A knob whose mechanism the load cannot exercise (:mod:`tunelab.preflight`) refuses the run before anything is
    applied, unless ``force`` or the design declares it a negative control (``preflight: {controls: [...]}``).
    """
    design = with_busy_rule(load_design(design_path), repeat_busy_pct)
    options = RunOptions(allow_host_global=allow_host_global, progress=progress, retry_failed=retry_failed,
                         allow_design_commands=allow_design_commands, checkpoint=checkpoint, force=force)
    return run_study_of(design, Path(design_path).read_text(), target=target, store=store, testbeds=testbeds,
                        scheduler=scheduler, options=options)


# ---- screen ---------------------------------------------------------------------------------------


def screen(source: PathLike, *, metrics: Sequence[Metric] = (), knobs: Sequence[str] = (),
           baselines: Mapping[str, Any] | None = None, alpha: float | None = None, correction: str | None = None,
           n_boot: int = 1000, seed: int = 0, include_flagged: bool = False,
           data_dir: PathLike = "data") -> Any:
    """Screen a study (name or ``.sqlite`` path) or a tidy CSV; return a ``stats.ScreenResult``.

    ``metrics`` (``Metric.parse("qps:max:5")``) and ``knobs`` default to a study's stored design; ``baselines``
    maps a knob column to its baseline level (or its text, ``"4096"``). The result's
    ``settings`` hold the alpha, correction and baselines used; ``to_json()`` follows
    ``tunelab/stats/screen.schema.json``.
    """
    inputs = screen_inputs(source, metrics=metrics, knobs=knobs, baselines=baselines, alpha=alpha,
                           correction=correction, include_flagged=include_flagged, data_dir=data_dir)
    return inputs.screen(n_boot=n_boot, seed=seed)


# ---- refine and validate --------------------------------------------------------------------------


@dataclass
class RefineRun(Displayed):
    """What :func:`refine` did: the search (``result``), its confirmation (``None`` when skipped, then
    ``note`` says why), measurement counts, and the study, store and knob levels it used. In a notebook it
    shows the winner and a convergence summary (:mod:`tunelab.report.reprs`); ``plot()`` draws the convergence."""

    study: str
    store_path: Path
    target_type: str
    result: Any
    confirmation: Any
    measured: int
    reused: int
    objectives: list[Any]
    levels: dict[str, list[Any]]
    note: str | None = None

    @property
    def synthetic(self) -> bool:
        """True on the simulator target: no real kernel was measured."""
        return self.target_type == "simulator"

    def counts_text(self) -> str:
        """Every measurement of the refinement, where it came from, and what it was for.

        ``measured`` and ``reused`` count the search, its race and the confirmation;
        ``result.evaluations`` the search and its race only, so the confirmation's are the rest.

        >>> search = type("Search", (), {"evaluations": 60})()
        >>> RefineRun("s", Path("s.sqlite"), "simulator", search, None, 84, 0, [], {}).counts_text()
        '84 measurements (0 taken from the store, 84 new): 60 searching, 24 confirming the winner'
        """
        total = self.measured + self.reused
        confirming = total - self.result.evaluations
        split = f": {self.result.evaluations} searching, {confirming} confirming the winner" if confirming else ""
        warm = getattr(self.result, "warm", 0)
        warm_text = f", {warm} of them the screen's (warm start)" if warm else ""
        return f"{total} measurements ({self.reused} taken from the store{warm_text}, {self.measured} new){split}"

    @property
    def exit_status(self) -> int:
        """0 improve/equivalent or no confirmation, 3 regress, 4 inconclusive, 5 untestable."""
        return EXIT_STATUS[self.confirmation.verdict] if self.confirmation is not None else 0

    def __repr__(self) -> str:
        """Four lines: the search, the winner, the confirmation, where the tables are."""
        result, confirmation = self.result, self.confirmation
        confirmed = (f"not confirmed: {self.note or 'confirmation skipped'}" if confirmation is None
                     else f"{confirmation.verdict.upper()}; {confirmation.gain_text()}")
        return (f"RefineRun: study {self.study}, engine {result.engine} (seed {result.seed}), {self.counts_text()}\n"
                f"  winner: {fmt_config(result.winner)}\n  confirmation: {confirmed}\n"
                "  .result.estimates (every configuration), .result.batches, .confirmation.table; .sysctl_conf(); "
                ".plot() draws the convergence")

    def sysctl_conf(self) -> str:
        """The winner as a sysctl.d file (with the confirmed gain when there is one)."""
        confirmation, first = self.confirmation, self.objectives[0]
        return sysctl_conf(self.result.winner, gain=confirmation.gain() if confirmation is not None else None,
                           metric=getattr(first, "metric", None) or first.name, study=self.study,
                           verdict=confirmation.verdict if confirmation is not None else None)

    def design_fragment(self) -> str:
        """A design fragment (``knobs:`` with the winner as baseline)."""
        return design_fragment(self.result.winner, self.levels)

    def to_json(self) -> dict[str, Any]:
        """Winner, estimates, batches, race, Pareto set and confirmation (``tunelab refine --json``)."""
        result, confirmation = self.result, self.confirmation
        return {
            "study": self.study, "winner": level_to_json(result.winner), "evaluations": result.evaluations,
            "engine": result.engine, "preset": result.preset, "seed": result.seed,
            "estimates": _frame_json(result.estimates), "batches": _frame_json(result.batches),
            "race": _frame_json(result.race), "pareto": _frame_json(result.pareto),
            "confirmation": None if confirmation is None else {
                "verdict": confirmation.verdict, "table": _frame_json(confirmation.table)},
        }


def refine(design_path: PathLike | None = None, *, knobs: str | None = None, objectives: Sequence[str] = (),
           budget: int | None = None, engine: str = "tunelab", preset: str | None = None, seed: int = 0,
           options: dict[str, Any] | None = None, confirm_blocks: int = 6, target: str | None = None,
           surface: str = "simple", cv: float = 0.03, allow_host_global: bool = False,
           allow_design_commands: bool = False, store: PathLike | None = None, testbeds: PathLike | None = None,
           scheduler: str | None = None, warm_start: bool | PathLike = False) -> RefineRun:
    """Search the knobs with an ask/tell engine and race its leaders, then confirm the winner.

    Parameters
    ----------
    design_path : the design file; optional with ``target="simulator"`` (then ``surface`` gives the knobs)
    knobs : ``None``/``"all"``, ``"screened"``, ``"screened+inconclusive"``, ``"K1,K2"`` or ``"screened+K1,K2"``
    objectives : ``METRIC:max|min`` strings (default: the design's first metric)
    budget : measurements in the search and its race (default: the preset's, else 60)
    engine, preset, options : the search engine (``tunelab``, ``ga``, ``nsga2``, ``tpe``, ``gp``, ``cmaes``,
        ``optuna-nsga2``, ``model``, ``random``), a preset of it and options on top
    seed : the search seed (keep it to resume)
    confirm_blocks : ABBA blocks confirming the winner (0: skip)
    target : override the design's target type
    surface, cv : the SYNTHETIC simulator surface and its noise, without a design
    allow_host_global, allow_design_commands : as for :func:`run`
    store : trial store (default ``data/<study>.sqlite``); rerunning resumes from it, and rerunning a finished
        search with a larger ``budget`` (nothing else changed) continues it
    warm_start : count the screen's measurements as made (True: those in ``store``, where the screen recorded by
        default; a path: that screen store): told to the engine before its first ask, never measured again,
        outside the budget (:func:`tunelab.optimize.workflow.warm_points`)
    testbeds, scheduler : measure each asked batch in parallel across the testbeds of this file (as
        for :func:`run`); the confirmation's blocks are spread over them, each block on one testbed

    Returns
    -------
    RefineRun
    """
    check_engine(engine, preset, budget)   # bad engine, preset or budget: one line before anything runs
    check_confirm_blocks(confirm_blocks)
    parsed = objectives_of(objectives)
    setup = _setup_of(design_path, knobs, target, surface, cv, seed, parsed, store, allow_host_global)
    parsed = parsed or [Metric(g.name, g.direction) for g in setup.goals]
    spec = {"type": setup.target_type, "options": setup.target_options}
    check_target_spec(spec, allow_commands=allow_design_commands)   # before the store is opened
    check_warm_start(warm_start)
    path = Path(store) if store is not None else default_store_path(setup.study)
    beds, warnings = None, []
    if testbeds is not None or scheduler is not None:
        if design_path is None:
            raise DesignError("--testbeds needs a DESIGN file (its target options are each testbed's defaults)")
        beds, warnings = checked_testbeds(load_design(design_path), testbeds, allow_design_commands)
    outcome = refine_study(setup, spec, path, parsed, testbeds=beds, warnings=warnings, scheduler=scheduler,
                           allow_commands=allow_design_commands, budget=budget, engine=engine, preset=preset,
                           seed=seed, options=options, confirm_blocks=confirm_blocks, warm_start=warm_start)
    return RefineRun(setup.study, path, setup.target_type, outcome.result, outcome.confirmation, outcome.measured,
                     outcome.reused, parsed, setup.levels, outcome.note)


def _setup_of(design_path: PathLike | None, knobs: str | None, target: str | None, surface: str, cv: float, seed: int,
              objectives: Sequence[Metric], store: PathLike | None, allow_host_global: bool) -> Any:
    """The refine setup of a design file, or of a SYNTHETIC surface on ``--target simulator`` (refine's and tune's)."""
    if design_path is not None:
        return setup_from_design(design_path, knobs=knobs, target_type=target, objectives=objectives,
                                 store_path=store, allow_host_global=allow_host_global)
    if target != "simulator":
        raise DesignError("give a DESIGN file (or --target simulator to work on a SYNTHETIC surface)")
    if knobs not in (None, "all"):
        raise DesignError("--knobs needs a design; on the simulator without one every surface knob is searched")
    setup = refine_setup(surface, cv=cv, seed=seed, objectives=objectives)
    setup.allow_host_global = allow_host_global     # wide27's net.core.* knobs, even in memory, need the flag
    return setup


def tune(design_path: PathLike | None = None, *, budget: int, evaluator: Any = None, space: Any = None,
         baseline: Mapping[str, Any] | None = None, objectives: Sequence[Metric | str] = (), study: str = "evaluator",
         target: str | None = None, surface: str = "simple", cv: float = 0.03, seed: int = 0,
         noise_pct: float | None = None, split: str | Mapping[str, float] | None = None,
         screen_design: str | None = None, engine: str = "tunelab", warm: str = "fit", store: PathLike | None = None,
         allow_host_global: bool = False, allow_design_commands: bool = False, plan_only: bool = False,
         hook: Any = None) -> Any:
    """Screen, refine the knobs that matter and confirm the winner, in one ``budget`` of measurements and one store
    (``tunelab tune``; the stages and the split are :mod:`tunelab.optimize.tune`'s). Rerunning resumes exactly.

    Parameters
    ----------
    design_path : a design file (every knob is screened; its target, load and metrics), or None with
        ``target="simulator"`` (the SYNTHETIC ``surface`` at noise ``cv``) or with ``evaluator``
    budget : measurements in all, every attempt counted (failed ones too); never exceeded
    evaluator, space, baseline, study : tune a Python evaluator (``config -> {metric: value}``, or an object with
        ``evaluate(config, replicate, key)``) over ``space`` (a ``SearchSpace`` or its spec) from ``baseline``;
        ``study`` names its store (default ``data/<study>.sqlite``)
    objectives : ``NAME:max|min[:SESOI]`` (default the design's or surface's first metric); the first is the goal
    seed : the screen's order, refine's engine and, on the simulator, its noise
    noise_pct : the noise (CV %) if known: no A/A calibration
    split, screen_design, engine, warm : override the split (``screen=40,refine=40,confirm=20``), the screening
        design, refine's engine, and how refine counts the screen's measurements (``fit`` or ``projected``)
    plan_only : return the split (:class:`tunelab.optimize.tune.BudgetSplit`) and measure nothing (``--plan``)
    hook : called with each stage's name once it is done (tests)

    Returns
    -------
    TuneResult (:mod:`tunelab.optimize.tune.result`), or the split with ``plan_only``
    """
    settings = TuneSettings(budget, seed, noise_pct, split, screen_design, engine, warm)
    if evaluator is not None:
        problem, digest, text = evaluator_problem(study, space, baseline, objectives)
        path = Path(store) if store is not None else default_store_path(check_study_name(study, "the study name"))
        return tune_plan(problem, settings) if plan_only else tune_evaluator(evaluator, problem, digest, text, path,
                                                                             settings, hook=hook)
    setup = _setup_of(design_path, "all", target, surface, cv, seed, goals_of(objectives), store, allow_host_global)
    spec = {"type": setup.target_type, "options": setup.target_options}
    check_target_spec(spec, allow_commands=allow_design_commands)   # before the store is opened
    if plan_only:
        return tune_plan(problem_of(setup), settings)
    path = Path(store) if store is not None else default_store_path(setup.study)
    return tune_study(setup, spec, path, settings, allow_commands=allow_design_commands, hook=hook)


def validate(target: str | None, candidate: Mapping[str, Any], *, baseline: Mapping[str, Any] | str = "current",
             metrics: Sequence[str] = (), target_options: Mapping[str, Any] | None = None, surface: str | None = None,
             load: str | None = None, load_settings: Mapping[str, Any] | None = None,
             sesoi_pct: float | None = None, profiles: Sequence[str] = (),
             blocks: int = 6, warmup_s: float = 2.0, measure_s: float = 8.0, allow_host_global: bool = False,
             store: PathLike | None = None, write_sysctl: PathLike | bool | None = None,
             measurement: str = "sequential", pairs: int | None = None, cpu_layout: str | None = None,
             testbeds: PathLike | None = None, allow_design_commands: bool = False, force: bool = False,
             pilot_s: float | None = None, retry_failed: bool = False) -> ValidateRun:
    """Is a candidate configuration better than the baseline on ``target``? (ABBA blocks or duet pairs, recorded)

    Parameters
    ----------
    target : target type (lab, local, ssh, simulator)
    candidate, baseline : knob id -> value (the knobs validate the values; the CLI reads them from
        ``KNOB=VALUE`` items and files with :func:`tunelab.cli.parsing.parse_config`);
        ``baseline`` ``"current"`` (or empty): the values the target holds now
    metrics : ``NAME:max|min[:SESOI]`` (default: the load's first metric)
    target_options, load_settings : the target's options and the load's setting overrides, given by the
        user (so command options are the user's own: checked by the target's schema, allowed)
    surface : the simulator surface (same as ``target_options={"surface": NAME}``)
    load : the load generator (required on a real target; the simulator uses its own)
    profiles : load profiles (default ``["overload"]``), each with ``blocks`` ABBA blocks
    store : trial store (default ``data/validate-<target>.sqlite``); rerunning resumes
    write_sysctl : directory of the sysctl.d file and its rollback, written on ``improve`` or ``equivalent``
        (default or ``True``: next to the store, ``<store>-sysctl/``; ``False``: none);
        :mod:`tunelab.optimize.deploy`
    measurement : ``sequential`` (ABBA blocks on one target) or ``duet``: two targets of the same spec
        measure A and B at the same moment, then swap sides, ``pairs`` pairs per profile (default twice
        ``blocks``; ``blocks`` in rounds, a :class:`~tunelab.designs.change.BlockRule`, count pairs); two labs
        share the CPUs as ``cpu_layout`` says (``shared``, ``split``; docs/duet.md)
    testbeds : with ``measurement="duet"`` and ``target=None``: a testbeds file of exactly two testbeds of one
        kind (lab, simulator, ssh), side 0 on the first and side 1 on the second (:func:`tunelab.duet.sides_on_testbeds`);
        ``allow_design_commands`` lets the file's command options (``service_commands``) run
    force : measure although the pre-flight (:mod:`tunelab.preflight`) says the change cannot act under this load
        or a metric cannot show it (``--force``); without it that is one error before anything is applied
    pilot_s : seconds of a baseline pilot window before the first trial (``--pilot``): whether the mechanism
        binds, whether the load generator is saturated, the noise and the blocks it needs
    retry_failed : on resume, measure again the trials the store records as failed (kept, set aside as
        superseded), instead of counting their failure

    Returns
    -------
    ValidateRun (:mod:`tunelab.optimize.validation`); bad input (a duration, an unknown load setting, a
    candidate equal to the baseline, ...) is one error before anything is applied or stored
    """
    return run_validate(target, candidate, baseline=baseline, metrics=metrics, target_options=target_options,
                        surface=surface, load=load, load_settings=load_settings, sesoi_pct=sesoi_pct,
                        profiles=profiles, blocks=blocks, warmup_s=warmup_s, measure_s=measure_s,
                        allow_host_global=allow_host_global, store=store, write_sysctl=write_sysctl,
                        measurement=measurement, pairs=pairs, cpu_layout=cpu_layout, testbeds=testbeds,
                        allow_design_commands=allow_design_commands, force=force, pilot_s=pilot_s,
                        retry_failed=retry_failed)


def validate_change(change: PathLike, *, allow_design_commands: bool = False, store: PathLike | None = None,
                    write_sysctl: PathLike | bool | None = None, force: bool = False,
                    pilot_s: float | None = None, retry_failed: bool = False) -> ValidateRun:
    """Validate the change a change file describes (``tunelab validate CHANGE.yaml``).

    Parameters
    ----------
    change : the change file (:mod:`tunelab.designs.change`: server, load host, load and its profiles, the query
        file, baseline, candidate, metrics, blocks)
    allow_design_commands : let the file's ``server.restart`` command run (a knob such as somaxconn needs it);
        without it a change that needs a restart is refused before anything runs
    store, write_sysctl, force, pilot_s, retry_failed : as for :func:`validate` (default store
        ``data/validate-<name>.sqlite``)

    Returns
    -------
    ValidateRun; a bad file is one error line (file, line, key) before anything is built
    """
    from tunelab.optimize.validation import validate_change as run_change

    return run_change(change, allow_design_commands=allow_design_commands, store=store, write_sysctl=write_sysctl,
                      force=force, pilot_s=pilot_s, retry_failed=retry_failed)


def preview_validate(change: PathLike | None = None, *, offline: bool = False, allow_design_commands: bool = False,
                     store: PathLike | None = None, force: bool = False, **flags: Any) -> Any:
    """What ``validate`` would run, where and as whom, and how long it would take; nothing is applied or run
    (``tunelab validate CHANGE.yaml --plan``). Every check ``validate`` makes runs first; without ``offline`` the
    target is reached as ``validate`` reaches it (over ssh: connect and read the knobs' current values).
    Without ``change``, ``flags`` are :func:`validate`'s parameters (``target``, ``candidate``, ...).

    Returns
    -------
    :class:`tunelab.optimize.validate_plan.ValidatePreview` (``text()``, ``to_json()``)
    """
    from tunelab.designs.change import load_change
    from tunelab.optimize.validate_plan import preview_request
    from tunelab.optimize.validation import request_of_change

    if change is not None:
        request = request_of_change(load_change(change), allow_commands=allow_design_commands, store=store,
                                    force=force)
    else:
        request = flags_request(flags.pop("target"), flags.pop("candidate"), store=store,
                                allow_design_commands=allow_design_commands, force=force, **flags)
    return preview_request(request, offline=offline)


# ---- report, export, restore ----------------------------------------------------------------------


@dataclass
class ReportResult:
    """Where :func:`report` wrote the study's report (``index`` is ``.../index.html``)."""

    index: Path

    def __fspath__(self) -> str:
        return str(self.index)

    def __str__(self) -> str:
        return str(self.index)

    def to_json(self) -> dict[str, Any]:
        return {"index": str(self.index)}


def report(study: PathLike, out_dir: PathLike | None = None, *, data_dir: PathLike = "data",
           **options: Any) -> ReportResult:
    """Execute the notebooks for a study and write ``reports/<study>/index.html`` (or ``out_dir``).

    ``study`` is a study name in ``data_dir`` or a store path; ``options`` are those of
    :func:`tunelab.report.build_report` (metric, alpha, correction, sesoi_pct, n_boot,
    include_flagged, notebooks, parameters, show_code, ...).
    """
    return ReportResult(build_report(study, out_dir, data_dir=data_dir, **options))


@dataclass
class ExportResult:
    """A study's tidy trial table (one row per usable trial; Contract 6)."""

    study: str
    phase: str
    tidy: pd.DataFrame

    def csv_ready(self) -> pd.DataFrame:
        """Tuples (triplet knobs) as space-separated text, so a CSV cell reads like the sysctl."""
        out = self.tidy.copy()
        for col in out.columns:
            if out[col].dtype == object and out[col].map(lambda v: isinstance(v, tuple)).any():
                out[col] = out[col].map(lambda v: " ".join(map(str, v)) if isinstance(v, tuple) else v)
        return out

    def file_name(self, fmt: str) -> str:
        """``<study>-<phase>.<fmt>``, the default export file; the study name comes from the store (which may be
        hostile), so it is checked first (:class:`~tunelab.errors.StoreError` naming it)."""
        return f"{check_study_name(self.study, 'the study name in the store')}-{self.phase}.{fmt}"

    def to_json(self) -> dict[str, Any]:
        return {"study": self.study, "phase": self.phase, "rows": _frame_json(self.tidy)}


def export(study: PathLike, *, phase: str = "screen", include_flagged: bool = False,
           data_dir: PathLike = "data") -> ExportResult:
    """Read a study's tidy trial table (``study``: a name in ``data_dir`` or a store path), read-only."""
    path = store_path_for(study, data_dir)
    with Store(path, readonly=True) as opened:
        tidy = opened.tidy(phase=phase, include_flagged=include_flagged)
        name = opened.study.name if opened.study else path.stem
    return ExportResult(name, phase, tidy)


def restore(studies: Sequence[PathLike] = (), *, all_stores: bool = False, data_dir: PathLike = "data",
            allow_host_global: bool = False, testbeds: PathLike | None = None) -> RestoreResult:
    """Put back every knob a crashed or interrupted run left changed (see ``tunelab restore --help``).

    The sequence is :func:`tunelab.recovery.restore_stores`'s: orphaned labs are removed first. With
    ``all_stores`` every store in ``data_dir`` is restored and one bad store does not stop the others (its
    error is recorded); otherwise the first error is raised. Never replays another machine's entries,
    host-global knobs (unless ``allow_host_global``) or commands.
    With ``testbeds`` (a testbeds file) each testbed's own journal on this machine is restored too:
    what a lost Dask worker left changed (:mod:`tunelab.cluster`).
    """
    if all_stores == bool(studies) and testbeds is None:
        raise StoreError("name the studies to restore, or pass --all (not both), or --testbeds FILE")
    paths = sorted(Path(data_dir).glob("*.sqlite")) if all_stores else [store_path_for(s, data_dir) for s in studies]
    if testbeds is not None:
        from tunelab.cluster import journal_path

        paths += [journal_path(bed.name) for bed in testbeds_mod.load_testbeds(testbeds)
                  if journal_path(bed.name).exists()]
    return restore_stores(paths, allow_host_global=allow_host_global, keep_going=all_stores)


__all__ = ["ExportResult", "KnobList", "LabDown", "LabStatus", "LabUp", "PlanResult", "RefineRun", "ReportResult",
           "RestoreResult", "StudyRun", "ValidateRun", "export", "knob_check", "knob_info", "knob_list", "lab_down",
           "lab_status", "lab_up", "plan", "refine", "report", "restore", "run",
           "screen", "tune", "TuneResult", "validate", "validate_change", "preview_validate"]
