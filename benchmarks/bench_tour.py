"""Wall time of ``notebooks/00_tour.ipynb`` executed with papermill on the simulator, as a new user runs it.

Each run is ``python -m papermill notebooks/00_tour.ipynb OUT -p out_dir DIR`` in a fresh temporary working
directory (a fresh kernel, every import paid), with the tour's default parameters; it prints each run's wall and
CPU time, the slowest cells of the last run (from papermill's per-cell durations) and the machine's load.

Target: under 120 s per run on a quiet machine (issue 28); it is about 7-20 s here. Times on a shared machine
vary with its load: compare the best of several runs.

usage: python benchmarks/bench_tour.py [--runs N]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOUR = ROOT / "notebooks" / "00_tour.ipynb"
#: the issue's target for one run (seconds)
TARGET_S = 120.0


def run_once(work: Path) -> tuple[float, float, Path]:
    """Execute the tour once in ``work``: wall seconds, CPU seconds of the children, the executed notebook."""
    out = work / "00_tour.ipynb"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-m", "papermill", str(TOUR), str(out), "-p", "out_dir", str(work / "out"),
                    "--no-progress-bar"], cwd=work, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def slowest_cells(notebook: Path, n: int = 4) -> list[tuple[float, str]]:
    """The ``n`` slowest code cells of an executed notebook: (seconds, first line)."""
    cells = json.loads(notebook.read_text())["cells"]
    timed = [(c["metadata"].get("papermill", {}).get("duration") or 0.0, "".join(c["source"]).splitlines()[0])
             for c in cells if c["cell_type"] == "code" and c["source"]]
    return sorted(timed, reverse=True)[:n]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="executions of the tour (default 3)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    walls = []
    for index in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="tunelab-bench-tour-") as work:
            wall, cpu, executed = run_once(Path(work))
            walls.append(wall)
            print(f"run {index + 1}: {wall:.1f} s wall, {cpu:.1f} s CPU")
            slowest = slowest_cells(executed)
    print(f"best {min(walls):.1f} s, worst {max(walls):.1f} s (target < {TARGET_S:.0f} s)")
    print("slowest cells of the last run: " + "; ".join(f"{s:.1f} s {line[:40]!r}" for s, line in slowest))
    return 0 if min(walls) < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
