"""The real thing: a tiny OAT design under dnsperf overload in the network-namespace lab."""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from tunelab.cli import main
from tunelab.store import Store

DESIGN = textwrap.dedent("""
    name: runner-e2e
    description: two per-netns knobs, OAT, one replicate, dnsperf overload
    target: {type: lab, options: {}, allow_host_global: false}
    load: {generator: dnsperf, profile: overload, settings: {}}
    warmup_s: 1
    measure_s: 2
    metrics:
      - {name: qps, direction: maximize, sesoi_pct: 5}
    knobs:
      - {name: net.core.somaxconn, host: server, levels: [4096, 64], baseline: 4096}
      - {name: net.ipv4.tcp_fin_timeout, host: server, levels: [60, 10], baseline: 60}
    design: {type: oat, replicates: 1, blocks: 1, seed: 7}
    analysis: {alpha: 0.05, correction: holm}
""")


def _host_value(name: str) -> str:
    return Path("/proc/sys", *name.split(".")).read_text()


@pytest.mark.lab
def test_tiny_oat_design_runs_in_the_lab_and_resumes(tmp_path: Path, capsys) -> None:
    _lab_pieces_or_skip()
    design, store_path = tmp_path / "e2e.yaml", tmp_path / "data" / "runner-e2e.sqlite"
    design.write_text(DESIGN)
    host_before = {k: _host_value(k) for k in ("net.core.somaxconn", "net.ipv4.tcp_fin_timeout")}

    status = main(["run", str(design), "--store", str(store_path), "--no-progress"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "0 failed" in out, out   # overload may flag a trial (achieved << requested); it must not fail

    with Store(store_path, readonly=True) as store:
        tidy = store.tidy(include_flagged=True)
        assert store.unrestored() == []
        trials = store.trials()
    assert len(tidy) == 3 and (tidy["qps"] > 0).all()
    assert tidy.loc[tidy["is_baseline"], "net.core.somaxconn"].tolist() == [4096]
    assert sorted(tidy["net.core.somaxconn"]) == [64, 4096, 4096]        # as read back inside the namespace
    assert sorted(tidy["net.ipv4.tcp_fin_timeout"]) == [10, 60, 60]
    assert all("kernel" in p["target"] for p in trials["provenance"])
    assert host_before == {k: _host_value(k) for k in host_before}

    assert main(["run", str(design), "--store", str(store_path), "--no-progress"]) == 0
    assert "3 of 3 trials were already done" in capsys.readouterr().out


def _lab_pieces_or_skip() -> None:
    pytest.importorskip("tunelab.knobs.catalogue", reason="needs the knob catalogue (tunelab.knobs)")
    from tunelab.loads import LOADS

    if "dnsperf" not in LOADS:
        pytest.importorskip("tunelab.loads.dnsperf", reason="needs the dnsperf load (tunelab.loads.dnsperf)")
    for tool in ("dnsperf", "nsd"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs Debian's {tool}")


@pytest.fixture
def crash_lab_name() -> Iterator[str]:
    """A unique lab name; whatever the test does, that lab is removed afterwards."""
    import secrets

    from tunelab.targets import lab as lab_module

    name = f"rcrash{secrets.token_hex(3)}"
    try:
        yield name
    finally:
        for state in lab_module.list_states():
            if state.name == name:
                lab_module.destroy(state)


@pytest.mark.lab
def test_sigkill_in_the_lab_then_restore_and_resume(tmp_path: Path, capsys, crash_lab_name: str) -> None:
    _lab_pieces_or_skip()
    from tunelab.targets import lab as lab_module

    design = tmp_path / "crash.yaml"
    design.write_text(DESIGN.replace("name: runner-e2e", "name: runner-lab-crash")
                      .replace("options: {}", "options: {name: %s}" % crash_lab_name))
    store_path = tmp_path / "data" / "runner-lab-crash.sqlite"
    driver = Path(__file__).resolve().parent / "lab_crash_driver.py"
    crashed = subprocess.run([sys.executable, str(driver), str(design), str(store_path), "--kill-at", "after_apply",
                              "--occurrence", "2"], capture_output=True, text=True, timeout=120)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    orphan = [s for s in lab_module.list_states() if s.name == crash_lab_name]
    assert orphan and orphan[0].is_orphan()  # the killed run left its namespaces behind

    assert main(["restore", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert f"removed orphaned lab {crash_lab_name}" in out, out
    assert not [s for s in lab_module.list_states() if s.name == crash_lab_name]
    with Store(store_path, readonly=True) as store:
        assert store.unrestored() == []

    assert main(["run", str(design), "--store", str(store_path), "--no-progress"]) == 0
    with Store(store_path, readonly=True) as store:
        trials = store.trials()
    ok = trials[trials["status"] == "ok"].groupby("run_key").size()
    assert len(ok) == 3 and set(ok) == {1} and trials["status"].tolist().count("interrupted") == 1
