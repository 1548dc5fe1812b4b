"""Two real lab testbeds on this machine (two namespace pairs, NSD and dnsperf in each), on a Dask
LocalCluster: a small dnsperf design end to end, and a worker killed with SIGKILL mid-trial.

These tests assert bookkeeping (every trial once, its testbed, nothing left changed, no lab left),
never a verdict: two labs share this machine's two CPUs, so their measurements are noisy.
"""
from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tunelab
from tunelab.cluster import Dispatcher, TestbedCluster, bed_specs, journal_path, run_design_on_testbeds
from tunelab.designs import load_design_text
from tunelab.store import Store
from tunelab.testbeds import load_testbeds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_helpers import WorkerKiller  # noqa: E402

DESIGN = textwrap.dedent("""
    name: two-labs
    target: {type: lab, options: {records: 200}}
    load: {generator: dnsperf, profile: overload}
    warmup_s: 1
    measure_s: 2
    metrics: [{name: qps, direction: maximize, sesoi_pct: 10}]
    knobs:
      - {name: net.core.somaxconn, levels: [4096, 64], baseline: 4096}
      - {name: net.ipv4.tcp_fin_timeout, levels: [60, 10], baseline: 60}
    design: {type: oat, replicates: REPLICATES, seed: 3}
""")
KNOBS = ("net.core.somaxconn", "net.ipv4.tcp_fin_timeout")


@pytest.fixture
def two_labs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A testbeds file of two labs with fresh names; skips without the lab's tools."""
    for tool in ("dnsperf", "nsd"):
        if shutil.which(tool) is None and shutil.which(tool, path="/usr/sbin") is None:
            pytest.skip(f"needs Debian's {tool}")
    monkeypatch.setenv("TUNELAB_TESTBED_DIR", str(tmp_path / "testbeds"))
    tag = secrets.token_hex(2)
    path = tmp_path / "testbeds.yaml"
    path.write_text(f"testbeds:\n  - {{name: tb{tag}-a, type: lab}}\n  - {{name: tb{tag}-b, type: lab}}\n")
    return path


def host_values() -> dict[str, str]:
    return {name: Path("/proc/sys", *name.split(".")).read_text() for name in KNOBS}


def lab_namespaces(names) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if any(f"tl-{n}-" in line for n in names)]


def design_file(tmp_path: Path, replicates: int) -> Path:
    path = tmp_path / "two-labs.yaml"
    path.write_text(DESIGN.replace("REPLICATES", str(replicates)))
    return path


@pytest.mark.lab
def test_two_lab_testbeds_run_a_dnsperf_design_end_to_end(tmp_path: Path, two_labs: Path) -> None:
    before = host_values()
    names = [bed.name for bed in load_testbeds(two_labs)]
    result = tunelab.run(design_file(tmp_path, 2), testbeds=two_labs, store=tmp_path / "two-labs.sqlite",
                         progress=False)
    with Store(tmp_path / "two-labs.sqlite", readonly=True) as store:
        data, trials = store.tidy(include_flagged=True, include_failed=True), store.trials()
    assert result.failed == 0 and len(data) == 6 and data["run_id"].is_unique
    assert set(data["testbed"]) <= set(names) and data["testbed"].notna().all()
    assert (data["qps"] > 0).all()
    # knobs as read back inside each lab's namespace: the planned levels
    assert sorted(data["net.core.somaxconn"]) == [64, 64, 4096, 4096, 4096, 4096]
    assert all(p["target"]["target"] == "lab" and p["testbed"] in names for p in trials["provenance"])
    assert host_values() == before                     # the host's own values never changed
    assert lab_namespaces(names) == []                 # both labs are gone
    for name in names:
        if journal_path(name).exists():
            with Store(journal_path(name), readonly=True) as own:
                assert own.unrestored() == []


@pytest.mark.lab
def test_a_lab_worker_killed_mid_trial_leaves_every_trial_once_and_nothing_changed(tmp_path: Path,
                                                                                     two_labs: Path) -> None:
    before = host_values()
    # bookkeeping only (a trial's status, not its value, is asserted): the shortest trial dnsperf measures
    # (no warm-up, one per-second line; a trial without its line is `flagged`, which counts as done here)
    text = design_file(tmp_path, 3).read_text().replace("warmup_s: 1\n", "warmup_s: 0\n").replace(
        "measure_s: 2\n", "measure_s: 1\n")
    assert "warmup_s: 0\n" in text and "measure_s: 1\n" in text
    design = load_design_text(text, source="two-labs.yaml")
    beds = bed_specs(load_testbeds(two_labs), {"type": "lab", "options": {"records": 200}})
    victim_bed = beds[0].name
    with TestbedCluster(beds) as cluster, Store.open(tmp_path / "kill.sqlite", study=design.name,
                                                     design_hash=design.design_hash, design_text=text) as store:
        # SIGKILL the worker once its testbed has a knob applied (and is measuring)
        killer = WorkerKiller(cluster, victim_bed, lambda own: bool(own.unrestored()) and own.last_trial_id() >= 2,
                              timeout_s=120)
        killer.start()
        summary = run_design_on_testbeds(design, Dispatcher(cluster, store, progress=False), store)
        killer.join()
        trials = store.trials()
    assert killer.killed, "the worker was never caught with a knob applied"
    done = trials[trials["status"].isin(["ok", "flagged", "failed"])]
    assert len(done) == 9 and done["run_key"].is_unique and summary.planned == 9
    assert trials["run_key"].is_unique
    assert host_values() == before
    assert lab_namespaces([bed.options["name"] for bed in beds]) == []      # the killed worker's lab too
    restored = tunelab.restore([], testbeds=two_labs)                        # what `tunelab restore --testbeds` does
    assert restored.ok
    with Store(journal_path(victim_bed), readonly=True) as own:
        assert own.unrestored() == []
