"""The load is prepared before anything is applied or restarted, and no output, error or store holds an input
file's content (issue 35, item 4).

A real dnsperf load on the real local target whose copy of the query file fails for real: its private directory
on the load host is a regular file, so the write fails (ENOTDIR) and the local target's error quotes the text it
could not write, the whole query file. The query file's distinctive line sits past its first 200 characters:
only a leak of more than :data:`tunelab.formatting.QUOTE_LIMIT` characters can show it. The restart command
appends to a ``restarts`` file, as the operator hosts' restart script does.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cli_helpers import run_in_process
from hypothesis import given
from hypothesis import strategies as st

from tunelab.formatting import QUOTE_LIMIT, quote, shorten
from tunelab.knobs import get_knob
from tunelab.loads import LOADS
from tunelab.loads.dnsperf import DnsperfLoad
from tunelab.runner.binding import BoundKnob
from tunelab.runner.trials import run_trial
from tunelab.store import Store
from tunelab.targets.local import LocalTarget

SOMAXCONN = "net.core.somaxconn"
#: the query file's distinctive line: personal data that must never leave the file
SECRET = "payroll-7f3a9c.corp.example. A"
QUERIES = "".join(f"host{i:03d}.corp.example. A\n" for i in range(40)) + SECRET + "\n" + "mx.corp.example. MX\n"


class UnwritableDnsperf(DnsperfLoad):
    """dnsperf whose private directory on the load host is a regular file (:attr:`blocker`): writing the query
    file there fails for real."""

    name = "dnsperf-unwritable"
    blocker = "/nonexistent"

    def _private_dir(self, target):
        return self.blocker


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setattr(UnwritableDnsperf, "blocker", str(blocker))
    monkeypatch.setitem(LOADS._items, UnwritableDnsperf.name, UnwritableDnsperf)
    queries = tmp_path / "queries.txt"
    queries.write_text(QUERIES)
    assert QUERIES.index(SECRET) > QUOTE_LIMIT
    return {"queries": queries, "restarts": tmp_path / "restarts"}


def restart_command(restarts: Path) -> list[str]:
    return ["sh", "-c", f"echo restarted >> {restarts}"]


def somaxconn() -> int:
    return int(Path("/proc/sys/net/core/somaxconn").read_text())


def store_text(path: Path) -> str:
    """Every value of every table of the store, as text."""
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(str(row) for table in tables for row in db.execute(f"SELECT * FROM {table}"))


def test_a_failed_query_file_copy_applies_and_restarts_nothing_and_quotes_nothing(files, tmp_path, capfd,
                                                                                   monkeypatch) -> None:
    before = somaxconn()
    proc = run_in_process([
        "validate", "--target", "local", "--target-option",
        f"service_commands={{dns: [{', '.join(restart_command(files['restarts']))}]}}",
        "--load", UnwritableDnsperf.name, "--load-setting", f"query_file={files['queries']}",
        "--candidate", f"{SOMAXCONN}={before + 1}", "--allow-host-global", "--blocks", "2",
        "--store", "v.sqlite", "--json", "verdict.json"], tmp_path, capfd, monkeypatch)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    # the pre-flight's notes come first (nothing listens on this target's port 53), then the one error line
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("pre-flight: ")]
    assert len(errors) == 1 and errors[0].startswith("tunelab: error: "), proc.stderr
    assert "could not prepare the load on the client host, so nothing was applied or restarted" in proc.stderr
    assert not files["restarts"].exists() and somaxconn() == before      # the restart never ran, no knob changed
    assert SECRET not in proc.stdout + proc.stderr
    assert not (tmp_path / "verdict.json").exists()
    with Store(tmp_path / "v.sqlite", readonly=True) as store:
        assert store.journal().empty and store.trials().empty
    assert SECRET not in store_text(tmp_path / "v.sqlite")


def test_a_trial_whose_load_cannot_be_prepared_fails_before_any_write_with_a_short_reason(files, tmp_path) -> None:
    before = somaxconn()
    target, load = LocalTarget(service_commands={"dns": restart_command(files["restarts"])}), UnwritableDnsperf()
    specs = [BoundKnob(SOMAXCONN, get_knob(SOMAXCONN))]
    with Store.open(tmp_path / "s.sqlite", study="s", design_hash="h", design_text="t") as store:
        outcome = run_trial(target, load, specs, {SOMAXCONN: before + 1}, "validate:0", "validate", store, 0, 1,
                            load_settings={"query_file": str(files["queries"])}, allow_host_global=True)
        assert outcome.status == "failed" and outcome.reason.startswith("TargetError: ")
        assert len(outcome.reason) <= len("TargetError: ") + QUOTE_LIMIT and SECRET not in outcome.reason
        assert store.journal().empty                     # prepared first: nothing journalled, nothing written
    assert not files["restarts"].exists() and somaxconn() == before
    assert SECRET not in store_text(tmp_path / "s.sqlite")


@given(st.text(max_size=600) | st.integers() | st.lists(st.text(max_size=80), max_size=20),
       st.integers(min_value=0, max_value=400))
def test_quote_and_shorten_never_exceed_the_limit_and_keep_what_fits(value, limit) -> None:
    quoted, short = quote(value, limit), shorten(value, limit)
    assert len(quoted) <= limit and len(short) <= limit
    if len(repr(value)) <= limit:
        assert quoted == repr(value)                     # what fits is quoted whole
    if len(str(value)) <= limit:
        assert short == str(value)
    elif limit >= 30:                                    # a cut one says so, with the total length
        assert short.endswith(f"... ({len(str(value))} characters)") and str(value).startswith(short.split("... (")[0])
