"""The worker side: a Dask worker drives one testbed and runs whole trials on it.

Each worker of a study's cluster gets the :class:`TestbedPlugin`; on start it finds its own testbed
(by worker name) and keeps a :class:`TestbedRuntime`. A trial is the task :func:`run_on_testbed`:
the runtime brings its target up (once), puts back what a crashed worker of this testbed left
changed, and runs the trial with :func:`tunelab.runner.run_trial`, exactly as a serial run does:
snapshot, journal, apply, verify, warm up, measure, record, restore.

The trial is recorded in the testbed's **own** store on the worker's machine
(:func:`tunelab.paths.testbed_dir`), which is also its journal: a worker killed mid-trial leaves its
changes there, and the next worker of that testbed (or ``tunelab restore --testbeds FILE``) puts them
back. The task returns the finished trial records; only the client writes the study's store.

Workers ignore SIGINT: Ctrl-C in the terminal reaches every process of the group, and a worker
stopped mid-trial would leave its knobs changed. The client stops them instead
(:func:`interrupt_testbed`): the trial in flight is recorded as interrupted and restored.
"""
from __future__ import annotations

import signal
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from distributed import WorkerPlugin, get_worker

from tunelab.errors import TunelabError
from tunelab.journal import host_identity, remove_orphan_labs, restore_journal
from tunelab.loads import Load
from tunelab.paths import testbed_dir
from tunelab.runner.binding import BoundKnob
from tunelab.runner.busy import BusyRule, repeat_while_busy
from tunelab.runner.load_setup import StorePrivateDirs, cleanup_load
from tunelab.runner.outcomes import RunSummary
from tunelab.runner.plans import describe_target, preflight, recover_journal
from tunelab.runner.trials import run_trial
from tunelab.store import Store
from tunelab.targets import Target

#: the plugin's name on every worker
PLUGIN_NAME = "tunelab-testbed"
#: seconds a worker waits for its testbed to come down when the study ends
TEARDOWN_TIMEOUT_S = 120.0
#: finished trials a testbed's own store keeps (older ones were sent to the study's store long ago)
KEEP_TRIALS = 200
#: the testbed's store is pruned to KEEP_TRIALS once every this many trials (a commit costs ms)
PRUNE_EVERY = 50


@dataclass(frozen=True)
class BedSpec:
    """One testbed as a worker builds it: its name, target type and options, and the target class
    (sent by reference, so a worker imports the module that registers it, e.g. the simulator)."""

    name: str
    target_type: str
    options: Mapping[str, Any]
    target_cls: type[Target]

    def spec(self) -> dict[str, Any]:
        return {"type": self.target_type, "options": dict(self.options)}


@dataclass(frozen=True)
class RunContext:
    """What every trial of one run shares: the knobs, the load, durations, permission, provenance."""

    study: str
    phase: str
    specs: Sequence[BoundKnob]
    load: Load
    warmup_s: float
    measure_s: float
    allow_host_global: bool
    provenance: Mapping[str, Any]
    busy: BusyRule | None = None

    def machine_cpu_s(self, nproc: int | None) -> float:
        """CPU seconds of a testbed's machine (``nproc`` CPUs) during one trial's load."""
        return (nproc or 1) * (self.warmup_s + self.measure_s)


@dataclass(frozen=True)
class TrialRequest:
    """One planned trial to run on whichever testbed's worker takes it."""

    context: RunContext
    run_key: str
    config: Mapping[str, Any]
    info: Mapping[str, Any]
    settings: Mapping[str, Any]


@dataclass
class TrialReply:
    """What a worker sends back: the testbed, the finished trial records (the set-aside busy
    attempts first, the run's own trial last), and an error when no trial could run."""

    testbed: str | None
    records: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: the error is the testbed's (it could not come up, or lacks a knob or tool), not the trial's
    testbed_fault: bool = False
    interrupted: bool = False
    machine_id: str | None = None
    nproc: int | None = None
    repeats: list[str] = field(default_factory=list)
    repeated: int = 0


def journal_path(name: str) -> Path:
    """The testbed's own store (trials and journal) on this machine."""
    return testbed_dir() / f"{name}.sqlite"


