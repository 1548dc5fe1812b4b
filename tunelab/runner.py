"""Plan -> trials: snapshot, apply, verify, restart, warm up + measure, record, restore.

One trial (:func:`run_trial`) is, in order:

1. ``begin``: the store records the trial as ``running``; ``prepare``: the load's files on its host
   (:meth:`~tunelab.loads.Load.prepare`, e.g. dnsperf's query file) and its command, before anything is
   applied, so a load that cannot start never costs a knob change or a service restart;
2. ``snapshot``: read the current value of every knob the trial touches;
3. ``apply``: for each knob whose value changes, journal the change (durably) and only then write
   it, in the design's write order (``apply_order``, else built-in ranks: the block scheduler
   before ``nr_requests``); unchanged knobs are not written;
4. ``verify``: read every knob back; a mismatch fails the trial with the knob, wanted and got;
5. ``restart``: if any knob of the study needs it (``knob.requires_restart``, e.g. somaxconn is
   read at ``listen()``), restart the load's service so the setting takes effect;
6. ``load``: ONE invocation of the load generator for ``warmup_s + measure_s`` seconds. The
   warm-up is discarded by the load's parser from the per-second series (dnsperf ``-S 1``,
   iperf3 ``--omit``, fio ``ramp_time``), so there is no gap between warm-up and measurement
   and the service never sees an idle period. Meanwhile the target's kernel counters
   (:meth:`~tunelab.targets.Target.counter_sources`) are read at the end of the warm-up and at the
   end of the window (:class:`tunelab.counters.CounterWindow`); the server's CPU time per answered
   request becomes a metric where the load names one (``server_cpu_metric``);
7. ``record``: the outcome, knobs as read back, metrics, series, counters, timings, foreign CPU
   seconds and provenance are committed in one transaction;
8. ``restore``: every changed knob is written back to its snapshot, verified, and its journal
   entry marked restored. Recording comes first, so a failed restore never loses a measurement;
   the unrestored entry stays in the journal for ``tunelab restore``.

Any exception from a step becomes a ``failed`` trial with the exception as reason (at most
:data:`tunelab.formatting.QUOTE_LIMIT` characters of its message: it may quote a user's file); Ctrl-C
records the trial as ``interrupted``, restores, then propagates. :func:`run_design` runs a
whole plan in ``run_order``, skipping run keys already done (resume; with ``retry_failed`` a failed
run is measured again, and its earlier failed trials are kept, set aside as superseded). Before its first
trial, :func:`prepare_load` puts the load's files on its host and checks them (once), journalling the
load's private directories so ``tunelab restore`` removes them after a crash.

``checkpoint(name)`` callbacks fire at named points (``begin``, ``before_apply``,
``after_apply``, ``before_measure``, ``after_measure``, ``after_record``, ``restore`` after each
restored knob, ``end``); tests use them to kill the process at an exact moment. In production
they are no-ops.

Before anything is written (:func:`check_trial`, and for a whole plan in :func:`run_design`):

1. every planned value is validated against the catalogue (``knob.validate``) so no command is
   ever built from an out-of-range or ill-typed value;
2. a host-global knob (``knob.scope == "host"``: ``vm.*``, ``fs.*``, ``kernel.*``, most of
   ``net.core.*``) is refused with :class:`~tunelab.errors.SafetyError` unless the user allowed
   it (design ``target.allow_host_global: true`` or ``--allow-host-global``).

The runner handles a study's knobs as :class:`BoundKnob`: a plan column id bound to its
catalogue :class:`~tunelab.knobs.Knob`, host and device (:func:`bind_knobs`).
"""
from __future__ import annotations

import math
import os
import statistics
import sys
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import pandas as pd

from tunelab.counters import CounterRecord, CounterRequest, CounterWindow
from tunelab.designs import Design, make_plan
from tunelab.designs.constraints import in_write_order
from tunelab.designs.plan import OPTIONAL_PLAN_COLUMNS, PLAN_COLUMNS
from tunelab.errors import DesignError, KnobError, LoadError, SafetyError, TargetError, TunelabError
from tunelab.formatting import QUOTE_LIMIT, shorten
from tunelab.journal import host_identity, in_two_passes, restore_journal
from tunelab.knobs import Knob, get_knob
from tunelab.loads import Load, LoadResult, get_load
from tunelab.model import KnobId, TrialStatus, level_from_json, level_to_json
from tunelab.progress import trial_progress
from tunelab.signals import deferred_interrupts
from tunelab.store import HostIdentity, Store, git_sha
from tunelab.targets import CommandResult, Target
from tunelab.version import __version__

Checkpoint = Callable[[str], None]
KnobLookup = Callable[[str], Knob]
#: runs one plan of a study, ``run_plan(phase, plan)`` (plan None: the design's own), on the study's
#: target or testbeds, and returns its counts (built by :func:`tunelab.study_run.plan_runner`)
PlanRunner = Callable[[str, "pd.DataFrame | None"], "RunSummary"]

#: warn when other processes used more than this share of the machine during the median trial
FOREIGN_LOAD_WARN = 0.10


def _no_checkpoint(name: str) -> None:
    return None


# ---- the knobs of a study, bound, and the rules checked before any write ------------------------


@dataclass(frozen=True)
class BoundKnob:
    """One knob of a study as the runner handles it: plan column id, catalogue knob, host, device."""

    id: str
    knob: Knob
    host: str = "server"
    device: str | None = None
    #: write rank from the design (``apply_order``); None: the built-in default (designs.constraints)
    apply_order: int | None = None

    @property
    def name(self) -> str:
        return self.knob.name


def bind_knobs(design: Design, knob_lookup: KnobLookup | None = None) -> list[BoundKnob]:
    """The :class:`BoundKnob` of each knob in the design (ids per Contract 1); ``knob_lookup`` defaults
    to :func:`tunelab.knobs.get_knob`."""
    lookup = knob_lookup or get_knob
    return _some([BoundKnob(id=entry.id, knob=lookup(entry.name), host=entry.host, device=entry.device,
                            apply_order=entry.apply_order) for entry in design.knobs])


