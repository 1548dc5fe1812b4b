"""Duet measurement: two targets measure A and B at the same moment, then swap sides (Bulej et al., ICPE 2020).

Interference from the rest of the machine (another job, a CPU frequency change) hits both sides of a
pair at once, so it cancels from the pair's log ratio ``log(B / A)``; a lasting difference between the
two sides (one lab's CPU is busier) cancels through the crossover: the side that measures A alternates
``0 1 1 0`` over the pairs (:func:`crossover_sides`), so every two consecutive pairs hold each
orientation once and a linear drift of the side difference cancels over four.

One pair (:func:`run_pair`) is two threads, each driving one target's whole trial through
:func:`tunelab.runner.run_trial` (reset, snapshot, apply, verify, restart, load, record, restore). They
meet at a :class:`threading.Barrier` just before the load (the runner's ``before_measure`` checkpoint),
so both loads start together and both are bounded by the trial's duration. A side that stops before
its load breaks the barrier, and the other side's trial fails with a reason saying so. The two threads
share the study's store through :class:`SerializedStore` (one lock around every store call).

Each trial records its pair in its plan bookkeeping and provenance (``duet_pair``, ``duet_side``,
``duet_arm``), no new store column. How the two sides share the CPUs is a :data:`CPU_LAYOUTS` entry
(docs/duet.md says which is the default and why).

The two sides may also be the two testbeds of a testbeds file (:func:`sides_on_testbeds`: exactly two, of
one kind: two labs, two simulators or two ssh hosts): side 0 on the first, side 1 on the second, both up
for the whole run; each trial then names its ``testbed`` too. After a crash each side's journal entries
are put back on its own target (:class:`SideJournal`).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from tunelab.designs import Design
from tunelab.errors import TunelabError
from tunelab.loads import Load
from tunelab.model import MeasurementKind, ParseError, Phase, TrialStatus
from tunelab.progress import StudyProgress
from tunelab.registry import Registry
from tunelab.runner import (BoundKnob, KnobLookup, PlannedTrial, RunSetup, RunSummary, TrialOutcome, cleanup_load,
                            describe_target, preflight, prepare_run, recover_journal, run_provenance_of, run_trial)
from tunelab.signals import deferred_interrupts
from tunelab.store import JournalEntry, Store
from tunelab.targets import Target
from tunelab.targets.ssh import parse_spec
from tunelab.testbeds import Testbed

#: the two sides of a duet
SIDES = (0, 1)
#: seconds a side waits at the barrier for the other to be ready to start its load
BARRIER_TIMEOUT_S = 300.0


class DuetError(TunelabError):
    """A duet cannot run as asked, or one side of a pair stopped so the other's load had no partner."""


def crossover_sides(pairs: int) -> list[int]:
    """The side that measures A (the baseline) in each pair: ``0 1 1 0`` repeated (B takes the other side).

    >>> crossover_sides(6)
    [0, 1, 1, 0, 0, 1]
    """
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise DuetError(f"a duet needs at least 1 pair, got {pairs!r}")
    return [(0, 1, 1, 0)[pair % 4] for pair in range(pairs)]


def check_measurement(measurement: str | MeasurementKind) -> MeasurementKind:
    """``measurement`` as a :class:`~tunelab.model.MeasurementKind` (its text parsed), else one DuetError line."""
    try:
        return MeasurementKind.parse(measurement)
    except ParseError:
        words = ", ".join(kind.value for kind in MeasurementKind)
        raise DuetError(f"measurement must be one of {words}, got {measurement!r}") from None


# ---- how the two sides share the CPUs ---------------------------------------------------------------

#: layout name -> ``available CPUs -> (options of side 0, options of side 1)`` for a lab target
CPU_LAYOUTS: Registry[Callable[[Sequence[int]], tuple[dict[str, int], dict[str, int]]]] = Registry("duet CPU layout",
                                                                                                error=DuetError)
