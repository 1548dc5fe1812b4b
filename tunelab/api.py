"""The Python API: one function per CLI verb, with the same defaults and the same safety rules.

Every ``tunelab`` verb is *parse -> this module -> print*: a notebook or a script calling these
functions gets exactly what the command prints, as a result object with ``to_json()`` (strict
JSON: ``json.dumps(result.to_json())`` always works). All orchestration lives here (stores opened,
targets built, leases taken, labs removed); the layers below do the work.

========================  ==========================================  ===========================
function                  does                                        returns
========================  ==========================================  ===========================
:func:`plan`              validate a design, build its plan           :class:`PlanResult`
:func:`run`               run the plan, record trials in the store    :class:`RunResult`
:func:`screen`            which knobs matter (a study or a CSV)       ``stats.ScreenResult``
:func:`refine`            GA / NSGA-II search, ABBA confirmation      :class:`RefineRun`
:func:`validate`          candidate vs baseline in ABBA blocks        :class:`ValidateRun`
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

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd
import yaml

from tunelab import calibration as calibration_mod
from tunelab import journal, leases, runner
from tunelab import testbeds as testbeds_mod
from tunelab.designs import Design, check_design_commands, load_design, make_plan, plan_records, plan_summary
from tunelab.errors import DesignError, StoreError, TargetError, TunelabError
from tunelab.knobs import FAMILIES, discover, get_knob
from tunelab.loads import get_load
from tunelab.model import KnobId, Metric, json_value, level_from_json, level_to_json
from tunelab.optimize import objectives_of
from tunelab.optimize.driver import check_engine
from tunelab.optimize.confirm import EXIT_STATUS
from tunelab.optimize.confirm import validate as validate_configs
from tunelab.optimize.export import design_fragment, sysctl_conf
from tunelab.optimize.workflow import run_refinement, setup_from_design
from tunelab.report import ReportError, build_report
from tunelab.rounds import round_lines, run_study
from tunelab.signals import sigterm_interrupts
from tunelab.simulator import refine_setup        # importing it registers the SYNTHETIC "simulator" target
from tunelab.store import Store, check_study_name, default_store_path, store_path_for
from tunelab.targets import build_target, check_target_spec, get_target, netns, services
from tunelab.targets import lab as lab_target
from tunelab.tidy import screen_design, screen_inputs

PathLike = str | os.PathLike[str]
#: a runner checkpoint: called with named points of a run (tests use it to kill a run at a point)
Checkpoint = Callable[[str], None]
#: targets :func:`knob_list` can probe, with the link device used when none is given
LIST_TARGETS = {"local": None, "lab": "@link", "dry-run": None}


def _frame_json(frame: pd.DataFrame | None) -> list[dict[str, Any]] | None:
    """A DataFrame as strict-JSON records (:func:`tunelab.model.json_value` of each row)."""
    if frame is None:
        return None
    return [json_value(row) for row in frame.to_dict(orient="records")]


# ---- plan -----------------------------------------------------------------------------------------


@dataclass
class PlanResult:
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
        write order, read it back and restore it (:func:`tunelab.constraints.probe_design`); the
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
    if probe:
        summary["probe"] = _probe(design, Path(design_path), frame, target, allow_host_global, allow_design_commands,
                                  store).to_json()
    return PlanResult(design, frame, summary, list(commands))


def _probe(design: Design, design_path: Path, frame: pd.DataFrame, target: str | None, allow_host_global: bool,
           allow_design_commands: bool, store: PathLike | None) -> Any:
    """The feasibility probe of :func:`plan`, under the run's safety rules (lease, crashed runs, journal).

    Its journal is a store of its own, keyed by the study name only, so editing the design after a
    probe (adding the suggested exclusions) neither clashes with it nor with the study's store.
    """
    from tunelab.constraints import probe_design

    spec = target_spec_for(design, target)
    target_cls = check_target_spec(spec, allow_commands=allow_design_commands)
    if getattr(target_cls, "writes_nothing", False):
        raise TargetError(f"the {spec['type']} target writes nothing, so it cannot tell which knob combinations the "
                          "kernel refuses; probe on the target the study runs on (lab, local, ssh, simulator)")
    path = Path(store) if store is not None else default_store_path(design.name).with_suffix(".probe.sqlite")
    with sigterm_interrupts(), leases.lease(path):
        for name in journal.remove_orphan_labs():
            print(f"removed orphaned lab {name} (its run had died)", file=sys.stderr)
        leases.check_crashed_runs(own_store=path)
        key = hashlib.sha256(f"probe:{design.name}".encode()).hexdigest()
        with Store.open(path, study=design.name, design_hash=key, design_text=Path(design_path).read_text(),
                        target_spec={"type": spec["type"], "options": spec["options"]}) as opened:
            with build_target(spec, allow_commands=allow_design_commands) as live:
                result = probe_design(design, live, opened, plan=frame, allow_host_global=allow_host_global)
        leases.sweep()
    return result


# ---- run ------------------------------------------------------------------------------------------


def target_spec_for(design: Design, override: str | None = None) -> dict[str, Any]:
    """The target to build: the design's, or ``override`` (keeping options only for the same type)."""
    spec = runner.target_spec_of(design)
    if override and override != spec["type"]:
        spec = {"type": override, "options": {}, "allow_host_global": spec["allow_host_global"]}
    return spec


