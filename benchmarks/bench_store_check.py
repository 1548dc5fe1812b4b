"""Cost of the check every writable store open makes before its first write (``PRAGMA quick_check``,
:func:`tunelab.store.schema.check_integrity`): median milliseconds on a fresh connection, for each
example store and for ``default.sqlite`` with its trials copied 64 times (about 15 MiB), and the
median wall time of a whole writable ``Store(path)`` open for comparison. Works on copies in a
temporary directory; the example stores are never opened for writing.

usage: python benchmarks/bench_store_check.py [--runs N]
"""
from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tunelab.store import Store  # noqa: E402

TRIAL_COLUMNS = ("run_key, phase, config, plan, status, reason, knobs_read, metrics, series, timings, "
                 "foreign_cpu_s, provenance, started_at, ended_at")


def quick_check_ms(path: Path, runs: int) -> float:
    """Median milliseconds of ``PRAGMA quick_check`` as the first statement of a new connection."""
    times = []
    for _ in range(runs):
        db = sqlite3.connect(path)
        start = time.perf_counter()
        assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        times.append((time.perf_counter() - start) * 1e3)
        db.close()
    return statistics.median(times)


def writable_open_ms(path: Path, runs: int) -> float:
    """Median milliseconds of ``Store(path)`` (writer lock, checks, WAL, crash check) and close."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        Store(path).close()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def grown_copy(source: Path, target: Path, doublings: int) -> Path:
    """``source`` copied to ``target`` with its trial rows doubled ``doublings`` times."""
    shutil.copyfile(source, target)
    db = sqlite3.connect(target)
    for _ in range(doublings):
        db.execute(f"INSERT INTO trials ({TRIAL_COLUMNS}) SELECT {TRIAL_COLUMNS} FROM trials")
        db.commit()
    db.close()
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tunelab-bench-store-") as tmp:
        stores = []
        for source in sorted((ROOT / "data" / "examples").rglob("*.sqlite")):
            copy = Path(tmp) / source.name
            shutil.copyfile(source, copy)
            stores.append((str(source.relative_to(ROOT)), copy))
        stores.append(("default.sqlite, trials x64", grown_copy(ROOT / "data/examples/default.sqlite",
                                                               Path(tmp) / "grown.sqlite", 6)))
        print(f"{'store':56s} {'KiB':>8s} {'quick_check ms':>15s} {'writable open ms':>17s}")
        for name, path in stores:
            print(f"{name:56s} {path.stat().st_size / 1024:8.0f} {quick_check_ms(path, args.runs):15.2f} "
                  f"{writable_open_ms(path, args.runs):17.1f}")


if __name__ == "__main__":
    main()
