"""SIGKILL the runner at every dangerous moment; restore must put every knob back and a
resumed run must neither lose nor repeat a trial."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from runner_fakes import INITIAL, FileTarget, make_knobs, oat_plan

from tunelab.journal import restore_journal
from tunelab.store import Store

DRIVER = Path(__file__).resolve().parent / "crash_driver.py"


def _drive(store: Path, root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DRIVER), str(store), str(root), *extra],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("kill_at", "leaves_changes"), [
    ("before_apply", False),   # snapshot taken, nothing written yet
    ("after_apply", True),     # knobs changed, not verified
    ("measuring", True),       # inside the load invocation
    ("after_measure", True),   # measured but not recorded
    ("restore", True),         # one knob put back, the others not
])
def test_sigkill_then_restore_and_resume(tmp_path: Path, kill_at: str, leaves_changes: bool) -> None:
    store_path, root = tmp_path / "data" / "fake-study.sqlite", tmp_path / "machine"
    machine = FileTarget(root)
    machine.seed(INITIAL)
    machine.seed(INITIAL, host="client")

    # the second trial; its restore step is the 3rd "restore" checkpoint (the first trial restores 2 knobs)
    occurrence = "3" if kill_at == "restore" else "2"
    crashed = _drive(store_path, root, "--kill-at", kill_at, "--occurrence", occurrence)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert (machine.values() != INITIAL) is leaves_changes  # the crash really left the machine changed (or not)

    with Store(store_path) as store:
        statuses = store.trials()["status"].tolist()
        # the trial in flight is interrupted, never ok; before "restore" it was not yet recorded
        assert statuses[-1] == ("ok" if kill_at == "restore" else "interrupted")
        assert statuses.count("ok") == (2 if kill_at == "restore" else 1)
        report = restore_journal(store, machine, knob_lookup=make_knobs())
        assert report.ok, report.lines()
        assert bool(report.restored) is leaves_changes
        assert store.unrestored() == []
    assert machine.values() == INITIAL and machine.values("client") == INITIAL

    resumed = _drive(store_path, root)
    assert resumed.returncode == 0, resumed.stderr
    with Store(store_path, readonly=True) as store:
        trials = store.trials()
    planned = {f"screen:{i}" for i in oat_plan()["run_id"]}
    ok = trials[trials["status"] == "ok"].groupby("run_key").size()
    assert set(ok.index) == planned and set(ok) == {1}   # nothing lost, nothing repeated
    assert set(trials["status"]) <= {"ok", "interrupted"}
    assert machine.values() == INITIAL