#: the layout a lab duet uses unless told otherwise (chosen from benchmarks/bench_noise.py: docs/duet.md)
DEFAULT_CPU_LAYOUT = "shared"


@CPU_LAYOUTS.register("shared")
def shared_layout(cpus: Sequence[int]) -> tuple[dict[str, int], dict[str, int]]:
    """Both servers on the first CPU, both clients on the next: each CPU carries the same work for both sides.

    >>> shared_layout([0, 1])
    ({'server_cpu': 0, 'client_cpu': 1}, {'server_cpu': 0, 'client_cpu': 1})
    """
    server, client = _two(cpus, "shared")
    return {"server_cpu": server, "client_cpu": client}, {"server_cpu": server, "client_cpu": client}


@CPU_LAYOUTS.register("split")
def split_layout(cpus: Sequence[int]) -> tuple[dict[str, int], dict[str, int]]:
    """One lab per CPU: side 0's server and client on the first CPU, side 1's on the next.

    >>> split_layout([2, 3])
    ({'server_cpu': 2, 'client_cpu': 2}, {'server_cpu': 3, 'client_cpu': 3})
    """
    first, second = _two(cpus, "split")
    return {"server_cpu": first, "client_cpu": first}, {"server_cpu": second, "client_cpu": second}


def _two(cpus: Sequence[int], layout: str) -> tuple[int, int]:
    ordered = sorted(set(cpus))
    if len(ordered) < 2:
        raise DuetError(f"duet CPU layout {layout!r} needs 2 CPUs, this process may use {ordered}; "
                        "run the duet on a machine with 2 CPUs or more")
    return ordered[0], ordered[1]