class TestbedRuntime:
    """One testbed's live target, its own store and its stop flag, kept by the worker's plugin."""

    __test__ = False   # not a pytest test class, whatever its name says

    def __init__(self, bed: BedSpec) -> None:
        self.bed = bed
        self.target: Target | None = None
        self.store: Store | None = None
        self.stop = threading.Event()
        self.services: set[str] = set()
        self.checked: set[tuple[Any, ...]] = set()
        self.machine_id: str | None = None
        self.nproc: int | None = None
        self.description: dict[str, Any] = {}
        self.trials_run = 0

    # ---- bringing the testbed up -----------------------------------------------------------------

    def ensure_up(self, context: RunContext) -> None:
        """Open the testbed's store, bring the target up once, put back what a crashed worker left
        changed, check the run's knobs and tools once, and start the load's service once."""
        if self.store is None:
            self.store = Store.open(journal_path(self.bed.name), study=f"testbed-{self.bed.name}",
                                    design_hash="testbed", design_text="", target_spec=self.bed.spec())
        if self.target is None:
            if self.bed.target_type == "lab":
                remove_orphan_labs()       # a killed worker's lab (its lease names a dead pid)
            target = self.bed.target_cls(**dict(self.bed.options))
            target.up()
            self.target = target
            self.description = describe_target(target)      # once per target, as a serial run does
            self.nproc = self.description.get("nproc")
            self.machine_id = host_identity(target, "server").machine_id
        recover_journal(self.store, self.target, allow_host_global=context.allow_host_global)
        key = (type(context.load).__name__, tuple(spec.id for spec in context.specs))
        if key not in self.checked:
            preflight(self.target, context.load, context.specs)
            self.checked.add(key)
        service = getattr(context.load, "service", None)
        if service and service not in self.services:
            self.target.start_service(service)
            self.services.add(service)

    def recover(self) -> None:
        """At worker start: remove a dead predecessor's lab and put back what its journal still holds
        (before any trial; a problem left here stops the first trial, which quarantines the testbed)."""
        if self.bed.target_type == "lab":
            remove_orphan_labs()
        if journal_path(self.bed.name).exists():
            with Store(journal_path(self.bed.name)) as store:
                if store.unrestored() or store.private_dirs_left():
                    restore_journal(store, target_spec=self.bed.spec(), remove_orphans=False)

    def checkpoint(self, name: str) -> None:
        """The runner's checkpoints: raise KeyboardInterrupt once the client asked this testbed to stop,
        so the trial in flight is recorded as interrupted and its knobs are put back."""
        if self.stop.is_set() and name in ("begin", "before_apply", "after_apply", "before_measure",
                                           "after_measure"):
            raise KeyboardInterrupt

    # ---- one trial --------------------------------------------------------------------------------

    def run(self, request: TrialRequest) -> TrialReply:
        """Run one trial (measured again while other processes were busy, per the busy rule) and return
        its records; a testbed that cannot run it says so instead (``testbed_fault``)."""
        reply = TrialReply(self.bed.name)
        context = request.context
        if self.stop.is_set():
            reply.error, reply.interrupted = "the study was stopped before this trial began", True
            return reply
        try:
            self.ensure_up(context)
        except Exception as exc:  # noqa: BLE001 - reported to the client, which quarantines the testbed
            why = str(exc) if isinstance(exc, (TunelabError, OSError)) else f"unexpected {type(exc).__name__}: {exc}"
            reply.error, reply.testbed_fault = f"testbed {self.bed.name} cannot run trials: {why}", True
            self.close()
            return reply
        reply.machine_id, reply.nproc = self.machine_id, self.nproc
        assert self.store is not None and self.target is not None
        before = self.store.last_trial_id()
        provenance = {**dict(context.provenance), "target": self.description, "testbed": self.bed.name}
        summary = RunSummary(study=context.study, store_path=self.store.path, planned=1)
        try:
            self.target.reset()
            if hasattr(context.load, "private_dirs"):   # journalled here: a killed worker's goes when it restarts
                context.load.private_dirs = StorePrivateDirs(self.store, self.target)

            def measure(trial_provenance: Mapping[str, Any]) -> Any:
                return run_trial(self.target, context.load, context.specs, request.config, request.run_key,
                                 context.phase, self.store, context.warmup_s, context.measure_s,
                                 load_settings=request.settings, plan_info=request.info,
                                 allow_host_global=context.allow_host_global, provenance=trial_provenance,
                                 checkpoint=self.checkpoint)

            repeat_while_busy(measure(provenance), measure, self.target, self.store, provenance, context.busy,
                              context.machine_cpu_s(self.nproc), summary)
        except KeyboardInterrupt:
            reply.interrupted = True
            reply.error = "interrupted: the study was stopped (Ctrl-C); the trial was recorded and restored"
        except TunelabError as exc:                        # refused before anything was written
            reply.error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 - a worker must answer, never die with the trial
            reply.error = f"unexpected {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
        finally:            # each task brings its own copy of the load: its private directory goes with the trial
            cleanup_load(context.load, self.target)
        reply.records = self.store.trial_records(after_trial_id=before)
        reply.repeats, reply.repeated = summary.repeats, summary.repeated
        self.trials_run += 1
        if self.trials_run % PRUNE_EVERY == 0:
            self.store.forget_trials(KEEP_TRIALS)
        return reply

    def close(self) -> None:
        """Take the target down (a lab's namespaces go) and close the testbed's store."""
        target, self.target = self.target, None
        self.services.clear()
        self.checked.clear()
        try:
            if target is not None:
                target.down()
        finally:
            if self.store is not None:
                self.store.close()
                self.store = None