@dataclass
class RunResult:
    """What :func:`run` did: the runner's ``RunSummary`` (its attributes are readable here too) and the
    orphaned labs removed first."""

    summary: runner.RunSummary
    labs_removed: list[str] = field(default_factory=list)
    #: a sequential design's rounds (``rounds.RoundRecord``) and why it stopped; empty for a fixed design
    rounds: list[Any] = field(default_factory=list)
    stop_reason: str | None = None
    #: the A/A calibration before the study's trials (``noise.calibration_runs``), or None
    calibration: calibration_mod.Calibration | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "summary":
            raise AttributeError(name)
        return getattr(self.summary, name)

    def __str__(self) -> str:
        lines = [str(self.summary), *round_lines(self.rounds, self.stop_reason)]
        if self.calibration is not None:
            lines.append(f"noise: {self.calibration.cv_text() or 'no metric'} over {self.calibration.usable} A/A trials"
                         + (f"; {len(self.calibration.warnings)} SESOI warning(s), see above"
                            if self.calibration.warnings else ""))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {"study": s.study, "store": str(s.store_path), "recorded": s.recorded, "planned": s.planned,
                "skipped": s.skipped, "ok": s.ok, "flagged": s.flagged, "failed": s.failed,
                "interrupted": s.interrupted, "wall_s": s.wall_s, "failures": list(s.failures),
                "foreign_load": list(s.foreign_load), "labs_removed": list(self.labs_removed),
                "rounds": [json_value(vars(record)) for record in self.rounds], "stop_reason": self.stop_reason,
                "repeated": s.repeated, "repeats": list(s.repeats),
                "noise": self.calibration.to_json() if self.calibration is not None else None}


def run(design_path: PathLike, *, target: str | None = None, store: PathLike | None = None,
        allow_host_global: bool = False, progress: bool = True, retry_failed: bool = False,
        allow_design_commands: bool = False, checkpoint: Checkpoint | None = None,
        repeat_busy_pct: float | None = None, testbeds: PathLike | None = None,
        scheduler: str | None = None) -> RunResult:
    """Run a design's plan on its target (or ``target``) and record every trial in the store.

    Resumes: trials already recorded are skipped. Target options that run commands (e.g.
    ``service_commands``) are refused unless ``allow_design_commands``. Orphaned labs are removed
    first (named on stderr); a crash of another study that left knobs changed stops the run. A
    dry run (``target="dry-run"``) records into a throw-away store: the study's store is untouched.
    ``checkpoint`` is passed to :func:`tunelab.runner.run_design` (the kill-point tests use it).
    ``repeat_busy_pct`` overrides the design's ``noise.repeat_busy_pct`` (measure a trial again when
    other processes used more than this % of the machine). With ``noise.calibration_runs`` the
    study's A/A calibration runs first (:mod:`tunelab.calibration`); its lines go to stderr.
    With ``testbeds`` (a testbeds file, :mod:`tunelab.testbeds`) the plan runs across them at once
    on Dask (:mod:`tunelab.cluster`): a LocalCluster here, or the cluster at ``scheduler``.
    See ``tunelab run --help`` for the safety rules.
    """
    design = load_design(design_path)
    design = _with_busy_rule(design, repeat_busy_pct)
    if testbeds is not None or scheduler is not None:
        return _run_on_testbeds(design, Path(design_path), testbeds, scheduler, store=store, target=target,
                                allow_host_global=allow_host_global, progress=progress, retry_failed=retry_failed,
                                allow_design_commands=allow_design_commands)
    spec = target_spec_for(design, target)
    target_cls = check_target_spec(spec, allow_commands=allow_design_commands)   # refuses before the store opens
    path = Path(store) if store is not None else default_store_path(design.name)
    dry = bool(getattr(target_cls, "writes_nothing", False))
    with sigterm_interrupts(), _run_store(path, dry) as path, leases.lease(path):
        removed = journal.remove_orphan_labs()
        for name in removed:
            print(f"removed orphaned lab {name} (its run had died)", file=sys.stderr)
        if not dry:
            leases.check_crashed_runs(own_store=path)
        with Store.open(path, study=design.name, design_hash=design.design_hash,
                        design_text=Path(design_path).read_text(),
                        target_spec={"type": spec["type"], "options": spec["options"]}) as opened:
            with build_target(spec, allow_commands=allow_design_commands) as live:
                # the A/A calibration (noise.calibration_runs) runs before the study's own trials
                calibration = calibration_mod.run_calibration(design, live, opened, allow_host_global=allow_host_global,
                                                              progress=progress, checkpoint=checkpoint)
                for line in calibration.lines() if calibration is not None else []:
                    print(line, file=sys.stderr)
                load, load_settings = runner.load_for(design, target_cls, spec["options"])
                study = run_study(design, live, opened, allow_host_global=allow_host_global,
                                  progress=progress, retry_failed=retry_failed, checkpoint=checkpoint,
                                  load=load, load_settings=load_settings)
        leases.sweep()                # a crashed run of this study, now recovered, leaves no lease
    study.summary.recorded = not dry
    return RunResult(study.summary, removed, study.rounds, study.stop_reason, calibration)