def bind_knob_ids(ids: Iterable[str], knob_lookup: KnobLookup | None = None) -> list[BoundKnob]:
    """The :class:`BoundKnob` of each knob id (``name[device]@host``, :class:`tunelab.model.KnobId`).

    Examples
    --------
    >>> [(k.name, k.host, k.device) for k in bind_knob_ids(["link.mtu[veth0]@client"])]
    [('link.mtu', 'client', 'veth0')]
    >>> bind_knob_ids(["net.core.somaxconn@client"])[0].id
    'net.core.somaxconn@client'
    """
    lookup = knob_lookup or get_knob
    parsed = [(str(text), KnobId.parse(str(text))) for text in ids]
    return _some([BoundKnob(id=text, knob=lookup(kid.name), host=kid.host, device=kid.device) for text, kid in parsed])


def _some(bound: list[BoundKnob]) -> list[BoundKnob]:
    if not bound:
        raise DesignError("the design has no knobs to run; list at least one under `knobs:`")
    return bound


def check_host_global(specs: Sequence[BoundKnob], allow_host_global: bool) -> None:
    """Refuse host-global knobs unless allowed; raises before anything is written.

    Raises
    ------
    SafetyError
        naming every host-global knob and the two ways to allow them.
    """
    host_global = [spec.id for spec in specs if getattr(spec.knob, "scope", "host") == "host"]
    if host_global and not allow_host_global:
        raise SafetyError(
            f"refusing to change host-global knob(s) {', '.join(host_global)}: they affect the whole machine, "
            "not just the lab's namespaces. If this machine is yours to tune, set `target: {allow_host_global: true}` "
            "in the design or pass --allow-host-global; every change is journalled and `tunelab restore` rolls it back"
        )


