"""The client side: hand planned trials to the testbeds' workers and record what comes back.

:class:`Dispatcher` keeps one trial in flight per healthy testbed and submits the next in plan
order as one finishes (Dask's ``as_completed`` pattern; Dask schedules each task on a free worker
with the ``testbed`` resource). Each reply's trial records go into the study's store here, the
only writer, with the testbed in the trial's plan bookkeeping.

Faults:

- **lost worker**: Dask itself runs a task again when its worker dies; a task that kills workers
  repeatedly (``KilledWorker``) is submitted once more, then recorded as failed. A trial is recorded
  only from the reply that came back, so it is never recorded twice.
- **failed trial**: while another testbed is healthy, a trial that failed is set aside (status
  ``interrupted``, kept in the store) and measured once more on another testbed. If it succeeds
  there, the failure was the first testbed's; :data:`QUARANTINE_AFTER` such failures in a row
  quarantine that testbed with one message, and the study goes on with the rest. If it fails
  again, the failure is the configuration's and is recorded as the run's outcome.
- **testbed that cannot run** (does not come up, lacks a knob or tool): quarantined at once; its
  trial goes back to the queue.
- **Ctrl-C**: dispatch stops, every testbed is asked to stop its trial (recorded as interrupted,
  knobs restored), those replies are recorded, then KeyboardInterrupt propagates.
"""
from __future__ import annotations

import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence


from tunelab.cluster.session import RESOURCE, TestbedCluster
from tunelab.cluster.worker import RunContext, TrialReply, TrialRequest, interrupt_testbed, run_on_testbed
from tunelab.errors import ClusterError, TargetError
from tunelab.model import TrialStatus
from tunelab.progress import StudyProgress, trial_progress
from tunelab.runner.outcomes import RunSummary, TrialOutcome
from tunelab.store import Store

#: confirmed testbed failures in a row (the trial then succeeded elsewhere) that quarantine a testbed
QUARANTINE_AFTER = 3
#: times a trial is submitted again after its worker was lost repeatedly (Dask's KilledWorker)
LOST_RESUBMITS = 1
#: seconds to wait, after Ctrl-C, for the testbeds to record and restore their trials in flight
STOP_GRACE_S = 60.0


@dataclass
class _Job:
    """One planned trial on its way: what to run, where it may not go, and why it is here again.

    ``group`` (a confirmation block) runs its trials in order on one testbed, in one task."""

    request: TrialRequest
    #: the testbed whose failure sent it here again (its result then judges that testbed)
    failed_on: str | None = None
    exclude: frozenset[str] = frozenset()
    lost: int = 0
    group: tuple[TrialRequest, ...] = ()

    @property
    def payload(self) -> TrialRequest | list[TrialRequest]:
        return list(self.group) if self.group else self.request


@dataclass
class TestbedState:
    """What the dispatcher knows of one testbed."""

    __test__ = False   # not a pytest test class, whatever its name says

    name: str
    busy: bool = False
    quarantined: str | None = None
    streak: int = 0
    trials: int = 0
    machine_id: str | None = None