def _testbed_specs(design: Design, testbeds: PathLike | None,
                   allow_design_commands: bool) -> tuple[list[Any], list[str]]:
    """The design's testbeds (checked: file, options, keys, reachable hosts) and the shared-machine
    warnings, which go to stderr."""
    from tunelab.cluster import bed_specs

    if testbeds is None:
        raise TargetError("--scheduler needs --testbeds FILE: the file names the testbeds its workers drive")
    beds = testbeds_mod.load_testbeds(testbeds, allow_commands=allow_design_commands)
    testbeds_mod.check_testbeds(beds)
    warnings = testbeds_mod.shared_machine_warnings(beds)
    for line in warnings:
        print(line, file=sys.stderr)
    return bed_specs(beds, runner.target_spec_of(design), allow_commands=allow_design_commands), warnings


def _run_on_testbeds(design: Design, design_path: Path, testbeds: PathLike | None, scheduler: str | None, *,
                     store: PathLike | None, target: str | None, allow_host_global: bool, progress: bool,
                     retry_failed: bool, allow_design_commands: bool) -> RunResult:
    """:func:`run` across the testbeds of a testbeds file (see there); everything is checked before Dask starts."""
    from tunelab.cluster import Dispatcher, TestbedCluster

    if target is not None:
        raise TargetError("--target and --testbeds do not mix: the testbeds file names each testbed's target")
    beds, warnings = _testbed_specs(design, testbeds, allow_design_commands)
    if warnings and design.noise.repeat_busy_pct is not None:
        # testbeds on one machine see each other's trials as foreign load: every trial would be repeated
        print(f"note: noise.repeat_busy_pct={design.noise.repeat_busy_pct:g} is off for this run: testbeds that share "
              "a machine see each other's trials as foreign load, so every trial would be measured again",
              file=sys.stderr)
        design = dataclasses.replace(design, noise=dataclasses.replace(design.noise, repeat_busy_pct=None))
    loads = {type(runner.load_for(design, bed.target_cls, bed.options)[0]).__name__ for bed in beds}
    if len(loads) > 1:
        raise TargetError(f"the testbeds measure with different loads ({', '.join(sorted(loads))}): a simulator "
                          "answers its own load, so do not mix simulator testbeds with real ones")
    load, load_settings = runner.load_for(design, beds[0].target_cls, beds[0].options)
    runner.prepare_run(design, None, allow_host_global=allow_host_global, load=load,
                       load_settings=load_settings)                           # bad values stop here
    path = Path(store) if store is not None else default_store_path(design.name)
    spec = target_spec_for(design, None)
    with sigterm_interrupts(), leases.lease(path):
        removed = journal.remove_orphan_labs()
        for name in removed:
            print(f"removed orphaned lab {name} (its run had died)", file=sys.stderr)
        leases.check_crashed_runs(own_store=path)
        with Store.open(path, study=design.name, design_hash=design.design_hash, design_text=design_path.read_text(),
                        target_spec={"type": spec["type"], "options": spec["options"]}) as opened:
            finished = runner.prepare_run(design, opened, allow_host_global=allow_host_global, load=load,
                                          load_settings=load_settings, retry_failed=retry_failed)
            calibrate = calibration_mod.CALIBRATE
            calibrated = len(opened.completed_run_keys(calibrate)) >= design.noise.calibration_runs
            if design.sequential is None and not finished.todo and calibrated:   # nothing left: no cluster to start
                summary = runner.RunSummary(finished.study, opened.path, len(finished.rows), len(finished.rows))
                return RunResult(summary, removed, [], None, None)
            with TestbedCluster(beds, scheduler) as cluster:
                if cluster.dashboard_link:
                    print(f"Dask dashboard: {cluster.dashboard_link}", file=sys.stderr)
                dispatcher = Dispatcher(cluster, opened, progress=progress, shown_warnings=warnings)
                # the A/A calibration (noise.calibration_runs) runs first, spread over the testbeds
                calibration = calibration_mod.run_calibration(design, None, opened, dispatcher=dispatcher, load=load,
                                                              load_settings=load_settings,
                                                              allow_host_global=allow_host_global)
                for line in calibration.lines() if calibration is not None else []:
                    print(line, file=sys.stderr)
                study = run_study(design, None, opened, dispatcher=dispatcher, allow_host_global=allow_host_global,
                                  retry_failed=retry_failed, load=load, load_settings=load_settings)
        leases.sweep()
    return RunResult(study.summary, removed, study.rounds, study.stop_reason, calibration)