def validate_config(specs: Sequence[BoundKnob], config: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``config`` (knob id -> level) against the catalogue; return canonical values.

    Raises
    ------
    KnobError
        for a missing knob id or an invalid value (the knob's own message names the range).
    """
    missing = [spec.id for spec in specs if spec.id not in config]
    if missing:
        raise KnobError(f"the trial config has no value for knob(s) {', '.join(missing)}; "
                        f"it has {', '.join(map(str, config)) or 'nothing'}")
    return {spec.id: spec.knob.validate(config[spec.id]) for spec in specs}


def check_trial(specs: Sequence[BoundKnob], config: Mapping[str, Any], allow_host_global: bool) -> dict[str, Any]:
    """Both pre-write checks: host-global policy, then catalogue validation."""
    check_host_global(specs, allow_host_global)
    return validate_config(specs, config)


# ---- one trial ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialOutcome:
    """What :func:`run_trial` recorded (and whether the machine was put back)."""

    trial_id: int
    run_key: str
    status: str
    reason: str | None
    knobs_read: dict[str, Any]
    metrics: dict[str, float]
    timings: dict[str, float]
    restored: bool
    foreign_cpu_s: float | None = None


@dataclass
class RunSummary:
    """Counts and wall time of one :func:`run_design` call."""

    study: str
    store_path: Path
    planned: int
    skipped: int = 0
    ok: int = 0
    flagged: int = 0
    failed: int = 0
    interrupted: int = 0
    wall_s: float = 0.0
    failures: list[str] = field(default_factory=list)
    #: per trial run now: share of the machine (0..1) other processes used while the load ran
    foreign_load: list[float] = field(default_factory=list)
    #: False for a dry run: its trials went to a throw-away store, the study's store was not touched
    recorded: bool = True
    #: attempts set aside and measured again because other processes were busy (noise.repeat_busy_pct)
    repeated: int = 0
    #: one line per such attempt, and per run still busy after its last repeat
    repeats: list[str] = field(default_factory=list)

    def count(self, outcome: TrialOutcome, machine_cpu_s: float | None = None) -> None:
        """Count a trial; ``machine_cpu_s`` (CPUs x trial seconds) turns its foreign CPU into a share."""
        if outcome.foreign_cpu_s is not None and machine_cpu_s:
            self.foreign_load.append(outcome.foreign_cpu_s / machine_cpu_s)
        status = str(outcome.status)            # the counter's name: ok, flagged, failed, interrupted
        setattr(self, status, getattr(self, status) + 1)
        if outcome.status in (TrialStatus.FAILED, TrialStatus.FLAGGED):
            self.failures.append(f"{outcome.run_key} {outcome.status}: {outcome.reason}")

    def __str__(self) -> str:
        lines = [
            f"study {self.study}: {self.planned} planned, {self.skipped} already done (skipped), "
            f"{self.ok} ok, {self.flagged} flagged, {self.failed} failed"
            + (f", {self.interrupted} interrupted" if self.interrupted else ""),
            f"wall time {self.wall_s:.1f} s; "
            + (f"store {self.store_path}" if self.recorded else "dry run: nothing was recorded, the store was not touched"),
        ]
        if self.foreign_load:
            median = statistics.median(self.foreign_load)
            if median > FOREIGN_LOAD_WARN:
                lines.append(f"warning: other processes used {100 * median:.0f} % of the machine during the median "
                             "trial; that is the main noise source in lab measurements, so intervals will be wider "
                             "and effects may shift. Rerun on a quiet machine if you can (the report shows the drift).")
        if self.repeats:
            lines.append(f"{self.repeated} trial(s) measured again because other processes were busy "
                         "(the busy attempts stay in the store, status interrupted, reason 'repeated: ...'):")
            lines += [f"  {line}" for line in self.repeats[:20]]
        lines += [f"  {line}" for line in self.failures[:20]]
        if len(self.failures) > 20:
            lines.append(f"  ... and {len(self.failures) - 20} more (see the store)")
        return "\n".join(lines)


class _Clock:
    """Collect named phase durations in seconds."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start


class _TrialFailed(Exception):
    """Internal: stop the trial early with a reason (not an error of the harness)."""


@dataclass
class _LiveTrial:
    """What a trial in flight has done so far: all that recording and restoring need, whatever
    step it stopped at."""

    trial_id: int
    #: knob id -> validated planned level
    levels: dict[str, Any]
    #: the load's settings (profile merged; ``load.prepare`` adds its own)
    settings: dict[str, Any]
    clock: _Clock = field(default_factory=_Clock)
    #: knob id -> value before the trial, and as text (the journal's old text)
    old_values: dict[str, Any] = field(default_factory=dict)
    snapshot: dict[str, str] = field(default_factory=dict)
    #: knob id -> the device as the target names it (``@disk`` -> ``loop3``)
    devices: dict[str, str | None] = field(default_factory=dict)
    #: (journal entry id, knob, device, old value) of every knob written, in write order
    applied: list[tuple[int, BoundKnob, str | None, Any]] = field(default_factory=list)
    knobs_read: dict[str, Any] = field(default_factory=dict)
    argv: list[str] | None = None
    status: str = TrialStatus.FAILED
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    series: pd.DataFrame | None = None
    foreign_cpu_s: float | None = None
    #: the kernel counters of the measured window (None: the target has none, or the load ended early)
    counters: CounterRecord | None = None


def _fmt(knob: Knob, value: Any) -> str:
    try:
        return knob.to_text(value)
    except Exception:  # noqa: BLE001 - only for the message
        return repr(value)


def _snapshot(trial: _LiveTrial, target: Target, specs: Sequence[BoundKnob]) -> None:
    """Step 2: read the current value of every knob the trial touches (and resolve its device)."""
    with trial.clock.phase("snapshot"):
        for spec in specs:
            device = target.resolve_device(spec.device) if spec.device else None
            trial.devices[spec.id] = device
            trial.old_values[spec.id] = spec.knob.read(target, spec.host, device=device)
            trial.snapshot[spec.id] = spec.knob.to_text(trial.old_values[spec.id])


def _apply(trial: _LiveTrial, target: Target, specs: Sequence[BoundKnob], store: Store) -> None:
    """Step 3: journal every intended change in one durable commit, then write the changed knobs in
    write order (:func:`tunelab.designs.constraints.write_rank`: e.g. the block scheduler before
    ``nr_requests``); a knob already at its level that such a write reset is journalled and written
    too (:func:`reset_by_writes`). Step 8 restores them in reverse."""
    def journal_and_write(todo: Sequence[BoundKnob]) -> None:
        entries = store.journal_apply_many(trial.trial_id, [
            (spec.host, spec.id, trial.devices[spec.id], trial.snapshot[spec.id],
             spec.knob.to_text(trial.levels[spec.id])) for spec in todo],
            identities=_identities(target, {spec.host for spec in todo}))
        for entry, spec in zip(entries, todo):
            trial.applied.append((entry, spec, trial.devices[spec.id], trial.old_values[spec.id]))
            spec.knob.write(target, spec.host, trial.levels[spec.id], device=trial.devices[spec.id])

    with trial.clock.phase("apply"):
        changing = in_write_order(spec for spec in specs if trial.levels[spec.id] != trial.old_values[spec.id])
        if not changing:
            return
        journal_and_write(changing)
        again = reset_by_writes(target, specs, trial.levels, trial.devices, changing)
        if again:
            journal_and_write(again)


def reset_by_writes(target: Target, specs: Sequence[BoundKnob], levels: Mapping[str, Any],
                    devices: Mapping[str, str | None], written: Sequence[BoundKnob]) -> list[BoundKnob]:
    """The knobs left out of a write because they already held their level, which a write to the same
    device has since changed (writing the block scheduler resets ``nr_requests`` to the scheduler's
    default), in write order: they must be written too."""
    touched = {devices[spec.id] for spec in written if devices[spec.id]}
    ids = {spec.id for spec in written}
    reset = [spec for spec in specs if spec.id not in ids and devices[spec.id] in touched
             and spec.knob.read(target, spec.host, device=devices[spec.id]) != levels[spec.id]]
    return in_write_order(reset)


def _verify(trial: _LiveTrial, target: Target, specs: Sequence[BoundKnob]) -> None:
    """Step 4: read every knob back; a mismatch fails the trial naming the knob, wanted and got."""
    with trial.clock.phase("verify"):
        mismatches = []
        for spec in specs:
            got = spec.knob.read(target, spec.host, device=trial.devices[spec.id])
            trial.knobs_read[spec.id] = got
            if got != trial.levels[spec.id]:
                mismatches.append(f"{spec.id}: wanted {_fmt(spec.knob, trial.levels[spec.id])!r}, "
                                  f"read back {_fmt(spec.knob, got)!r}")
        if mismatches and "read back" not in getattr(target, "cannot", {}):   # dry run: nothing written to read back
            raise _TrialFailed("verify failed (the kernel did not take the value): " + "; ".join(mismatches))


def _restart_service(trial: _LiveTrial, target: Target, load: Load, specs: Sequence[BoundKnob]) -> None:
    """Step 5: restart the load's service when a knob only takes effect then (``requires_restart``)."""
    if load.service and any(getattr(spec.knob, "requires_restart", False) for spec in specs):
        with trial.clock.phase("restart"):
            target.restart_service(load.service)


def _prepare(trial: _LiveTrial, target: Target, load: Load, duration_s: float) -> None:
    """Step 1: the load's files on its host (kept from :func:`prepare_load`: not written again when unchanged)
    and its command, before anything is applied or restarted."""
    with trial.clock.phase("prepare"):
        trial.settings.update(load.prepare(target, trial.settings) or {})
        trial.argv = list(load.command(trial.settings, duration_s, target.address("server")))


def _measure(trial: _LiveTrial, target: Target, load: Load, warmup_s: float, measure_s: float,
             checkpoint: Checkpoint) -> None:
    """Step 6: ONE run of the load for ``warmup_s + measure_s``, its foreign CPU, and its verdict."""
    checkpoint("before_measure")
    with trial.clock.phase("foreign_cpu"):
        target.foreign_cpu_s()  # start the foreign-CPU window at the load
    window = _counter_window(target, load, trial.settings, warmup_s, measure_s)
    with trial.clock.phase("load"), window:
        result = target.run(load.runs_on, trial.argv, timeout_s=_load_timeout(warmup_s, measure_s))
    trial.counters = window.record
    trial.clock.timings["counters"] = window.cost_s
    trial.clock.timings["counters_cpu"] = window.cpu_s
    with trial.clock.phase("foreign_cpu"):
        trial.foreign_cpu_s = float(target.foreign_cpu_s())
    if getattr(result, "dry", False):     # recorded, not run (a dry run): there is nothing to measure or judge
        trial.status, trial.reason = TrialStatus.OK, "dry run: the load's command was recorded, not run"
        return
    with trial.clock.phase("parse"):
        parsed = load.parse(result, trial.settings, warmup_s)
    checkpoint("after_measure")
    _judge(trial, load, parsed, result)
    trial.metrics.update(server_cpu_metric(load, trial.counters, trial.metrics))


def _counter_window(target: Target, load: Load, settings: Mapping[str, Any], warmup_s: float,
                    measure_s: float) -> CounterWindow:
    """The counter snapshots around the load's measured window: none on a target without counters, or
    whose counters cannot be found (counters explain a verdict, they never fail a trial)."""
    began = time.perf_counter()
    counted_device = getattr(load, "counted_device", lambda settings: None)
    try:
        sources = list(target.counter_sources(CounterRequest(service=getattr(load, "service", None),
                                                             device=counted_device(settings))))
    except TunelabError:
        sources = []
    window = CounterWindow(sources, warmup_s, measure_s)
    window.cost_s = time.perf_counter() - began
    return window


def server_cpu_metric(load: Load, counters: CounterRecord | None, metrics: Mapping[str, float]) -> dict[str, float]:
    """``{metric: CPU us per answered request}`` for a load that names one (``load.server_cpu_metric``) when
    the counters hold the server's CPU time and the load answered; else empty."""
    spec = getattr(load, "server_cpu_metric", None)
    if spec is None or counters is None:
        return {}
    name, rate = spec
    value = counters.cpu_us_per(metrics.get(rate))
    return {} if value is None else {name: value}


def _judge(trial: _LiveTrial, load: Load, parsed: LoadResult, result: CommandResult) -> None:
    """The trial's status from the load's: a measurement without any metric fails, and a status
    other than ok always carries a reason."""
    trial.status, trial.reason = parsed.status, parsed.reason
    trial.metrics = {k: float(v) for k, v in (parsed.metrics or {}).items()}
    trial.series = parsed.series
    if trial.status != TrialStatus.FAILED and (not trial.metrics or all(math.isnan(v) for v in trial.metrics.values())):
        trial.status = TrialStatus.FAILED
        trial.reason = (f"{load.name} reported no metrics (status {parsed.status!r}); raw output: "
                        f"{_tail(parsed.raw or result.stdout + result.stderr)}")
    if trial.status != TrialStatus.OK and not trial.reason:
        trial.reason = f"{load.name} marked the measurement {trial.status} without saying why"


def _execute(trial: _LiveTrial, target: Target, load: Load, specs: Sequence[BoundKnob], store: Store,
             warmup_s: float, measure_s: float, checkpoint: Checkpoint) -> KeyboardInterrupt | None:
    """Steps 2 to 6; any exception becomes the trial's failure and reason. Ctrl-C marks the trial
    interrupted and is returned, to be raised again once the trial is recorded and restored."""
    try:
        checkpoint("begin")          # inside the try: Ctrl-C here records the trial as interrupted
        _prepare(trial, target, load, warmup_s + measure_s)
        _snapshot(trial, target, specs)
        checkpoint("before_apply")
        _apply(trial, target, specs, store)
        checkpoint("after_apply")
        _verify(trial, target, specs)
        _restart_service(trial, target, load, specs)
        _measure(trial, target, load, warmup_s, measure_s, checkpoint)
    except _TrialFailed as exc:
        trial.status, trial.reason = TrialStatus.FAILED, str(exc)
    except KeyboardInterrupt as exc:
        trial.status, trial.reason = TrialStatus.INTERRUPTED, "interrupted by the user (Ctrl-C / SIGTERM)"
        return exc
    except TunelabError as exc:       # the message may quote a file's text: at most QUOTE_LIMIT characters of it
        trial.status, trial.reason = TrialStatus.FAILED, f"{type(exc).__name__}: {shorten(exc)}"
    except Exception as exc:  # noqa: BLE001 - a trial must never take the run down silently
        trial.status, trial.reason = TrialStatus.FAILED, f"unexpected {type(exc).__name__}: {shorten(exc)}"
    return None


def _record(trial: _LiveTrial, store: Store, load: Load, warmup_s: float, measure_s: float,
            provenance: Mapping[str, Any] | None) -> None:
    """Step 7: commit the outcome, knobs as read back, metrics, series, timings and provenance at once."""
    with trial.clock.phase("record"):
        trial_provenance = dict(provenance or {})
        trial_provenance.update({
            "snapshot": trial.snapshot, "devices": trial.devices, "load": getattr(load, "name", None),
            "load_settings": trial.settings, "argv": trial.argv, "warmup_s": warmup_s, "measure_s": measure_s,
        })
        store.finish_trial(trial.trial_id, trial.status, trial.reason, trial.knobs_read, trial.metrics, trial.series,
                           dict(trial.clock.timings), trial.foreign_cpu_s, trial_provenance,
                           counters=trial.counters.to_json() if trial.counters is not None else None)


def run_trial(
    target: Target,
    load: Load,
    knob_specs: Sequence[BoundKnob],
    config: Mapping[str, Any],
    run_key: str,
    phase: str,
    store: Store,
    warmup_s: float,
    measure_s: float,
    *,
    load_settings: Mapping[str, Any] | None = None,
    plan_info: Mapping[str, Any] | None = None,
    allow_host_global: bool = False,
    provenance: Mapping[str, Any] | None = None,
    checkpoint: Checkpoint | None = None,
) -> TrialOutcome:
    """Run and record one trial of ``config`` (knob id -> level); see the module docstring.

    Parameters
    ----------
    target : Target (up, and reset by the caller if it wants a clean state)
    load : Load instance; ``load_settings`` are its merged profile settings
    knob_specs : the knobs this trial sets; ``config`` must give a level for each
    run_key, phase : identify the trial in the store (e.g. ``"refine:g3:i5:r0"``, ``"refine"``)
    warmup_s, measure_s : the load runs once for their sum; the parser drops the warm-up
    plan_info : plan bookkeeping (``run_id``, ``config_id``, ...) for the tidy frame
    allow_host_global : permit knobs with ``scope == "host"``
    provenance : run-level provenance (target description, design hash, ...) to store with it
    checkpoint : called with named points (tests only)

    Raises
    ------
    SafetyError, KnobError
        before anything is written, for a refused host-global knob or an invalid value.
    KeyboardInterrupt
        after recording the trial as interrupted and restoring its knobs.
    """
    checkpoint = checkpoint or _no_checkpoint
    levels = check_trial(knob_specs, config, allow_host_global)
    trial = _LiveTrial(store.begin_trial(run_key, phase, levels, plan=plan_info), levels, dict(load_settings or {}))
    try:
        interrupted = _execute(trial, target, load, knob_specs, store, warmup_s, measure_s, checkpoint)
        with deferred_interrupts():
            _record(trial, store, load, warmup_s, measure_s, provenance)
            supersede_failed(store, phase, run_key, trial.trial_id)
        checkpoint("after_record")
    finally:
        # step 8 runs even when recording failed; Ctrl-C is held until the machine is back
        with deferred_interrupts():
            with trial.clock.phase("restore"):
                _restore(store, target, trial.applied, checkpoint)
    timings = trial.clock.timings
    store.add_timings(trial.trial_id, {k: timings[k] for k in ("record", "restore") if k in timings})
    checkpoint("end")
    if interrupted is not None:
        raise interrupted
    return TrialOutcome(trial.trial_id, run_key, trial.status, trial.reason, trial.knobs_read, trial.metrics,
                        dict(timings), True, trial.foreign_cpu_s)


#: host identities per live target object (machine and boot ids do not change while it is up)
_IDENTITIES: "weakref.WeakKeyDictionary[Target, dict[str, HostIdentity]]" = weakref.WeakKeyDictionary()


def _identities(target: Target, hosts: set[str]) -> dict[str, HostIdentity]:
    """The machine/boot identity of each host, read once per target (journalled with each change)."""
    try:
        known = _IDENTITIES.setdefault(target, {})
    except TypeError:                      # a target that cannot be weakly referenced: no cache
        known = {}
    for host in hosts - known.keys():
        known[host] = host_identity(target, host)
    return {host: known[host] for host in hosts}


def write_back(target: Target, items: Sequence[tuple[int, BoundKnob, str | None, Any]],
               on_each: Callable[[], None] | None = None) -> tuple[list[int], list[str]]:
    """Write each ``(journal entry, knob, device, old value)`` back in the given order and read it back;
    a knob the kernel refuses is tried once more after the others (:func:`tunelab.journal.in_two_passes`:
    ``nr_requests`` is only valid under its old scheduler), and one a later write reset is put back again
    (:func:`_put_back_resets`). Returns the restored entries and one problem line per knob still not back;
    ``on_each`` is called after each restored knob."""
    restored: list[int] = []

    def put_back(item: tuple[int, BoundKnob, str | None, Any]) -> None:
        entry, spec, device, old = item
        _write_verified(target, spec, device, old)
        restored.append(entry)
        if on_each is not None:
            on_each()

    problems = [f"{item[1].id}: {why}" for item, why in in_two_passes(items, put_back)]
    return restored, problems + _put_back_resets(target, items, restored)


def _write_verified(target: Target, spec: BoundKnob, device: str | None, value: Any) -> None:
    """Write ``value`` and read it back; KnobError when the kernel keeps another value."""
    spec.knob.write(target, spec.host, value, device=device)
    got = spec.knob.read(target, spec.host, device=device)
    if got != value:
        raise KnobError(f"wrote back {_fmt(spec.knob, value)!r}, read {_fmt(spec.knob, got)!r}")


def _put_back_resets(target: Target, items: Sequence[tuple[int, BoundKnob, str | None, Any]],
                     restored: list[int]) -> list[str]:
    """Write back, once more, a restored knob that a later write to its device changed (restoring the block
    scheduler resets ``nr_requests``); only knobs sharing a device are read again. Drops the entries still
    wrong from ``restored`` and returns one problem line for each."""
    devices = [device for entry, _, device, _ in items if device and entry in restored]
    problems = []
    for entry, spec, device, old in items:
        if entry not in restored or not device or devices.count(device) < 2:
            continue
        try:
            if spec.knob.read(target, spec.host, device=device) != old:
                _write_verified(target, spec, device, old)
        except TunelabError as exc:
            restored.remove(entry)
            problems.append(f"{spec.id}: {exc}")
    return problems


def _restore(store: Store, target: Target, applied: list[tuple[int, BoundKnob, str | None, Any]],
             checkpoint: Checkpoint) -> None:
    """Step 8: write each changed knob back (newest first, :func:`write_back`), verify, then mark the
    verified entries restored in one commit (a crash before it leaves them ``applied``; restoring
    again is idempotent)."""
    restored, problems = write_back(target, list(reversed(applied)), lambda: checkpoint("restore"))
    if restored:
        store.journal_restored_many(restored)
    if problems:
        raise KnobError("could not restore " + "; ".join(problems) + f". The trial is recorded and the journal in "
                        f"{store.path} keeps the changes: fix the cause and run `tunelab restore`")


def _load_timeout(warmup_s: float, measure_s: float) -> float:
    total = warmup_s + measure_s
    return total + max(10.0, 0.5 * total)


def _tail(text: str, limit: int = QUOTE_LIMIT - 2) -> str:
    """The last ``limit`` characters of a tool's output, quoted (it may echo a user's file: never more)."""
    text = (text or "").strip()
    return repr(text[-limit:]) if text else "(nothing)"


def supersede_failed(store: Store, phase: str, run_key: str, trial_id: int) -> None:
    """Set aside the earlier failed trials of ``run_key`` now that trial ``trial_id`` measured it again
    (``retry_failed``): kept in the store, status ``interrupted``, reason ``superseded: ...``, so the run's last
    attempt is the one every reader counts. A store wrapper without the method (a duet side's) is left alone."""
    supersede = getattr(store, "supersede_failed", None)
    if supersede is not None:
        supersede(phase, run_key, trial_id)


# ---- the design-level loop ----------------------------------------------------------------------


def target_spec_of(design: Design) -> dict[str, Any]:
    """``{"type", "options", "allow_host_global"}`` of the design's target section."""
    return {"type": design.target.type, "options": dict(design.target.options),
            "allow_host_global": bool(design.target.allow_host_global)}


def load_of(design: Design) -> tuple[Load, dict[str, Any]]:
    """Instantiate the design's load generator and merge its profile settings."""
    load = get_load(design.load.generator)()
    return load, load.settings(design.load.profile, dict(design.load.settings))


def load_for(design: Design, target_cls: type[Target], options: Mapping[str, Any]) -> tuple[Load, dict[str, Any]]:
    """The load a run of ``design`` measures with on a target of ``target_cls`` with ``options``: the
    target's own (:meth:`~tunelab.targets.Target.paired_load`, the simulator's) or the design's."""
    paired = target_cls.paired_load(dict(options), design.load.profile)
    return paired if paired is not None else load_of(design)


#: one planned trial: its run key, config (knob id -> level) and plan bookkeeping
PlannedTrial = tuple[str, dict[str, Any], dict[str, Any]]


def profile_settings(design: Design, load: Load, rows: Sequence[PlannedTrial]) -> dict[str, dict[str, Any]]:
    """The load settings of each profile the planned trials name (plan column ``profile``).

    Each is the profile merged with the design's ``load.settings``, as :func:`load_of` merges the
    single profile; empty for a plan without profiles. A profile the load does not know raises
    :class:`~tunelab.errors.LoadError` here, before anything runs.
    """
    overrides = dict(design.load.settings)
    names = dict.fromkeys(info["profile"] for _, _, info in rows if info.get("profile") is not None)
    return {name: load.settings(name, overrides) for name in names}


def _planned_trials(plan: pd.DataFrame, specs: Sequence[BoundKnob], phase: str) -> list[PlannedTrial]:
    """The plan's rows in ``run_order`` as trials: run key ``"<phase>:<run_id>"``, config, bookkeeping."""
    missing = [spec.id for spec in specs if spec.id not in plan.columns]
    if missing:
        raise DesignError(f"the plan has no column for knob(s) {', '.join(missing)}; plan columns are {list(plan.columns)}")
    plan = plan.sort_values("run_order") if "run_order" in plan.columns else plan
    rows: list[PlannedTrial] = []
    for record in plan.to_dict("records"):
        config = {spec.id: level_from_json(level_to_json(record[spec.id])) for spec in specs}
        info = {col: level_from_json(level_to_json(record[col])) for col in (*PLAN_COLUMNS, *OPTIONAL_PLAN_COLUMNS)
                if col in record}
        rows.append((f"{phase}:{info.get('run_id', len(rows))}", config, info))
    return rows


def _check_plan(specs: Sequence[BoundKnob], rows: Sequence[PlannedTrial], allow_host_global: bool) -> None:
    """Safety and validity of the WHOLE plan before the first write (see the module docstring)."""
    check_host_global(specs, allow_host_global)
    for run_key, config, _ in rows:
        try:
            validate_config(specs, config)
        except KnobError as exc:
            raise KnobError(f"planned run {run_key}: {exc}") from None


def _durations(design: Design) -> tuple[float, float]:
    """``(warmup_s, measure_s)`` of the design; DesignError unless ``measure_s > 0``."""
    warmup_s, measure_s = float(design.warmup_s or 0), float(design.measure_s)
    if measure_s <= 0:
        raise DesignError(f"measure_s must be > 0, got {measure_s}; set `measure_s:` in the design")
    return warmup_s, measure_s


def _still_to_run(store: Store, rows: Sequence[PlannedTrial], phase: str, retry_failed: bool) -> list[PlannedTrial]:
    """The planned trials without a recorded outcome (resume); failed ones too with ``retry_failed``."""
    done = store.completed_run_keys(phase)
    if retry_failed:
        done -= set(store.trials(phase).query("status == 'failed'")["run_key"])
    return [row for row in rows if row[0] not in done]


def run_provenance_of(store: Store, load: Load, description: Mapping[str, Any]) -> dict[str, Any]:
    """What every trial of this run records about where and with what it ran."""
    return {
        "target": description, "design_hash": store.study.design_hash if store.study else None,
        "tunelab_version": __version__, "git_sha": git_sha(), "python": sys.version.split()[0],
        "load_tools": list(getattr(load, "tools", ())),
    }


def cleanup_load(load: Load, target: Target) -> None:
    """Remove the load's private temporary files on the target (journalled as removed where :func:`prepare_load`
    journalled them); a problem is a warning, never the outcome."""
    with deferred_interrupts():
        try:
            load.cleanup(target)
        except TunelabError as exc:
            print(f"warning: {getattr(load, 'name', 'load')} could not remove its temporary files: {shorten(exc)}",
                  file=sys.stderr)
        finally:
            if getattr(load, "private_dirs", None) is not None:
                load.private_dirs = None        # type: ignore[attr-defined]


class StorePrivateDirs:
    """A load's private directories journalled in a study's store (:class:`tunelab.store.PrivateDir`): each one
    with its host's identity BEFORE anything is copied into it, marked removed when the load removes it; what a
    crash leaves, ``tunelab restore`` removes (:func:`tunelab.journal.remove_private_dirs`)."""

    def __init__(self, store: Store, target: Target) -> None:
        self.store, self.target = store, target
        self._ids: dict[tuple[str, str], int] = {}

    def made(self, host: str, path: str) -> None:
        identity = _identities(self.target, {host})[host]
        self._ids[(host, path)] = self.store.private_dir_made(host, path, identity)

    def removed(self, host: str, path: str) -> None:
        dir_id = self._ids.pop((host, path), None)
        if dir_id is not None:
            self.store.private_dir_removed(dir_id)


def prepare_load(target: Target, load: Load, settings: Iterable[Mapping[str, Any]], store: Store | None = None) -> None:
    """Before the first trial applies a knob or restarts a service: put the load's files on its host
    (:meth:`~tunelab.loads.Load.prepare`, once per distinct settings) and check them (the load's
    ``check_prepared``, where it has one: dnsperf's query file is a readable file there). With ``store``, the
    load's private directories are journalled there first (:class:`StorePrivateDirs`).

    Raises
    ------
    LoadError
        one line (the cause shortened to :data:`~tunelab.formatting.QUOTE_LIMIT` characters: it may quote a
        file's text); the load's files are removed again, and nothing was applied or restarted.
    """
    kept = getattr(load, "private_dirs", None)
    if store is not None and hasattr(load, "private_dirs") and not (
            isinstance(kept, StorePrivateDirs) and kept.store is store and kept.target is target):
        load.private_dirs = StorePrivateDirs(store, target)     # type: ignore[attr-defined]  (prepared again: kept)
    seen: list[dict[str, Any]] = []
    for each in map(dict, settings):
        if each in seen:
            continue
        seen.append(each)
        try:
            added = load.prepare(target, each) or {}
            check = getattr(load, "check_prepared", None)
            if check is not None:
                check(target, {**each, **added})
        except (TunelabError, OSError) as exc:
            cleanup_load(load, target)
            raise LoadError(f"{getattr(load, 'name', 'load')}: could not prepare the load on the {load.runs_on} "
                            f"host, so nothing was applied or restarted: {shorten(exc)}") from None


def keyed_settings(load: Load, settings: Mapping[str, Any], run_key: str) -> dict[str, Any]:
    """``settings`` plus the run key as ``key`` for a load whose measurement is seeded by it (the
    simulator's ``wants_key``), so a trial measures the same whichever order or testbed runs it."""
    settings = dict(settings)
    if getattr(load, "wants_key", False):
        settings["key"] = run_key
    return settings


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


def prepare_run(
    design: Design,
    store: Store | None,
    *,
    allow_host_global: bool = False,
    phase: str = "screen",
    plan: pd.DataFrame | None = None,
    load: Load | None = None,
    load_settings: Mapping[str, Any] | None = None,
    knob_lookup: KnobLookup | None = None,
    retry_failed: bool = False,
) -> RunSetup:
    """Bind, plan and check a run (see :func:`run_design` for the parameters); nothing is applied.
    Without a ``store`` (a check before any store is opened) every planned trial is still to run.

    Raises
    ------
    DesignError, KnobError, SafetyError, LoadError
        for a plan without knob columns, an invalid value, a refused host-global knob, an unknown profile.
    """
    specs = bind_knobs(design, knob_lookup)
    rows = _planned_trials(make_plan(design) if plan is None else plan, specs, phase)
    if load is None:
        load, default_settings = load_of(design)
        load_settings = default_settings if load_settings is None else load_settings
    allow = allow_host_global or target_spec_of(design)["allow_host_global"]
    warmup_s, measure_s = _durations(design)
    _check_plan(specs, rows, allow)
    by_profile = profile_settings(design, load, rows)      # an unknown profile stops here, before any write
    todo = rows if store is None else _still_to_run(store, rows, phase, retry_failed)
    return RunSetup(study=design.name, phase=phase,
                    specs=specs, rows=rows, todo=todo, load=load,
                    load_settings=dict(load_settings or {}), by_profile=by_profile, allow_host_global=allow,
                    warmup_s=warmup_s, measure_s=measure_s, busy=busy_rule(design))


def run_design(
    design: Design,
    target: Target,
    store: Store,
    *,
    allow_host_global: bool = False,
    progress: bool = True,
    phase: str = "screen",
    plan: pd.DataFrame | None = None,
    load: Load | None = None,
    load_settings: Mapping[str, Any] | None = None,
    knob_lookup: KnobLookup | None = None,
    retry_failed: bool = False,
    checkpoint: Checkpoint | None = None,
    may_start: Callable[[], bool] | None = None,
) -> RunSummary:
    """Run every planned trial of ``design`` on ``target`` (already up), recording into ``store``.

    Trials run in ``run_order``; run keys ``"<phase>:<run_id>"`` already done (ok, flagged, or
    failed unless ``retry_failed``) are skipped, so calling this again resumes an interrupted
    study. Every planned value is validated and host-global knobs are refused (unless allowed
    here or by the design's ``target.allow_host_global``) before the first write.
    ``may_start()`` (a study's time budget, :class:`tunelab.rounds.StudyBudget`) is asked before every
    attempt, busy repeats included: once it says no, the run stops and the rest stays to run.

    ``plan``, ``load``/``load_settings`` and ``knob_lookup`` default to ``make_plan(design)``,
    the design's load and :func:`tunelab.knobs.get_knob`; pass them to run a custom plan. A
    trial whose plan row names a load ``profile`` runs with that profile's settings
    (:func:`profile_settings`); the others with ``load_settings``.
    With the design's ``noise.repeat_busy_pct``, a trial during which other processes used more
    of the machine is set aside and its run measured again (:class:`BusyRule`).
    With ``progress``, :func:`tunelab.progress.trial_progress` shows the trials done, ETA and busy repeats
    on stderr: a text bar on a terminal, a widget bar in a notebook, one line per round or minute otherwise.

    Examples
    --------
    >>> from tunelab.designs import load_design                       # doctest: +SKIP
    >>> design = load_design("designs/dns-overload-screen.yaml")      # doctest: +SKIP
    >>> with get_target("lab")() as target, Store.open(...) as store:  # doctest: +SKIP
    ...     print(run_design(design, target, store))
    """
    started = time.perf_counter()
    setup = prepare_run(design, store, allow_host_global=allow_host_global, phase=phase, plan=plan, load=load,
                        load_settings=load_settings, knob_lookup=knob_lookup, retry_failed=retry_failed)
    load, allow, todo = setup.load, setup.allow_host_global, setup.todo
    recover_journal(store, target, allow_host_global=allow, knob_lookup=knob_lookup)
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

    machine_cpu_s = setup.machine_cpu_s(description.get("nproc"))
    bar = trial_progress(len(setup.rows), initial=summary.skipped, desc=summary.study, enabled=progress)
    try:
        for run_key, config, info in todo:
            if may_start is not None and not may_start():
                break
            with deferred_interrupts():
                target.reset()
            measure = lambda provenance: run_trial(  # noqa: E731 - this run, measured again if busy
                target, load, setup.specs, config, run_key, phase, store, setup.warmup_s, setup.measure_s,
                load_settings=setup.settings_for(run_key, info), plan_info=info,
                allow_host_global=allow, provenance=provenance, checkpoint=checkpoint)
            outcome = repeat_while_busy(measure(run_provenance), measure, target, store, run_provenance,
                                        setup.busy, machine_cpu_s, summary, may_start=may_start)
            summary.count(outcome, machine_cpu_s)
            bar.update(1)
            bar.set_postfix(ok=summary.ok, flagged=summary.flagged, failed=summary.failed,
                            busy_repeats=summary.repeated, refresh=False)
    finally:
        bar.close()
        cleanup_load(load, target)
        summary.wall_s = time.perf_counter() - started
    return summary


@dataclass(frozen=True)
class BusyRule:
    """``noise.repeat_busy_pct`` / ``max_repeats``: measure a run again while other processes used
    more than ``pct`` % of the machine during it, at most ``max_repeats`` times."""

    pct: float
    max_repeats: int = 2


def busy_rule(design: Design) -> BusyRule | None:
    """The design's :class:`BusyRule` (its ``noise`` section), or None when busy trials are kept."""
    pct = design.noise.repeat_busy_pct
    return None if pct is None else BusyRule(float(pct), int(design.noise.max_repeats))


def repeat_while_busy(outcome: TrialOutcome, measure: Callable[[Mapping[str, Any]], TrialOutcome], target: Target,
                       store: Store, provenance: Mapping[str, Any], rule: BusyRule | None, machine_cpu_s: float,
                       summary: RunSummary, *, may_start: Callable[[], bool] | None = None) -> TrialOutcome:
    """While ``outcome`` is a measurement during which other processes used more than ``rule.pct`` %
    of the machine, set it aside (kept in the store: status ``interrupted``, reason ``repeated: ...``,
    provenance ``repeated``/``busy_pct``) and ``measure`` the run again with ``repeat_of`` (the set-aside
    trial) in its provenance; at most ``rule.max_repeats`` times, and only while ``may_start()`` (the
    study's time budget) allows another attempt. The last attempt is the run's."""
    repeats = 0
    while rule is not None and outcome.status in (TrialStatus.OK, TrialStatus.FLAGGED):
        busy = 100 * outcome.foreign_cpu_s / machine_cpu_s if outcome.foreign_cpu_s is not None and machine_cpu_s else None
        if busy is None or busy <= rule.pct:
            break
        if repeats == rule.max_repeats or (may_start is not None and not may_start()):
            why = "after" if repeats == rule.max_repeats else "and the time budget is spent, after"
            summary.repeats.append(f"{outcome.run_key}: still busy ({busy:.0f} %) {why} {repeats} repeat(s); "
                                   f"trial {outcome.trial_id} kept")
            break
        reason = f"repeated: other processes used {busy:.0f} % of the machine (threshold {rule.pct:g} %)"
        store.set_aside_trial(outcome.trial_id, reason,
                              {"repeated": True, "busy_pct": round(busy, 1), "repeat_threshold_pct": rule.pct})
        summary.repeats.append(f"{outcome.run_key} (trial {outcome.trial_id}): other processes used {busy:.0f} %")
        summary.repeated += 1
        repeats += 1
        with deferred_interrupts():
            target.reset()
        outcome = measure({**provenance, "repeat_of": outcome.trial_id, "attempt": repeats + 1})
    return outcome


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


__all__ = ["BoundKnob", "BusyRule", "PlanRunner", "RunSetup", "RunSummary", "TrialOutcome", "bind_knob_ids", "bind_knobs",
           "busy_rule", "check_host_global", "check_trial", "cleanup_load", "keyed_settings", "load_for", "load_of",
           "prepare_load", "prepare_run", "preflight", "profile_settings", "recover_journal", "repeat_while_busy", "reset_by_writes",
           "run_design", "run_provenance_of", "run_trial", "server_cpu_metric", "StorePrivateDirs", "supersede_failed", "target_spec_of", "validate_config", "write_back"]
