"""Plan -> trials: snapshot, apply, verify, restart, warm up + measure, record, restore.

One trial (:func:`run_trial`) is, in order:

1. ``begin``: the store records the trial as ``running``;
2. ``snapshot``: read the current value of every knob the trial touches;
3. ``apply``: for each knob whose value changes, journal the change (durably) and only then write
   it; unchanged knobs are not written;
4. ``verify``: read every knob back; a mismatch fails the trial with the knob, wanted and got;
5. ``restart``: if any knob of the study needs it (``knob.requires_restart``, e.g. somaxconn is
   read at ``listen()``), restart the load's service so the setting takes effect;
6. ``load``: ONE invocation of the load generator for ``warmup_s + measure_s`` seconds. The
   warm-up is discarded by the load's parser from the per-second series (dnsperf ``-S 1``,
   iperf3 ``--omit``, fio ``ramp_time``), so there is no gap between warm-up and measurement
   and the service never sees an idle period;
7. ``record``: the outcome, knobs as read back, metrics, series, timings, foreign CPU seconds
   and provenance are committed in one transaction;
8. ``restore``: every changed knob is written back to its snapshot, verified, and its journal
   entry marked restored. Recording comes first, so a failed restore never loses a measurement;
   the unrestored entry stays in the journal for ``tunelab restore``.

Any exception from a step becomes a ``failed`` trial with the exception as reason; Ctrl-C
records the trial as ``interrupted``, restores, then propagates. :func:`run_design` runs a
whole plan in ``run_order``, skipping run keys already done (resume).

``checkpoint(name)`` callbacks fire at named points (``begin``, ``before_apply``,
``after_apply``, ``before_measure``, ``after_measure``, ``after_record``, ``restore`` after each
restored knob, ``end``); tests use them to kill the process at an exact moment. In production
they are no-ops.
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
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd

from tunelab.errors import DesignError, KnobError, SafetyError, TargetError, TunelabError
from tunelab.journal import (KnobSpec, check_host_global, check_trial, host_identity, restore_journal,
                             validate_config)
from tunelab.signals import deferred_interrupts
from tunelab.store import HostIdentity, Store, git_sha, knob_id

Checkpoint = Callable[[str], None]

#: bookkeeping columns of a plan (Contract 2) that travel with each trial into the store
PLAN_BOOKKEEPING = ("run_id", "config_id", "block", "replicate", "run_order", "is_baseline", "varied_knob")


def _no_checkpoint(name: str) -> None:
    return None


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


#: warn when other processes used more than this share of the machine during the median trial
FOREIGN_LOAD_WARN = 0.10


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

    def count(self, outcome: TrialOutcome, machine_cpu_s: float | None = None) -> None:
        """Count a trial; ``machine_cpu_s`` (CPUs x trial seconds) turns its foreign CPU into a share."""
        if outcome.foreign_cpu_s is not None and machine_cpu_s:
            self.foreign_load.append(outcome.foreign_cpu_s / machine_cpu_s)
        setattr(self, outcome.status, getattr(self, outcome.status) + 1)
        if outcome.status in ("failed", "flagged"):
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


def _fmt(knob: Any, value: Any) -> str:
    try:
        return knob.to_text(value)
    except Exception:  # noqa: BLE001 - only for the message
        return repr(value)


def run_trial(
    target: Any,
    load: Any,
    knob_specs: Sequence[KnobSpec],
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
    settings = dict(load_settings or {})
    clock = _Clock()
    trial_id = store.begin_trial(run_key, phase, levels, plan=plan_info)
    checkpoint("begin")

    applied: list[tuple[int, KnobSpec, str | None, Any]] = []  # (entry id, spec, device, old value)
    snapshot: dict[str, str] = {}
    devices: dict[str, str | None] = {}
    knobs_read: dict[str, Any] = {}
    status, reason = "failed", None
    metrics: dict[str, float] = {}
    series: pd.DataFrame | None = None
    foreign_cpu: float | None = None
    argv: list[str] | None = None
    interrupted: BaseException | None = None
    try:
        try:
            with clock.phase("snapshot"):
                old_values = {}
                for spec in knob_specs:
                    device = target.resolve_device(spec.device) if spec.device else None
                    devices[spec.id] = device
                    old_values[spec.id] = spec.knob.read(target, spec.host, device=device)
                    snapshot[spec.id] = spec.knob.to_text(old_values[spec.id])
            checkpoint("before_apply")
            with clock.phase("apply"):
                changing = [spec for spec in knob_specs if levels[spec.id] != old_values[spec.id]]
                # every intended change is journalled (one durable commit) before the first write
                entries = store.journal_apply_many(trial_id, [
                    (spec.host, spec.id, devices[spec.id], snapshot[spec.id], spec.knob.to_text(levels[spec.id]))
                    for spec in changing], identities=_identities(target, {spec.host for spec in changing})
                ) if changing else []
                for entry, spec in zip(entries, changing):
                    applied.append((entry, spec, devices[spec.id], old_values[spec.id]))
                    spec.knob.write(target, spec.host, levels[spec.id], device=devices[spec.id])
            checkpoint("after_apply")
            with clock.phase("verify"):
                mismatches = []
                for spec in knob_specs:
                    got = spec.knob.read(target, spec.host, device=devices[spec.id])
                    knobs_read[spec.id] = got
                    if got != levels[spec.id]:
                        mismatches.append(f"{spec.id}: wanted {_fmt(spec.knob, levels[spec.id])!r}, "
                                          f"read back {_fmt(spec.knob, got)!r}")
                if mismatches:
                    raise _TrialFailed("verify failed (the kernel did not take the value): " + "; ".join(mismatches))
            if load.service and any(getattr(spec.knob, "requires_restart", False) for spec in knob_specs):
                with clock.phase("restart"):
                    target.restart_service(load.service)
            with clock.phase("prepare"):
                settings.update(load.prepare(target, settings) or {})
                argv = list(load.command(settings, warmup_s + measure_s, target.address("server")))
            checkpoint("before_measure")
            with clock.phase("foreign_cpu"):
                target.foreign_cpu_s()  # start the foreign-CPU window at the load
            with clock.phase("load"):
                result = target.run(load.runs_on, argv, timeout_s=_load_timeout(warmup_s, measure_s))
            with clock.phase("foreign_cpu"):
                foreign_cpu = float(target.foreign_cpu_s())
            with clock.phase("parse"):
                parsed = load.parse(result, settings, warmup_s)
            checkpoint("after_measure")
            status, reason = parsed.status, parsed.reason
            metrics = {k: float(v) for k, v in (parsed.metrics or {}).items()}
            series = parsed.series
            if status != "failed" and (not metrics or all(math.isnan(v) for v in metrics.values())):
                status, reason = "failed", f"{load.name} reported no metrics (status {parsed.status!r}); raw output: " \
                                           f"{_tail(parsed.raw or result.stdout + result.stderr)}"
            if status != "ok" and not reason:
                reason = f"{load.name} marked the measurement {status} without saying why"
        except _TrialFailed as exc:
            status, reason = "failed", str(exc)
        except KeyboardInterrupt as exc:
            status, reason, interrupted = "interrupted", "interrupted by the user (Ctrl-C / SIGTERM)", exc
        except TunelabError as exc:
            status, reason = "failed", f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 - a trial must never take the run down silently
            status, reason = "failed", f"unexpected {type(exc).__name__}: {exc}"

        with deferred_interrupts():
            with clock.phase("record"):
                trial_provenance = dict(provenance or {})
                trial_provenance.update({
                    "snapshot": snapshot, "devices": devices, "load": getattr(load, "name", None),
                    "load_settings": settings, "argv": argv, "warmup_s": warmup_s, "measure_s": measure_s,
                })
                store.finish_trial(trial_id, status, reason, knobs_read, metrics, series, dict(clock.timings),
                                   foreign_cpu, trial_provenance)
            checkpoint("after_record")
    finally:
        # restore runs even when recording failed; Ctrl-C is held until the machine is back
        with deferred_interrupts():
            with clock.phase("restore"):
                _restore(store, target, applied, checkpoint)
    store.add_timings(trial_id, {k: clock.timings[k] for k in ("record", "restore") if k in clock.timings})
    checkpoint("end")
    if interrupted is not None:
        raise interrupted
    return TrialOutcome(trial_id, run_key, status, reason, knobs_read, metrics, dict(clock.timings), True,
                        foreign_cpu)


#: host identities per live target object (machine and boot ids do not change while it is up)
_IDENTITIES: "weakref.WeakKeyDictionary[Any, dict[str, HostIdentity]]" = weakref.WeakKeyDictionary()


def _identities(target: Any, hosts: set[str]) -> dict[str, HostIdentity]:
    """The machine/boot identity of each host, read once per target (journalled with each change)."""
    try:
        known = _IDENTITIES.setdefault(target, {})
    except TypeError:                      # a target that cannot be weakly referenced: no cache
        known = {}
    for host in hosts - known.keys():
        known[host] = host_identity(target, host)
    return {host: known[host] for host in hosts}


def _restore(store: Store, target: Any, applied: list[tuple[int, KnobSpec, str | None, Any]],
             checkpoint: Checkpoint) -> None:
    """Write each changed knob back (newest first), verify, then mark the verified entries restored
    in one commit (a crash before it leaves them ``applied``; restoring again is idempotent)."""
    problems, restored = [], []
    for entry, spec, device, old in reversed(applied):
        try:
            spec.knob.write(target, spec.host, old, device=device)
            got = spec.knob.read(target, spec.host, device=device)
        except TunelabError as exc:
            problems.append(f"{spec.id}: {exc}")
            continue
        if got != old:
            problems.append(f"{spec.id}: wrote back {_fmt(spec.knob, old)!r}, read {_fmt(spec.knob, got)!r}")
            continue
        restored.append(entry)
        checkpoint("restore")
    if restored:
        store.journal_restored_many(restored)
    if problems:
        raise KnobError("could not restore " + "; ".join(problems) + f". The trial is recorded and the journal in "
                        f"{store.path} keeps the changes: fix the cause and run `tunelab restore`")


def _load_timeout(warmup_s: float, measure_s: float) -> float:
    total = warmup_s + measure_s
    return total + max(10.0, 0.5 * total)


def _tail(text: str, limit: int = 300) -> str:
    text = (text or "").strip()
    return repr(text[-limit:]) if text else "(nothing)"


# ---- the design-level loop ----------------------------------------------------------------------


def _field(obj: Any, name: str, default: Any = None) -> Any:
    """Read ``name`` from a dataclass-like object or a mapping."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _native(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_native(v) for v in value)
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def knob_specs_from_design(design: Any, knob_lookup: Callable[[str], Any] | None = None) -> list[KnobSpec]:
    """The :class:`KnobSpec` of each knob in the design (ids per Contract 1)."""
    if knob_lookup is None:
        from tunelab.knobs import get_knob as knob_lookup  # type: ignore[no-redef]
    specs = []
    for entry in _field(design, "knobs", []) or []:
        name = _field(entry, "name")
        host = _field(entry, "host", "server") or "server"
        device = _field(entry, "device")
        kid = _field(entry, "id") or knob_id(name, host, device)
        specs.append(KnobSpec(id=kid, knob=knob_lookup(name), host=host, device=device))
    if not specs:
        raise DesignError("the design has no knobs to run; list at least one under `knobs:`")
    return specs