def _with_busy_rule(design: Design, repeat_busy_pct: float | None) -> Design:
    """``design`` with ``noise.repeat_busy_pct`` set from ``tunelab run --repeat-busy PCT`` (DesignError unless 0 < PCT < 100)."""
    if repeat_busy_pct is None:
        return design
    if isinstance(repeat_busy_pct, bool) or not isinstance(repeat_busy_pct, (int, float)) \
            or not 0 < repeat_busy_pct < 100:
        raise DesignError(f"--repeat-busy must be a percentage of the machine above 0 and below 100, got "
                          f"{repeat_busy_pct!r} (e.g. 20: measure a trial again when other processes used more than "
                          "20 % of the CPUs)")
    return dataclasses.replace(design, noise=dataclasses.replace(design.noise, repeat_busy_pct=float(repeat_busy_pct)))


@contextmanager
def _run_store(path: Path, dry: bool) -> Iterator[Path]:
    """The store a run records into: ``path``, or for a dry run a throw-away one in a private temp dir.

    A dry run must never write the real store: its (unmeasured) trials would count as done and
    the later real run would skip them.
    """
    if not dry:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tunelab-dry-run-") as private:   # mode 0700
        yield Path(private) / path.name


# ---- screen ---------------------------------------------------------------------------------------


def screen(source: PathLike, *, metrics: Sequence[str] = (), knobs: Sequence[str] = (),
           baselines: Sequence[str] = (), alpha: float | None = None, correction: str | None = None,
           n_boot: int = 1000, seed: int = 0, include_flagged: bool = False,
           data_dir: PathLike = "data") -> Any:
    """Screen a study (name or ``.sqlite`` path) or a tidy CSV; return a ``stats.ScreenResult``.

    ``metrics`` are ``NAME[:max|:min][:SESOI]`` strings, ``baselines`` ``COL=VALUE`` strings, as
    on the command line; for a study they default to the stored design's. The result's
    ``settings`` hold the alpha, correction and baselines used; ``to_json()`` follows
    ``tunelab/stats/screen.schema.json``.
    """
    from tunelab.stats import screen as run_screen   # scipy, statsmodels, pingouin: ~4 s, only when screening

    data, metric_specs, knob_ids, baseline, alpha_used, correction_used = screen_inputs(
        source, metrics=metrics, knobs=knobs, baselines=baselines, alpha=alpha, correction=correction,
        include_flagged=include_flagged, data_dir=data_dir)
    return run_screen(data, metric_specs, knob_ids, baseline, alpha=alpha_used, correction=correction_used,
                      n_boot=n_boot, seed=seed, design=screen_design(source, data_dir))


# ---- refine and validate --------------------------------------------------------------------------


