"""The harness's own per-trial overhead on the lab target: snapshot + apply + verify + record + restore.

Runs ``run_trial`` N times with 4 per-namespace knobs that change on every trial and a load
that does nothing (``true``), so what remains is tunelab's own cost: store commits (WAL,
synchronous=FULL, one per journal entry), knob reads/writes inside the namespaces, verify,
and restore. Service restarts, the load itself and ``target.reset()`` are excluded; the target's
foreign-CPU sampling around the load is measurement instrumentation and is reported separately.

Prints the median and 95th percentile in ms and as a share of a 10 s trial (target <= 0.3 %,
i.e. 30 ms), and the cost of recording the kernel counters (:mod:`tunelab.counters`: both snapshots
and their differences; target <= 5 ms per trial): as timed by the runner (both namespaces' network
counters; the no-op load has no service), and with the DNS server's processes too, as a dnsperf
trial records them. The snapshots run while the load does, so they add no wall time to a trial.

usage: sudo .venv/bin/python benchmarks/bench_overhead.py [--trials 50]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from tunelab.loads.base import Load, LoadResult, MetricInfo
from tunelab.runner import BoundKnob, run_trial
from tunelab.store import Store
from tunelab.targets.base import CommandResult

KNOBS = {  # two levels each, alternated so every trial writes and restores all four
    "net.core.somaxconn": (128, 1024),
    "net.ipv4.tcp_abort_on_overflow": (1, 0),
    "net.ipv4.tcp_max_syn_backlog": (256, 2048),
    "net.ipv4.tcp_fin_timeout": (15, 30),
}
TRIAL_S = 10.0
EXCLUDED = ("restart", "prepare", "load", "parse", "foreign_cpu")


class NoopLoad(Load):
    """A load that runs `true` and reports a constant, so only the harness is timed."""

    name = "noop"
    service = None
    metrics = {"noop": MetricInfo("1", "maximize")}

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        return ["true"]

    def parse(self, result: CommandResult, settings: Mapping[str, Any], warmup_s: float) -> LoadResult:
        return LoadResult("ok", None, {"noop": 1.0}) if result.ok else LoadResult("failed", "true failed", {})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_overhead: needs root for the lab target (network namespaces); skipped", file=sys.stderr)
        return 0
    from tunelab.knobs import get_knob
    from tunelab.targets import get_target

    specs = [BoundKnob(name, get_knob(name)) for name in KNOBS]
    load = NoopLoad()
    harness_ms, phases = [], {k: [] for k in ("snapshot", "apply", "verify", "record", "restore", "foreign_cpu",
                                              "counters", "counters_cpu")}
    with tempfile.TemporaryDirectory() as tmp, get_target("lab")() as lab, \
            Store.open(Path(tmp) / "bench.sqlite", study="bench", design_hash="bench", design_text="") as store:
        for i in range(args.trials):
            config = {name: levels[i % 2] for name, levels in KNOBS.items()}
            start = time.perf_counter()
            outcome = run_trial(lab, load, specs, config, f"screen:{i}", "screen", store, 0.0, 0.0)
            wall = time.perf_counter() - start
            if outcome.status != "ok":
                print(f"trial {i} {outcome.status}: {outcome.reason}", file=sys.stderr)
                return 1
            timings = store.trials().iloc[-1]["timings"]
            harness_ms.append((wall - sum(timings.get(k, 0.0) for k in EXCLUDED)) * 1000)
            for k in phases:
                phases[k].append(timings.get(k, 0.0) * 1000)
        changes = len(store.journal())
        with_service_ms = counter_cost_ms(lab, args.trials)
    median = statistics.median(harness_ms)
    p95 = statistics.quantiles(harness_ms, n=20)[-1]
    print(f"lab target, {len(KNOBS)} knobs, {args.trials} trials, {changes} journalled changes")
    print("per-phase median ms: " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in phases.items()))
    print(f"harness overhead per trial: median {median:.1f} ms, p95 {p95:.1f} ms")
    print(f"share of a {TRIAL_S:g} s trial: median {median / (TRIAL_S * 10):.3f} %, p95 {p95 / (TRIAL_S * 10):.3f} % "
          f"(target <= 0.3 %)")
    for label, (wall, cpu) in {"runner, both namespaces": (phases["counters"], phases["counters_cpu"]),
                               "with the DNS server's processes": with_service_ms}.items():
        print(f"counter recording per trial ({label}): median {statistics.median(wall):.2f} ms wall "
              f"(p95 {statistics.quantiles(wall, n=20)[-1]:.2f}), {statistics.median(cpu):.2f} ms CPU "
              f"(p95 {statistics.quantiles(cpu, n=20)[-1]:.2f}); target <= 5 ms")
    return 0


def counter_cost_ms(lab: Any, trials: int) -> tuple[list[float], list[float]]:
    """The cost of one trial's counters (sources, two snapshots, differences) with the lab's DNS server
    running, as a dnsperf trial records them: wall and CPU ms per trial."""
    from tunelab.counters import CounterRequest, CounterWindow

    lab.start_service("dns")
    wall, cpu = [], []
    for _ in range(trials):
        start, start_cpu = time.perf_counter(), time.process_time()
        with CounterWindow(lab.counter_sources(CounterRequest(service="dns")), 0.0, 0.0) as window:
            pass
        if window.record is None:
            raise SystemExit("bench_overhead: the lab recorded no counters")
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return wall, cpu


if __name__ == "__main__":
    raise SystemExit(main())
