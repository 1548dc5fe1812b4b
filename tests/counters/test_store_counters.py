"""Counters in the store (schema 3): recorded with a trial, per second in the tidy frame, old stores still open."""
from __future__ import annotations

import contextlib

import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pytest

from tunelab.counters import CounterRequest, CounterSource
from tunelab.errors import StoreError
from tunelab.loads.base import Load, LoadResult, MetricInfo
from tunelab.runner.trials import run_trial
from tunelab.store import SCHEMA_VERSION, Store
from tunelab.targets.base import CommandResult, Target

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"


def new_store(tmp_path: Path) -> Store:
    return Store.open(tmp_path / "c.sqlite", study="c", design_hash="h", design_text="")


def record(store: Store, run_id: int, counters: Mapping[str, Any] | None) -> int:
    trial_id = store.begin_trial(f"screen:{run_id}", "screen", {"k": run_id}, plan={"run_id": run_id})
    store.finish_trial(trial_id, "ok", None, {"k": run_id}, {"qps": 100.0}, counters=counters)
    return trial_id


def test_counters_are_rates_per_second_in_the_tidy_frame(tmp_path):
    with new_store(tmp_path) as store:
        record(store, 0, {"window_s": 4.0, "deltas": {"TcpExt.ListenOverflows": 100.0, "Udp.InErrors": 0.0,
                                                       "client.Tcp.RetransSegs": 2.0, "proc.cpu_s": 3.0},
                          "problems": []})
        record(store, 1, {"window_s": 8.0, "deltas": {"TcpExt.ListenOverflows": 0.0, "Udp.InErrors": 0.0,
                                                       "client.Tcp.RetransSegs": 4.0, "proc.cpu_s": 2.0}})
        record(store, 2, None)                       # a trial without counters (e.g. before schema 3)
        tidy = store.tidy()
    counters = [c for c in tidy.columns if c.startswith("counter.")]
    # Udp.InErrors never moved: dropped; the others are sorted after the metrics
    assert counters == ["counter.TcpExt.ListenOverflows", "counter.client.Tcp.RetransSegs", "counter.proc.cpu_s"]
    assert list(tidy.columns).index("qps") < list(tidy.columns).index(counters[0])
    assert tidy["counter.TcpExt.ListenOverflows"].tolist()[:2] == [25.0, 0.0]
    assert tidy["counter.client.Tcp.RetransSegs"].tolist()[:2] == [0.5, 0.5]
    assert tidy["counter.proc.cpu_s"].tolist()[:2] == [0.75, 0.25]
    assert tidy[counters].iloc[2].isna().all()
    assert all(tidy[c].dtype == "float64" for c in counters)


@pytest.mark.parametrize("counters, message", [
    ({"window_s": 0, "deltas": {}}, "window_s"),
    ({"window_s": 2.0, "deltas": {"TcpExt.ListenOverflows": -1}}, "increase"),
    ({"window_s": 2.0, "deltas": {"tcp overflow": 1}}, "not a counter name"),
    ({"window_s": 2.0, "deltas": {}, "problems": [3]}, "list of texts"),
])
def test_bad_counters_are_refused_before_anything_is_recorded(tmp_path, counters, message):
    with new_store(tmp_path) as store:
        trial_id = store.begin_trial("screen:0", "screen", {"k": 1})
        with pytest.raises(StoreError, match=message):
            store.finish_trial(trial_id, "ok", None, {"k": 1}, {"qps": 1.0}, counters=counters)
        assert store.trials().iloc[0]["status"] == "running"


def test_counters_edited_in_the_file_are_refused_on_read(tmp_path):
    with new_store(tmp_path) as store:
        record(store, 0, {"window_s": 1.0, "deltas": {"Tcp.InSegs": 1.0}})
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute("""UPDATE trials SET counters = '{"window_s": 1, "deltas": {"Tcp.InSegs": "x"}}'""")
    with Store(tmp_path / "c.sqlite", readonly=True) as store, pytest.raises(StoreError, match="finite number"):
        store.tidy()


