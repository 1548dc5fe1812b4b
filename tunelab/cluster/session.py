"""The Dask side: a cluster with one worker per testbed, started here or reached at a scheduler.

Without a scheduler address, :class:`TestbedCluster` starts a ``LocalCluster`` on this machine with
one single-threaded worker process per testbed (resource ``testbed=1``: a worker runs one trial at
a time, so two trials never share a testbed). With ``scheduler="tcp://HOST:8786"`` it uses an
existing cluster, whose workers must be named after the testbeds::

    dask scheduler                                   # on the coordinating machine
    dask worker tcp://HOST:8786 --name lab1 --nthreads 1 --resources testbed=1   # one per testbed

Either way every worker gets the :class:`~tunelab.cluster.worker.TestbedPlugin`, which tells it its
testbed; leaving the context takes every testbed down (labs are removed) and closes what it started.
"""
from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tunelab.cluster.worker import PLUGIN_NAME, BedSpec, TestbedPlugin
from tunelab.targets import check_target_spec
from tunelab.testbeds import Testbed
from tunelab.errors import ClusterError

#: the worker resource each trial takes (one per worker: a testbed runs one trial at a time)
RESOURCE = "testbed"
#: seconds to wait for the workers to join
JOIN_TIMEOUT_S = 120.0


def bed_specs(testbeds: Sequence[Testbed], design_target: Mapping[str, Any], *,
              allow_commands: bool = False) -> list[BedSpec]:
    """The :class:`BedSpec` of each testbed, with the design's target options as defaults
    (:meth:`Testbed.merged`), each checked as a design's target is (unknown options, commands)."""
    specs = []
    for bed in testbeds:
        merged = bed.merged(design_target)
        spec = merged.spec()
        cls = check_target_spec(spec, allow_commands=allow_commands)
        specs.append(BedSpec(merged.name, merged.type, spec["options"], cls))
    return specs


@dataclass
class TestbedCluster:
    """A Dask client whose workers drive ``beds``; use as a context manager.

    Parameters
    ----------
    beds : the testbeds (names unique)
    scheduler : ``tcp://HOST:PORT`` of an existing scheduler, or None to start a LocalCluster here
    """

    __test__ = False   # not a pytest test class, whatever its name says

    beds: Sequence[BedSpec]
    scheduler: str | None = None
    #: seconds to wait for the workers (default :data:`JOIN_TIMEOUT_S`, read when the cluster starts)
    join_timeout_s: float | None = None
    client: Any = field(default=None, init=False)
    cluster: Any = field(default=None, init=False)
    #: testbed name -> the Dask worker name that drives it
    worker_of: dict[str, Any] = field(default_factory=dict, init=False)

    def __enter__(self) -> "TestbedCluster":
        from distributed import Client, LocalCluster   # deferred: dask is only needed for many testbeds

        if self.join_timeout_s is None:
            self.join_timeout_s = JOIN_TIMEOUT_S
        names = [bed.name for bed in self.beds]
        if not names or len(set(names)) != len(names):
            raise ClusterError(f"a cluster needs testbeds with distinct names, got {names}")
        try:
            if self.scheduler is None:
                self.cluster = LocalCluster(n_workers=len(self.beds), threads_per_worker=1, processes=True,
                                            resources={RESOURCE: 1}, host="127.0.0.1",
                                            dashboard_address=":0",   # a free port (without bokeh: health routes only)
                                            silence_logs=logging.CRITICAL)
                self.client = Client(self.cluster)
                self.worker_of = {bed.name: index for index, bed in enumerate(self.beds)}
            else:
                self.client = Client(self.scheduler, timeout=f"{int(self.join_timeout_s)}s")
                self.worker_of = {bed.name: bed.name for bed in self.beds}
            by_worker = {str(self.worker_of[bed.name]): bed for bed in self.beds}
            self.client.register_plugin(TestbedPlugin(by_worker), name=PLUGIN_NAME)
            self._wait_for_workers()
        except ClusterError:
            self.close()
            raise
        except (OSError, TimeoutError) as exc:
            self.close()
            where = f"the scheduler at {self.scheduler}" if self.scheduler else "a local Dask cluster"
            raise ClusterError(f"could not start or reach {where}: {exc}; check the address and that "
                               "`dask scheduler` runs there") from None
        return self

    def _wait_for_workers(self) -> None:
        """Wait until a worker with the resource runs for every testbed; name the missing ones."""
        import time

        deadline = time.monotonic() + self.join_timeout_s
        while True:
            missing = self.missing_workers()
            if not missing:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"no Dask worker for testbed(s) {', '.join(missing)} after {self.join_timeout_s:.0f} s; start one "
                    f"per testbed: `dask worker {self.scheduler or 'SCHEDULER'} --name TESTBED --nthreads 1 "
                    f"--resources {RESOURCE}=1`")
            time.sleep(0.2)

    def missing_workers(self) -> list[str]:
        """Testbeds without a live worker (named for it, holding the ``testbed`` resource)."""
        info = self.client.scheduler_info(n_workers=-1)["workers"].values()
        present = {str(w.get("name")) for w in info if (w.get("resources") or {}).get(RESOURCE, 0) >= 1}
        return [bed for bed, worker in self.worker_of.items() if str(worker) not in present]

    def worker_names(self, testbeds: Sequence[str]) -> list[Any]:
        """The Dask worker names of ``testbeds`` (for a task's ``workers=`` restriction)."""
        return [self.worker_of[name] for name in testbeds]

    @property
    def dashboard_link(self) -> str | None:
        """The Dask dashboard's address, when one is served."""
        if self.client is None:
            return None
        try:
            link = self.client.dashboard_link
        except Exception:  # noqa: BLE001 - no dashboard (bokeh missing) is not an error
            return None
        return link if self.cluster is None or importlib.util.find_spec("bokeh") else None

    def close(self) -> None:
        """Take every testbed down (the plugin's teardown), then close the client and the local cluster."""
        client, cluster, self.client, self.cluster = self.client, self.cluster, None, None
        if client is not None:
            try:
                client.unregister_worker_plugin(PLUGIN_NAME)
            except Exception:  # noqa: BLE001 - a cluster that is already gone has nothing to take down
                pass
            client.close()
        if cluster is not None:
            cluster.close()

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["ClusterError", "JOIN_TIMEOUT_S", "RESOURCE", "TestbedCluster", "bed_specs"]
