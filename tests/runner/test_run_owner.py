"""The run's owner (:mod:`tunelab.run_owner`): run, refine and validate each enter it exactly once and open their
store through it once; interrupted, it says in one line what the run put back and what it left, and gives the
lease back. On the SYNTHETIC simulator target (no knob of this machine changes); the SIGTERM tests on real targets
are tests/runner/test_interrupted_verbs.py."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import tunelab
from tunelab import leases, run_owner
from tunelab.signals import RunInterrupted
from tunelab.store import HostIdentity, Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from simulator_helpers import simulator_design  # noqa: E402


@pytest.fixture
def entered(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the owner's housekeeping ran and a store was opened through it (no real lab is touched)."""
    counts = {"owner": 0, "store": 0}
    monkeypatch.setattr("tunelab.journal.remove_orphan_labs", lambda: [])
    housekeeping, open_store = run_owner._housekeeping, run_owner.RunOwner.open_store

    def counted_housekeeping(*args, **kwargs):
        counts["owner"] += 1
        return housekeeping(*args, **kwargs)

    def counted_open(self, **kwargs):
        counts["store"] += 1
        return open_store(self, **kwargs)

    monkeypatch.setattr(run_owner, "_housekeeping", counted_housekeeping)
    monkeypatch.setattr(run_owner.RunOwner, "open_store", counted_open)
    return counts


def test_run_refine_and_validate_each_enter_the_owner_once(tmp_path: Path, entered: dict[str, int]) -> None:
    design = tmp_path / "owned.yaml"
    design.write_text(simulator_design("owned", cv=0.01, replicates="1"))
    tunelab.run(design, store=tmp_path / "run.sqlite", progress=False)
    assert entered == {"owner": 1, "store": 1}
    tunelab.refine(design, budget=2, confirm_blocks=0, store=tmp_path / "refine.sqlite")
    assert entered == {"owner": 2, "store": 2}
    tunelab.validate("simulator", {"net.core.somaxconn": 16}, surface="simple", blocks=2,
                     store=tmp_path / "validate.sqlite")
    assert entered == {"owner": 3, "store": 3}


def _journal(store, knob_id: str, old: str, new: str) -> int:
    return store.journal_apply(None, "server", knob_id, None, old, new, HostIdentity(None, None))


def test_an_interrupt_says_what_was_restored_and_what_was_not(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tunelab.journal.remove_orphan_labs", lambda: [])
    path = tmp_path / "owned.sqlite"
    with pytest.raises(RunInterrupted) as caught:
        with run_owner.owned_run(path) as owner:
            store = owner.open_store(study="owned", design_hash="h", design_text="t",
                                     target_spec={"type": "simulator", "options": {}})
            store.journal_restored(_journal(store, "net.core.somaxconn", "4096", "16"))
            _journal(store, "net.ipv4.tcp_fin_timeout", "60", "10")
            raise KeyboardInterrupt
    assert str(caught.value) == ("interrupted: restored net.core.somaxconn on server; NOT restored "
                                 f"net.ipv4.tcp_fin_timeout on server: run `tunelab restore {path}`")
    assert not (leases.LEASE_DIR / f"{os.getpid()}.json").exists()          # the lease was given back


def test_an_interrupt_before_any_change_says_nothing_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tunelab.journal.remove_orphan_labs", lambda: [])
    with pytest.raises(RunInterrupted, match="^interrupted before the store opened: nothing was changed$"):
        with run_owner.owned_run(tmp_path / "never.sqlite"):
            raise KeyboardInterrupt
    assert not (tmp_path / "never.sqlite").exists()
    with pytest.raises(RunInterrupted, match="^interrupted: no knob had been changed$"):
        with run_owner.owned_run(tmp_path / "opened.sqlite") as owner:
            owner.open_store(study="opened", design_hash="h", design_text="t", target_spec={"type": "simulator"})
            raise KeyboardInterrupt


def test_the_load_files_a_run_left_on_this_machine_go_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a run cut short before the load's cleanup: its journalled directory here is removed and marked removed; one
    # journalled for another machine is left to `tunelab restore` there
    monkeypatch.setattr("tunelab.journal.remove_orphan_labs", lambda: [])
    here = HostIdentity(run_owner._this_machine_id(), None)
    if here.machine_id is None:
        pytest.skip("this machine has no /etc/machine-id")
    left = tmp_path / "tunelab-dnsperf.AbCdEfGh12"
    with pytest.raises(RunInterrupted):
        with run_owner.owned_run(tmp_path / "files.sqlite") as owner:
            store = owner.open_store(study="files", design_hash="h", design_text="t", target_spec={"type": "lab"})
            left.mkdir()
            (left / "queries").write_text("www.example.org. A\n")
            store.private_dir_made("client", str(left), here)
            store.private_dir_made("client", str(tmp_path / "tunelab-dnsperf.ElsewhereZ"), HostIdentity("0" * 32, None))
            raise KeyboardInterrupt
    assert not left.exists()
    with Store(tmp_path / "files.sqlite", readonly=True) as store:
        assert [item.path for item in store.private_dirs_left()] == [str(tmp_path / "tunelab-dnsperf.ElsewhereZ")]
