"""Suite-wide guards: lab tests need root and iproute2, and no test may leave a lab behind."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))     # tests/*_helpers.py (browser_helpers)

# Each pytest-xdist worker keeps its run leases and lab states in a run directory of its own (set before tunelab is
# imported: tunelab.paths reads it once). A test that SIGKILLs a run leaves that run's lease and journal until it
# restores them, and meanwhile every tunelab run sharing the directory refuses to start, as it must on a real
# machine: a worker's tests must not meet another worker's crashes, nor take another worker's labs for orphans.
if os.environ.get("PYTEST_XDIST_WORKER") and "TUNELAB_RUN_DIR" not in os.environ:
    os.environ["TUNELAB_RUN_DIR"] = f"/run/tunelab-test-{os.environ['PYTEST_XDIST_WORKER']}"


def _tunelab_namespaces() -> set[str]:
    if shutil.which("ip") is None:
        return set()
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip() and line.split()[0].startswith("tl")}


_BEFORE: set[str] = set()


def _is_xdist_worker(config: pytest.Config) -> bool:
    """A pytest-xdist worker: the controller alone takes the namespace census, before the workers start and
    after they all end (a worker would take a namespace another worker is using for a leftover)."""
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_xdist_worker(session.config):
        _BEFORE.update(_tunelab_namespaces())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None
    if os.geteuid() != 0:
        reason = "lab tests need root (network namespaces)"
    elif shutil.which("ip") is None:
        reason = "lab tests need iproute2 (`ip`)"
    if reason:
        for item in items:
            if "lab" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


def _live_foreign_lab_namespaces() -> set[str]:
    """Namespaces of labs another live process owns (a concurrent session's): not ours to judge."""
    try:
        from tunelab.targets.lab import list_states
    except ImportError:
        return set()
    return {ns for state in list_states() if state.owner_pid != os.getpid() and not state.is_orphan()
            for ns in state.namespaces.values()}


def _other_pytest_sessions() -> list[int]:
    """Pids of pytest runs that are not this one, its workers or its parents (another checkout's suite): their
    namespaces are theirs, and which are is not knowable from here."""
    import psutil

    me = psutil.Process()
    ours = {me.pid, *(p.pid for p in me.parents()), *(p.pid for p in me.children(recursive=True))}
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.pid not in ours and any("pytest" in part for part in cmdline[:3]):
            found.append(proc.pid)
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _is_xdist_worker(session.config):
        return
    leftover = _tunelab_namespaces() - _BEFORE - _live_foreign_lab_namespaces()
    if leftover and (others := _other_pytest_sessions()):
        print(f"\nnote: network namespaces {', '.join(sorted(leftover))} appeared during this run, but other pytest "
              f"runs are going on (pids {', '.join(map(str, others))}): they may be theirs, so they are left alone")
        return
    if leftover:
        print(f"\nERROR: tests left network namespaces behind: {', '.join(sorted(leftover))}")
        for name in leftover:
            subprocess.run(["ip", "netns", "delete", name], check=False)
        session.exitstatus = 1


@pytest.fixture(scope="session")
def chromium() -> str:
    """The headless Chromium binary (browser tests are skipped without it)."""
    from browser_helpers import find_chromium

    path = find_chromium()
    if path is None:
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    return path
