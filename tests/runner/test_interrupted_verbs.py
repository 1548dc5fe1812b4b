"""Every verb has one owner (:mod:`tunelab.run_owner`): SIGTERM to ``tunelab validate`` and ``tunelab refine``
mid-trial, on a real target, puts the knob back, says so in one line and exits 130 (as ``tunelab run`` does,
tests/hostile/test_kill_points.py), with the store's journal closed and no private directory of the load left.

* validate on the lab (dnsperf against the lab's DNS server, somaxconn 16 vs 4096 under ``overload``): the
  lab's namespaces go with the run, so "the knob back" is the journal's word (an entry is marked restored only
  after its old value was written back and read back); the dnsperf directories are found by the store's
  ``load_files`` rows (journalled before anything is copied there), never by counting /tmp;
* refine with the ``local`` target inside a private network namespace made here (fio on a small file,
  ``tcp_fin_timeout``): the namespace outlives the run, so the knob is read back after it exits.

Only states are asserted (exit status, lines, knob values, journal, files), never a metric or a verdict.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tunelab import journal
from tunelab.paths import SCRATCH_DIR
from tunelab.store import Store
from tunelab.targets import lab as lab_module

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.lab


def _tools(*names: str) -> None:
    for name in names:
        if shutil.which(name) is None:
            pytest.skip(f"needs {name}")


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting until {what}")


def sysctl_in(netns: str, name: str) -> str | None:
    """``name`` inside the network namespace ``netns`` (None when the namespace is gone)."""
    # nsenter and cat: no mount namespace to set up (``ip netns exec`` remounts /sys), so a poll stays quick
    proc = subprocess.run(["nsenter", f"--net=/run/netns/{netns}", "cat", f"/proc/sys/{name.replace('.', '/')}"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


class Verb:
    """A ``tunelab`` verb running in a child process (optionally inside a network namespace), its output in files."""

    def __init__(self, tmp_path: Path, argv: list[str], netns: str | None = None) -> None:
        self.err_path = tmp_path / "stderr.txt"
        command = [sys.executable, "-m", "tunelab", *argv]
        if netns:                 # nsenter execs in place (``ip netns exec`` forks): the signal reaches tunelab
            command = ["nsenter", f"--net=/run/netns/{netns}", *command]
        with open(tmp_path / "stdout.txt", "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(command, cwd=tmp_path, stdout=out, stderr=err,
                                         env={**os.environ, "PYTHONPATH": str(ROOT)})

    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self) -> int:
        """SIGTERM, then the exit status (SIGKILL after 60 s: the test then fails on the status)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return -signal.SIGKILL

    def stop(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(10)

    def interrupted_lines(self) -> list[str]:
        return [line for line in self.err_path.read_text().splitlines() if "interrupted" in line]


def check_journal_closed(path: Path) -> None:
    with Store(path, readonly=True) as store:
        assert not store.journal().empty, "no knob was ever changed: the test sent SIGTERM too early"
        assert store.unrestored() == []                       # every change written back and read back
        assert store.private_dirs_left() == []


def load_dirs(path: Path) -> list[tuple[str, str]]:
    """Every private directory the run's load journalled, and its state."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return [(row[0], row[1]) for row in db.execute("SELECT path, state FROM load_files")]


# ---- validate on the lab --------------------------------------------------------------------------


def lab_of(pid: int) -> lab_module.LabState | None:
    return next((state for state in lab_module.list_states() if state.owner_pid == pid), None)


def lab_somaxconn(pid: int) -> str | None:
    state = lab_of(pid)
    return sysctl_in(state.namespaces["server"], "net.core.somaxconn") if state is not None else None


def test_sigterm_to_validate_on_the_lab_restores_and_says_so(tmp_path: Path) -> None:
    _tools("dnsperf", "nsd", "nsenter")
    store = tmp_path / "v.sqlite"
    verb = Verb(tmp_path, ["validate", "--target", "lab", "--load", "dnsperf", "--baseline", "net.core.somaxconn=4096",
                           "--candidate", "net.core.somaxconn=16", "--profile", "overload", "--warmup", "0.5",
                           "--measure", "2", "--blocks", "2", "--store", str(store)])
    try:
        wait_for(lambda: not verb.alive() or lab_somaxconn(verb.proc.pid) == "16", 90, "the candidate is live")
        assert verb.alive(), verb.err_path.read_text()
        status = verb.terminate()
    finally:
        verb.stop()
        journal.remove_orphan_labs()                        # only if the run died without tearing its lab down
        for path, _ in load_dirs(store) if store.exists() else []:
            shutil.rmtree(path, ignore_errors=True)
    assert status == 130, verb.err_path.read_text()
    assert verb.interrupted_lines() == ["tunelab: interrupted: restored net.core.somaxconn on server"], \
        verb.err_path.read_text()
    check_journal_closed(store)
    dirs = load_dirs(store)
    assert dirs and all(state == "removed" and "/tunelab-dnsperf." in path and not os.path.exists(path)
                        for path, state in dirs), dirs
    assert lab_of(verb.proc.pid) is None                    # the run took its lab down


# ---- refine with the local target in a private namespace -----------------------------------------

REFINE_DESIGN = """\
name: refine-sigterm
description: SIGTERM mid-refine on the local target in a private network namespace
target: {{type: local}}
load: {{generator: fio, profile: randread, settings: {{filename: {fio_file}, size: 4M, direct: false,
        ioengine: psync, iodepth: 1}}}}
warmup_s: 0
measure_s: 2
metrics:
  - {{name: iops, direction: maximize, sesoi_pct: 5}}
knobs:
  - {{name: net.ipv4.tcp_fin_timeout, host: server, levels: [10, 20, 30], baseline: 30}}
design: {{type: oat, replicates: 1, seed: 3}}
"""
#: a fresh namespace's value, outside the design's levels: any trial's value differs from it
ORIGINAL = "57"


@pytest.fixture
def fio_file() -> Iterator[Path]:
    """A 4 MiB file in a directory of its own under tunelab's scratch directory (the only place fio may read)."""
    folder = SCRATCH_DIR / f"sigterm-{secrets.token_hex(4)}"
    folder.mkdir(parents=True)
    try:
        (folder / "fio.dat").write_bytes(os.urandom(4 * 2**20))
        yield folder / "fio.dat"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def private_netns() -> Iterator[str]:
    _tools("ip", "nsenter", "fio")
    name = f"tlk-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "netns", "exec", name, "sysctl", "-qw", f"net.ipv4.tcp_fin_timeout={ORIGINAL}"],
                       check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)