@dataclass
class Dispatcher:
    """Runs trials across the testbeds of ``session`` and records them in ``store``.

    One dispatcher serves a whole study or search: quarantines and the shared-machine check carry
    over from one :meth:`run` call to the next.
    """

    session: TestbedCluster
    store: Store
    progress: bool = True
    quarantine_after: int = QUARANTINE_AFTER
    #: called with each line worth telling the user (quarantine, shared machine); default: stderr
    say: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    #: the testbeds file's shared-machine warnings already shown (a group they name is not warned again)
    shown_warnings: Sequence[str] = ()
    beds: dict[str, TestbedState] = field(default_factory=dict, init=False)
    warned_shared: set[frozenset[str]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.beds = {bed.name: TestbedState(bed.name) for bed in self.session.beds}

    # ---- the loop ---------------------------------------------------------------------------------

    def healthy(self) -> list[str]:
        return [name for name, bed in self.beds.items() if bed.quarantined is None]

    def run(self, context: RunContext, trials: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any],
                                                             Mapping[str, Any]]],
            summary: RunSummary, *, bar_total: int | None = None, bar_initial: int = 0,
            groups: Sequence[Any] | None = None, tracker: StudyProgress | None = None) -> dict[str, TrialOutcome]:
        """Run ``trials`` (run key, config, plan info, load settings), in order, on the healthy testbeds.

        ``groups`` (one label per trial) keeps trials with the same label together: they run in
        order on one testbed (a confirmation's ABBA block). Returns run key -> the outcome recorded
        for it; ``summary`` counts them. With a ``tracker`` (a study's progress, its round started by the caller)
        each outcome counts there as it is recorded; otherwise a bar of this call's own shows them.
        """
        from distributed import as_completed

        requests = [TrialRequest(context, key, dict(config), dict(info), dict(settings))
                    for key, config, info, settings in trials]
        queue = deque(_jobs(requests, groups))
        outcomes: dict[str, TrialOutcome] = {}
        in_flight: dict[Any, _Job] = {}
        bar = trial_progress(bar_total if bar_total is not None else len(queue), initial=bar_initial,
                             desc=context.study, enabled=self.progress and tracker is None)
        done = as_completed(with_results=True, raise_errors=False)    # each result comes with its future
        try:
            self._fill(queue, in_flight, done)
            self._show(bar, in_flight)
            for future, result in done:
                job = in_flight.pop(future)
                for outcome in self._handle(result, job, queue, summary, context):
                    outcomes[outcome.run_key] = outcome
                    bar.update(1)
                    if tracker is not None:
                        tracker.record(outcome.status, busy_repeats=summary.repeated)
                bar.set_postfix(busy_repeats=summary.repeated)
                if not self.healthy():
                    raise TargetError("every testbed is quarantined (see the messages above); nothing more can "
                                      "run. Fix the testbeds and run the study again: finished trials are kept")
                self._fill(queue, in_flight, done)
                self._show(bar, in_flight)
        except KeyboardInterrupt:
            self._stop(in_flight, summary, context)
            raise
        finally:
            bar.close()
        return outcomes

    def _fill(self, queue: deque[_Job], in_flight: dict[Any, _Job], done: Any) -> None:
        """Submit jobs in order while a healthy testbed has nothing in flight."""
        while queue and len(in_flight) < len(self.healthy()):
            job = queue.popleft()
            allowed = [name for name in self.healthy() if name not in job.exclude] or self.healthy()
            restrict = None if len(allowed) == len(self.beds) else self.session.worker_names(allowed)
            future = self.session.client.submit(run_on_testbed, job.payload, resources={RESOURCE: 1},
                                                workers=restrict, allow_other_workers=False, pure=False)
            in_flight[future] = job
            done.add(future)

    def _show(self, bar: Any, in_flight: Mapping[Any, _Job]) -> None:
        healthy = len(self.healthy())
        busy = min(len(in_flight), healthy)
        bar.set_postfix(busy=busy, idle=healthy - busy, quarantined=len(self.beds) - healthy, refresh=True)

    # ---- one reply ----------------------------------------------------------------------------------

    def _handle(self, reply: TrialReply | BaseException, job: _Job, queue: deque[_Job], summary: RunSummary,
                context: RunContext) -> list[TrialOutcome]:
        """Record a task's reply; requeue what must run again. Returns the runs' outcomes.

        ``reply`` is the exception when the task itself was lost (KilledWorker, a cancelled task)."""
        if isinstance(reply, BaseException):
            return self._lost(job, queue, summary, f"{type(reply).__name__}: {reply}")
        bed = self.beds.get(reply.testbed or "")
        if bed is not None:
            bed.trials += 1
            self._note_machine(bed, reply.machine_id)
        if reply.testbed is None:       # a worker of the cluster that drives no testbed took the task
            raise ClusterError(reply.error or "a Dask worker without a testbed took a trial")
        if reply.testbed_fault:
            self._quarantine(reply.testbed, reply.error or "it cannot run trials")
            queue.appendleft(job)
            return []
        summary.repeats += reply.repeats
        summary.repeated += reply.repeated
        ids = [self.store.add_trial_record(record, {"testbed": reply.testbed}) for record in reply.records]
        if job.group:
            return self._group_outcomes(job, reply, ids, summary, context)
        last = reply.records[-1] if reply.records else None
        if last is None or last["run_key"] != job.request.run_key:
            if reply.interrupted:
                return []
            return self._lost(job, queue, summary, reply.error or "the testbed sent no trial back")
        outcome = _outcome(ids[-1], last)
        if outcome.status == TrialStatus.FAILED and self._run_elsewhere(job, reply.testbed):
            self.store.set_aside_trial(outcome.trial_id, f"failed on testbed {reply.testbed} ({outcome.reason}); "
                                       "measured again on another testbed", {"failed_on": reply.testbed},
                                       include_failed=True)
            queue.appendleft(_Job(job.request, failed_on=reply.testbed, exclude=job.exclude | {reply.testbed}))
            return []
        self._judge(job, bed, outcome)
        if outcome.status != TrialStatus.INTERRUPTED:
            summary.count(outcome, context.machine_cpu_s(reply.nproc))
        return [outcome]

    def _group_outcomes(self, job: _Job, reply: TrialReply, ids: list[int], summary: RunSummary,
                        context: RunContext) -> list[TrialOutcome]:
        """A group's outcomes: the last record of each run key; trials the reply lacks are failed."""
        last = {record["run_key"]: (trial_id, record) for trial_id, record in zip(ids, reply.records)}
        outcomes = []
        for request in job.group:
            if request.run_key in last:
                outcome = _outcome(*last[request.run_key])
            else:
                outcome = self._lost(_Job(request, lost=LOST_RESUBMITS), deque(), summary,
                                     reply.error or "the testbed sent no trial back")[0]
                outcomes.append(outcome)
                continue
            if outcome.status != TrialStatus.INTERRUPTED:
                summary.count(outcome, context.machine_cpu_s(reply.nproc))
            outcomes.append(outcome)
        return outcomes

    def _run_elsewhere(self, job: _Job, testbed: str | None) -> bool:
        """A failed trial runs once more elsewhere when it has not already, and another testbed is healthy."""
        return job.failed_on is None and any(name != testbed for name in self.healthy())

    def _judge(self, job: _Job, bed: TestbedState | None, outcome: TrialOutcome) -> None:
        """Streaks: success clears a testbed's; a rerun that succeeded confirms the first testbed failed."""
        if outcome.status == TrialStatus.FAILED:
            return
        if bed is not None:
            bed.streak = 0
        if job.failed_on is not None and job.failed_on in self.beds:
            origin = self.beds[job.failed_on]
            origin.streak += 1
            if origin.streak >= self.quarantine_after and origin.quarantined is None:
                self._quarantine(origin.name, f"{origin.streak} trials in a row failed there and then succeeded on "
                                              "another testbed")

    def _lost(self, job: _Job, queue: deque[_Job], summary: RunSummary, why: str) -> list[TrialOutcome]:
        """A trial whose worker was lost: submit it again (once), then record it as failed."""
        if job.lost < LOST_RESUBMITS:
            queue.appendleft(_Job(job.request, job.failed_on, job.exclude, job.lost + 1, job.group))
            return []
        request = job.request
        trial_id = self.store.begin_trial(request.run_key, request.context.phase, dict(request.config),
                                          plan=dict(request.info))
        reason = f"its Dask worker was lost {job.lost + 1} times ({why}); see the testbeds' messages"
        self.store.finish_trial(trial_id, TrialStatus.FAILED, reason, {}, {})
        outcome = TrialOutcome(trial_id, request.run_key, TrialStatus.FAILED, reason, {}, {}, {}, False)
        summary.count(outcome)
        return [outcome]

    def _quarantine(self, name: str | None, why: str) -> None:
        if name not in self.beds or self.beds[name].quarantined is not None:
            return
        self.beds[name].quarantined = why
        left = len(self.healthy())
        self.say(f"testbed {name} quarantined: {why}. The study goes on with {left} other testbed(s); "
                 f"fix it, then `tunelab restore --testbeds FILE` and run again to use it")

    def _note_machine(self, bed: TestbedState, machine_id: str | None) -> None:
        """Warn once when two testbeds turn out to be the same machine (they share its CPUs)."""
        if not machine_id or bed.machine_id == machine_id:
            bed.machine_id = machine_id
            return
        bed.machine_id = machine_id
        same = frozenset(name for name, other in self.beds.items() if other.machine_id == machine_id)
        shown = any(all(name in line for name in same) for line in self.shown_warnings)
        if len(same) > 1 and same not in self.warned_shared and not shown:
            self.warned_shared.add(same)
            self.say(f"warning: testbeds {', '.join(sorted(same))} are the same machine (machine id "
                     f"{machine_id[:12]}); they share its CPUs, so their trials disturb each other's measurements")

    # ---- Ctrl-C -----------------------------------------------------------------------------------

    def _stop(self, in_flight: dict[Any, _Job], summary: RunSummary, context: RunContext) -> None:
        """Stop dispatch: every testbed records its trial in flight as interrupted and restores it; record
        those replies (a second Ctrl-C skips the wait: the testbeds' own journals keep what is left)."""
        from distributed import wait

        self.say(f"stopping: {len(in_flight)} trial(s) in flight are recorded as interrupted and their knobs put back")
        try:
            self.session.client.run(interrupt_testbed, True)
            finished = wait(list(in_flight), timeout=STOP_GRACE_S + context.warmup_s + context.measure_s)
        except Exception:  # noqa: BLE001 - a timeout or a cluster going down: the journals keep the rest
            return
        for future in finished.done:
            in_flight.pop(future)
            try:
                reply = future.result()
            except Exception:  # noqa: BLE001
                continue
            for record in reply.records:
                self.store.add_trial_record(record, {"testbed": reply.testbed})
                summary.interrupted += record.get("status") == TrialStatus.INTERRUPTED
        for future in in_flight:
            future.cancel()


