"""``--retry-failed`` (``retry_failed=True``): a resumed run or validation measures its failed trials again; the
failed attempts stay in the store, set aside as superseded (status ``interrupted``), so every reader counts only
the run's last attempt. The simulator's ``fail_after`` breaks a testbed after so many measurements (per process:
a resumed run measures that many again before breaking)."""
from __future__ import annotations

from pathlib import Path

from cli_helpers import run_in_process
from simulator_helpers import simulator_design

import tunelab
from tunelab.store import Store

SIMPLE = ["validate", "--target", "simulator", "--surface", "simple", "--metric", "qps:max:5", "--blocks", "3",
          "--candidate", "net.core.somaxconn=1024", "--target-option", "fail_after=5", "--store", "v.sqlite"]


def superseded(store: Store, phase: str) -> list[str]:
    trials = store.trials(phase)
    return list(trials.loc[trials["reason"].fillna("").str.startswith("superseded: "), "status"])


def test_a_resumed_run_measures_its_failed_trials_again_with_retry_failed(tmp_path: Path) -> None:
    design = tmp_path / "retry.yaml"
    design.write_text(simulator_design("retry", cv=0.02).replace("cv: 0.02}", "cv: 0.02, fail_after: 2}"))
    store = tmp_path / "retry.sqlite"
    first = tunelab.run(design, store=store, progress=False)
    assert first.ok == 2 and first.failed == first.planned - 2 > 0
    again = tunelab.run(design, store=store, progress=False)          # resume: failed trials are done
    assert again.skipped == again.planned and again.failed == 0
    retried = tunelab.run(design, store=store, progress=False, retry_failed=True)
    assert retried.skipped == 2 and retried.ok == 2 and retried.failed == first.failed - 2
    with Store(store, readonly=True) as opened:
        assert superseded(opened, "screen") == ["interrupted"] * first.failed
        assert len(opened.tidy("screen", include_failed=True)) == first.planned      # one row per planned run


def test_a_resumed_validation_measures_its_failed_trials_again_with_retry_failed(tmp_path, capfd, monkeypatch) -> None:
    first = run_in_process(SIMPLE, tmp_path, capfd, monkeypatch)
    assert "7 of 12 trials failed" in first.stdout, first.stdout
    resumed = run_in_process(SIMPLE, tmp_path, capfd, monkeypatch)            # without the flag: read back
    assert "7 of 12 trials failed" in resumed.stdout, resumed.stdout
    retried = run_in_process(SIMPLE + ["--retry-failed"], tmp_path, capfd, monkeypatch)
    assert "2 of 12 trials failed" in retried.stdout, retried.stdout          # 5 measured before it broke again
    with Store(tmp_path / "v.sqlite", readonly=True) as store:
        assert superseded(store, "validate") == ["interrupted"] * 7
        assert list(store.trials("validate")["status"]).count("failed") == 2
