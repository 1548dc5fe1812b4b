"""One owner for a study run: a typed :class:`~tunelab.designs.Design` from housekeeping to the last lease.

:func:`run_study_of` runs a study on the design's target (or another type) or across the testbeds
of a testbeds file (a ``measurement: duet`` design: on its two testbeds at once, one side each, driven
from this process as a duet on two targets, :func:`run_duet_on_testbeds`), in one sequence:

1. the target (or every testbed) is checked before anything opens: options, commands, values; the pre-flight
   (:mod:`tunelab.preflight`): a knob whose mechanism the load cannot exercise refuses the run unless ``force``;
2. the run's owner (:func:`tunelab.run_owner.owned_run`, the one every verb enters): under SIGTERM-as-Ctrl-C and
   the run lease, orphaned labs are removed (named on stderr), a crashed run of another study that left knobs
   changed stops the run, and the study's store is opened once;
3. the target is brought up (or the Dask cluster of the testbeds started), the pre-flight reads the server's own
   limits (a listen backlog below every level), and one plan runner is built (:func:`plan_runner`): every later step runs its plans through it;
4. the A/A calibration (``noise.calibration_runs``, :mod:`tunelab.calibration`) and its lines;
5. the study's rounds (:func:`tunelab.rounds.run_study`);
6. the load's private directories this run left are removed and the leases of dead runs whose stores are
   clean again are swept; interrupted, one line says which knobs were put back.

A dry run (a target that ``writes_nothing``) records into a throw-away store in a private temp
dir, so the study's store is never touched, and returns the target's preview of every planned
trial (:meth:`tunelab.targets.dryrun.DryRunTarget.preview`).
"""
from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from tunelab import runner
from tunelab import testbeds as testbeds_mod
from tunelab.calibration import CALIBRATE, calibration_plan, run_calibration
from tunelab.designs import Design, make_plan
from tunelab.errors import DesignError, KnobError, TargetError
from tunelab.knobs import get_knob
from tunelab.loads import Load
from tunelab.model import MeasurementKind
from tunelab.preflight import design_preflight
from tunelab.progress import StudyProgress
from tunelab.rounds import StudyBudget, budget_of, run_study
from tunelab.run_owner import owned_run
from tunelab.study_result import StudyRun
from tunelab.store import Store, default_store_path
from tunelab.targets import Target, build_target, check_target_spec


@dataclass(frozen=True)
class RunOptions:
    """How to run a study (the flags of ``tunelab run``); see :func:`tunelab.run`."""

    allow_host_global: bool = False
    progress: bool = True
    retry_failed: bool = False
    allow_design_commands: bool = False
    checkpoint: runner.Checkpoint | None = None
    #: ``--force``: run although the pre-flight says a knob cannot act under the load (:mod:`tunelab.preflight`)
    force: bool = False
    #: seconds for a study's ``budget_minutes`` (tests inject a simulated clock)
    clock: Callable[[], float] = time.monotonic


def target_spec_for(design: Design, override: str | None = None) -> dict[str, Any]:
    """The target to build: the design's, or ``override`` (keeping options only for the same type)."""
    spec = runner.target_spec_of(design)
    if override and override != spec["type"]:
        spec = {"type": override, "options": {}, "allow_host_global": spec["allow_host_global"]}
    return spec


def with_busy_rule(design: Design, repeat_busy_pct: float | None) -> Design:
    """``design`` with ``noise.repeat_busy_pct`` set from ``tunelab run --repeat-busy PCT`` (DesignError unless 0 < PCT < 100)."""
    if repeat_busy_pct is None:
        return design
    if isinstance(repeat_busy_pct, bool) or not isinstance(repeat_busy_pct, (int, float)) \
            or not 0 < repeat_busy_pct < 100:
        raise DesignError(f"--repeat-busy must be a percentage of the machine above 0 and below 100, got "
                          f"{repeat_busy_pct!r} (e.g. 20: measure a trial again when other processes used more than "
                          "20 % of the CPUs)")
    return dataclasses.replace(design, noise=dataclasses.replace(design.noise, repeat_busy_pct=float(repeat_busy_pct)))


