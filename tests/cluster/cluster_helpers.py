"""Shared by the many-testbed tests (imported by path, like tests/runner/runner_fakes.py): SIGKILL a testbed's Dask worker at a chosen moment."""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Callable

from tunelab.cluster import TestbedCluster, journal_path
from tunelab.errors import StoreError
from tunelab.store import Store


class WorkerKiller(threading.Thread):
    """Watches ``testbed``'s own store and SIGKILLs its worker process once ``ready(store)`` holds
    (e.g. a trial is running); ``killed`` holds the pid when it did, empty if it never did."""

    def __init__(self, cluster: TestbedCluster, testbed: str, ready: Callable[[Store], bool],
                 timeout_s: float = 60.0) -> None:
        super().__init__(daemon=True)
        pids = cluster.client.run(os.getpid)                   # worker address -> pid
        names = {addr: w["name"] for addr, w in cluster.client.scheduler_info(n_workers=-1)["workers"].items()}
        self.pid = next(pid for addr, pid in pids.items() if str(names[addr]) == str(cluster.worker_of[testbed]))
        self.testbed, self.ready, self.timeout_s = testbed, ready, timeout_s
        self.killed: list[int] = []

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            try:
                with Store(journal_path(self.testbed), readonly=True) as own:
                    now = self.ready(own)
            except StoreError:                   # not created yet, or still empty
                now = False
            if now:
                os.kill(self.pid, signal.SIGKILL)
                self.killed.append(self.pid)
                return
            time.sleep(0.01)
