"""Start-up time of the ``tunelab`` command, and the size of the environment it runs from.

Wall time of ``tunelab --help``, of every verb's ``--help`` and of ``tunelab plan designs/default.yaml`` over
several runs (each a fresh process, after one unmeasured warm-up): best, median and worst. Then the size of the
virtual environment running this script (``du`` of ``sys.prefix``) and whether PyTorch (the optional ``gp``
extra) is in it.

Targets: ``--help`` and each verb's ``--help`` <= 0.5 s; the venv <= 1.2 GB without the ``gp`` extra. The CLI
imports only argparse, the verb modules and ``tunelab.model`` to build its parser; the API and its dependencies
(pandas, scipy, statsmodels, Optuna, ...) are imported when a verb runs (tests/test_cli_startup.py checks it).
See what a command imports with ``python -X importtime -m tunelab --help``. Times on a shared machine vary
with its load (printed first): compare the best of several runs, and the CPU time, which waits for nothing.

usage: python benchmarks/bench_startup.py [--runs N] [--no-verbs]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tunelab.cli import VERB_MODULES

ROOT = Path(__file__).resolve().parents[1]
#: the start-up target of --help (seconds)
HELP_TARGET_S = 0.5
#: the size target of the environment without the gp extra (bytes)
VENV_TARGET = 1.2e9


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timings(args: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``runs`` runs of ``python -m tunelab ARGS`` (one unmeasured warm-up first).

    CPU time barely depends on what else the machine runs; wall time does (it waits for a core)."""
    argv = [sys.executable, "-m", "tunelab", *args]
    subprocess.run(argv, cwd=ROOT, capture_output=True, check=True)
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), children_cpu_s()
        subprocess.run(argv, cwd=ROOT, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
        cpus.append(children_cpu_s() - cpu)
    return walls, cpus


def du_bytes(path: str) -> int:
    """Disk usage of ``path`` in bytes, as ``du -sk`` counts it."""
    out = subprocess.run(["du", "-sk", path], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) * 1024


def commands(verbs: bool) -> dict[str, list[str]]:
    """The timed commands: --help, each verb's --help (with ``verbs``), then plan."""
    out = {"tunelab --help": ["--help"]}
    if verbs:
        out |= {f"tunelab {verb} --help": [verb, "--help"] for verb in VERB_MODULES}
    return out | {"tunelab plan designs/default.yaml": ["plan", "designs/default.yaml"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="measured runs per command (default 5)")
    parser.add_argument("--no-verbs", action="store_true", help="time only --help and plan, not each verb's --help")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs; "
          f"{args.runs} runs each, after one warm-up")
    for name, argv in commands(not args.no_verbs).items():
        walls, cpus = timings(argv, args.runs)
        mark = "" if "--help" not in argv or min(walls) <= HELP_TARGET_S else f"  (over {HELP_TARGET_S} s)"
        print(f"{name:<36} wall best {min(walls):.3f} s  median {statistics.median(walls):.3f} s  worst "
              f"{max(walls):.3f} s;  cpu best {min(cpus):.3f} s{mark}")
    size = du_bytes(sys.prefix)
    torch = "with torch (the gp extra)" if importlib.util.find_spec("torch") else "without torch"
    print(f"environment {sys.prefix}: {size / 1e9:.2f} GB, {torch}; target <= {VENV_TARGET / 1e9:.1f} GB without "
          "the gp extra")


if __name__ == "__main__":
    main()