@dataclass
class RefineRun:
    """What :func:`refine` did: the search (``result``), its confirmation (``None`` when skipped, then
    ``note`` says why), measurement counts, and the study, store and knob levels it used."""

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
        """Every measurement of the refinement, split by where it went and where it came from.

        ``measured`` and ``reused`` count the search, its race and the confirmation;
        ``result.evaluations`` the search and its race only, so the confirmation's are the rest.

        >>> run = RefineRun("s", Path("s.sqlite"), "simulator", type("R", (), {"evaluations": 60})(), None, 84, 0, [], {})
        >>> run.counts_text()
        '84 measurements (60 in the search, 24 confirming the winner; 0 taken from the store, 84 new)'
        """
        total = self.measured + self.reused
        confirming = total - self.result.evaluations
        split = f"{self.result.evaluations} in the search, {confirming} confirming the winner; " if confirming else ""
        return f"{total} measurements ({split}{self.reused} taken from the store, {self.measured} new)"

    @property
    def exit_status(self) -> int:
        """0 improve/equivalent or no confirmation, 3 regress, 4 inconclusive."""
        return EXIT_STATUS[self.confirmation.verdict] if self.confirmation is not None else 0

    def sysctl_conf(self) -> str:
        """The winner as a sysctl.d file (with the confirmed gain when there is one)."""
        confirmation = self.confirmation
        return sysctl_conf(self.result.winner, gain=confirmation.gain() if confirmation is not None else None,
                           metric=_metric_name(self.objectives[0]), study=self.study,
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


def _metric_name(objective: Any) -> str:
    return getattr(objective, "metric", None) or objective.name


def refine(design_path: PathLike | None = None, *, knobs: str | None = None, objectives: Sequence[str] = (),
           budget: int | None = None, engine: str = "tunelab", preset: str | None = None, seed: int = 0,
           options: dict[str, Any] | None = None, confirm_blocks: int = 6, target: str | None = None,
           surface: str = "simple", cv: float = 0.03, allow_host_global: bool = False,
           allow_design_commands: bool = False, store: PathLike | None = None, testbeds: PathLike | None = None,
           scheduler: str | None = None) -> RefineRun:
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
    store : trial store (default ``data/<study>.sqlite``); rerunning resumes from it
    testbeds, scheduler : measure each asked batch in parallel across the testbeds of this file (as
        for :func:`run`); the confirmation's blocks are spread over them, each block on one testbed

    Returns
    -------
    RefineRun
    """
    check_engine(engine, preset, budget)   # bad engine, preset or budget: one line before anything runs
    parsed = objectives_of(objectives)
    if design_path is not None:
        setup = setup_from_design(design_path, knobs=knobs, target_type=target, objectives=parsed,
                                  store_path=store, allow_host_global=allow_host_global)
    elif target == "simulator":
        if knobs not in (None, "all"):
            raise DesignError("--knobs needs a design; on the simulator without one every surface knob is searched")
        setup = refine_setup(surface, cv=cv, seed=seed, objectives=parsed)
        setup.allow_host_global = allow_host_global     # wide27's net.core.* knobs, even in memory, need the flag
    else:
        raise DesignError("give a DESIGN file (or --target simulator to refine on a SYNTHETIC surface)")
    parsed = parsed or [Metric(g.name, g.direction) for g in setup.goals]
    spec = {"type": setup.target_type, "options": setup.target_options}
    check_target_spec(spec, allow_commands=allow_design_commands)   # before the store is opened
    path = Path(store) if store is not None else default_store_path(setup.study)
    beds, warnings = None, []
    if testbeds is not None or scheduler is not None:
        if design_path is None:
            raise DesignError("--testbeds needs a DESIGN file (its target options are each testbed's defaults)")
        beds, warnings = _testbed_specs(load_design(design_path), testbeds, allow_design_commands)
    with sigterm_interrupts():
        with Store.open(path, study=setup.study, design_hash=setup.design_hash, design_text=setup.design_text,
                        target_spec=dict(spec)) as opened:
            if beds is not None:
                outcome = _refine_on_testbeds(beds, warnings, scheduler, setup, opened, parsed, budget=budget,
                                              engine=engine, preset=preset, seed=seed, options=options,
                                              confirm_blocks=confirm_blocks)
            else:
                with build_target(spec, allow_commands=allow_design_commands) as live:
                    outcome = run_refinement(setup, live, opened, parsed, budget=budget, engine=engine,
                                             preset=preset, seed=seed, options=options, confirm_blocks=confirm_blocks)
    return RefineRun(setup.study, path, setup.target_type, outcome.result, outcome.confirmation, outcome.measured,
                     outcome.reused, parsed, setup.levels, outcome.note)


def _refine_on_testbeds(beds: list[Any], warnings: list[str], scheduler: str | None, setup: Any, store: Store,
                        objectives: list[Metric], **settings: Any) -> Any:
    """:func:`tunelab.optimize.workflow.run_refinement` with each batch measured across the testbeds."""
    from tunelab.cluster import Dispatcher, TestbedCluster

    if settings["engine"] in ("tunelab", "model") and "batch" not in (settings.get("options") or {}):
        # one asked configuration per testbed (the engine's default asks 2 at a time)
        settings["options"] = {**(settings.get("options") or {}), "batch": max(2, len(beds))}
    with TestbedCluster(beds, scheduler) as cluster:
        if cluster.dashboard_link:
            print(f"Dask dashboard: {cluster.dashboard_link}", file=sys.stderr)
        dispatcher = Dispatcher(cluster, store, shown_warnings=warnings)
        return run_refinement(setup, None, store, objectives, dispatcher=dispatcher, **settings)


@dataclass
class ValidateRun:
    """What :func:`validate` found: the confirmation (``verdict``, ``table``, ``baseline``, ``candidate``)."""

    target_type: str
    store_path: Path
    confirmation: Any

    @property
    def verdict(self) -> str:
        return self.confirmation.verdict

    @property
    def synthetic(self) -> bool:
        return self.target_type == "simulator"

    @property
    def exit_status(self) -> int:
        """0 improve/equivalent, 3 regress, 4 inconclusive."""
        return EXIT_STATUS[self.verdict]

    def summary(self) -> str:
        return self.confirmation.summary()

    def to_json(self) -> dict[str, Any]:
        """The verdict, both configurations and the table (``tunelab validate --json``)."""
        c = self.confirmation
        return {"verdict": c.verdict, "baseline": level_to_json(c.baseline), "candidate": level_to_json(c.candidate),
                "table": _frame_json(c.table)}


def parse_value(text: str) -> Any:
    """``"4096"`` -> 4096; other text (``"4096 131072 6291456"``, ``"bbr"``) stays text for the knob to parse."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return text


def parse_options(items: Sequence[str], flag: str = "--target-option") -> dict[str, Any]:
    """``KEY=VALUE`` items -> a dict; values are read as JSON when they are JSON (``cv=0.05``), else text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise DesignError(f"{flag} {item!r} must look like KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def parse_config(items: Sequence[str]) -> dict[str, Any]:
    """KNOB=VALUE items and/or files -> knob id -> value (values validated later by the knobs).

    >>> parse_config(["net.core.somaxconn=4096", "net.ipv4.tcp_congestion_control=bbr"])
    {'net.core.somaxconn': 4096, 'net.ipv4.tcp_congestion_control': 'bbr'}
    """
    config: dict[str, Any] = {}
    for item in items:
        if "=" in item and not Path(item).exists():
            name, _, value = item.partition("=")
            if not name.strip():
                raise DesignError(f"{item!r} must look like KNOB=VALUE, e.g. net.core.somaxconn=4096")
            config[name.strip()] = parse_value(value)
        else:
            config.update(read_config_file(Path(item)))
    return config


def read_config_file(path: Path) -> dict[str, Any]:
    """A sysctl.d file (``name = value``) or a YAML/JSON mapping (or a design fragment's ``knobs:`` baselines)."""
    if not path.exists():
        raise DesignError(f"config file {path} does not exist; give KNOB=VALUE or an existing file")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml", ".json"):
        data = yaml.safe_load(text) if path.suffix != ".json" else json.loads(text)
        if isinstance(data, dict) and "knobs" in data:
            return {str(KnobId(entry["name"], entry.get("host") or "server", entry.get("device") or None)):
                    level_from_json(entry["baseline"]) for entry in data["knobs"]}
        if not isinstance(data, dict):
            raise DesignError(f"{path} must hold a mapping knob id -> value")
        return {k: level_from_json(v) for k, v in data.items()}
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if "=" not in line:
            raise DesignError(f"{path}:{number}: {line!r} is not 'name = value'")
        name, _, value = line.partition("=")
        out[name.strip()] = parse_value(value)
    return out


class _ProfileOverrides:
    """A load whose every profile carries the user's setting overrides (``--load-setting``).

    Wraps the load (composition, no patching): ``settings(profile)`` merges the overrides in,
    everything else is the load's own.
    """

    def __init__(self, load: Any, overrides: Mapping[str, Any]) -> None:
        self._load, self._overrides = load, dict(overrides)

    def settings(self, profile: str | None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._load.settings(profile, {**self._overrides, **(overrides or {})})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._load, name)


def validate(target: str, candidate: Sequence[str], *, baseline: Sequence[str] = (), metrics: Sequence[str] = (),
             target_options: Sequence[str] = (), surface: str | None = None, load: str | None = None,
             load_settings: Sequence[str] = (), sesoi_pct: float | None = None, profiles: Sequence[str] = (),
             blocks: int = 6, warmup_s: float = 2.0, measure_s: float = 8.0, allow_host_global: bool = False,
             store: PathLike | None = None) -> ValidateRun:
    """Is a candidate configuration better than the baseline on ``target``? (ABBA blocks, recorded)

    Parameters
    ----------
    target : target type (lab, local, ssh, simulator)
    candidate, baseline : ``KNOB=VALUE`` items or files (sysctl.d, YAML/JSON, design fragment);
        ``baseline`` empty or ``["current"]``: the values the target holds now
    metrics : ``NAME:max|min[:SESOI]`` (default: the load's first metric)
    target_options, load_settings : ``KEY=VALUE`` items typed by the user (so command options are
        the user's own: checked by the target's schema, allowed)
    surface : the simulator surface (same as ``target_options=["surface=NAME"]``)
    load : the load generator (required on a real target; the simulator uses its own)
    profiles : load profiles (default ``["overload"]``), each with ``blocks`` ABBA blocks
    store : trial store (default ``data/validate-<target>.sqlite``); rerunning resumes

    Returns
    -------
    ValidateRun
    """
    options = parse_options(target_options)
    if surface:
        options["surface"] = surface
    spec = {"type": target, "options": options}
    check_target_spec(spec, allow_commands=True)
    wanted = parse_config(candidate)
    base: Any = "current"
    if baseline and list(baseline) != ["current"]:
        base = parse_config([b for b in baseline if b != "current"])
    path = Path(store) if store is not None else default_store_path(f"validate-{target}")
    design_text = json.dumps({"validate": target, "options": options}, sort_keys=True, default=str)
    with build_target(spec, allow_commands=True) as live:
        if target == "simulator":
            generator, warmup_s, measure_s = live.load(), 0.0, 1.0
        elif not load:
            raise DesignError("--load is required on a real target (dnsperf, iperf3, fio, wrk)")
        else:
            generator = get_load(load)()
        overrides = parse_options(load_settings, "--load-setting")
        if overrides:
            generator = _ProfileOverrides(generator, overrides)
        goals = list(metrics) or [str(Metric(name, info.direction)).rpartition(":")[0]
                                  for name, info in list(generator.metrics.items())[:1]]
        with Store.open(path, study=f"validate-{target}", design_hash=hashlib.sha256(design_text.encode()).hexdigest(),
                        design_text=design_text, target_spec=dict(spec)) as opened:
            result = validate_configs(live, generator, base, wanted, goals, opened, blocks=blocks, sesoi_pct=sesoi_pct,
                                  profiles=list(profiles) or ["overload"], warmup_s=warmup_s, measure_s=measure_s,
                                  allow_host_global=allow_host_global)
    return ValidateRun(target, path, result)


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


def parse_parameters(items: Sequence[str]) -> dict[str, Any]:
    """``["objectives=[qps:max]", "x=3"]`` -> ``{"objectives": ["qps:max"], "x": 3}`` (values as YAML).

    >>> parse_parameters(["objectives=[qps:max]", "n=3", "name=abc"])
    {'objectives': ['qps:max'], 'n': 3, 'name': 'abc'}
    """
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise ReportError(f"-p {item!r} must look like NAME=VALUE with NAME a Python identifier, "
                              "e.g. -p objectives=[qps:max]")
        try:
            out[name.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ReportError(f"-p {item!r}: the value is not valid YAML ({exc})") from None
    return out


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


@dataclass
class StoreRestore:
    """One store's restore: the report's lines, whether all is back, or the error that stopped it."""

    path: Path
    lines: list[str]
    ok: bool
    error: str | None = None


@dataclass
class RestoreResult:
    """What :func:`restore` did: orphaned labs removed, then each store's restore."""

    labs_removed: list[str]
    stores: list[StoreRestore]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stores)

    @property
    def exit_status(self) -> int:
        """0 when everything is back, 1 when some entry was refused or failed."""
        return 0 if self.ok else 1

    def to_json(self) -> dict[str, Any]:
        return {"labs_removed": list(self.labs_removed), "ok": self.ok,
                "stores": [{"path": str(s.path), "lines": list(s.lines), "ok": s.ok, "error": s.error}
                           for s in self.stores]}


def restore(studies: Sequence[PathLike] = (), *, all_stores: bool = False, data_dir: PathLike = "data",
            allow_host_global: bool = False, testbeds: PathLike | None = None) -> RestoreResult:
    """Put back every knob a crashed or interrupted run left changed (see ``tunelab restore --help``).

    Orphaned labs are removed first. With ``all_stores`` every store in ``data_dir`` is restored
    and one bad store does not stop the others (its error is recorded); otherwise the first
    error is raised. Never replays another machine's entries, host-global knobs (unless
    ``allow_host_global``) or commands.
    With ``testbeds`` (a testbeds file) each testbed's own journal on this machine is restored too:
    what a lost Dask worker left changed (:mod:`tunelab.cluster`).
    """
    if all_stores == bool(studies) and testbeds is None:
        raise StoreError("name the studies to restore, or pass --all (not both), or --testbeds FILE")
    removed = journal.remove_orphan_labs()
    paths = sorted(Path(data_dir).glob("*.sqlite")) if all_stores else [store_path_for(s, data_dir) for s in studies]
    if testbeds is not None:
        from tunelab.cluster import journal_path

        paths += [journal_path(bed.name) for bed in testbeds_mod.load_testbeds(testbeds)
                  if journal_path(bed.name).exists()]
    if not paths:
        return RestoreResult(removed, [])
    done = []
    for path in paths:
        try:
            with Store(path) as opened:
                result = journal.restore_journal(opened, allow_host_global=allow_host_global, remove_orphans=False)
            done.append(StoreRestore(path, result.lines(), result.ok))
        except TunelabError as exc:
            if not all_stores:
                raise
            done.append(StoreRestore(path, [], False, str(exc)))   # one bad store must not stop the others
    leases.sweep()                                                  # leases of dead runs whose stores are now clean
    return RestoreResult(removed, done)


# ---- knobs ----------------------------------------------------------------------------------------


@dataclass
class KnobList:
    """The catalogue probed read-only on a target: one row per knob (exists, writable, current, note)."""

    target: str
    host: str
    table: pd.DataFrame

    def missing_summary(self) -> str:
        """One line naming the catalogue entries that were checked and not found."""
        frame = self.table
        checked = frame[~frame["note"].str.startswith("not checked")]
        missing = checked.loc[~checked["exists"], "name"].tolist()
        unchecked = len(frame) - len(checked)
        text = f"{int(checked['exists'].sum())} of {len(checked)} checked knobs exist"
        text += f"; missing here: {', '.join(missing)}" if missing else "; none missing"
        if unchecked:
            text += f"; {unchecked} not checked (need --device / --link-device)"
        return text

    def to_json(self) -> list[dict[str, Any]]:
        return _frame_json(self.table) or []


def knob_list(target: str = "local", *, host: str = "server", families: Sequence[str] | None = None,
              device: str | None = None, link_device: str | None = None) -> KnobList:
    """Probe every catalogue knob on ``target`` (local, lab: a temporary lab, dry-run); nothing is written."""
    if target not in LIST_TARGETS:
        raise TargetError(f"knobs can be listed on {', '.join(sorted(LIST_TARGETS))}, not {target!r}")
    unknown = sorted(set(families or ()) - set(FAMILIES.names()))
    if unknown:
        raise TargetError(f"unknown knob family {', '.join(unknown)}; choose from {', '.join(FAMILIES.names())}")
    options = {"quiet": True} if target == "dry-run" else {}
    with get_target(target)(**options) as live:
        frame = discover(live, host=host, device=device, link_device=link_device or LIST_TARGETS[target],
                         families=list(families) if families else None)
    return KnobList(target, host, frame)


def knob_info(name: str) -> dict[str, Any]:
    """A JSON-ready description of one catalogue knob (type, range, unit, scope, ...)."""
    knob = get_knob(name)
    return {"name": knob.name, "family": knob.family, "type": knob.type, "valid": knob.describe_range(),
            "minimum": knob.minimum, "maximum": knob.maximum, "choices": list(knob.choices or []),
            "unit": knob.unit, "scope": knob.scope, "requires_restart": knob.requires_restart,
            "needs_device": knob.needs_device, "description": knob.description}


def knob_check(name: str, words: Sequence[str]) -> dict[str, Any]:
    """Validate a value (several words form a triplet or pair): its canonical form and kernel text."""
    knob = get_knob(name)
    value = knob.validate(" ".join(words) if len(words) > 1 or knob.length else words[0])
    return {"name": knob.name, "canonical": level_to_json(value), "value": value, "text": knob.to_text(value)}


# ---- labs -----------------------------------------------------------------------------------------


@dataclass
class LabUp:
    """A detached lab :func:`lab_up` created: its namespaces, addresses, disk and bring-up time."""

    name: str
    namespaces: dict[str, str]
    addresses: dict[str, str]
    disk: str | None
    up_s: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "namespaces": dict(self.namespaces), "addresses": dict(self.addresses),
                "disk": self.disk, "up_s": self.up_s}


def lab_up(name: str | None = None, *, bottleneck_mbit: float | None = None, queue_limit_bytes: int | None = None,
           disk_mb: int | None = None, records: int = 1000, pin: bool = True) -> LabUp:
    """Create a lab that stays up after this process exits (remove it with :func:`lab_down`)."""
    lab = lab_target.LabTarget(name=name, bottleneck_mbit=bottleneck_mbit, queue_limit_bytes=queue_limit_bytes,
                               records=records, disk_mb=disk_mb, pin_cpus="auto" if pin else False)
    lab.up()
    disk = lab.resolve_device("@disk") if disk_mb else None
    lab.detach()
    return LabUp(lab.lab_name, dict(lab.namespaces), dict(lab.addresses), disk, lab.timings.get("up_s", 0.0))


@dataclass
class LabStatus:
    """Every lab (namespaces, service liveness, disk, owner, orphan or not) and namespaces without a lab."""

    labs: list[dict[str, Any]]
    orphan_namespaces: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"labs": self.labs, "orphan_namespaces": list(self.orphan_namespaces)}


