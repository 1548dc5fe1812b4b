"""Start-up time of the ``tunelab`` command: median wall time of ``tunelab --help`` and of
``tunelab plan designs/default.yaml`` over several runs (each a fresh process, after one warm-up).

``--help`` must stay under 0.5 s: it imports only the CLI (argparse, the verb modules and
``tunelab.model``); the API and its dependencies (pandas, pyDOE3, scipy, ...) are imported when a
verb runs. See which modules a command imports with ``python -X importtime -m tunelab --help``.

usage: python benchmarks/bench_startup.py [--runs N]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {"tunelab --help": ["--help"], "tunelab plan designs/default.yaml": ["plan", "designs/default.yaml"]}


def wall_times(args: list[str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` runs of ``python -m tunelab ARGS`` (one unmeasured warm-up first)."""
    argv = [sys.executable, "-m", "tunelab", *args]
    subprocess.run(argv, cwd=ROOT, capture_output=True, check=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="measured runs per command (default 7)")
    args = parser.parse_args()
    for name, argv in COMMANDS.items():
        times = wall_times(argv, args.runs)
        print(f"{name:<36} median {statistics.median(times):.3f} s  (min {min(times):.3f}, max {max(times):.3f}, "
              f"{args.runs} runs)")


if __name__ == "__main__":
    main()
