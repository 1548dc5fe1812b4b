"""The report's noise control: the A/A calibration's CV, the CPU pinning and the trials measured again.

A copy of the default example store gets six calibration trials with known values, one screen
attempt set aside as busy (as the runner does it, :meth:`Store.set_aside_trial`) and a pinning
note in its first run's target description; the methods text and the executed 01 notebook show them.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from report_helpers import DEFAULT_EXAMPLE, MISSING, copy_store, nb_outputs

from tunelab.report import loading, wording
from tunelab.report.loading import load_study
from tunelab.stats.noise import replicates_for_sesoi
from tunelab.store import Store

QPS = 20000 * np.array([0.90, 0.95, 1.00, 1.05, 1.10, 1.00])
LATENCY = np.array([2.0, 2.1, 1.9, 2.0, 2.05, 1.95])
PINNED = "pinned (auto): server CPUs 0, client CPUs 1 of 2 available"


@pytest.fixture
def noisy_store(tmp_path: Path) -> Path:
    if not DEFAULT_EXAMPLE.is_file():
        pytest.skip(MISSING.format(path=DEFAULT_EXAMPLE))
    path = copy_store(DEFAULT_EXAMPLE, tmp_path / "stores")
    db = sqlite3.connect(path)
    try:              # the example's own A/A trials make way for the known values below
        db.execute("DELETE FROM trials WHERE phase = 'calibrate'")
        db.commit()
    finally:
        db.close()
    with Store(path) as store:
        first = store.trials("screen").iloc[0]
        baseline = dict(first["config"])
        for i, (qps, latency) in enumerate(zip(QPS, LATENCY)):
            tid = store.begin_trial(f"calibrate:{i}", "calibrate", baseline,
                                    plan={"run_id": i, "config_id": 0, "block": 0, "replicate": i, "run_order": i,
                                          "is_baseline": True, "varied_knob": None})
            store.finish_trial(tid, "ok", None, baseline, {"qps": float(qps), "latency_mean_ms": float(latency)})
        tid = store.begin_trial(first["run_key"], "screen", baseline, plan=first["plan"])
        store.finish_trial(tid, "ok", None, baseline, {"qps": 1.0, "latency_mean_ms": 99.0},
                           provenance={"target": {"target": "lab"}})
        store.set_aside_trial(tid, "repeated: other processes used 34 % of the machine (threshold 20 %)",
                              {"repeated": True, "busy_pct": 34.0})
    db = sqlite3.connect(path)
    try:
        run_id, target = db.execute("SELECT run_id, target FROM runs ORDER BY run_id LIMIT 1").fetchone()
        described = json.loads(target)
        described["lab"]["pinning"] = {"server": "0", "client": "1", "note": PINNED}
        db.execute("UPDATE runs SET target = ? WHERE run_id = ?", (json.dumps(described), run_id))
        db.commit()
    finally:
        db.close()
    return path


def test_methods_state_the_noise_cv_the_pinning_and_the_repeats(noisy_store: Path) -> None:
    study = load_study(noisy_store)
    text = wording.noise_markdown(study)
    cv = 100 * np.std(QPS, ddof=1) / np.mean(QPS)
    assert f"qps CV {cv:.1f} %" in text and PINNED in text
    assert f"qps ±10 %: {replicates_for_sesoi(cv, 10.0)}" in text     # the default design's qps SESOI
    assert "1 attempt(s) during which other processes were busy" in text
    repeated = loading.repeated_trials(study)
    assert repeated[["phase", "busy_pct"]].values.tolist() == [["screen", 34.0]]
    assert repeated["reason"].iloc[0].startswith("repeated: other processes used 34 %")
    # the busy attempt is not a usable run: the screen sees the same trials as before
    assert len(study.tidy["screen"]) == len(load_study(copy_store(DEFAULT_EXAMPLE, noisy_store.parent / "plain"))
                                            .tidy["screen"])


def test_the_screen_notebook_shows_noise_and_repeated_trials(noisy_store: Path, tmp_path: Path) -> None:
    from tunelab.report import build_report

    index = build_report(noisy_store, tmp_path / "r", notebooks=["01"], n_boot=200)
    shown = json.dumps(nb_outputs(index.parent / "01_screen.ipynb"))
    assert "A/A trials of the baseline ran before the study" in shown
    assert "repeated: other processes used 34 %" in shown
    assert "busy attempt(s) set aside and measured again" in shown
