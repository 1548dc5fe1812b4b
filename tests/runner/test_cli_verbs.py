"""`tunelab export` and `tunelab restore` end to end through the CLI entry point."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tunelab.cli import main
from tunelab.store import Store


def _study(tmp_path: Path, spec: dict | None = None) -> Path:
    path = tmp_path / "data" / "demo.sqlite"
    with Store.open(path, study="demo", design_hash="h", design_text="name: demo\n",
                    target_spec=spec or {"type": "lab", "options": {}}) as store:
        for run_id, (status, qps) in enumerate([("ok", 100.0), ("ok", 120.0), ("flagged", 5.0), ("failed", None)]):
            tid = store.begin_trial(f"screen:{run_id}", "screen", {"net.ipv4.tcp_rmem": (4096, 87380, 6291456)},
                                    plan={"run_id": run_id, "config_id": run_id, "block": 0, "replicate": 0,
                                          "run_order": run_id, "is_baseline": run_id == 0, "varied_knob": None})
            store.finish_trial(tid, status, None if status == "ok" else "why", {"net.ipv4.tcp_rmem": (4096, 87380, 6291456)},
                               {} if qps is None else {"qps": qps})
    return path


def test_export_csv_writes_ok_trials_with_sysctl_style_triplets(tmp_path: Path, capsys) -> None:
    path = _study(tmp_path)
    out = tmp_path / "out.csv"
    assert main(["export", str(path), "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert frame["run_id"].tolist() == [0, 1] and frame["qps"].tolist() == [100.0, 120.0]
    assert frame["net.ipv4.tcp_rmem"].tolist() == ["4096 87380 6291456"] * 2
    assert "wrote 2 screen trials of demo" in capsys.readouterr().out


def test_export_parquet_by_study_name_round_trips_the_tidy_frame(tmp_path: Path) -> None:
    path = _study(tmp_path)
    assert main(["export", "demo", "--data-dir", str(tmp_path / "data"), "--format", "parquet", "--include-flagged"]) == 0
    frame = pd.read_parquet(tmp_path / "data" / "demo-screen.parquet")
    with Store(path, readonly=True) as store:
        tidy = store.tidy(include_flagged=True)
    assert frame["status"].tolist() == ["ok", "ok", "flagged"]
    pd.testing.assert_series_equal(frame["qps"], tidy["qps"])
    assert [tuple(v) for v in frame["net.ipv4.tcp_rmem"]] == [(4096, 87380, 6291456)] * 3


def test_export_of_a_missing_study_names_the_fix(tmp_path: Path, capsys) -> None:
    assert main(["export", "nope", "--data-dir", str(tmp_path)]) == 2
    assert "tunelab run DESIGN" in capsys.readouterr().err


def test_restore_with_nothing_to_do_and_argument_errors(tmp_path: Path, capsys) -> None:
    _study(tmp_path)
    assert main(["restore", "--all", "--data-dir", str(tmp_path / "data")]) == 0
    assert "nothing to restore" in capsys.readouterr().out
    assert main(["restore", "--data-dir", str(tmp_path / "data")]) == 2
    assert "or pass --all" in capsys.readouterr().err


def test_restore_resolves_lab_namespace_knobs_as_gone(tmp_path: Path, capsys, monkeypatch) -> None:
    import tunelab.journal

    monkeypatch.setattr(tunelab.journal, "remove_orphan_labs", lambda: [])  # leave other people's labs alone
    pytest.importorskip("tunelab.knobs.catalogue", reason="needs the knob catalogue (tunelab.knobs)")
    path = _study(tmp_path)
    with Store(path) as store:
        store.journal_apply(1, "server", "net.ipv4.tcp_rmem", None, "4096 131072 6291456", "4096 87380 6291456")
    assert main(["restore", "demo", "--data-dir", str(tmp_path / "data")]) == 0
    assert "nothing to restore" in capsys.readouterr().out
    with Store(path, readonly=True) as store:
        assert store.unrestored() == []
