"""Stores read anywhere: a store opens for reading on a read-only mount, and reading leaves no file beside it.

The read-only cases use a real read-only file system: a tmpfs of the test's own, filled, then remounted
``ro`` (root only; skipped otherwise). The expectation is independent of tunelab: the trial count SQLite's
own ``sqlite3`` module reads from a copy of the files in a writable folder.
"""
from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from mount_helpers import tmpfs  # tests/ is on sys.path (tests/conftest.py)

from tunelab.cli import main
from tunelab.errors import StoreError
from tunelab.store import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "examples" / "default.sqlite"


def listing(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the SHA-256 of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def sqlite_trial_count(files: list[Path], tmp: Path) -> int:
    """The trials SQLite itself reads from a copy of a store's files (log included) in a writable folder."""
    copy = tmp / "copy"
    copy.mkdir(parents=True)
    for path in files:
        shutil.copyfile(path, copy / path.name)
    db = sqlite3.connect(copy / files[0].name)
    try:
        return db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    finally:
        db.close()


def remount_read_only(mount: Path) -> None:
    """Remount the test's tmpfs read-only (skip when this system refuses)."""
    done = subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot remount a tmpfs read-only here: {done.stderr.strip()[:200]}")


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``tunelab ARGV`` in this process: exit status, stdout, stderr."""
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err
    return status, out, err


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Path]:
    """A writable tmpfs of this test's own (the test remounts it read-only once it holds its stores)."""
    with tmpfs(tmp_path / "mnt", "size=32m") as mounted:
        yield mounted


def with_committed_log(folder: Path, keep_shm: bool) -> Path:
    """A copy of the example store whose last committed trial is only in its ``-wal`` (as a writer that
    stopped before its checkpoint leaves it), with or without its ``-shm``."""
    live = folder / "live"
    live.mkdir()
    shutil.copyfile(EXAMPLE, live / "default.sqlite")
    writer = Store(live / "default.sqlite")
    try:
        writer._db.execute("PRAGMA wal_autocheckpoint=0")
        trial = writer.begin_trial("extra:0", "screen", {"net.core.somaxconn": 128})
        writer.finish_trial(trial, "failed", "only in the log", {}, {})
        frozen = folder / ("with-shm" if keep_shm else "without-shm")
        frozen.mkdir()
        for suffix in ("", "-wal", "-shm") if keep_shm else ("", "-wal"):
            shutil.copyfile(f"{live}/default.sqlite{suffix}", f"{frozen}/default.sqlite{suffix}")
    finally:
        writer.close()
    shutil.rmtree(live)
    return frozen / "default.sqlite"


def test_a_store_on_a_read_only_mount_is_screened_and_exported(mount: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    store = mount / "default.sqlite"
    shutil.copyfile(EXAMPLE, store)
    remount_read_only(mount)
    before = listing(mount)
    with Store(store, readonly=True) as reader:
        assert reader.study.name == "default"
        assert len(reader.trials()) == sqlite_trial_count([EXAMPLE], tmp_path)
    status, out, err = cli(capsys, "screen", store)
    assert status == 0 and "damaged" not in err and "somaxconn" in out, err
    status, out, err = cli(capsys, "export", store, "--out", tmp_path / "default.csv")
    assert status == 0 and (tmp_path / "default.csv").read_text().count("\n") == 55, err   # header + 54 trials
    assert listing(mount) == before


def test_a_committed_log_on_a_read_only_mount_is_read(mount: Path, tmp_path: Path) -> None:
    store = with_committed_log(mount, keep_shm=True)
    expected = sqlite_trial_count([store, Path(f"{store}-wal")], tmp_path)
    assert expected == sqlite_trial_count([EXAMPLE], tmp_path / "example") + 1
    remount_read_only(mount)
    with Store(store, readonly=True) as reader:
        assert len(reader.trials()) == expected
        assert "only in the log" in set(reader.trials()["reason"].dropna())


def test_a_log_without_its_shm_on_a_read_only_mount_is_one_clear_error(mount: Path) -> None:
    store = with_committed_log(mount, keep_shm=False)
    remount_read_only(mount)
    with pytest.raises(StoreError, match="default.sqlite-wal.*Copy default.sqlite with default.sqlite-wal"):
        Store(store, readonly=True)


def test_reading_leaves_no_file_beside_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """screen, export, report and the Python API read a store in a writable folder and leave it as it was."""
    import tunelab

    folder = tmp_path / "published"
    folder.mkdir()
    store = folder / "default.sqlite"
    shutil.copyfile(EXAMPLE, store)
    before = listing(folder)
    assert cli(capsys, "screen", store)[0] == 0
    assert cli(capsys, "export", store, "--out", tmp_path / "out.csv")[0] == 0
    status, _, err = cli(capsys, "report", store, "--notebooks", "01", "--out", tmp_path / "report")
    assert status == 0, err
    assert len(tunelab.screen(store).verdicts) > 0
    with Store(store, readonly=True) as reader:
        assert len(reader.tidy()) == 54
    assert listing(folder) == before


def test_a_reader_beside_a_live_writer_sees_its_commits(tmp_path: Path) -> None:
    """A writer holds the store open (its log exists): readers go through SQLite's locking and its log."""
    store = tmp_path / "default.sqlite"
    shutil.copyfile(EXAMPLE, store)
    with Store(store) as writer:
        writer._db.execute("PRAGMA wal_autocheckpoint=0")
        trial = writer.begin_trial("extra:0", "screen", {"net.core.somaxconn": 128})
        writer.finish_trial(trial, "failed", "while a reader reads", {}, {})
        with Store(store, readonly=True) as reader:
            assert "while a reader reads" in set(reader.trials()["reason"].dropna())
        trial = writer.begin_trial("extra:1", "screen", {"net.core.somaxconn": 128})   # the writer goes on
        writer.finish_trial(trial, "failed", "after the read", {}, {})
    assert not Path(f"{store}-wal").exists() and not Path(f"{store}-shm").exists()
    with Store(store, readonly=True) as reader:
        assert {"while a reader reads", "after the read"} <= set(reader.trials()["reason"].dropna())
