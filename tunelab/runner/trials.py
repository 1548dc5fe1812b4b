"""One trial: snapshot, apply, verify, restart, warm up + measure, record, restore (:func:`run_trial`).

One trial is, in order:

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
records the trial as ``interrupted``, restores, then propagates.

``checkpoint(name)`` callbacks fire at named points (``begin``, ``before_apply``,
``after_apply``, ``before_measure``, ``after_measure``, ``after_record``, ``restore`` after each
restored knob, ``end``); tests use them to kill the process at an exact moment. In production
they are no-ops.
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd

from tunelab.counters import CounterRecord, CounterRequest, CounterWindow
from tunelab.designs.constraints import in_write_order
from tunelab.errors import KnobError, TunelabError
from tunelab.formatting import QUOTE_LIMIT, shorten
from tunelab.loads import Load, LoadResult
from tunelab.model import TrialStatus
from tunelab.runner.binding import BoundKnob, check_trial
from tunelab.runner.knob_writes import host_identities, knob_text, reset_by_writes, write_back
from tunelab.runner.outcomes import TrialOutcome
from tunelab.signals import deferred_interrupts
from tunelab.store import Store
from tunelab.targets import CommandResult, Target

#: called with the name of each point a trial reaches (see the module docstring); tests kill the process there
Checkpoint = Callable[[str], None]


def _no_checkpoint(name: str) -> None:
    return None


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
            identities=host_identities(target, {spec.host for spec in todo}))
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


def _verify(trial: _LiveTrial, target: Target, specs: Sequence[BoundKnob]) -> None:
    """Step 4: read every knob back; a mismatch fails the trial naming the knob, wanted and got."""
    with trial.clock.phase("verify"):
        mismatches = []
        for spec in specs:
            got = spec.knob.read(target, spec.host, device=trial.devices[spec.id])
            trial.knobs_read[spec.id] = got
            if got != trial.levels[spec.id]:
                mismatches.append(f"{spec.id}: wanted {knob_text(spec.knob, trial.levels[spec.id])!r}, "
                                  f"read back {knob_text(spec.knob, got)!r}")
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


__all__ = ["Checkpoint", "run_trial", "server_cpu_metric", "supersede_failed"]
