"""Peak memory of ``tunelab screen`` on a tidy CSV against rows x columns (with kernel counters).

The CSV is the example study's export (``data/examples/default.sqlite``: 54 screen trials, 142 columns of
which 112 are kernel counters, ``counter.*``) repeated to the number of rows asked for: each copy is a new
replicate with its own run ids, and every number gets a little multiplicative noise (seeded) so no two rows
are equal. Each size is screened by a fresh ``python -m tunelab screen CSV --metric qps --json OUT`` (the
mechanisms included, as a user runs it) in its own process, and its peak resident memory is that process's
``ru_maxrss`` (:func:`os.wait4`), with its wall time. ``--no-counters`` screens the same rows without the
counter columns, for comparison.

Goal: at most 1.5 GB for 1,000,000 rows x 142 columns (issue 37). The CSV of 1M rows is about 1.5 GB on
disk and takes minutes to write; it lives in a temporary directory removed at the end.

Usage::

    .venv/bin/python benchmarks/bench_memory.py                      # 10k and 100k rows
    .venv/bin/python benchmarks/bench_memory.py --rows 10000 100000 1000000
    .venv/bin/python benchmarks/bench_memory.py --rows 100000 --no-counters

A benchmark, not a test: it exits 1 only when a screen failed (its figures would mean nothing).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))      # this checkout's tunelab, as the screens run from ROOT use
EXAMPLE = ROOT / "data" / "examples" / "default.sqlite"
GOAL_BYTES, GOAL_ROWS = 1.5e9, 1_000_000
#: rows written per piece of the generated CSV (bounds the generator's own memory)
PIECE_ROWS = 20_000
#: relative noise added to every number of a repeated row
NOISE = 1e-3


def base_frame() -> pd.DataFrame:
    """The example study's usable screen trials, as ``tunelab export`` writes them."""
    from tunelab.store import Store

    with Store(EXAMPLE, readonly=True) as store:
        return store.tidy("screen")


def write_csv(base: pd.DataFrame, rows: int, path: Path, counters: bool, seed: int = 0) -> None:
    """``rows`` rows of ``base`` repeated as new replicates with noisy numbers, written piece by piece."""
    rng = np.random.default_rng(seed)
    if not counters:
        base = base[[c for c in base.columns if not c.startswith("counter.")]]
    noisy = [c for c in base.select_dtypes("float").columns if not c.startswith("net.") and "[" not in c]
    replicates = int(base["replicate"].max()) + 1
    written = 0
    while written < rows:
        copies = max(1, PIECE_ROWS // len(base))
        piece = pd.concat([base] * copies, ignore_index=True).iloc[: rows - written].copy()
        copy_no = (written + np.arange(len(piece))) // len(base)
        piece["run_id"] = written + np.arange(len(piece))
        piece["trial_id"] = piece["run_id"] + 1
        piece["replicate"] = piece["replicate"].to_numpy() + replicates * copy_no
        for column in noisy:
            piece[column] = piece[column] * (1 + NOISE * rng.standard_normal(len(piece)))
        piece.to_csv(path, mode="a", header=written == 0, index=False)
        written += len(piece)


def peak_of_screen(csv: Path, out: Path) -> tuple[int, float, int, str]:
    """``tunelab screen CSV`` in a fresh process: (peak RSS in bytes, wall seconds, exit status, last stderr line)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "tunelab", "screen", str(csv), "--metric", "qps",
                                 "--json", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    return usage.ru_maxrss * 1024, time.perf_counter() - start, proc.returncode, (lines or [""])[-1][:200]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--no-counters", action="store_true", help="screen the rows without counter columns")
    args = parser.parse_args(argv)
    base = base_frame()
    failed = False
    print(f"{'rows':>9} {'columns':>7} {'counters':>8} {'csv MB':>7} {'peak MB':>8} {'wall s':>7}  goal")
    with tempfile.TemporaryDirectory(prefix="tunelab-bench-memory-") as tmp:
        for rows in args.rows:
            csv = Path(tmp) / f"screen-{rows}.csv"
            write_csv(base, rows, csv, counters=not args.no_counters)
            header = pd.read_csv(csv, nrows=0).columns
            peak, wall, status, last = peak_of_screen(csv, Path(tmp) / "screen.json")
            counters = sum(c.startswith("counter.") for c in header)
            goal = ("<= 1.5 GB " + ("met" if peak <= GOAL_BYTES else "MISSED")) if rows >= GOAL_ROWS else ""
            print(f"{rows:>9} {len(header):>7} {counters:>8} {csv.stat().st_size / 1e6:>7.0f} {peak / 1e6:>8.0f} "
                  f"{wall:>7.1f}  {goal}", flush=True)
            if status != 0:
                failed = True
                print(f"  the screen failed (exit {status}): {last}", flush=True)
            csv.unlink()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
