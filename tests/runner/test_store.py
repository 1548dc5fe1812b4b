"""The trial store: round trip, tidy frame, atomicity, locking, journal, design-hash guard."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from tunelab.errors import StoreError
from tunelab.model import KnobId, knob_id
from tunelab.store import TIDY_COLUMNS, Store


def _record(store: Store, run_key: str, status: str = "ok", planned: int = 128, read: int = 128,
            qps: float = 1000.0, reason: str | None = None, run_id: int = 0) -> int:
    tid = store.begin_trial(run_key, "screen", {"net.core.somaxconn": planned, "tcp_rmem": (4096, 87380, 6291456)},
                            plan={"run_id": run_id, "config_id": 1, "block": 0, "replicate": 0, "run_order": run_id,
                                  "is_baseline": False, "varied_knob": "net.core.somaxconn"})
    store.finish_trial(tid, status, reason, {"net.core.somaxconn": read, "tcp_rmem": (4096, 87380, 6291456)},
                       {"qps": qps, "latency_mean_ms": 2.5}, pd.DataFrame({"t_s": [0, 1], "qps": [qps - 1, qps + 1]}),
                       {"apply": 0.001, "load": 3.0}, 0.25, {"target": {"kernel": "6.1"}})
    return tid


def test_store_uses_wal_and_full_sync(store: Store) -> None:
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_trial_round_trip_keeps_every_field(store: Store) -> None:
    tid = _record(store, "screen:0", qps=1234.5)
    row = store.trials("screen").set_index("trial_id").loc[tid]
    assert row["status"] == "ok" and row["phase"] == "screen" and row["run_key"] == "screen:0"
    assert row["config"] == {"net.core.somaxconn": 128, "tcp_rmem": [4096, 87380, 6291456]}
    assert row["metrics"] == {"qps": 1234.5, "latency_mean_ms": 2.5}
    assert row["timings"] == {"apply": 0.001, "load": 3.0}
    assert row["foreign_cpu_s"] == 0.25
    assert row["provenance"] == {"target": {"kernel": "6.1"}}
    assert store.series(tid).to_dict("list") == {"t_s": [0, 1], "qps": [1233.5, 1235.5]}
    assert store.study.name == "fake-study" and store.study.target_spec == {"type": "file-fake", "options": {}}


def test_tidy_has_contract_columns_and_read_back_values(store: Store) -> None:
    _record(store, "screen:0", planned=4096, read=2048, qps=900.0, run_id=0)   # the kernel capped the value
    _record(store, "screen:1", status="flagged", reason="low rate", qps=10.0, run_id=1)
    _record(store, "screen:2", status="failed", reason="dnsperf crashed", qps=float("nan"), run_id=2)
    tidy = store.tidy()
    assert list(tidy.columns) == TIDY_COLUMNS + ["net.core.somaxconn", "tcp_rmem", "qps", "latency_mean_ms"]
    assert tidy["run_id"].tolist() == [0]
    assert tidy["net.core.somaxconn"].tolist() == [2048]          # as read back, not as planned
    assert tidy["tcp_rmem"].tolist() == [(4096, 87380, 6291456)]  # triplets come back hashable
    assert tidy["qps"].dtype == "float64" and tidy["duration_s"].iloc[0] >= 0
    assert str(tidy["started_at"].dt.tz) == "UTC"
    with_flagged = store.tidy(include_flagged=True)
    assert with_flagged["status"].tolist() == ["ok", "flagged"]
    assert store.tidy(phase="refine").empty and list(store.tidy(phase="refine").columns)[:len(TIDY_COLUMNS)] == TIDY_COLUMNS


def test_non_ok_trial_needs_a_reason_and_bad_status_changes_nothing(store: Store) -> None:
    tid = store.begin_trial("screen:0", "screen", {"k": 1})
    with pytest.raises(StoreError, match="needs a reason"):
        store.finish_trial(tid, "failed", None, {}, {})
    with pytest.raises(StoreError, match="not one of"):
        store.finish_trial(tid, "done", "x", {}, {})
    assert store.trials()["status"].tolist() == ["running"]
    store.finish_trial(tid, "ok", None, {"k": 1}, {"qps": 1.0})
    with pytest.raises(StoreError, match="finished already"):
        store.finish_trial(tid, "ok", None, {"k": 1}, {"qps": 2.0})
    assert store.trials()["metrics"].tolist() == [{"qps": 1.0}]


def test_completed_run_keys_counts_outcomes_not_interruptions(store: Store) -> None:
    _record(store, "screen:0")
    _record(store, "screen:1", status="failed", reason="x")
    tid = store.begin_trial("screen:2", "screen", {"k": 1})
    store.finish_trial(tid, "interrupted", "Ctrl-C", {}, {})
    store.begin_trial("screen:3", "screen", {"k": 1})  # still running
    assert store.completed_run_keys("screen") == {"screen:0", "screen:1"}
    assert store.completed_run_keys("refine") == set()


def test_other_design_hash_is_refused_with_the_fix(store: Store, tmp_path: Path) -> None:
    path = store.path
    _record(store, "screen:0")
    store.close()
    with pytest.raises(StoreError, match="Rename the study.*delete"):
        Store.open(path, study="fake-study", design_hash="hash-2", design_text="")
    Store.open(path, study="fake-study", design_hash="hash-1", design_text="").close()


def test_a_store_with_nothing_recorded_is_taken_over_by_the_corrected_design(store: Store) -> None:
    # a design that `run` refused before its first trial must not block the corrected design
    path = store.path
    store.close()
    with Store.open(path, study="fake-study", design_hash="hash-2", design_text="fixed") as reopened:
        assert reopened.study.design_hash == "hash-2" and reopened.study.design_text == "fixed"


def test_second_writer_is_locked_out_but_readers_are_not(store: Store) -> None:
    with pytest.raises(StoreError, match="in use by another tunelab process"):
        Store(store.path)
    _record(store, "screen:0")
    with Store(store.path, readonly=True) as reader:
        assert len(reader.tidy()) == 1
        with pytest.raises(StoreError, match="read-only"):
            reader.begin_trial("screen:1", "screen", {})


def test_missing_or_corrupt_store_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no trial store"):
        Store(tmp_path / "nope.sqlite")
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a tunelab store"):
        Store(bad)
    assert bad.read_bytes() == b"this is not sqlite" * 100   # never turned into a store


def test_journal_lists_unrestored_newest_first(store: Store) -> None:
    tid = store.begin_trial("screen:0", "screen", {})
    first = store.journal_apply(tid, "server", "net.core.somaxconn", None, "4096", "16")
    second = store.journal_apply(tid, "client", "link.mtu[veth0]@client", "veth0", "1500", "9000")
    assert [e.entry_id for e in store.unrestored()] == [second, first]
    assert store.unrestored()[0].knob_name == "link.mtu" and store.unrestored()[0].device == "veth0"
    store.journal_restored(second)
    assert [e.entry_id for e in store.unrestored()] == [first]
    assert store.journal().set_index("entry_id").loc[second, "state"] == "restored"


_CRASH_BETWEEN_BEGIN_AND_FINISH = textwrap.dedent("""
    import os, signal, sys
    from tunelab.store import Store
    store = Store.open(sys.argv[1], study="fake-study", design_hash="hash-1", design_text="")
    done = store.begin_trial("screen:0", "screen", {"k": 1})
    store.finish_trial(done, "ok", None, {"k": 1}, {"qps": 1.0})
    store.begin_trial("screen:1", "screen", {"k": 2})
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_crash_between_begin_and_finish_leaves_interrupted_not_ok(tmp_path: Path) -> None:
    path = tmp_path / "fake-study.sqlite"
    proc = subprocess.run([sys.executable, "-c", _CRASH_BETWEEN_BEGIN_AND_FINISH, str(path)], capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    raw = sqlite3.connect(path).execute("SELECT run_key, status FROM trials ORDER BY trial_id").fetchall()
    assert raw == [("screen:0", "ok"), ("screen:1", "running")]   # the lock died with the process
    with Store.open(path, study="fake-study", design_hash="hash-1", design_text="") as store:
        trials = store.trials()
        assert trials["status"].tolist() == ["ok", "interrupted"]
        assert "died" in trials["reason"].iloc[1]
        assert store.completed_run_keys("screen") == {"screen:0"}
        assert store.tidy()["trial_id"].tolist() == [int(trials["trial_id"].iloc[0])]


@pytest.mark.parametrize(("name", "host", "device"), [
    ("net.core.somaxconn", "server", None), ("net.ipv4.tcp_rmem", "client", None),
    ("block.queue.scheduler", "server", "@disk"), ("link.mtu", "client", "veth0"),
])
def test_knob_id_round_trips(name: str, host: str, device: str | None) -> None:
    assert KnobId.parse(knob_id(name, host, device)) == KnobId(name, host, device)


def test_unknown_phase_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="unknown phase"):
        store.begin_trial("x:0", "warmup", {})
    assert os.path.exists(store.path)
