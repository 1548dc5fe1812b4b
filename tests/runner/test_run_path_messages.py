"""What `tunelab run --target dry-run` and `tunelab refine` print, checked against what happened.

The dry run is a preview: per planned trial the files it would write (name and size) and the
commands it would run, on any knob family (``@link`` too), exit 0, and no store. The refine
summary's counts are checked against the trials its store holds.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tunelab.cli import main
from tunelab.designs import load_design, make_plan
from tunelab.store import Store

ROOT = Path(__file__).resolve().parents[2]
README_DRY_RUNS = ["designs/abort_on_overflow_factorial.yaml", "designs/default.yaml"]


@pytest.mark.parametrize("design", README_DRY_RUNS)
def test_dry_run_previews_every_trial_compactly_and_records_nothing(design: str, tmp_path: Path, monkeypatch,
                                                                     capsys) -> None:
    monkeypatch.chdir(tmp_path)                       # the default store would be data/<study>.sqlite here
    monkeypatch.setattr("tunelab.journal.remove_orphan_labs", lambda: [])
    status = main(["run", str(ROOT / design), "--target", "dry-run", "--no-progress"])
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert status == 0, out
    assert len(out.encode()) < 5_000, f"{len(out.encode())} bytes:\n{out}"
    assert not (tmp_path / "data").exists() and not list(tmp_path.rglob("*.sqlite"))
    assert "failed" not in out and "see the store" not in out
    plan = make_plan(load_design(ROOT / design))
    # every planned trial is named on a line of the preview
    named = set(re.findall(r"screen:(\d+)", out))
    assert named == {str(run_id) for run_id in plan["run_id"]}
    # the knob files by name with their size, and the load's command (dnsperf for both designs)
    assert re.search(r"/proc/sys/net/core/somaxconn \(\d+ B", out), out
    assert re.search(r"queries-1000 \(\d[\d,]* B\)", out), out
    assert re.search(r"^\s+client: dnsperf .*-l \d+", out, re.MULTILINE), out
    assert "r0.tunelab.test" not in out                   # the query file is not printed inline


def test_dry_run_shows_link_knobs_as_the_commands_that_set_them(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tunelab.journal.remove_orphan_labs", lambda: [])
    assert main(["run", str(ROOT / "designs/default.yaml"), "--target", "dry-run", "--no-progress"]) == 0
    out = capsys.readouterr().out
    levels = load_design(ROOT / "designs/default.yaml").knobs
    mtu = next(knob for knob in levels if knob.name == "link.mtu")
    for level in mtu.levels:
        if level != mtu.baseline:
            assert re.search(rf"server: ip link set dev \S+ mtu {level}\b", out), out


def test_refine_counts_agree_with_the_store(tmp_path: Path, capsys) -> None:
    store = tmp_path / "r.sqlite"
    args = ["refine", "--target", "simulator", "--surface", "simple", "--budget", "20", "--confirm-blocks", "2",
            "--store", str(store)]
    main(args)
    line = next(line for line in capsys.readouterr().out.splitlines() if " measurements (" in line)
    with Store(store, readonly=True) as opened:
        trials = opened.trials()
    searched, confirming = (trials["phase"] == "refine").sum(), (trials["phase"] == "confirm").sum()
    assert confirming > 0
    split = f"{searched} searching, {confirming} confirming the winner;"
    assert f"{len(trials)} measurements (0 taken from the store, {len(trials)} new): {split}" in line, line
    main(args)                                            # again: everything comes from the store
    line = next(line for line in capsys.readouterr().out.splitlines() if " measurements (" in line)
    assert f"{len(trials)} measurements ({len(trials)} taken from the store, 0 new): {split}" in line, line
