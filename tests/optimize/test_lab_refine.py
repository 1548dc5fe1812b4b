"""Refinement and validation on the real network-namespace lab (dnsperf against NSD).

Short trials (1 s warm-up, 2 s measured) keep these to about a minute; they check the pipeline
on real kernels (trials recorded, knobs read back, host untouched, labs removed) and one
effect big enough to be beyond doubt in 2 ABBA blocks: ``somaxconn=16`` collapses QPS by ~99 %.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from dns_helpers import lab_dnsperf_design, needs_dns_tools  # noqa: F401 - a fixture

from tunelab.cli import main
from tunelab.store import Store

DESIGN = lab_dnsperf_design("refine-lab", "GA over somaxconn and the server link MTU, dnsperf overload, short trials", """
    - {name: net.core.somaxconn, host: server, levels: [4096, 128, 16], baseline: 4096}
    - {name: link.mtu, host: server, device: "@link", levels: [1500, 128], baseline: 1500}
""")


pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures("needs_dns_tools")]


def _host_somaxconn() -> str:
    return Path("/proc/sys/net/core/somaxconn").read_text()


def test_refine_on_the_lab_records_every_evaluation_and_confirms(tmp_path: Path, capsys) -> None:
    design, store_path, out_json = tmp_path / "refine.yaml", tmp_path / "refine.sqlite", tmp_path / "r.json"
    design.write_text(DESIGN)
    before = _host_somaxconn()
    status = main(["refine", str(design), "--objective", "qps:max", "--budget", "6", "--confirm-blocks", "2",
                   "--store", str(store_path), "--json", str(out_json)])
    captured = capsys.readouterr()
    out = captured.out
    assert status in (0, 4), out + captured.err   # two ABBA blocks: improve/equivalent or inconclusive, never an error
    payload = json.loads(out_json.read_text())
    assert payload["winner"]["net.core.somaxconn"] != 16, payload   # the collapse is never the winner
    with Store(store_path, readonly=True) as store:
        trials = store.trials()
        assert store.unrestored() == []
        assert store.run_targets() and all("lab" in t for t in store.run_targets())
    refine_trials = trials[trials["phase"] == "refine"]
    assert len(refine_trials) >= 6 and (refine_trials["status"] != "running").all()
    if payload["winner"] == {"net.core.somaxconn": 4096, "link.mtu[@link]": 1500}:   # the defaults won
        assert "no change to confirm" in out and (trials["phase"] == "confirm").sum() == 0
    else:
        assert (trials["phase"] == "confirm").sum() == 8            # two ABBA blocks: A B B A A B B A
    read_back = [t["net.core.somaxconn"] for t in refine_trials["knobs_read"] if t]
    assert set(read_back) <= {4096, 128, 16} and len(set(read_back)) >= 2
    assert _host_somaxconn() == before


def test_validate_on_the_lab_finds_the_somaxconn_collapse(tmp_path: Path, capsys) -> None:
    before = _host_somaxconn()
    status = main(["validate", "--target", "lab", "--load", "dnsperf", "--baseline", "net.core.somaxconn=4096",
                   "--candidate", "net.core.somaxconn=16", "--metric", "qps:max:5", "--profile", "overload",
                   "--blocks", "2", "--warmup", "1", "--measure", "2", "--store", str(tmp_path / "v.sqlite")])
    out = capsys.readouterr().out
    assert status in (3, 4), out     # regress (or, with 2 blocks' t on 1 df, inconclusive), never improve
    assert "qps" in out and "%" in out
    with Store(tmp_path / "v.sqlite", readonly=True) as store:
        tidy = store.tidy(phase="validate", include_flagged=True)
        assert store.unrestored() == []
    assert len(tidy) == 8                      # 2 ABBA blocks of 4 trials
    base = tidy.loc[tidy["net.core.somaxconn"] == 4096, "qps"].mean()
    cand = tidy.loc[tidy["net.core.somaxconn"] == 16, "qps"].mean()
    assert cand < 0.2 * base, (base, cand)
    assert _host_somaxconn() == before
