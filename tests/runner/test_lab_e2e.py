"""The real thing: a tiny OAT design under dnsperf overload in the network-namespace lab."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dns_helpers import lab_dnsperf_design

from tunelab.cli import main
from tunelab.store import Store

DESIGN = lab_dnsperf_design("runner-e2e", "two per-netns knobs, OAT, one replicate, dnsperf overload", """
    - {name: net.core.somaxconn, host: server, levels: [4096, 64], baseline: 4096}
    - {name: net.ipv4.tcp_fin_timeout, host: server, levels: [60, 10], baseline: 60}
""", design="{type: oat, replicates: 1, blocks: 1, seed: 7}")


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
