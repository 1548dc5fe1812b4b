"""A whole plan on one target: checked before the first write, crashed changes put back, then every planned
trial still to run (:func:`run_design`).

:func:`run_design` runs a whole plan in ``run_order``, skipping run keys already done (resume; with
``retry_failed`` a failed run is measured again, and its earlier failed trials are kept, set aside as
superseded). Before anything is written, :func:`prepare_run` binds and checks the WHOLE plan (every value
against the catalogue, the host-global policy: :mod:`tunelab.runner.binding`); before its first trial,
:func:`recover_journal` puts back what a crashed run left changed, :func:`preflight` reads every knob and
looks for the load's tools, and :func:`tunelab.runner.load_setup.prepare_load` puts the load's files on its
host and checks them (once), journalling the load's private directories so ``tunelab restore`` removes them
after a crash. Each trial is :func:`tunelab.runner.trials.run_trial`, measured again while busy
(:mod:`tunelab.runner.busy`). :mod:`tunelab.cluster` runs the same :class:`RunSetup` on many testbeds.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from tunelab.designs import Design, make_plan
from tunelab.errors import KnobError, SafetyError, TargetError, TunelabError
from tunelab.journal import restore_journal
from tunelab.loads import Load
from tunelab.model import Phase
from tunelab.progress import StudyProgress
from tunelab.runner import trials
from tunelab.runner.binding import BoundKnob, KnobLookup, bind_knobs, check_host_global, validate_config
from tunelab.runner.busy import BusyRule, busy_rule, repeat_while_busy
from tunelab.runner.design_access import (PlannedTrial, durations, load_of, planned_trials, profile_settings,
                                          target_spec_of)
from tunelab.runner.load_setup import cleanup_load, keyed_settings, prepare_load
from tunelab.runner.outcomes import RunSummary
from tunelab.runner.trials import Checkpoint
from tunelab.signals import deferred_interrupts
from tunelab.store import Store, git_sha
from tunelab.targets import Target
from tunelab.version import __version__


#: runs one plan of a study, ``run_plan(phase, plan)`` (plan None: the design's own), on the study's
#: target or testbeds, and returns its counts (built by :func:`tunelab.study_run.plan_runner`)
PlanRunner = Callable[[str, "pd.DataFrame | None"], "RunSummary"]


@dataclass
class RunSetup:
    """Everything a run of a plan needs, checked before anything is written (:func:`prepare_run`):
    the bound knobs, the planned trials in ``run_order`` and those still to run, the load and its
    settings, the host-global permission, the durations and the busy rule. Shared by
    :func:`run_design` (one target) and :mod:`tunelab.cluster` (many testbeds)."""

    study: str
    phase: str
    specs: list[BoundKnob]
    rows: list[PlannedTrial]
    todo: list[PlannedTrial]
    load: Load
    load_settings: dict[str, Any]
    by_profile: dict[str, dict[str, Any]]
    allow_host_global: bool
    warmup_s: float
    measure_s: float
    busy: BusyRule | None

    def settings_for(self, run_key: str, info: Mapping[str, Any]) -> dict[str, Any]:
        """The load settings of one planned trial: its profile's (else the run's), plus the run key as
        ``key`` for loads whose measurement is seeded by it (the simulator), so a trial measures the
        same whichever order or testbed runs it."""
        return keyed_settings(self.load, self.by_profile.get(info.get("profile"), self.load_settings), run_key)

    def profiles_to_run(self) -> list[dict[str, Any]]:
        """The load settings of each profile the trials still to run name (the run's for those naming none)."""
        names = dict.fromkeys(info.get("profile") for _, _, info in self.todo)
        return [dict(self.by_profile.get(name, self.load_settings)) for name in names]

    def machine_cpu_s(self, nproc: int | None) -> float:
        """CPU seconds of the whole machine during one trial's load (turns foreign CPU into a share)."""
        return (nproc or os.cpu_count() or 1) * (self.warmup_s + self.measure_s)

    def resumed(self, store: Store, retry_failed: bool = False) -> RunSetup:
        """This setup, checked before any store opened, with only the planned trials ``store`` has no outcome for
        (failed ones too with ``retry_failed``): what :func:`prepare_run` with the store returns, without
        binding and checking the plan again."""
        return replace(self, todo=_still_to_run(store, self.rows, self.phase, retry_failed))


@dataclass(frozen=True)
class RunRequest:
    """What a run of a design is asked for, beyond the design itself: the keyword arguments of
    :func:`prepare_run`, :func:`run_design` and :func:`tunelab.cluster.run_design_on_testbeds`.

    ``plan``, ``load``/``load_settings`` and ``knob_lookup`` default to ``make_plan(design)``, the design's
    load and :func:`tunelab.knobs.get_knob`; ``retry_failed`` measures failed runs again."""

    allow_host_global: bool = False
    phase: str = "screen"
    plan: pd.DataFrame | None = None
    load: Load | None = None
    load_settings: Mapping[str, Any] | None = None
    knob_lookup: KnobLookup | None = None
    retry_failed: bool = False


def prepare_run(design: Design, store: Store | None, **request: Any) -> RunSetup:
    """Bind, plan and check a run; nothing is applied. ``request``: the fields of :class:`RunRequest`, by keyword.
    Without a ``store`` (a check before any store is opened) every planned trial is still to run.

    Raises
    ------
    DesignError, KnobError, SafetyError, LoadError
        for a plan without knob columns, an invalid value, a refused host-global knob, an unknown profile.
    """
    return setup_of(design, store, RunRequest(**request))


def setup_of(design: Design, store: Store | None, request: RunRequest) -> RunSetup:
    """:func:`prepare_run` for a request already built."""
    specs = bind_knobs(design, request.knob_lookup)
    rows = planned_trials(make_plan(design) if request.plan is None else request.plan, specs, request.phase)
    load, load_settings = request.load, request.load_settings
    if load is None:
        load, default_settings = load_of(design)
        load_settings = default_settings if load_settings is None else load_settings
    allow = request.allow_host_global or target_spec_of(design)["allow_host_global"]
    warmup_s, measure_s = durations(design)
    _check_plan(specs, rows, allow)
    by_profile = profile_settings(design, load, rows)      # an unknown profile stops here, before any write
    todo = rows if store is None else _still_to_run(store, rows, request.phase, request.retry_failed)
    return RunSetup(study=design.name, phase=request.phase,
                    specs=specs, rows=rows, todo=todo, load=load,
                    load_settings=dict(load_settings or {}), by_profile=by_profile, allow_host_global=allow,
                    warmup_s=warmup_s, measure_s=measure_s, busy=busy_rule(design))


def run_design(
    design: Design,
    target: Target,
    store: Store,
    *,
    progress: bool | StudyProgress = True,
    checkpoint: Checkpoint | None = None,
    may_start: Callable[[], bool] | None = None,
    **request: Any,
) -> RunSummary:
    """Run every planned trial of ``design`` on ``target`` (already up), recording into ``store``.

    Trials run in ``run_order``; run keys ``"<phase>:<run_id>"`` already done (ok, flagged, or
    failed unless ``retry_failed``) are skipped, so calling this again resumes an interrupted
    study. Every planned value is validated and host-global knobs are refused (unless allowed
    here or by the design's ``target.allow_host_global``) before the first write.
    ``may_start()`` (a study's time budget, :class:`tunelab.rounds.StudyBudget`) is asked before every
    attempt, busy repeats included: once it says no, the run stops and the rest stays to run.

    ``request`` takes the fields of :class:`RunRequest` by keyword: ``plan``, ``load``/``load_settings`` and
    ``knob_lookup`` default to ``make_plan(design)``, the design's load and :func:`tunelab.knobs.get_knob`;
    pass them to run a custom plan. A
    trial whose plan row names a load ``profile`` runs with that profile's settings
    (:func:`profile_settings`); the others with ``load_settings``.
    With the design's ``noise.repeat_busy_pct``, a trial during which other processes used more
    of the machine is set aside and its run measured again (:class:`BusyRule`).
    With ``progress``, a :class:`tunelab.progress.StudyProgress` shows the trials done, the counts, ETA and busy
    repeats on stderr (a text bar on a terminal, a widget bar in a notebook, one line per round or minute
    otherwise); pass the study's own to count this plan as one round of it (an A/A calibration by its name).

    Examples
    --------
    >>> from tunelab.designs import load_design                       # doctest: +SKIP
    >>> design = load_design("designs/dns-overload-screen.yaml")      # doctest: +SKIP
    >>> with get_target("lab")() as target, Store.open(...) as store:  # doctest: +SKIP
    ...     print(run_design(design, target, store))
    """
    started = time.perf_counter()
    asked = RunRequest(**request)
    setup = setup_of(design, store, asked)
    load, todo = setup.load, setup.todo
    recover_journal(store, target, allow_host_global=setup.allow_host_global, knob_lookup=asked.knob_lookup)
    summary = RunSummary(study=setup.study, store_path=store.path, planned=len(setup.rows),
                         skipped=len(setup.rows) - len(todo))
    if todo:                        # only reads, and the load's files: nothing applied or restarted yet
        preflight(target, load, setup.specs)
        prepare_load(target, load, setup.profiles_to_run(), store)
    description = describe_target(target)
    store.begin_run(description)
    run_provenance = run_provenance_of(store, load, description)
    if load.service and todo:
        target.start_service(load.service)

    try:
        _run_todo(setup, target, store, summary, run_provenance, setup.machine_cpu_s(description.get("nproc")),
                  progress=progress, checkpoint=checkpoint, may_start=may_start)
    finally:
        cleanup_load(load, target)
        summary.wall_s = time.perf_counter() - started
    return summary


def _run_todo(setup: RunSetup, target: Target, store: Store, summary: RunSummary, run_provenance: Mapping[str, Any],
              machine_cpu_s: float, *, progress: bool, checkpoint: Checkpoint | None,
              may_start: Callable[[], bool] | None) -> None:
    """Each trial still to run, in ``run_order``, on a reset target, measured again while busy; counted in
    ``summary`` and shown on the progress bar. Stops early once ``may_start()`` says no."""
    tracker = progress if isinstance(progress, StudyProgress) else StudyProgress(summary.study, enabled=progress)
    start_progress_round(tracker, store, setup)
    try:
        for run_key, config, info in setup.todo:
            if may_start is not None and not may_start():
                break
            with deferred_interrupts():
                target.reset()
            measure = lambda provenance: trials.run_trial(  # noqa: E731 - this run, measured again if busy
                target, setup.load, setup.specs, config, run_key, setup.phase, store, setup.warmup_s,
                setup.measure_s, load_settings=setup.settings_for(run_key, info), plan_info=info,
                allow_host_global=setup.allow_host_global, provenance=provenance, checkpoint=checkpoint)
            outcome = repeat_while_busy(measure(run_provenance), measure, target, store, run_provenance,
                                        setup.busy, machine_cpu_s, summary, may_start=may_start)
            summary.count(outcome, machine_cpu_s)
            tracker.record(outcome.status, busy_repeats=summary.repeated)
    except BaseException:
        tracker.end_round(failing=True)
        raise
    finally:
        tracker.end_round()
        if tracker is not progress:
            tracker.close()


def start_progress_round(tracker: StudyProgress, store: Store, setup: RunSetup) -> None:
    """The plan of ``setup`` starts as a round of ``tracker`` (the A/A calibration's named so), its trials
    already recorded counted as done (:func:`done_statuses`)."""
    tracker.start_round(len(setup.rows), done_statuses=done_statuses(store, setup),
                        label="A/A calibration" if setup.phase == Phase.CALIBRATE.value else None)


def done_statuses(store: Store, setup: RunSetup) -> list[str]:
    """The statuses of the plan's trials already recorded (skipped by this run), for the progress counts."""
    done = {row[0] for row in setup.rows} - {row[0] for row in setup.todo}
    if not done:
        return []
    trials = store.trials(setup.phase)
    latest = trials[trials["run_key"].isin(done)].drop_duplicates("run_key", keep="last")   # not a set-aside attempt
    return [str(status) for status in latest["status"]]


def _check_plan(specs: Sequence[BoundKnob], rows: Sequence[PlannedTrial], allow_host_global: bool) -> None:
    """Safety and validity of the WHOLE plan before the first write (see the module docstring)."""
    check_host_global(specs, allow_host_global)
    for run_key, config, _ in rows:
        try:
            validate_config(specs, config)
        except KnobError as exc:
            raise KnobError(f"planned run {run_key}: {exc}") from None


def _still_to_run(store: Store, rows: Sequence[PlannedTrial], phase: str, retry_failed: bool) -> list[PlannedTrial]:
    """The planned trials without a recorded outcome (resume); failed ones too with ``retry_failed``."""
    done = store.completed_run_keys(phase)
    if retry_failed:
        done -= set(store.trials(phase).query("status == 'failed'")["run_key"])
    return [row for row in rows if row[0] not in done]


def recover_journal(store: Store, target: Target, *, allow_host_global: bool = False,
                    knob_lookup: KnobLookup | None = None) -> None:
    """Before the first trial, put back whatever a crashed run of this study left changed.

    Otherwise the next snapshot would read the crashed trial's value and take it for the
    machine's original. Entries that cannot be put back stop the run with the command to run.
    """
    if not store.unrestored() and not getattr(store, "private_dirs_left", lambda: [])():
        return
    report = restore_journal(store, target, knob_lookup=knob_lookup, allow_host_global=allow_host_global,
                             remove_orphans=False)
    for line in report.lines():
        print(f"recovered from a crashed run: {line}", file=sys.stderr)
    if not report.ok:
        study = store.study.name if store.study else store.path
        raise SafetyError(f"a crashed run of this study left knob changes that could not be put back "
                          f"({len(report.failed) + len(report.refused)} entries, listed above); nothing was applied. "
                          f"Fix the cause, then run `tunelab restore {study}` and run again")


def preflight(target: Target, load: Load, specs: Sequence[BoundKnob]) -> None:
    """Before the first trial: every knob can be read on its host and the load's tools exist.

    Only reads, so nothing is applied when it fails; the error lists every problem at once
    (a knob the kernel or the simulator surface lacks, a missing load generator) with the fix.
    """
    problems = []
    for spec in specs:
        try:
            device = target.resolve_device(spec.device) if spec.device else None
            spec.knob.read(target, spec.host, device=device)
        except TunelabError as exc:
            problems.append(f"knob {spec.id}: {exc}")
    for tool in getattr(load, "tools", ()) or ():
        has_tool = getattr(target, "has_tool", None)
        if has_tool is not None and not has_tool(load.runs_on, tool):
            problems.append(f"load {getattr(load, 'name', '?')}: {tool!r} is not installed on the {load.runs_on} "
                            "host (Debian packages: ./quickstart.sh installs them as root)")
    if problems:
        raise TargetError("cannot run on this target, nothing was applied:\n  " + "\n  ".join(problems)
                          + "\n`tunelab knobs list --target ...` shows which knobs exist there")


def describe_target(target: Target) -> dict[str, Any]:
    """``target.describe()`` for provenance; a failure becomes a ``describe_error`` entry, never an abort."""
    try:
        return dict(target.describe())
    except Exception as exc:  # noqa: BLE001 - provenance must not abort the run
        return {"target": getattr(target, "name", "?"), "describe_error": f"{type(exc).__name__}: {exc}"}


def run_provenance_of(store: Store, load: Load, description: Mapping[str, Any]) -> dict[str, Any]:
    """What every trial of this run records about where and with what it ran."""
    return {
        "target": description, "design_hash": store.study.design_hash if store.study else None,
        "tunelab_version": __version__, "git_sha": git_sha(), "python": sys.version.split()[0],
        "load_tools": list(getattr(load, "tools", ())),
    }


__all__ = ["PlanRunner", "RunSetup", "describe_target", "preflight", "prepare_run", "recover_journal", "run_design",
           "run_provenance_of"]