def test_sigterm_to_refine_on_a_local_target_restores_and_says_so(tmp_path: Path, private_netns: str,
                                                                  fio_file: Path) -> None:
    host_before = Path("/proc/sys/net/ipv4/tcp_fin_timeout").read_text()
    design, store = tmp_path / "refine.yaml", tmp_path / "r.sqlite"
    design.write_text(textwrap.dedent(REFINE_DESIGN.format(fio_file=fio_file)))
    verb = Verb(tmp_path, ["refine", str(design), "--budget", "6", "--confirm-blocks", "0", "--store", str(store)],
                netns=private_netns)
    try:
        wait_for(lambda: not verb.alive() or sysctl_in(private_netns, "net.ipv4.tcp_fin_timeout") not in (ORIGINAL, None),
                 90, "a trial's value is live")
        assert verb.alive(), verb.err_path.read_text()
        status = verb.terminate()
    finally:
        verb.stop()
    assert status == 130, verb.err_path.read_text()
    assert verb.interrupted_lines() == ["tunelab: interrupted: restored net.ipv4.tcp_fin_timeout on server"], \
        verb.err_path.read_text()
    assert sysctl_in(private_netns, "net.ipv4.tcp_fin_timeout") == ORIGINAL      # the knob is back
    check_journal_closed(store)
    assert Path("/proc/sys/net/ipv4/tcp_fin_timeout").read_text() == host_before