def lab_status() -> LabStatus:
    """The labs on this machine, read from their state files (any process's labs)."""
    labs = []
    for state in lab_target.list_states():
        labs.append({
            "name": state.name,
            "namespaces": {role: {"name": ns, "exists": netns.namespace_exists(ns)}
                           for role, ns in state.namespaces.items()},
            "addresses": state.addresses,
            "services": {name: {"pid": pid, "alive": services.pid_alive(pid) and lab_target.pid_in_lab(pid, state)}
                         for name, pid in state.services.items()},
            "disk": state.disk_device,
            "detached": state.detached,
            "owner_pid": state.owner_pid,
            "orphan": state.is_orphan(),
            "options": state.options,
        })
    return LabStatus(labs, lab_target.orphan_namespaces(min_age_s=0.0))


@dataclass
class LabDown:
    """What :func:`lab_down` removed (labs and namespaces) and what it could not remove (``problems``)."""

    removed: list[str]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"removed": list(self.removed), "problems": list(self.problems)}


def lab_down(name: str | None = None, *, all_labs: bool = False) -> LabDown:
    """Remove the lab ``name`` (or every lab and ``tl-*`` namespace), and always the orphans of crashed runs.

    What could not be removed is listed in ``problems`` (the rest is removed regardless).
    """
    problems: list[str] = []
    removed: list[str] = []
    if name is not None:
        state = lab_target.load_state(name)          # validates the name before it becomes a path
        problems += lab_target.destroy(state)
        removed.append(state.name)
    for state in lab_target.list_states() if all_labs else [s for s in lab_target.list_states() if s.is_orphan()]:
        problems += lab_target.destroy(state)
        removed.append(state.name)
    for ns in netns.list_namespaces(lab_target.NS_PREFIX) if all_labs else lab_target.orphan_namespaces():
        try:
            netns.delete_namespace(ns)
            removed.append(ns)
        except TargetError as exc:
            problems.append(str(exc))
    return LabDown(removed, problems)


__all__ = ["ExportResult", "KnobList", "LabDown", "LabStatus", "LabUp", "PlanResult", "RefineRun", "ReportResult",
           "RestoreResult", "RunResult", "ValidateRun", "export", "knob_check", "knob_info", "knob_list", "lab_down",
           "lab_status", "lab_up", "parse_config", "parse_parameters", "plan", "refine", "report", "restore", "run",
           "screen", "validate"]
