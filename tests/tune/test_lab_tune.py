"""``tunelab tune`` on the real network-namespace lab (dnsperf against NSD), a small budget: the structure of a
tune run on real kernels (every stage's trials recorded within the budget, knobs read back, nothing left
changed, the lab removed), never a verdict noise could flip."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from dns_helpers import lab_dnsperf_design, needs_dns_tools  # noqa: F401 - a fixture

from tunelab.cli import main
from tunelab.store import Store

DESIGN = lab_dnsperf_design("tune-lab", "tune over somaxconn, dnsperf overload, short trials", """
    - {name: net.core.somaxconn, host: server, levels: [4096, 128, 16], baseline: 4096}
""")


pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures("needs_dns_tools")]


def test_tune_on_the_lab_records_every_stage_within_its_budget(tmp_path: Path, capsys) -> None:
    design, store_path, out_json = tmp_path / "tune.yaml", tmp_path / "tune.sqlite", tmp_path / "t.json"
    design.write_text(DESIGN)
    before = Path("/proc/sys/net/core/somaxconn").read_text()
    # eight trials (about 4 s each on a quiet machine): the screen's four and refine's four, no confirmation
    status = main(["tune", str(design), "--budget", "8", "--noise", "3", "--split", "screen=50,refine=50,confirm=0",
                   "--store", str(store_path), "--json", str(out_json)])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err                 # no confirmation: nothing to judge
    result = json.loads(out_json.read_text())
    with Store(store_path, readonly=True) as store:
        trials = store.trials()
        assert store.unrestored() == [] and all("lab" in t for t in store.run_targets())
    assert len(trials) == result["spent_total"] <= 8 and (trials["status"] != "running").all()
    assert result["split"]["calibrate"] == 0 and result["spent"]["screen"] == result["split"]["screen"] == 4
    assert [k["knob"] for k in result["knobs"]] == ["net.core.somaxconn"]
    screened = trials[trials["phase"] == "screen"]
    assert {t["net.core.somaxconn"] for t in screened["knobs_read"]} == {4096, 16}    # baseline and its far end
    if result["stopped"]:
        assert set(trials["phase"]) == {"screen"}
    else:
        assert result["spent"]["refine"] <= result["split"]["refine"] and result["confirmation"] is None
        assert all(t["net.core.somaxconn"] in (4096, 128, 16) for t in trials["knobs_read"] if t)
    assert Path("/proc/sys/net/core/somaxconn").read_text() == before
