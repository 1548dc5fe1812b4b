"""One study on many testbeds at once, on dask.distributed.

- :mod:`~tunelab.cluster.session`: :class:`TestbedCluster`, a LocalCluster with one worker per
  testbed (or an existing scheduler's workers named after them);
- :mod:`~tunelab.cluster.worker`: what a worker does: its testbed's target, its own journal store,
  one whole trial per task (:func:`run_on_testbed`);
- :mod:`~tunelab.cluster.dispatch`: :class:`Dispatcher`, the client's loop: trials out in plan order,
  records into the study's store (the only writer), lost workers, failing testbeds, Ctrl-C;
- :mod:`~tunelab.cluster.plan_run`: :func:`run_design_on_testbeds`, a design's plan across the testbeds.

See docs/scale-out.md.
"""
from tunelab.cluster.dispatch import QUARANTINE_AFTER, Dispatcher, TestbedState
from tunelab.cluster.session import RESOURCE, ClusterError, TestbedCluster, bed_specs
from tunelab.cluster.plan_run import run_design_on_testbeds
from tunelab.cluster.worker import BedSpec, RunContext, TrialReply, TrialRequest, journal_path

__all__ = ["BedSpec", "ClusterError", "Dispatcher", "QUARANTINE_AFTER", "RESOURCE", "RunContext", "TestbedCluster",
           "TestbedState", "TrialReply", "TrialRequest", "bed_specs", "journal_path", "run_design_on_testbeds"]
