"""Run leases: which study stores a run on this machine holds, so a crashed run is never missed.

A run takes a lease (``RUN_DIR/leases/<pid>.json``: pid, process start time, store path) before
it opens its store and gives it back when it ends, however it ends short of kill -9 or a power
cut. Every process a run starts carries the run's id in its environment, so the loads a killed
run left running are found and stopped. The next run on this machine, of ANY study, looks for
leases of dead processes: if such a
run's store still journals unrestored changes, a knob may still hold that crashed trial's value,
and a new snapshot would take it for the machine's original. The new run then stops and names
the store to restore. A dead lease whose store is clean is simply dropped.
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import psutil

from tunelab.errors import SafetyError, StoreError
from tunelab.journal import pending_changes
from tunelab.paths import RUN_DIR, private_dir
from tunelab.store import Store
from tunelab.targets.process import kill_marked, process_alive, run_id_of

LEASE_DIR = RUN_DIR / "leases"


@dataclass(frozen=True)
class Lease:
    """One run's claim: the process and the store it records into."""

    pid: int
    started: float
    store: str

    @property
    def run_id(self) -> str:
        """The marker the run put into the environment of the processes it started."""
        return run_id_of(self.pid, self.started)

    def alive(self) -> bool:
        return process_alive(self.pid, self.started)


def _read(path: Path) -> Lease | None:
    try:
        data = json.loads(path.read_text())
        return Lease(int(data["pid"]), float(data["started"]), str(data["store"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def dead_leases() -> list[tuple[Path, Lease]]:
    """Leases whose process is gone (unreadable lease files are ignored)."""
    if not LEASE_DIR.is_dir():
        return []
    found = []
    for path in sorted(LEASE_DIR.glob("*.json")):
        lease = _read(path)
        if lease is not None and not lease.alive():
            found.append((path, lease))
    return found


def sweep(own_store: str | os.PathLike[str] | None = None) -> list[str]:
    """Drop dead leases whose store holds no live change; describe the others (those left in place).

    The run's own store (``own_store``) is not reported: the runner itself puts back what a crashed
    run of the same study left (:func:`tunelab.runner.recover_journal`); its dead lease is dropped
    once that store is clean, like any other.
    """
    own = Path(own_store).resolve() if own_store is not None else None
    pending = []
    for path, lease in dead_leases():
        kill_marked(lease.run_id)     # loads a kill -9 left running (fio workers leave the group)
        try:
            with Store(lease.store, readonly=True) as store:
                changes = len(pending_changes(store))
        except StoreError:
            changes = 0               # the store is gone or unreadable: nothing we could restore
        if not changes:
            path.unlink(missing_ok=True)
        elif own is None or Path(lease.store) != own:
            pending.append(f"{lease.store} ({changes} change(s), run pid {lease.pid})")
    return pending


def check_crashed_runs(own_store: str | os.PathLike[str] | None = None) -> None:
    """Stop when a dead run's store still holds changes that may be live (see :func:`sweep`).

    Raises
    ------
    SafetyError
        naming each such store and the ``tunelab restore`` command that puts its knobs back.
    """
    pending = sweep(own_store)
    if pending:
        raise SafetyError("a crashed tunelab run left knobs changed on this machine: " + "; ".join(pending)
                          + ". A new snapshot would take those values for the machine's own, so nothing was "
                          "applied. Run `tunelab restore STORE` for each, then run again")


@contextmanager
def lease(store: str | os.PathLike[str]) -> Iterator[None]:
    """Hold a lease on ``store`` for the duration of a run (skipped when RUN_DIR is not ours to write)."""
    try:
        private_dir(RUN_DIR)
        private_dir(LEASE_DIR)
    except (OSError, SafetyError):
        yield                          # not root: no lab, no host knobs; nothing to protect across runs
        return
    me = psutil.Process()
    path = LEASE_DIR / f"{me.pid}.json"
    path.write_text(json.dumps(asdict(Lease(me.pid, me.create_time(), str(Path(store).resolve())))))
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