def _recorded_before_counters() -> list[Path]:
    """The shipped stores recorded before schema 3 (and the default study's 2026-11-24 recording in tests/data)."""
    candidates = [*EXAMPLES.glob("*.sqlite"), *(Path(__file__).resolve().parents[1] / "data").glob("*.sqlite")]
    old = []
    for path in sorted(candidates):
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)) as db:  # no -wal/-shm
            if db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                old.append(path)
    return old


@pytest.fixture(params=_recorded_before_counters(), ids=lambda path: path.name)
def old_store(request, tmp_path) -> Path:
    path = tmp_path / request.param.name
    shutil.copy(request.param, path)
    return path


def test_a_shipped_store_opens_read_only_unchanged_and_read_write_migrated(old_store):
    before = old_store.read_bytes()
    with sqlite3.connect(old_store) as db:
        assert "counters" not in {row[1] for row in db.execute("PRAGMA table_info(trials)")}
        old_version = db.execute("PRAGMA user_version").fetchone()[0]
    assert old_version < SCHEMA_VERSION == 3
    with Store(old_store, readonly=True) as store:
        tidy_ro = store.tidy()
        assert not [c for c in tidy_ro.columns if c.startswith("counter.")]
        assert store.trials()["counters"].isna().all()
    assert old_store.read_bytes() == before
    with Store(old_store) as store:
        pd.testing.assert_frame_equal(store.tidy(), tidy_ro)
        record(store, 10_000, {"window_s": 2.0, "deltas": {"TcpExt.ListenDrops": 6.0}})
        assert store.tidy()["counter.TcpExt.ListenDrops"].dropna().tolist() == [3.0]
    with sqlite3.connect(old_store) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert "counters" in {row[1] for row in db.execute("PRAGMA table_info(trials)")}


class CpuTicks(CounterSource):
    """The server's processes, 0.25 CPU seconds more at every read."""

    place = "server"

    def __init__(self) -> None:
        self.cpu = 0.0

    def read(self) -> dict[str, float]:
        self.cpu += 0.25
        return {"proc.cpu_s": self.cpu, "Tcp.InSegs": 7.0}


class CountingTarget(Target):
    """A target whose load takes 0.1 s and whose counters are :class:`CpuTicks`."""

    name = "counting-fake"

    def __init__(self) -> None:
        self.requests: list[CounterRequest] = []

    def read_text(self, host, path):
        return ""

    def write_text(self, host, path, text):
        return None

    def run(self, host, argv, timeout_s, cpu=None):
        time.sleep(0.1)
        return CommandResult(tuple(argv), 0, "ok", "", 0.1)

    def counter_sources(self, request):
        self.requests.append(request)
        return [CpuTicks()]


class AnsweringLoad(Load):
    name = "answering"
    service = "dns"
    metrics = {"qps": MetricInfo("1/s", "maximize"), "server_cpu_per_query": MetricInfo("us", "minimize")}
    server_cpu_metric = ("server_cpu_per_query", "qps")

    def command(self, settings, duration_s, server_address):
        return ["answer"]

    def parse(self, result, settings, warmup_s):
        return LoadResult("ok", None, {"qps": 5000.0})


def test_a_trial_records_its_window_and_the_server_cpu_per_answered_query(tmp_path):
    target = CountingTarget()
    with new_store(tmp_path) as store:
        outcome = run_trial(target, AnsweringLoad(), [], {}, "screen:0", "screen", store, 0.0, 0.05)
        stored = store.trials().iloc[-1]["counters"]
        tidy = store.tidy()
    assert target.requests == [CounterRequest(service="dns", device=None)]
    assert stored["deltas"] == {"Tcp.InSegs": 0.0, "proc.cpu_s": 0.25}
    window = stored["window_s"]
    assert 0 < window < 1.0
    # 0.25 CPU s over the window, 5000 answers per second: 1e6 * 0.25 / window / 5000 us per query
    assert outcome.metrics["server_cpu_per_query"] == pytest.approx(50.0 / window)
    assert tidy["counter.proc.cpu_s"].tolist() == [pytest.approx(0.25 / window)]
    assert "counter.Tcp.InSegs" not in tidy.columns                  # never moved
    assert outcome.timings["counters"] > 0