class TestbedPlugin(WorkerPlugin):
    """Gives each worker its testbed: ``testbeds`` maps a worker's name to its :class:`BedSpec`.

    A worker whose name is not in the map takes no testbed (its tasks answer with an error).
    """

    __test__ = False   # not a pytest test class, whatever its name says

    idempotent = False

    def __init__(self, testbeds: Mapping[str, BedSpec]) -> None:
        self.testbeds = dict(testbeds)
        self.runtime: TestbedRuntime | None = None

    def setup(self, worker: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        bed = self.testbeds.get(str(worker.name))
        self.runtime = TestbedRuntime(bed) if bed is not None else None
        executor = getattr(worker, "executors", {}).get("default")
        if self.runtime is not None and executor is not None:
            executor.submit(_quietly, self.runtime.recover)      # in the task thread, before any trial

    def teardown(self, worker: Any) -> None:
        """Take the testbed down in the worker's task thread (where its store and target live)."""
        if self.runtime is None:
            return
        executor = getattr(worker, "executors", {}).get("default")
        if executor is None:
            self.runtime.close()
        else:
            executor.submit(self.runtime.close).result(timeout=TEARDOWN_TIMEOUT_S)


def _quietly(step: Any) -> None:
    """Run a start-up step; its failure shows again, as the testbed's error, at its first trial."""
    try:
        step()
    except Exception:  # noqa: BLE001 - ensure_up repeats the recovery and reports what stops it
        pass


def _runtime() -> tuple[Any, TestbedRuntime | None]:
    worker = get_worker()
    plugin = worker.plugins.get(PLUGIN_NAME)
    return worker, getattr(plugin, "runtime", None)


def run_on_testbed(request: TrialRequest | Sequence[TrialRequest]) -> TrialReply:
    """The Dask task: run ``request`` on this worker's testbed (one at a time: resource ``testbed=1``).

    A sequence of requests (a confirmation block) runs in order on this one testbed; the reply holds
    every trial's records and stops at the first error.
    """
    worker, runtime = _runtime()
    if runtime is None:
        return TrialReply(None, error=f"Dask worker {worker.name!r} has no testbed; start it with "
                                      "`dask worker ... --name TESTBED --nthreads 1 --resources testbed=1`",
                          testbed_fault=True)
    if isinstance(request, TrialRequest):
        return runtime.run(request)
    reply = TrialReply(runtime.bed.name)
    for one in request:
        part = runtime.run(one)
        reply.records += part.records
        reply.repeats += part.repeats
        reply.repeated += part.repeated
        reply.machine_id, reply.nproc = part.machine_id, part.nproc
        if part.error:
            reply.error, reply.testbed_fault, reply.interrupted = part.error, part.testbed_fault, part.interrupted
            break
    return reply


def interrupt_testbed(stop: bool = True) -> str | None:
    """Run on every worker (``client.run``): ask its testbed to stop (or, with ``stop=False``, to go
    on); the trial in flight is recorded as interrupted and restored at its next step."""
    _, runtime = _runtime()
    if runtime is None:
        return None
    (runtime.stop.set if stop else runtime.stop.clear)()
    return runtime.bed.name


__all__ = ["BedSpec", "KEEP_TRIALS", "PLUGIN_NAME", "RunContext", "TestbedPlugin", "TestbedRuntime", "TrialReply",
           "TrialRequest", "interrupt_testbed", "journal_path", "run_on_testbed"]
