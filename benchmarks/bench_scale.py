"""Scale-out of one study over many testbeds (tunelab.cluster on dask.distributed), on SYNTHETIC testbeds.

Every testbed is a ``simulator`` target (no real kernel is measured) driven by its own worker of a
``LocalCluster`` (one single-threaded worker process per testbed, as ``tunelab run --testbeds`` starts it).
Three figures, measured in one run:

1. **Speed-up**: a full-factorial design whose every measurement sleeps ``delay_s: 1`` (32 trials) on 1, 2,
   4 and 8 testbeds. Dispatch wall time (:func:`tunelab.cluster.run_design_on_testbeds`, the cluster
   already up), its speed-up against 1 testbed and the efficiency (speed-up / testbeds); the cluster's
   start-up and close are timed apart. The trials sleep, so this measures the dispatch, not CPU-bound
   work: 8 sleeping testbeds fit on 2 cores, 8 real loads would not.
2. **Dispatch overhead per trial**: the same design with ``delay_s: 0`` (400 trials) on 1 and 4 testbeds.
   ``trial`` is the worker-side trial time (the sum of each stored trial's ``timings``: snapshot, apply,
   verify, load, parse, record, restore); ``task`` is the Dask task's compute time on the worker
   (:func:`distributed.get_task_stream`), so ``task - trial`` is what the worker does around the runner
   (its own store: begin, timings, pruning) and the rest is Dask's round trip and the client recording
   the trial into the study's store. ``overhead`` = wall/trial - trial (the goal's figure: with several
   testbeds it is shared between them); ``per testbed`` = testbeds x wall/trial - trial, the time each
   testbed spends per trial outside the trial, which is what bounds the speed-up.
3. **Resume of a finished study**: a store holding every one of 10,000 planned trials (the first
   replicate run for real on the simulator, the others copies of those records inserted with
   :meth:`tunelab.store.Store.add_trial_record`); then ``tunelab.api.run(design, testbeds=FILE)`` on it
   (cluster start-up included) and ``run_design_on_testbeds`` on a cluster already up. Both must skip
   every trial and run none.

Goals: speed-up >= 3.5x at 4 testbeds; dispatch overhead <= 20 ms per trial; a finished study is resumed
without running a trial. Testbed journals and leases go to a temporary directory
(``TUNELAB_TESTBED_DIR``, ``TUNELAB_RUN_DIR``), removed at the end.

Usage::

    .venv/bin/python benchmarks/bench_scale.py            # the figures above (about 2-3 minutes on 2 cores)
    .venv/bin/python benchmarks/bench_scale.py --quick    # smoke run (< 1 minute): fewer testbeds and trials

A benchmark, not a test: it exits 1 only when a run did not record what it should (a trial missing,
failed or recorded twice, or a resume that ran trials), since its figures would then mean nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

#: seconds each measurement sleeps in the speed-up part
TRIAL_DELAY_S = 1.0
GOAL_SPEEDUP, GOAL_SPEEDUP_AT = 3.5, 4
GOAL_OVERHEAD_MS = 20.0
#: 2 x 2 configurations (speed-up and overhead parts)
SMALL_KNOBS = """\
  - {name: net.core.somaxconn, levels: [128, 16], baseline: 128}
  - {name: net.ipv4.tcp_congestion_control, levels: [cubic, bbr], baseline: cubic}
"""
SMALL_CONFIGS = 4
#: 5 x 2 configurations (resume part: 10,000 trials = 1,000 replicates, the design limit)
RESUME_KNOBS = """\
  - {name: net.core.somaxconn, levels: [128, 16, 64, 512, 4096], baseline: 128}
  - {name: net.ipv4.tcp_abort_on_overflow, levels: [false, true], baseline: false}
