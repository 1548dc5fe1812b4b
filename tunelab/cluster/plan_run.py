"""A design's plan run across many testbeds: :func:`run_design_on_testbeds`, the many-testbed
twin of :func:`tunelab.runner.run_design` (same checks, same resume, same summary)."""
from __future__ import annotations

import os
import time
from typing import Any

from tunelab.cluster.dispatch import Dispatcher
from tunelab.cluster.worker import RunContext
from tunelab.designs import Design
from tunelab.errors import SafetyError
from tunelab.runner.outcomes import RunSummary
from tunelab.progress import StudyProgress
from tunelab.runner.plans import prepare_run, run_provenance_of, start_progress_round
from tunelab.store import Store


def run_design_on_testbeds(design: Design, dispatcher: Dispatcher, store: Store, *,
                           tracker: StudyProgress | None = None, **request: Any) -> RunSummary:
    """Run every planned trial of ``design`` on the dispatcher's testbeds, recording into ``store``.

    Everything is checked before the first trial, as :func:`~tunelab.runner.run_design` checks it
    (values, host-global knobs, profiles); trials already done are skipped, whichever testbed ran
    them; the rest go out in ``run_order``, one per free testbed. ``request``: the fields of
    :class:`tunelab.runner.RunRequest`, by keyword. With a ``tracker`` (:class:`tunelab.progress.StudyProgress`) the
    plan is one round of the study's progress; otherwise the dispatcher shows a bar of its own. Each testbed checks its knobs and
    tools before its first trial and puts back what a crashed worker of it left changed.
    """
    started = time.perf_counter()
    setup = prepare_run(design, store, **request)
    if store.unrestored():
        study = store.study.name if store.study else store.path
        raise SafetyError(f"the study's store journals knob changes of a crashed single-target run that were never "
                          f"put back; run `tunelab restore {study}` first, then run on the testbeds")
    summary = RunSummary(study=setup.study, store_path=store.path, planned=len(setup.rows),
                         skipped=len(setup.rows) - len(setup.todo))
    description = {"target": "testbeds", "testbeds": [bed.name for bed in dispatcher.session.beds],
                   "scheduler": dispatcher.session.scheduler or "LocalCluster", "nproc": os.cpu_count()}
    store.begin_run(description)
    context = RunContext(study=setup.study, phase=setup.phase, specs=setup.specs, load=setup.load,
                         warmup_s=setup.warmup_s, measure_s=setup.measure_s,
                         allow_host_global=setup.allow_host_global,
                         provenance=run_provenance_of(store, setup.load, description), busy=setup.busy)
    trials = [(key, config, info, setup.settings_for(key, info)) for key, config, info in setup.todo]
    if tracker is not None:
        start_progress_round(tracker, store, setup)
    try:
        if trials:
            dispatcher.run(context, trials, summary, bar_total=len(setup.rows), bar_initial=summary.skipped,
                           tracker=tracker)
    except BaseException:
        if tracker is not None:
            tracker.end_round(failing=True)
        raise
    finally:
        summary.wall_s = time.perf_counter() - started
    if tracker is not None:
        tracker.end_round()
    return summary

__all__ = ["run_design_on_testbeds"]