def side_options(target_type: str, options: Mapping[str, Any], layout: str | None = None,
                 cpus: Sequence[int] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The target options of each side: a lab gets its CPUs from ``layout`` (default
    :data:`DEFAULT_CPU_LAYOUT`) unless the options pin it already (or say ``pin_cpus: false``); other targets
    take ``options`` as given.

    >>> side_options("lab", {"pin_cpus": False})
    ({'pin_cpus': False}, {'pin_cpus': False})
    """
    base = dict(options)
    if target_type != "lab" or {"server_cpu", "client_cpu"} & base.keys() or base.get("pin_cpus") is False:
        if layout is not None and target_type == "lab":
            raise DuetError("a duet CPU layout and server_cpu/client_cpu (or pin_cpus: false) options contradict; "
                            "drop one of them")
        return dict(base), dict(base)
    layout = layout or DEFAULT_CPU_LAYOUT
    zero, one = CPU_LAYOUTS.get(layout)(cpus if cpus is not None else sorted(os.sched_getaffinity(0)))
    return {**base, **zero}, {**base, **one}


# ---- two testbeds as the two sides ---------------------------------------------------------------------

#: testbed types a duet can hold one side on each of: two labs (on this machine), two simulators, two ssh hosts
TESTBED_TYPES = ("lab", "simulator", "ssh")
#: why a duet refuses two testbeds of another type (the hint of its error line)
NOT_A_SIDE = {"local": "two local testbeds are this one machine, so both sides would write the same knobs",
              "dry-run": "a dry run measures nothing; preview a duet with `tunelab run DESIGN --target dry-run`"}


@dataclass(frozen=True)
class TestbedSide:
    """One side of a duet on testbeds: the testbed's name and the target spec its side is built from."""

    __test__ = False   # not a pytest test class, whatever its name says

    name: str
    spec: dict[str, Any]


def sides_on_testbeds(testbeds: Sequence[Testbed], design_target: Mapping[str, Any] | None = None,
                  layout: str | None = None, cpus: Sequence[int] | None = None) -> tuple[TestbedSide, TestbedSide]:
    """Side 0 on the first testbed, side 1 on the second: each testbed's spec with ``design_target``'s options as
    defaults (:meth:`tunelab.testbeds.Testbed.merged`), two labs with their CPUs from ``layout``
    (:func:`side_options`). Exactly two testbeds of one kind of :data:`TESTBED_TYPES`, two ssh testbeds on two
    servers; anything else is one DuetError line saying what to change.

    >>> zero, one = sides_on_testbeds([Testbed("sim1", "simulator"), Testbed("sim2", "simulator", {"cv": 0.05})])
    >>> (zero.name, zero.spec), (one.name, one.spec)
    (('sim1', {'type': 'simulator', 'options': {}}), ('sim2', {'type': 'simulator', 'options': {'cv': 0.05}}))
    """
    beds = [bed.merged(design_target or {}) for bed in testbeds]
    names = ", ".join(f"{bed.name} ({bed.type})" for bed in beds)
    if len(beds) != 2:
        raise DuetError(f"measurement: duet runs on exactly 2 testbeds (side 0 on the first, side 1 on the second), "
                        f"the testbeds file lists {len(beds)}: {names}; keep two testbeds of one kind in it")
    first, second = beds
    if first.type != second.type:
        raise DuetError(f"a duet compares its two sides, so its 2 testbeds must be of one kind, got {names}; "
                        f"make both {first.type} (or both {second.type})")
    if first.type not in TESTBED_TYPES:
        why = NOT_A_SIDE.get(first.type, "its two sides would not be two measured machines")
        raise DuetError(f"a duet runs on two testbeds of type {', '.join(TESTBED_TYPES)}, not {first.type} ({names}): "
                        f"{why}")
    if first.type == "ssh":
        check_two_servers(first, second)
    zero = side_options(first.type, first.spec()["options"], layout, cpus)[0]
    one = side_options(second.type, second.spec()["options"], layout, cpus)[1]
    return (TestbedSide(first.name, {"type": first.type, "options": zero}),
            TestbedSide(second.name, {"type": second.type, "options": one}))


def check_two_servers(first: Testbed, second: Testbed) -> None:
    """DuetError when two ssh testbeds name one server (host and port): each side changes its own server's knobs.

    >>> a, b = Testbed("a", "ssh", {"server": "root@h1:22"}), Testbed("b", "ssh", {"server": "h1"})
    >>> check_two_servers(a, b)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tunelab.duet.DuetError: testbeds a and b both name the server h1:22, so both sides would change ...
    """
    (_, host0, port0), (_, host1, port1) = (parse_spec(str(bed.options.get("server"))) for bed in (first, second))
    if host0.lower() == host1.lower() and port0 == port1:
        raise DuetError(f"testbeds {first.name} and {second.name} both name the server {host0}:{port0}, so both sides "
                        f"would change one machine's knobs; point {second.name} at a second host")


def on_testbeds(trials: Sequence[SideTrial], names: Sequence[str] | None) -> tuple[SideTrial, SideTrial]:
    """The two sides' trials, each naming its side's testbed (plan column ``testbed``) when ``names`` are given."""
    if not names:
        return trials[0], trials[1]
    zero, one = (replace(trial, plan_info={**trial.plan_info, "testbed": name}) for trial, name in zip(trials, names))
    return zero, one


class SideJournal:
    """The study's store as one side's crash recovery sees it (:func:`tunelab.runner.recover_journal`): only the
    unrestored journal entries of the trials that side ran (side 0 also takes those of trials that name no side),
    so each side's changes go back on its own target; everything else is the store's."""

    def __init__(self, store: Store, side: int) -> None:
        self._store, self._side = store, side

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def unrestored(self) -> list[JournalEntry]:
        entries = self._store.unrestored()
        if not entries:
            return entries
        trials = self._store.trials()
        sides = {int(trial_id): int(plan.get("duet_side") or 0)
                 for trial_id, plan in zip(trials["trial_id"], trials["plan"]) if isinstance(plan, Mapping)}
        return [entry for entry in entries if sides.get(entry.trial_id, 0) == self._side]


# ---- one pair: two threads, one barrier ---------------------------------------------------------------


class SerializedStore:
    """A :class:`~tunelab.store.Store` shared by the two sides of a pair: every method call holds one lock
    (the store's SQLite connection is used by one thread at a time)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.RLock()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value):
            return value

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return value(*args, **kwargs)
        return locked


@dataclass(frozen=True)
class SideTrial:
    """What one side of a pair measures: its run key, configuration, load settings and plan bookkeeping."""

    run_key: str
    config: dict[str, Any]
    settings: dict[str, Any]
    plan_info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PairSetup:
    """What both sides share: the knobs, the store, the durations and the run's provenance; and each side's
    own load instance (a load keeps per-target state, e.g. dnsperf's private directory on its client)."""

    loads: tuple[Load, Load]
    specs: list[BoundKnob]
    store: Any
    warmup_s: float
    measure_s: float
    allow_host_global: bool = False
    provenance: dict[str, Any] = field(default_factory=dict)
    phase: str = "validate"
    barrier_timeout_s: float = BARRIER_TIMEOUT_S


def pair_trials(pair: int, configs: Mapping[str, Mapping[str, Any]], key: Callable[[int, str], str],
                settings: Mapping[str, Any], wants_slot: bool = False) -> tuple[SideTrial, SideTrial]:
    """The two :class:`SideTrial` of pair ``pair``: arm A (``configs["A"]``) on side
    ``crossover_sides(pair + 1)[pair]``, B on the other; ``key(side, arm)`` names each run key. A load
    seeded by its key (the simulator, ``wants_slot``) also gets the pair as ``slot`` and its ``side``."""
    a_side = crossover_sides(pair + 1)[pair]
    trials = []
    for side in SIDES:
        arm = "A" if side == a_side else "B"
        extra = {"slot": f"pair{pair}", "side": side} if wants_slot else {}
        info = {"replicate": pair, "duet_pair": pair, "duet_side": side, "duet_arm": arm}
        trials.append(SideTrial(key(side, arm), dict(configs[arm]), {**dict(settings), **extra}, info))
    return trials[0], trials[1]


def run_pair(targets: Sequence[Target], trials: Sequence[SideTrial], setup: PairSetup) -> tuple[TrialOutcome, TrialOutcome]:
    """Run ``trials[side]`` on ``targets[side]`` at the same moment (see the module docstring); both are
    recorded in ``setup.store`` whatever happens, and both restored. Ctrl-C waits for both sides to
    finish and restore (each is bounded by its load's duration), then propagates."""
    if len(targets) != 2 or len(trials) != 2:
        raise DuetError(f"a duet pair needs 2 targets and 2 trials, got {len(targets)} and {len(trials)}")
    barrier = threading.Barrier(2, timeout=setup.barrier_timeout_s)
    store = setup.store if isinstance(setup.store, SerializedStore) else SerializedStore(setup.store)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="duet-side") as pool:
        futures = [pool.submit(_run_side, target, trial, side, barrier, setup, store)
                   for side, (target, trial) in enumerate(zip(targets, trials))]
        outcomes = [future.result() for future in futures]
    return outcomes[0], outcomes[1]


def _run_side(target: Target, trial: SideTrial, side: int, barrier: threading.Barrier, setup: PairSetup,
              store: SerializedStore) -> TrialOutcome:
    """One side: reset its target, run and record its trial, meeting the other side before the load."""
    met = threading.Event()

    def checkpoint(name: str) -> None:
        if name != "before_measure":
            return
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            raise DuetError(f"the other side of duet pair {trial.plan_info.get('duet_pair')} stopped before its load "
                            "started, so this side had no concurrent partner") from None
        met.set()

    provenance = {**setup.provenance, "duet": {k.removeprefix("duet_"): v for k, v in trial.plan_info.items()
                                               if k.startswith("duet_") or k == "testbed"}}
    try:
        with deferred_interrupts():
            target.reset()
        return run_trial(target, setup.loads[side], setup.specs, trial.config, trial.run_key, setup.phase, store,
                         setup.warmup_s, setup.measure_s, load_settings=trial.settings, plan_info=trial.plan_info,
                         allow_host_global=setup.allow_host_global, provenance=provenance, checkpoint=checkpoint)
    finally:
        if not met.is_set():
            barrier.abort()           # the other side must not wait for a load that never starts


# ---- a design's plan as duet pairs ---------------------------------------------------------------------

#: the run key suffix of the concurrent baseline of a planned run
BASELINE_SUFFIX = ":duet-base"


def design_pair(row: PlannedTrial, baseline: Mapping[str, Any], setup: RunSetup,
                wants_slot: bool = False) -> tuple[SideTrial, SideTrial]:
    """A planned run (arm B, its own run key) and its concurrent baseline (arm A, run key + :data:`BASELINE_SUFFIX`,
    planned as a baseline run), on the sides the crossover gives the run's replicate: a level's replicates
    alternate ``0 1 1 0`` so each orientation is half of them."""
    run_key, config, info = row
    replicate = int(info.get("replicate") or 0)
    a_side = crossover_sides(replicate + 1)[replicate]
    pair = info.get("run_id", run_key)
    base_config = {kid: baseline[kid] for kid in config}
    base_info = {**info, "is_baseline": True, "varied_knob": None}
    sides = {}
    for arm, key, cfg, plan_info in (("A", run_key + BASELINE_SUFFIX, base_config, base_info), ("B", run_key, config, info)):
        side = a_side if arm == "A" else 1 - a_side
        extra = {"slot": f"pair{pair}", "side": side} if wants_slot else {}
        sides[side] = SideTrial(key, dict(cfg), {**setup.settings_for(key, info), **extra},
                                {**plan_info, "duet_pair": pair, "duet_side": side, "duet_arm": arm})
    return sides[0], sides[1]


def pairs_to_run(setup: RunSetup, store: Store, retry_failed: bool = False) -> list[PlannedTrial]:
    """The planned runs whose pair is not finished (a side without an outcome, or a failed one with
    ``retry_failed``); a finished side of such a pair is set aside (kept, status interrupted), as a side is
    only worth its concurrent partner."""
    trials = store.trials(setup.phase)
    done = store.completed_run_keys(setup.phase)
    if retry_failed:
        done -= set(trials.loc[trials["status"] == TrialStatus.FAILED, "run_key"])
    todo = []
    for row in setup.rows:
        keys = (row[0], row[0] + BASELINE_SUFFIX)
        if all(key in done for key in keys):
            continue
        finished = trials[trials["run_key"].isin(keys) & trials["status"].isin(["ok", "flagged", "failed"])]
        for trial_id in finished["trial_id"]:
            store.set_aside_trial(int(trial_id), "duet: the pair is measured again (its other side was not recorded)",
                                  {"duet_repeated": True}, include_failed=True)
        todo.append(row)
    return todo


def _finished_statuses(store: Store, setup: RunSetup, todo: Sequence[PlannedTrial]) -> list[str]:
    """The statuses of both sides of the pairs already finished (skipped on resume), for the progress counts."""
    left = {row[0] for row in todo}
    keys = {key for row in setup.rows if row[0] not in left for key in (row[0], row[0] + BASELINE_SUFFIX)}
    trials = store.trials(setup.phase)
    finished = trials[trials["run_key"].isin(keys)].drop_duplicates("run_key", keep="last")  # not a set-aside side
    return [str(status) for status in finished["status"]]


def run_duet_design(design: Design, targets: Sequence[Target], loads: Sequence[Load], store: Store, *,
                    allow_host_global: bool = False, progress: bool | StudyProgress = True, phase: str = "screen",
                    plan: pd.DataFrame | None = None, load_settings: Mapping[str, Any] | None = None,
                    knob_lookup: KnobLookup | None = None, retry_failed: bool = False,
                    may_start: Callable[[], bool] | None = None, testbeds: Sequence[str] | None = None) -> RunSummary:
    """:func:`tunelab.runner.run_design` as a duet: every planned run of ``design`` on one side of ``targets``
    beside its concurrent baseline on the other (:func:`design_pair`, :func:`run_pair`), each target with
    its own load instance (``loads``); ``testbeds`` names the testbed of each side (recorded with every trial and
    in the run's description). The same checks before the first write; each side's crash leftovers are put
    back on its own target (:class:`SideJournal`); finished pairs are skipped (resume); ``may_start()`` (a
    study's time budget) is asked before every pair. The busy rule (``noise.repeat_busy_pct``) does not apply,
    nor the busy-machine warning: interference is what the pair cancels, and each side's foreign CPU time
    (still recorded) includes its partner's."""
    started = time.perf_counter()
    setup = prepare_run(design, store, allow_host_global=allow_host_global, phase=phase, plan=plan, load=loads[0],
                        load_settings=load_settings, knob_lookup=knob_lookup, retry_failed=retry_failed)
    for side, target in enumerate(targets):
        side_journal: Any = SideJournal(store, side)          # the store, with only this side's journal entries
        recover_journal(side_journal, target, allow_host_global=setup.allow_host_global, knob_lookup=knob_lookup)
    todo = pairs_to_run(setup, store, retry_failed)
    summary = RunSummary(study=setup.study, store_path=store.path, planned=2 * len(setup.rows),
                         skipped=2 * (len(setup.rows) - len(todo)))
    descriptions = [{**describe_target(target), **({"testbed": testbeds[side]} if testbeds else {})}
                    for side, target in enumerate(targets)]
    for target, load, description in zip(targets, loads, descriptions):
        if todo:
            preflight(target, load, setup.specs)
            if load.service:
                target.start_service(load.service)
        store.begin_run(description)           # each side's lab, so `tunelab restore` can find it after a crash
    pair_setup = PairSetup(loads=(loads[0], loads[1]), specs=setup.specs, store=SerializedStore(store),
                           warmup_s=setup.warmup_s, measure_s=setup.measure_s, allow_host_global=setup.allow_host_global,
                           provenance=run_provenance_of(store, loads[0], {"duet": descriptions}), phase=phase)
    tracker = progress if isinstance(progress, StudyProgress) else StudyProgress(f"{summary.study} (duet)",
                                                                                 enabled=progress)
    tracker.start_round(summary.planned, done_statuses=_finished_statuses(store, setup, todo),
                        label="A/A calibration" if phase == Phase.CALIBRATE.value else None)
    wants_slot = bool(getattr(loads[0], "wants_key", False))
    try:
        for row in todo:
            if may_start is not None and not may_start():
                break
            trials = on_testbeds(design_pair(row, design.baseline, setup, wants_slot), testbeds)
            for outcome in run_pair(targets, trials, pair_setup):
                summary.count(outcome)       # no busy share: each side's "foreign" CPU includes its partner's
                tracker.record(outcome.status)
    finally:
        tracker.end_round(failing=sys.exc_info()[0] is not None)
        if tracker is not progress:
            tracker.close()
        for target, load in zip(targets, loads):
            cleanup_load(load, target)
        summary.wall_s = time.perf_counter() - started
    return summary


__all__ = ["BASELINE_SUFFIX", "NOT_A_SIDE", "SideJournal", "TESTBED_TYPES", "TestbedSide", "check_two_servers",
           "design_pair", "on_testbeds", "pairs_to_run", "run_duet_design", "sides_on_testbeds",
           "BARRIER_TIMEOUT_S", "CPU_LAYOUTS", "DEFAULT_CPU_LAYOUT", "SIDES", "DuetError",
           "PairSetup", "SerializedStore", "SideTrial", "check_measurement", "crossover_sides", "pair_trials",
           "run_pair", "shared_layout", "side_options", "split_layout"]
