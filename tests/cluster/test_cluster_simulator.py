"""Many testbeds on a real Dask LocalCluster, with SYNTHETIC simulator testbeds (no mocks of Dask).

The simulator's noise is seeded by the run key, so a trial measures the same whichever testbed runs
it, in whatever order: a study run on three testbeds must equal the serial study exactly, up to the
order of its trials.
"""
from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tunelab
from tunelab.cli import main
from tunelab.cluster import (QUARANTINE_AFTER, BedSpec, Dispatcher, TestbedCluster, journal_path,
                             run_design_on_testbeds)
from tunelab.designs import load_design_text, make_plan
from tunelab.runner.design_access import load_for
from tunelab.runner.plans import run_design
from tunelab.simulator import SimulatorTarget
from tunelab.errors import StoreError
from tunelab.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_helpers import WorkerKiller  # noqa: E402

DESIGN = textwrap.dedent("""
    name: sim60
    target: {type: simulator, options: {surface: simple, cv: 0.03}}
    load: {generator: dnsperf, profile: overload}
    measure_s: 1
    metrics: [{name: qps, direction: maximize, sesoi_pct: 10}]
    knobs:
      - {name: net.core.somaxconn, levels: [128, 16, 1024], baseline: 128}
      - {name: net.ipv4.tcp_congestion_control, levels: [cubic, bbr], baseline: cubic}
    design: {type: oat, replicates: 12, seed: 5}
""")


@pytest.fixture(autouse=True)
def testbed_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "testbeds"
    monkeypatch.setenv("TUNELAB_TESTBED_DIR", str(directory))   # the workers inherit it
    return directory


def beds(count: int, **options) -> list[BedSpec]:
    return [BedSpec(f"sim{i + 1}", "simulator", {"surface": "simple", "cv": 0.03, "seed": 0, **options},
                    SimulatorTarget) for i in range(count)]


def open_store(path: Path, text: str = DESIGN) -> Store:
    design = load_design_text(text, source="sim60.yaml")
    return Store.open(path, study=design.name, design_hash=design.design_hash, design_text=text)


def by_run(frame):
    return frame.sort_values("run_id").reset_index(drop=True)


def test_three_testbeds_give_the_serial_results_up_to_order(tmp_path: Path) -> None:
    design = load_design_text(DESIGN, source="sim60.yaml")
    load, settings = load_for(design, SimulatorTarget, {"surface": "simple", "cv": 0.03})
    with open_store(tmp_path / "serial.sqlite") as store:
        run_design(design, SimulatorTarget("simple", cv=0.03, seed=0), store, progress=False, load=load,
                   load_settings=settings)
        serial = store.tidy()
    with TestbedCluster(beds(3)) as cluster, open_store(tmp_path / "parallel.sqlite") as store:
        summary = run_design_on_testbeds(design, Dispatcher(cluster, store, progress=False), store, load=load,
                                         load_settings=settings)
        parallel = store.tidy()
        trials = store.trials()
    assert summary.ok == 60 and summary.failed == 0
    assert len(parallel) == len(serial) == 60
    columns = ["run_id", "config_id", "is_baseline", "net.core.somaxconn", "net.ipv4.tcp_congestion_control", "qps"]
    assert by_run(parallel)[columns].equals(by_run(serial)[columns])
    assert "testbed" not in serial.columns
    assert set(parallel["testbed"]) == {"sim1", "sim2", "sim3"}            # all three took trials
    assert trials["run_key"].is_unique
    assert all(p["testbed"] == row for p, row in zip(trials["provenance"], parallel["testbed"]))


def test_resume_skips_trials_done_whichever_testbed_ran_them(tmp_path: Path) -> None:
    design = load_design_text(DESIGN, source="sim60.yaml")
    load, settings = load_for(design, SimulatorTarget, {"surface": "simple", "cv": 0.03})
    path = tmp_path / "study.sqlite"
    plan = make_plan(design)
    with TestbedCluster(beds(2)) as cluster:
        with open_store(path) as store:           # the first 25 runs, on two testbeds
            part = plan.sort_values("run_order").head(25)
            run_design_on_testbeds(design, Dispatcher(cluster, store, progress=False), store, plan=part, load=load,
                                   load_settings=settings)
        with open_store(path) as store:           # then the whole plan: only the other 35 run
            summary = run_design_on_testbeds(design, Dispatcher(cluster, store, progress=False), store, load=load,
                                             load_settings=settings)
            trials = store.trials()
    assert (summary.skipped, summary.ok) == (25, 35)
    assert len(trials) == 60 and trials["run_key"].is_unique


