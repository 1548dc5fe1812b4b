"""`tunelab quickstart` end to end on the real lab: run -> screen -> report, with a tiny design.

The README's first command runs the same verb on designs/default.yaml (about 8 minutes); this test
uses short trials so the whole path (lab up, real dnsperf/NSD trials, lab down, screen, papermill
report) is proven in CI in well under a minute.

With 2 runs per level the screen cannot check its assumptions, so it reads each knob through a
one-way model of log(QPS) with the error pooled over the levels (tunelab.stats.screen,
MIN_RUNS_FOR_CHECKS). somaxconn=16 collapses the QPS by about 99 %, a log ratio of about -4.6
against a run-to-run SD of 0.05-0.3: in 300 simulated studies with CVs of 12 % (baseline) and 30 %
(collapse), the largest Holm-adjusted p was 0.021, so `matters` is asserted. The null knob's verdict
is not asserted (noise may flip it). Every knob gets a row with a legal verdict, the store holds
every planned trial, and the measured QPS at somaxconn=16 is below half the baseline's.
"""
from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from tunelab.cli import main
from tunelab.store import Store

VERDICTS = ("matters", "no effect (equivalent)", "inconclusive", "untestable")

DESIGN = textwrap.dedent("""
    name: quickstart-e2e
    description: tiny OAT design for the quickstart test
    target: {type: lab}
    load: {generator: dnsperf, profile: overload, settings: {}}
    warmup_s: 1
    measure_s: 1.5
    metrics:
      - {name: qps, direction: maximize, sesoi_pct: 5}
    knobs:
      - {name: net.core.somaxconn, host: server, levels: [4096, 16], baseline: 4096}
      - {name: net.ipv4.tcp_fin_timeout, host: server, levels: [60, 10], baseline: 60}
    design: {type: oat, replicates: 2, seed: 1}
""")


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.serial      # it reads a real verdict (somaxconn 16 matters): measured on a machine running nothing else
def test_quickstart_runs_screens_and_reports(tmp_path: Path, monkeypatch, capsys) -> None:
    for tool in ("dnsperf", "nsd"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs Debian's {tool}")
    design = tmp_path / "tiny.yaml"
    design.write_text(DESIGN)
    monkeypatch.chdir(tmp_path)
    assert main(["quickstart", "--design", str(design), "--no-progress"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.lstrip().startswith(("net.core.somaxconn", "net.ipv4.tcp_fin"))]
    assert {row.split()[0] for row in rows} >= {"net.core.somaxconn", "net.ipv4.tcp_fin_timeout"}, out
    assert all(any(verdict in row for verdict in VERDICTS) for row in rows), out
    somaxconn_qps = next(row for row in rows if row.split()[:2] == ["net.core.somaxconn", "qps"])
    assert " matters " in somaxconn_qps, out
    index = Path(out.strip().splitlines()[-1].removeprefix("report: "))
    assert index == (tmp_path / "reports" / "quickstart-e2e" / "index.html").resolve()
    html = index.read_text()
    assert "net.core.somaxconn" in html and "Methods" in html
    with Store(tmp_path / "data" / "quickstart-e2e.sqlite", readonly=True) as store:
        assert store.completed_run_keys("screen") == {f"screen:{i}" for i in range(6)}   # 3 configs x 2
        trials = store.tidy(include_flagged=True)
    qps = trials.groupby("net.core.somaxconn")["qps"].mean()
    assert qps[16] < 0.5 * qps[4096], qps             # measured about -99 %; noise is a few %