def target_spec_of(design: Any) -> dict[str, Any]:
    """``{"type", "options", "allow_host_global"}`` of the design's target section."""
    section = _field(design, "target", {}) or {}
    return {
        "type": _field(section, "type", "lab"),
        "options": dict(_field(section, "options", {}) or {}),
        "allow_host_global": bool(_field(section, "allow_host_global", False)),
    }


def load_of(design: Any) -> tuple[Any, dict[str, Any]]:
    """Instantiate the design's load generator and merge its profile settings."""
    from tunelab.loads import get_load

    section = _field(design, "load", {}) or {}
    load = get_load(_field(section, "generator"))()
    return load, load.settings(_field(section, "profile"), _field(section, "settings", {}) or {})


def run_design(
    design: Any,
    target: Any,
    store: Store,
    *,
    allow_host_global: bool = False,
    progress: bool = True,
    phase: str = "screen",
    plan: pd.DataFrame | None = None,
    load: Any = None,
    load_settings: Mapping[str, Any] | None = None,
    knob_lookup: Callable[[str], Any] | None = None,
    retry_failed: bool = False,
    checkpoint: Checkpoint | None = None,
) -> RunSummary:
    """Run every planned trial of ``design`` on ``target`` (already up), recording into ``store``.

    Trials run in ``run_order``; run keys ``"<phase>:<run_id>"`` already done (ok, flagged, or
    failed unless ``retry_failed``) are skipped, so calling this again resumes an interrupted
    study. Every planned value is validated and host-global knobs are refused (unless allowed
    here or by the design's ``target.allow_host_global``) before the first write.

    ``plan``, ``load``/``load_settings`` and ``knob_lookup`` default to ``make_plan(design)``,
    the design's load and :func:`tunelab.knobs.get_knob`; pass them to run a custom plan.
    A progress bar with ETA goes to stderr when ``progress`` and stderr is a terminal.

    Examples
    --------
    >>> from tunelab.designs import load_design                       # doctest: +SKIP
    >>> design = load_design("designs/dns-overload-screen.yaml")      # doctest: +SKIP
    >>> with get_target("lab")() as target, Store.open(...) as store:  # doctest: +SKIP
    ...     print(run_design(design, target, store))
    """
    started = time.perf_counter()
    specs = knob_specs_from_design(design, knob_lookup)
    if plan is None:
        from tunelab.designs import make_plan

        plan = make_plan(design)
    missing = [spec.id for spec in specs if spec.id not in plan.columns]
    if missing:
        raise DesignError(f"the plan has no column for knob(s) {', '.join(missing)}; plan columns are {list(plan.columns)}")
    if load is None:
        load, default_settings = load_of(design)
        load_settings = default_settings if load_settings is None else load_settings
    allow = allow_host_global or target_spec_of(design)["allow_host_global"]
    warmup_s = float(_field(design, "warmup_s", 0) or 0)
    measure_s = float(_field(design, "measure_s"))
    if measure_s <= 0:
        raise DesignError(f"measure_s must be > 0, got {measure_s}; set `measure_s:` in the design")

    plan = plan.sort_values("run_order") if "run_order" in plan.columns else plan
    rows = []
    for record in plan.to_dict("records"):
        config = {spec.id: _native(record[spec.id]) for spec in specs}
        info = {col: _native(record[col]) for col in PLAN_BOOKKEEPING if col in record}
        rows.append((f"{phase}:{info.get('run_id', len(rows))}", config, info))
    # safety and validity of the WHOLE plan before the first write
    check_host_global(specs, allow)
    for run_key, config, _ in rows:
        try:
            validate_config(specs, config)
        except KnobError as exc:
            raise KnobError(f"planned run {run_key}: {exc}") from None

    recover_journal(store, target, allow_host_global=allow, knob_lookup=knob_lookup)
    done = store.completed_run_keys(phase)
    if retry_failed:
        done -= set(store.trials(phase).query("status == 'failed'")["run_key"])
    todo = [row for row in rows if row[0] not in done]
    summary = RunSummary(study=_field(design, "name", store.study.name if store.study else "?"),
                         store_path=store.path, planned=len(rows), skipped=len(rows) - len(todo))
    if todo:
        preflight(target, load, specs)
    description = describe_target(target)
    store.begin_run(description)
    run_provenance = {
        "target": description, "design_hash": store.study.design_hash if store.study else None,
        "tunelab_version": _version(), "git_sha": git_sha(), "python": sys.version.split()[0],
        "load_tools": list(getattr(load, "tools", ())),
    }
    if load.service and todo:
        target.start_service(load.service)

    from tqdm import tqdm

    machine_cpu_s = (description.get("nproc") or os.cpu_count() or 1) * (warmup_s + measure_s)
    bar = tqdm(total=len(rows), initial=summary.skipped, unit="trial", file=sys.stderr, dynamic_ncols=True,
               disable=not (progress and sys.stderr.isatty()), desc=summary.study)
    try:
        for run_key, config, info in todo:
            with deferred_interrupts():
                target.reset()
            outcome = run_trial(target, load, specs, config, run_key, phase, store, warmup_s, measure_s,
                                load_settings=load_settings, plan_info=info, allow_host_global=allow,
                                provenance=run_provenance, checkpoint=checkpoint)
            summary.count(outcome, machine_cpu_s)
            bar.update(1)
            bar.set_postfix(ok=summary.ok, flagged=summary.flagged, failed=summary.failed, refresh=False)
    finally:
        bar.close()
        with deferred_interrupts():
            try:
                load.cleanup(target)        # the load's private temporary files on the target
            except TunelabError as exc:     # never hide the run's own outcome behind a cleanup problem
                print(f"warning: {getattr(load, 'name', 'load')} could not remove its temporary files: {exc}",
                      file=sys.stderr)
        summary.wall_s = time.perf_counter() - started
    return summary


def recover_journal(store: Store, target: Any, *, allow_host_global: bool = False,
                    knob_lookup: Callable[[str], Any] | None = None) -> None:
    """Before the first trial, put back whatever a crashed run of this study left changed.

    Otherwise the next snapshot would read the crashed trial's value and take it for the
    machine's original. Entries that cannot be put back stop the run with the command to run.
    """
    if not store.unrestored():
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


def preflight(target: Any, load: Any, specs: Sequence[KnobSpec]) -> None:
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


def describe_target(target: Any) -> dict[str, Any]:
    """``target.describe()`` for provenance; a failure becomes a ``describe_error`` entry, never an abort."""
    try:
        return dict(target.describe())
    except Exception as exc:  # noqa: BLE001 - provenance must not abort the run
        return {"target": getattr(target, "name", "?"), "describe_error": f"{type(exc).__name__}: {exc}"}


def _version() -> str:
    from tunelab.version import __version__

    return __version__


__all__ = ["KnobSpec", "RunSummary", "TrialOutcome", "run_design", "run_trial", "knob_specs_from_design",
           "target_spec_of", "load_of"]