def _jobs(requests: Sequence[TrialRequest], groups: Sequence[Any] | None) -> list[_Job]:
    """One job per request, or with ``groups`` one per label (its requests in order), in first-seen order."""
    if groups is None:
        return [_Job(request) for request in requests]
    if len(groups) != len(requests):
        raise ValueError(f"{len(groups)} group labels for {len(requests)} trials")
    grouped: dict[Any, list[TrialRequest]] = {}
    for label, request in zip(groups, requests):
        grouped.setdefault(label, []).append(request)
    return [_Job(members[0], group=tuple(members)) for members in grouped.values()]


def _outcome(trial_id: int, record: Mapping[str, Any]) -> TrialOutcome:
    """A :class:`~tunelab.runner.TrialOutcome` of a trial record as a worker sent it."""
    import json

    def decoded(column: str) -> dict[str, Any]:
        return dict(json.loads(record[column]) if record.get(column) else {})

    return TrialOutcome(trial_id, record["run_key"], record["status"], record.get("reason"), decoded("knobs_read"),
                        {k: float("nan") if v is None else float(v) for k, v in decoded("metrics").items()},
                        decoded("timings"), True, record.get("foreign_cpu_s"))


__all__ = ["Dispatcher", "LOST_RESUBMITS", "QUARANTINE_AFTER", "STOP_GRACE_S", "TestbedState"]