def test_a_worker_killed_mid_study_loses_and_doubles_no_trial(tmp_path: Path) -> None:
    """SIGKILL one worker while its testbed measures: Dask runs the lost task again, the nanny restarts
    the worker, and every planned trial is in the store exactly once."""
    text = DESIGN.replace("replicates: 12", "replicates: 4")            # 20 trials of 0.25 s
    design = load_design_text(text, source="sim60.yaml")
    load, settings = load_for(design, SimulatorTarget, {"surface": "simple", "cv": 0.03})
    with TestbedCluster(beds(2, delay_s=0.25)) as cluster, open_store(tmp_path / "kill.sqlite", text) as store:
        killer = WorkerKiller(cluster, "sim1",
                              lambda own: (own.trials()["status"] == "running").any() and own.last_trial_id() >= 3)
        killer.start()
        summary = run_design_on_testbeds(design, Dispatcher(cluster, store, progress=False), store, load=load,
                                         load_settings=settings)
        killer.join()
        trials = store.trials()
    assert killer.killed, "the worker was never caught mid-trial"
    done = trials[trials["status"].isin(["ok", "flagged", "failed"])]
    assert summary.ok == 20 and len(done) == 20 and done["run_key"].is_unique
    assert trials["run_key"].is_unique                                     # not even an interrupted copy
    with Store(journal_path("sim1"), readonly=True) as bed:                # the killed worker's own store
        assert not bed.unrestored()                                        # its successor put everything back


def test_a_testbed_that_cannot_run_is_quarantined_at_once(tmp_path: Path) -> None:
    """sim2's surface lacks a knob of the design: its preflight fails, it is quarantined before any trial,
    and the study finishes on the other two, every run exactly once."""
    design = load_design_text(DESIGN, source="sim60.yaml")
    load, settings = load_for(design, SimulatorTarget, {"surface": "simple", "cv": 0.03})
    specs = beds(3)
    specs[1] = BedSpec("sim2", "simulator", {"surface": "smooth", "cv": 0.03}, SimulatorTarget)
    said: list[str] = []
    with TestbedCluster(specs) as cluster, open_store(tmp_path / "q.sqlite") as store:
        dispatcher = Dispatcher(cluster, store, progress=False, say=said.append)
        summary = run_design_on_testbeds(design, dispatcher, store, load=load, load_settings=settings)
        data, trials = store.tidy(), store.trials()
    assert summary.ok == 60 and len(trials) == 60 and data["run_id"].is_unique
    assert set(data["testbed"]) == {"sim1", "sim3"}
    assert "tcp_congestion_control" in dispatcher.beds["sim2"].quarantined
    assert [line for line in said if line.startswith("testbed sim2 quarantined")]


def test_a_testbed_whose_trials_keep_failing_is_quarantined(tmp_path: Path) -> None:
    """sim2 breaks after 2 measurements: each of its failed trials is set aside and measured again on
    another testbed, where it succeeds; after QUARANTINE_AFTER such failures sim2 is quarantined and the
    study goes on. Every run ends ok exactly once; the set-aside attempts stay, marked."""
    design = load_design_text(DESIGN, source="sim60.yaml")
    load, settings = load_for(design, SimulatorTarget, {"surface": "simple", "cv": 0.03})
    specs = beds(3, delay_s=0.05)
    specs[1] = BedSpec("sim2", "simulator", {"surface": "simple", "cv": 0.03, "delay_s": 0.05, "fail_after": 2},
                       SimulatorTarget)
    said: list[str] = []
    with TestbedCluster(specs) as cluster, open_store(tmp_path / "q.sqlite") as store:
        dispatcher = Dispatcher(cluster, store, progress=False, say=said.append)
        summary = run_design_on_testbeds(design, dispatcher, store, load=load, load_settings=settings)
        trials = store.trials()
    done = trials[trials["status"] != "interrupted"]
    aside = trials[trials["status"] == "interrupted"]
    assert summary.ok == 60 and summary.failed == 0
    assert len(done) == 60 and done["run_key"].is_unique and set(done["status"]) == {"ok"}
    # the failures that convicted sim2, and those of trials it took while the reruns were on their way
    assert QUARANTINE_AFTER <= len(aside) <= QUARANTINE_AFTER + 3
    assert all(p["testbed"] == "sim2" for p in aside["plan"])
    assert aside["reason"].str.startswith("failed on testbed sim2").all()
    assert set(aside["run_key"]) <= set(done["run_key"])          # each measured again elsewhere
    assert dispatcher.beds["sim2"].quarantined and [s for s in said if s.startswith("testbed sim2 quarantined")]