def checked_testbeds(design: Design, testbeds: Path | str | None,
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


@contextmanager
def dispatcher_on(beds: list[Any], scheduler: str | None, store: Store, warnings: list[str], *,
                       progress: bool = True) -> Iterator[Any]:
    """The Dask cluster of the testbeds (its dashboard named on stderr) and a
    :class:`tunelab.cluster.Dispatcher` recording into ``store``; the cluster closes after."""
    from tunelab.cluster import Dispatcher, TestbedCluster

    with TestbedCluster(beds, scheduler) as cluster:
        if cluster.dashboard_link:
            print(f"Dask dashboard: {cluster.dashboard_link}", file=sys.stderr)
        yield Dispatcher(cluster, store, progress=progress, shown_warnings=warnings)


def plan_runner(design: Design, store: Store, load: Load, load_settings: dict[str, Any], options: RunOptions, *,
                target: Target | None = None, dispatcher: Any = None, partner: Any = None,
                budget: StudyBudget | None = None, sides: tuple[str, str] | None = None,
                tracker: StudyProgress | None = None) -> runner.PlanRunner:
    """The one way a study's plans reach the runner: ``run_plan(phase, plan)`` runs ``plan`` (None: the
    design's own) on ``target`` (:func:`tunelab.runner.run_design`), as duet pairs on ``target`` and
    ``partner`` (a ``(target, load)`` pair: :func:`tunelab.duet.run_duet_design`; ``sides``: the testbed of
    each side, when they are two testbeds) or across the
    ``dispatcher``'s testbeds (:func:`tunelab.cluster.run_design_on_testbeds`), with the study's load and options.
    On a target (or a duet's two), ``budget`` (:class:`tunelab.rounds.StudyBudget`) is asked before every
    attempt (pair); across testbeds it is held between rounds only. ``tracker`` (:func:`study_progress`) shows
    each plan as a round of the whole study."""
    may_start = budget.may_start if budget is not None else None
    progress = tracker if tracker is not None else options.progress
    if partner is not None:
        from tunelab.duet import run_duet_design

        return lambda phase, plan: run_duet_design(
            design, [target, partner[0]], [load, partner[1]], store, phase=phase, plan=plan,
            load_settings=load_settings, allow_host_global=options.allow_host_global, progress=progress,
            retry_failed=options.retry_failed, may_start=may_start, testbeds=sides)
    common = dict(allow_host_global=options.allow_host_global, retry_failed=options.retry_failed, load=load,
                  load_settings=load_settings)
    if dispatcher is not None:
        from tunelab.cluster import run_design_on_testbeds

        return lambda phase, plan: run_design_on_testbeds(design, dispatcher, store, phase=phase, plan=plan,
                                                          tracker=tracker, **common)
    if target is None:
        raise TargetError("a study runs on a target or on testbeds; neither was given")
    return lambda phase, plan: runner.run_design(design, target, store, phase=phase, plan=plan,
                                                 progress=progress, checkpoint=options.checkpoint,
                                                 may_start=may_start, **common)


def _calibrate_and_run(design: Design, store: Store, run_plan: runner.PlanRunner,
                       budget: StudyBudget | None = None) -> StudyRun:
    """Steps 4 and 5: the A/A calibration (its lines to stderr), then the study's rounds (``budget``:
    the study's ``budget_minutes``, which the calibration counts against too)."""
    calibration = run_calibration(design, store, run_plan)
    for line in calibration.lines() if calibration is not None else []:
        print(line, file=sys.stderr)
    study = run_study(design, store, run_plan, budget)
    study.calibration = calibration
    return study


@contextmanager
def study_store(study: str, design_hash: str, design_text: str, spec: dict[str, Any], path: Path, *,
                check_crashed: bool = True) -> Iterator[tuple[Store, list[str]]]:
    """Steps 2 and 6: the run's owner (:func:`tunelab.run_owner.owned_run`: SIGTERM as Ctrl-C, the run lease,
    orphaned labs removed, crashed runs checked, the leases swept after; interrupted, one line says what was
    restored) with the store opened at once. Yields the store and the labs removed.
    Also the frame of the plan-time probe (:func:`tunelab.plan` with ``probe``)."""
    with owned_run(path, check_crashed=check_crashed) as owner:
        opened = owner.open_store(study=study, design_hash=design_hash, design_text=design_text, target_spec=spec)
        yield opened, owner.labs_removed


def study_progress(design: Design, options: RunOptions, *, dry: bool = False) -> StudyProgress:
    """The progress of a study on a target (or a duet's two, two trials a run): its total from the start is the
    A/A calibration's trials and the first round's (a later round adds its own when it starts); a dry run counts
    its trials as planned."""
    runs, sides = design.noise.calibration_runs, 2 if design.measurement is MeasurementKind.DUET else 1
    expected = [sides * n for n in ([runs] if runs > 0 else []) + [len(make_plan(design))]]
    return StudyProgress(design.name + (" (dry run)" if dry else ""), expected=expected, dry=dry,
                         enabled=options.progress)


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


def run_on_target(design: Design, design_text: str, spec: dict[str, Any], path: Path, options: RunOptions,
                  testbeds: Any = None) -> StudyRun:
    """The study on one target (``spec``: :func:`target_spec_for`), or a duet's two; a dry run previews it
    (module docstring). ``testbeds``: a duet's two :class:`tunelab.duet.TestbedSide` (side 0 is ``spec``)."""
    target_cls = check_target_spec(spec, allow_commands=options.allow_design_commands)  # before the store opens
    dry = bool(getattr(target_cls, "writes_nothing", False))
    if dry:                   # the preview is printed at the end, compactly, not action by action
        spec = {**spec, "options": {**spec["options"], "quiet": True}}
    load, load_settings = runner.load_for(design, target_cls, spec["options"])
    design_preflight(design, load).check(options.force)        # before the store opens: from the design alone
    sides = (testbeds[0].spec, testbeds[1].spec) if testbeds else duet_specs(design, spec)
    names = (testbeds[0].name, testbeds[1].name) if testbeds else None
    with _run_store(path, dry) as where, \
            study_store(design.name, design.design_hash, design_text, spec, where,
                        check_crashed=not dry) as (opened, removed):
        with build_target(sides[0], allow_commands=options.allow_design_commands) as live, \
                duet_partner(design, sides[1], options) as partner, \
                study_progress(design, options, dry=dry) as tracker:
            if dry:
                study = _preview(design, opened, live, plan_runner(design, opened, load, load_settings, options,
                                                                   target=live, partner=partner, tracker=tracker))
            else:
                checked = design_preflight(design, load, live)                # the server's own limits, read
                checked.check(options.force)
                for line in checked.shown(options.force):
                    print(line, file=sys.stderr)
                budget = budget_of(design, opened, options.clock)
                study = _calibrate_and_run(design, opened, plan_runner(design, opened, load, load_settings, options,
                                                                       target=live, partner=partner, budget=budget,
                                                                       sides=names, tracker=tracker),
                                           budget)
    study.labs_removed, study.recorded = removed, not dry
    return study


def duet_specs(design: Design, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The target spec of each side: ``(spec, None)`` unless the design is a duet, whose two labs get their
    CPUs from the default layout (:func:`tunelab.duet.side_options`); a duet on ssh needs two hosts: testbeds."""
    if design.measurement is not MeasurementKind.DUET:
        return spec, None
    from tunelab.designs.schema import DUET_TESTBED_TARGETS
    from tunelab.duet import DuetError, side_options

    if spec["type"] in DUET_TESTBED_TARGETS:
        raise DuetError(f"a duet on {spec['type']} needs two hosts, one per side: run it with --testbeds FILE naming "
                        f"two {spec['type']} testbeds (the design's target options are their defaults)")

    zero, one = side_options(spec["type"], spec["options"])
    return {**spec, "options": zero}, {**spec, "options": one}


@contextmanager
def duet_partner(design: Design, spec: dict[str, Any] | None, options: RunOptions) -> Iterator[Any]:
    """The second side of a duet, up, with its own load instance: ``(target, load)``; None for one target."""
    if spec is None:
        yield None
        return
    target_cls = check_target_spec(spec, allow_commands=options.allow_design_commands)
    load, _ = runner.load_for(design, target_cls, spec["options"])
    with build_target(spec, allow_commands=options.allow_design_commands) as partner:
        yield partner, load


def _preview(design: Design, store: Store, live: Any, run_plan: runner.PlanRunner) -> StudyRun:
    """A dry run: the A/A calibration's plan and the study's first plan on the dry-run target, and its
    preview of them. Nothing is measured, so nothing is assessed and no later round is planned."""
    _assume_baselines(design, live)
    runs = design.noise.calibration_runs
    calibration = run_plan(CALIBRATE, calibration_plan(design, runs)) if runs > 0 else None
    study = StudyRun.of(run_plan("screen", make_plan(design)))
    if calibration is not None:
        study.add(calibration)
    if design.rounds is not None:
        study.stop_reason = ("a sequential design's later rounds depend on what its first round measures; "
                             "a dry run measures nothing, so it shows the first round only")
    study.preview = live.preview(store.trials()["run_key"].tolist())
    return study


def _assume_baselines(design: Design, live: Target) -> None:
    """For a dry run: a knob this machine cannot read (the lab's link ``@link``, its disk ``@disk``) reads
    as the design's baseline, so the preview shows the writes a trial would make from there."""
    for spec in design.knobs:
        knob = get_knob(spec.name)
        try:
            knob.read(live, spec.host, device=spec.device)
        except KnobError:
            live.assume(spec.host, knob.path(live, spec.device), knob.to_text(spec.baseline))


def run_on_testbeds(design: Design, design_text: str, testbeds: Path | str | None, scheduler: str | None,
                    path: Path, options: RunOptions) -> StudyRun:
    """The study across the testbeds of a testbeds file (see :func:`tunelab.run`); everything is checked
    before Dask starts."""
    if design.measurement is MeasurementKind.DUET:
        return run_duet_on_testbeds(design, design_text, testbeds, scheduler, path, options)
    beds, warnings = checked_testbeds(design, testbeds, options.allow_design_commands)
    design = _without_busy_rule_on_one_machine(design, warnings)
    load, load_settings = _one_load(design, beds)
    design_preflight(design, load).check(options.force)
    checked = runner.prepare_run(design, None, allow_host_global=options.allow_host_global, load=load,
                                 load_settings=load_settings)                 # bad values stop here, before the store
    with study_store(design.name, design.design_hash, design_text, target_spec_for(design), path) as (opened, removed):
        finished = checked.resumed(opened, options.retry_failed)
        if _nothing_left(design, opened, finished):                          # no cluster to start
            study = StudyRun(finished.study, opened.path, len(finished.rows), len(finished.rows))
        else:
            with dispatcher_on(beds, scheduler, opened, warnings, progress=options.progress) as dispatcher, \
                    study_progress(design, options) as tracker:
                study = _calibrate_and_run(design, opened, plan_runner(design, opened, load, load_settings, options,
                                                                       dispatcher=dispatcher, tracker=tracker),
                                           budget_of(design, opened, options.clock))
    study.labs_removed = removed
    return study


def run_duet_on_testbeds(design: Design, design_text: str, testbeds: Path | str | None, scheduler: str | None,
                         path: Path, options: RunOptions) -> StudyRun:
    """A duet design on the two testbeds of a testbeds file (:func:`tunelab.duet.sides_on_testbeds`): side 0 on the
    first, side 1 on the second, both driven from this process as a duet on two targets (no Dask). The file is
    checked (and its hosts reached) before anything opens; the study's store keeps side 0's spec."""
    from tunelab.duet import DuetError, sides_on_testbeds

    if scheduler is not None:
        raise DuetError("a duet drives its two testbeds from this process at the same moment, not through a Dask "
                        "scheduler: drop --scheduler (keep --testbeds FILE with its two testbeds)")
    beds = testbeds_mod.load_testbeds(testbeds, allow_commands=options.allow_design_commands)  # type: ignore[arg-type]
    sides = sides_on_testbeds(beds, runner.target_spec_of(design))
    for side in sides:                    # the design's options merged in: checked as a design's target is
        check_target_spec(side.spec, allow_commands=options.allow_design_commands)
    testbeds_mod.check_testbeds(beds)     # key files, known_hosts, every host reachable; nothing applied
    print(f"duet on testbeds: side 0 on {sides[0].name}, side 1 on {sides[1].name} ({sides[0].spec['type']})",
          file=sys.stderr)
    return run_on_target(design, design_text, sides[0].spec, path, options, testbeds=sides)


def _without_busy_rule_on_one_machine(design: Design, warnings: list[str]) -> Design:
    """Testbeds on one machine see each other's trials as foreign load: every trial would be repeated,
    so the busy rule is off (and a note says so) when the testbeds share a machine."""
    if not warnings or design.noise.repeat_busy_pct is None:
        return design
    print(f"note: noise.repeat_busy_pct={design.noise.repeat_busy_pct:g} is off for this run: testbeds that share "
          "a machine see each other's trials as foreign load, so every trial would be measured again",
          file=sys.stderr)
    return dataclasses.replace(design, noise=dataclasses.replace(design.noise, repeat_busy_pct=None))


def _one_load(design: Design, beds: list[Any]) -> tuple[Load, dict[str, Any]]:
    """The load every testbed measures with; TargetError when they differ (simulator beside real testbeds)."""
    loads = {type(runner.load_for(design, bed.target_cls, bed.options)[0]).__name__ for bed in beds}
    if len(loads) > 1:
        raise TargetError(f"the testbeds measure with different loads ({', '.join(sorted(loads))}): a simulator "
                          "answers its own load, so do not mix simulator testbeds with real ones")
    return runner.load_for(design, beds[0].target_cls, beds[0].options)


def _nothing_left(design: Design, store: Store, finished: runner.RunSetup) -> bool:
    """A fixed design whose trials and A/A calibration are all recorded: nothing to run."""
    calibrated = len(store.completed_run_keys(CALIBRATE)) >= design.noise.calibration_runs
    return design.rounds is None and not finished.todo and calibrated


def run_study_of(design: Design, design_text: str, *, target: str | None = None, store: Path | str | None = None,
                 testbeds: Path | str | None = None, scheduler: str | None = None,
                 options: RunOptions = RunOptions()) -> StudyRun:
    """Run ``design`` (its file's text is kept in the store) on its target, ``target``, or the testbeds of
    ``testbeds`` (``scheduler``: an existing Dask cluster); record into ``store`` (default
    ``data/<study>.sqlite``). See :func:`tunelab.run` for the rules."""
    path = Path(store) if store is not None else default_store_path(design.name)
    if testbeds is not None or scheduler is not None:
        if target is not None:
            raise TargetError("--target and --testbeds do not mix: the testbeds file names each testbed's target")
        return run_on_testbeds(design, design_text, testbeds, scheduler, path, options)
    return run_on_target(design, design_text, target_spec_for(design, target), path, options)


__all__ = ["RunOptions", "checked_testbeds", "dispatcher_on", "duet_partner", "duet_specs", "plan_runner",
           "run_duet_on_testbeds", "run_on_target", "run_on_testbeds", "run_study_of", "study_store",
           "target_spec_for", "with_busy_rule"]