"""
RESUME_CONFIGS = 10


@dataclass(frozen=True)
class Sizes:
    """How much each part runs."""

    speedup_testbeds: tuple[int, ...]
    speedup_trials: int
    overhead_testbeds: tuple[int, ...]
    overhead_trials: int
    resume_trials: int
    resume_testbeds: int


FULL = Sizes((1, 2, 4, 8), 32, (1, 4), 400, 10_000, 4)
QUICK = Sizes((1, 4), 8, (1, 2), 80, 1_000, 1)


@dataclass
class Dispatched:
    """One design dispatched over ``testbeds`` simulator testbeds."""

    testbeds: int
    trials: int
    startup_s: float
    dispatch_s: float
    close_s: float
    #: mean worker-side trial time (sum of the stored timings), seconds
    trial_s: float
    #: mean Dask task compute time on the worker, seconds (NaN when not recorded)
    task_s: float
    per_testbed: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- designs

def design_text(name: str, knobs: str, replicates: int, delay_s: float) -> str:
    """A full-factorial simulator design (surface ``simple``, 3 % noise) whose measurements sleep ``delay_s``."""
    return (f"name: {name}\n"
            f"description: SYNTHETIC scale-out benchmark (benchmarks/bench_scale.py)\n"
            f"target: {{type: simulator, options: {{surface: simple, cv: 0.03, delay_s: {delay_s:g}}}}}\n"
            "load: {generator: dnsperf, profile: overload}\n"
            "warmup_s: 0\nmeasure_s: 1\n"
            "metrics: [{name: qps, direction: maximize, sesoi_pct: 10}]\n"
            f"knobs:\n{knobs}"
            f"design: {{type: full_factorial, replicates: {replicates}, seed: 1}}\n")


def replicates_for(trials: int, configs: int) -> int:
    """Replicates giving exactly ``trials`` runs of ``configs`` configurations."""
    if trials % configs:
        raise SystemExit(f"bench_scale: {trials} trials is not a multiple of {configs} configurations")
    return trials // configs


def testbeds_yaml(count: int) -> str:
    """A testbeds file of ``count`` simulator testbeds (options from the design's target)."""
    return "testbeds:\n" + "".join(f"  - {{name: sim{i}, type: simulator}}\n" for i in range(count))


def simulator_beds(design: Any, count: int) -> list[Any]:
    """The checked :class:`~tunelab.cluster.BedSpec` of ``count`` simulator testbeds for ``design``."""
    import yaml

    from tunelab import runner
    from tunelab.cluster import bed_specs
    from tunelab.testbeds import parse_testbeds

    beds = parse_testbeds(yaml.safe_load(testbeds_yaml(count)), "bench-testbeds.yaml")
    return bed_specs(beds, runner.target_spec_of(design))


def open_store(path: Path, text: str) -> tuple[Any, Any]:
    """The design of ``text`` and a store for it at ``path``."""
    from tunelab.designs import load_design_text
    from tunelab.store import Store

    design = load_design_text(text, source=f"{path.stem}.yaml")
    return design, Store.open(path, study=design.name, design_hash=design.design_hash, design_text=text)


# ---------------------------------------------------------------------------------------------- dispatch

def dispatch(text: str, testbeds: int, path: Path, *, task_stream: bool = False) -> Dispatched:
    """Run the design of ``text`` on ``testbeds`` simulator testbeds into a fresh store at ``path``, timed."""
    from distributed import get_task_stream

    from tunelab import runner
    from tunelab.cluster import Dispatcher, TestbedCluster, run_design_on_testbeds

    design, store = open_store(path, text)
    beds = simulator_beds(design, testbeds)
    load, settings = runner.load_for(design, beds[0].target_cls, beds[0].options)
    stream = None
    with store:
        started = time.perf_counter()
        with TestbedCluster(beds) as cluster:
            up = time.perf_counter()
            dispatcher = Dispatcher(cluster, store, progress=False, say=lambda line: print(f"  tunelab: {line}"))
            if task_stream:
                with get_task_stream(cluster.client) as stream:
                    run_design_on_testbeds(design, dispatcher, store, load=load, load_settings=settings)
            else:
                run_design_on_testbeds(design, dispatcher, store, load=load, load_settings=settings)
            done = time.perf_counter()
        closed = time.perf_counter()
        frame = store.trials()
    trial_s = statistics.fmean(sum(t.values()) for t in frame["timings"]) if len(frame) else float("nan")
    result = Dispatched(testbeds, len(frame), up - started, done - up, closed - done, trial_s=trial_s,
                        task_s=task_compute_s(stream.data) if stream is not None else float("nan"),
                        per_testbed=frame["plan"].map(lambda plan: plan.get("testbed")).value_counts().to_dict())
    result.problems = recording_problems(frame, design)
    return result


def task_compute_s(tasks: Sequence[dict[str, Any]]) -> float:
    """Mean compute seconds of the Dask tasks in a task stream."""
    computes = [sum(span["stop"] - span["start"] for span in task["startstops"] if span["action"] == "compute")
                for task in tasks]
    return statistics.fmean(computes) if computes else float("nan")


def recording_problems(frame: Any, design: Any) -> list[str]:
    """What is wrong with a dispatched study's store: trials missing, not ok or recorded twice."""
    from tunelab.designs import make_plan

    planned = len(make_plan(design))
    problems = []
    if frame["run_key"].nunique() != planned:
        problems.append(f"{frame['run_key'].nunique()} of {planned} planned runs recorded")
    if frame["run_key"].duplicated().any():
        problems.append(f"{int(frame['run_key'].duplicated().sum())} runs recorded twice")
    bad = frame[frame["status"] != "ok"]
    if len(bad):
        problems.append(f"{len(bad)} trials not ok, e.g. {bad['run_key'].iloc[0]} {bad['status'].iloc[0]}: "
                        f"{bad['reason'].iloc[0]}")
    return problems


# ---------------------------------------------------------------------------------------------- resume

def fill_finished_store(text: str, path: Path) -> tuple[int, int, float]:
    """Record every planned trial of ``text`` in a store at ``path``: the first replicate run for real (serially,
    on one simulator), every other run a copy of the record of its configuration.

    Returns the runs recorded, the last trial id and the seconds it took."""
    from tunelab import runner
    from tunelab.designs import make_plan
    from tunelab.simulator import SimulatorTarget

    started = time.perf_counter()
    design, store = open_store(path, text)
    load, settings = runner.load_for(design, SimulatorTarget, {"surface": "simple", "cv": 0.03})
    plan = make_plan(design)
    with store, SimulatorTarget("simple", cv=0.03) as target:
        first = plan[plan["replicate"] == plan["replicate"].min()]
        runner.run_design(design, target, store, plan=first, progress=False, load=load, load_settings=settings)
        template = {config_key(json.loads(record["config"])): record for record in store.trial_records()}
        setup = runner.prepare_run(design, store, load=load, load_settings=settings)
        for run_key, config, info in setup.todo:
            store.add_trial_record({**template[config_key(config)], "run_key": run_key}, info)
        recorded, last_id = len(store.completed_run_keys("screen")), store.last_trial_id()
    return recorded, last_id, time.perf_counter() - started


def config_key(config: dict[str, Any]) -> str:
    """One text per configuration (knob id -> level), whichever side it comes from."""
    return json.dumps(config, sort_keys=True, default=str)


@dataclass
class Resumed:
    """Resuming a finished study: its size, the seconds of each step, what each run skipped and ran."""

    trials: int
    build_s: float
    api_s: float
    api_skipped: int
    startup_s: float
    resume_s: float
    resume_skipped: int
    ran: int


def resume(trials: int, testbeds: int, tmp: Path) -> Resumed:
    """Time resuming a finished study of ``trials`` runs on ``testbeds`` testbeds (see the module docstring)."""
    from tunelab import runner
    from tunelab.api import run as api_run
    from tunelab.cluster import Dispatcher, TestbedCluster, run_design_on_testbeds

    text = design_text("scale-resume", RESUME_KNOBS, replicates_for(trials, RESUME_CONFIGS), 0.0)
    design_path, beds_path, store_path = tmp / "scale-resume.yaml", tmp / "testbeds.yaml", tmp / "scale-resume.sqlite"
    design_path.write_text(text)
    beds_path.write_text(testbeds_yaml(testbeds))
    recorded, last_id, build_s = fill_finished_store(text, store_path)

    started = time.perf_counter()
    result = api_run(design_path, testbeds=beds_path, store=store_path, progress=False)
    api_s = time.perf_counter() - started

    design, store = open_store(store_path, text)
    beds = simulator_beds(design, testbeds)
    load, settings = runner.load_for(design, beds[0].target_cls, beds[0].options)
    with store:
        started = time.perf_counter()
        with TestbedCluster(beds) as cluster:
            up = time.perf_counter()
            summary = run_design_on_testbeds(design, Dispatcher(cluster, store, progress=False), store, load=load,
                                             load_settings=settings)
            resume_s = time.perf_counter() - up
        ran = store.last_trial_id() - last_id
    return Resumed(recorded, build_s, api_s, result.skipped, up - started, resume_s, summary.skipped, ran)


# ---------------------------------------------------------------------------------------------- report

def met(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def speedup_table(rows: Sequence[Dispatched]) -> bool:
    """Print the speed-up table; True when the goal is met (or its row did not run)."""
    base = next((row for row in rows if row.testbeds == 1), None)
    print(f"\n1. speed-up: {rows[0].trials} trials whose measurements sleep {TRIAL_DELAY_S:g} s (SYNTHETIC; "
          "it measures dispatch, not CPU-bound work)")
    header = (f"{'testbeds':>8} {'start-up s':>10} {'dispatch s':>10} {'ideal s':>8} {'speed-up':>8} "
              f"{'efficiency':>10} {'close s':>8}  trials per testbed")
    print(header)
    print("-" * len(header))
    for row in rows:
        speedup = base.dispatch_s / row.dispatch_s if base else float("nan")
        spread = " ".join(str(n) for _, n in sorted(row.per_testbed.items()))
        ideal = row.trials * TRIAL_DELAY_S / row.testbeds
        print(f"{row.testbeds:>8} {row.startup_s:>10.2f} {row.dispatch_s:>10.2f} {ideal:>8.2f} {speedup:>7.2f}x "
              f"{100 * speedup / row.testbeds:>9.1f}% {row.close_s:>8.2f}  {spread}")
    goal_row = next((row for row in rows if row.testbeds == GOAL_SPEEDUP_AT), None)
    if base is None or goal_row is None:
        return True
    speedup = base.dispatch_s / goal_row.dispatch_s
    print(f"goal speed-up >= {GOAL_SPEEDUP:g}x at {GOAL_SPEEDUP_AT} testbeds: {speedup:.2f}x: "
          f"{met(speedup >= GOAL_SPEEDUP)}")
    return speedup >= GOAL_SPEEDUP


def overhead_table(rows: Sequence[Dispatched]) -> bool:
    """Print the per-trial overhead table; True when every row meets the goal."""
    print(f"\n2. dispatch overhead: {rows[0].trials} trials whose measurements do not sleep (delay_s 0); "
          "per trial, in ms")
    header = (f"{'testbeds':>8} {'wall s':>7} {'wall/trial':>10} {'trial':>6} {'task':>6} {'overhead':>8} "
              f"{'per testbed':>11} {'= task-trial':>12} {'+ dask+record':>13} {'start-up s':>10}")
    print(header)
    print("-" * len(header))
    good = True
    for row in rows:
        wall = 1000 * row.dispatch_s / row.trials
        trial, task = 1000 * row.trial_s, 1000 * row.task_s
        overhead, slot = wall - trial, row.testbeds * wall - trial
        print(f"{row.testbeds:>8} {row.dispatch_s:>7.2f} {wall:>10.2f} {trial:>6.2f} {task:>6.2f} {overhead:>8.2f} "
              f"{slot:>11.2f} {task - trial:>12.2f} {slot - (task - trial):>13.2f} {row.startup_s:>10.2f}")
        good &= overhead <= GOAL_OVERHEAD_MS
    print("trial: stored timings (worker); task: Dask task compute (worker); overhead = wall/trial - trial; "
          "per testbed = testbeds x wall/trial - trial,\nsplit into the worker's own work around the trial "
          "(task - trial) and Dask's round trip plus the client's recording (the rest)")
    worst = max(1000 * row.dispatch_s / row.trials - 1000 * row.trial_s for row in rows)
    print(f"goal dispatch overhead <= {GOAL_OVERHEAD_MS:g} ms per trial: worst {worst:.2f} ms: {met(good)}")
    return good


def resume_table(row: Resumed, testbeds: int) -> bool:
    """Print the resume figures; True when both runs skipped every trial and ran none."""
    print(f"\n3. resume of a finished study: {row.trials:,} trials recorded (built in {row.build_s:.1f} s), "
          f"{testbeds} testbed{'s' if testbeds != 1 else ''}")
    print(f"  tunelab.api.run(..., testbeds=FILE), cluster start-up and close included: {row.api_s:6.2f} s "
          f"(skipped {row.api_skipped:,})")
    print(f"  run_design_on_testbeds on a cluster already up:                        {row.resume_s:6.2f} s "
          f"(skipped {row.resume_skipped:,}; that cluster's start-up {row.startup_s:.2f} s)")
    good = row.api_skipped == row.resume_skipped == row.trials and row.ran == 0
    print(f"goal resume skips all {row.trials:,} and runs none: skipped {row.api_skipped:,} and "
          f"{row.resume_skipped:,}, ran {row.ran}: {met(good)}")
    return good


# ---------------------------------------------------------------------------------------------- main

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run (< 1 minute): fewer testbeds and trials")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    warnings.filterwarnings("ignore", message="Port .* is already in use")   # the scheduler's HTTP port
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_name:
        tmp = Path(tmp_name)
        # read by the worker processes (they inherit the environment) and, for RUN_DIR, at import
        os.environ["TUNELAB_TESTBED_DIR"] = str(tmp / "testbeds")
        os.environ["TUNELAB_RUN_DIR"] = str(tmp / "run")
        import tunelab.simulator  # noqa: F401 - registers the simulator target

        print(f"SYNTHETIC benchmark: simulator testbeds on a LocalCluster (one worker process per testbed); "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start")
        started = time.perf_counter()
        speed_text = design_text("scale-speedup", SMALL_KNOBS, replicates_for(sizes.speedup_trials, SMALL_CONFIGS),
                                 TRIAL_DELAY_S)
        speed = [dispatch(speed_text, n, tmp / f"speedup-{n}.sqlite") for n in sizes.speedup_testbeds]
        fast_text = design_text("scale-overhead", SMALL_KNOBS, replicates_for(sizes.overhead_trials, SMALL_CONFIGS),
                                0.0)
        fast = [dispatch(fast_text, n, tmp / f"overhead-{n}.sqlite", task_stream=True) for n in sizes.overhead_testbeds]
        problems = [f"{row.testbeds} testbeds: {problem}" for row in (*speed, *fast) for problem in row.problems]
        resumed = resume(sizes.resume_trials, sizes.resume_testbeds, tmp)

        speedup_table(speed)
        overhead_table(fast)
        resumed_ok = resume_table(resumed, sizes.resume_testbeds)
        for problem in problems:
            print(f"RECORDING PROBLEM (figures above are void): {problem}")
        print(f"\nwall time {time.perf_counter() - started:.0f} s; load average over the last 1 / 15 min "
              f"{os.getloadavg()[0]:.2f} / {os.getloadavg()[2]:.2f} (the benchmark's own processes count in it)")
    return 1 if problems or not resumed_ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