def test_cli_runs_on_a_testbeds_file_and_the_screen_shows_the_block(tmp_path: Path, capsys,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sim.yaml").write_text(DESIGN)
    testbeds = Path(__file__).resolve().parents[2] / "examples" / "testbeds-simulator.yaml"
    assert main(["run", "sim.yaml", "--testbeds", str(testbeds)]) == 0
    captured = capsys.readouterr()
    assert "60 planned, 0 already done (skipped), 60 ok" in captured.out
    # on a pipe, the study's progress: the round, the whole study's counts as recorded, one bar (not the dispatcher's)
    lines = [line for line in captured.err.splitlines() if line.startswith("sim60: ")]
    assert lines and lines[-1].startswith("sim60: round 1, 60/60 trials, 60 ok, 0 flagged, 0 failed"), captured.err
    assert all("/60 trials" in line for line in lines), captured.err
    assert main(["screen", "sim60"]) == 0
    out = capsys.readouterr().out
    assert "testbed block: 3 testbeds" in out
    # the refine search measures its batches on the testbeds; each confirmation block stays on one testbed
    result = tunelab.refine("sim.yaml", budget=12, testbeds=testbeds, confirm_blocks=3)
    with Store(result.store_path, readonly=True) as store:
        confirm = store.trials("confirm")
    blocks = confirm["run_key"].str.extract(r":b(\d+):")[0]
    per_block = confirm.assign(block=blocks, testbed=[p["testbed"] for p in confirm["plan"]]).groupby("block")
    assert len(confirm) == 12 and (per_block["testbed"].nunique() == 1).all()


def test_ctrl_c_stops_dispatch_records_trials_in_flight_and_resumes(tmp_path: Path) -> None:
    """SIGINT to the whole process group (as Ctrl-C in a terminal): the workers ignore it, the client
    stops dispatch, the trials in flight are recorded as interrupted and restored, the exit status is
    130; running again finishes the study without measuring anything twice."""
    import subprocess
    import sys

    text = DESIGN.replace("replicates: 12", "replicates: 6")                 # 30 trials of 0.3 s
    (tmp_path / "sim.yaml").write_text(text)
    (tmp_path / "beds.yaml").write_text("testbeds:\n" + "".join(
        f"  - {{name: sim{i}, type: simulator, options: {{surface: simple, delay_s: 0.3}}}}\n" for i in (1, 2)))
    argv = [sys.executable, "-m", "tunelab", "run", "sim.yaml", "--testbeds", "beds.yaml", "--no-progress"]
    env = {**os.environ, "TUNELAB_TESTBED_DIR": str(tmp_path / "testbeds")}
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    store_path = tmp_path / "data" / "sim60.sqlite"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with Store(store_path, readonly=True) as store:
                if len(store.trials()) >= 6:
                    break
        except StoreError:
            pass
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "stopping:" in err and "Traceback" not in err
    with Store(store_path, readonly=True) as store:
        first = store.trials()
    assert 6 <= len(first) < 30 and first["run_key"].is_unique
    for name in ("sim1", "sim2"):
        with Store(journal_path(name), readonly=True) as own:
            assert own.unrestored() == []                  # every trial in flight was put back
    again = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stderr[-2000:]
    with Store(store_path, readonly=True) as store:
        trials = store.trials()
    done = trials[trials["status"] != "interrupted"]
    assert len(done) == 30 and done["run_key"].is_unique
    assert (trials["status"] == "interrupted").sum() == len(trials) - 30


BAD_TESTBEDS = {
    "unknown type": ("testbeds:\n  - {name: a, type: vm}\n", "unknown target type"),
    "duplicate names": ("testbeds:\n  - {name: a, type: simulator}\n  - {name: a, type: simulator}\n", "are both named 'a'"),
    "unreachable host": ("testbeds:\n  - {name: a, type: ssh, options: {server: 'root@127.0.0.1:PORT', "
                         "known_hosts: KNOWN}}\n", "cannot reach 127.0.0.1:PORT"),
    "missing key": ("testbeds:\n  - {name: a, type: ssh, options: {server: 'root@127.0.0.1:PORT', known_hosts: KNOWN, "
                    "connect_kwargs: {key_filename: /nonexistent/id_ed25519}}}\n", "/nonexistent/id_ed25519"),
}


@pytest.mark.parametrize("case", sorted(BAD_TESTBEDS))
def test_a_bad_testbeds_file_is_one_error_line_before_anything_runs(case: str, tmp_path: Path, capsys,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as probe:                   # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "known_hosts").write_text("")
    text, expected = BAD_TESTBEDS[case]
    (tmp_path / "beds.yaml").write_text(text.replace("PORT", str(port)).replace("KNOWN", str(tmp_path / "known_hosts")))
    (tmp_path / "sim.yaml").write_text(DESIGN)
    assert main(["run", "sim.yaml", "--testbeds", "beds.yaml", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("tunelab: error:"), err
    assert expected.replace("PORT", str(port)) in err, err
    assert not (tmp_path / "data").exists()           # no store: nothing was run or recorded


def test_a_refused_plan_on_testbeds_is_one_error_line_before_the_store_opens(tmp_path: Path, capsys,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan is checked once, before the store: a host-global knob not allowed opens no store and starts no Dask."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "beds.yaml").write_text("testbeds:\n  - {name: a, type: simulator}\n")
    (tmp_path / "sim.yaml").write_text(DESIGN.replace("design:", "  - {name: vm.swappiness, levels: [60, 10], "
                                                                     "baseline: 60}\ndesign:"))
    assert main(["run", "sim.yaml", "--testbeds", "beds.yaml", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "refusing to change host-global knob(s) vm.swappiness" in err, err
    assert not (tmp_path / "data").exists()


def test_an_existing_scheduler_and_named_workers_run_the_study(tmp_path: Path, capsys,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`dask scheduler` and one `dask worker --name TESTBED --resources testbed=1` per testbed, as the
    README shows; `tunelab run --scheduler` uses them, and leaves them running."""
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    worker = [sys.executable, "-m", "distributed.cli.dask_worker"]
    env = {**os.environ, "TUNELAB_TESTBED_DIR": str(tmp_path / "testbeds")}
    procs = [subprocess.Popen([*dask, "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for name in ("sim1", "sim2"):
            procs.append(subprocess.Popen([*worker, address, "--name", name, "--nthreads", "1", "--resources",
                                           "testbed=1", "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("TUNELAB_TESTBED_DIR", str(tmp_path / "testbeds"))
        (tmp_path / "sim.yaml").write_text(DESIGN.replace("replicates: 12", "replicates: 2"))
        (tmp_path / "beds.yaml").write_text("testbeds:\n  - {name: sim1, type: simulator}\n"
                                            "  - {name: sim2, type: simulator}\n")
        assert main(["run", "sim.yaml", "--testbeds", "beds.yaml", "--scheduler", address, "--no-progress"]) == 0
        assert "10 planned, 0 already done (skipped), 10 ok" in capsys.readouterr().out
        with Store(tmp_path / "data" / "sim60.sqlite", readonly=True) as store:
            assert set(store.tidy()["testbed"]) == {"sim1", "sim2"}
        assert all(proc.poll() is None for proc in procs)          # the cluster is the user's: still up
        (tmp_path / "beds3.yaml").write_text((tmp_path / "beds.yaml").read_text()
                                             + "  - {name: sim3, type: simulator}\n")
        monkeypatch.setattr("tunelab.cluster.session.JOIN_TIMEOUT_S", 3.0)
        assert main(["run", "sim.yaml", "--testbeds", "beds3.yaml", "--scheduler", address, "--store", "x.sqlite",
                     "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "no Dask worker for testbed(s) sim3" in err and len(err.strip().splitlines()) == 1
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
