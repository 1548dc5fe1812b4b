"""Reports on stores that cannot be reported on fail early with a message that says what to do."""
from __future__ import annotations

from pathlib import Path

import pytest

from tunelab.report import ReportError, build_report, load_study

ROOT = Path(__file__).resolve().parents[2]


def test_study_without_screen_trials(tmp_path: Path) -> None:
    from tunelab.designs import load_design
    from tunelab.store import Store

    design = load_design(ROOT / "designs" / "default.yaml")
    path = tmp_path / "empty.sqlite"
    with Store.open(path, study=design.name, design_hash=design.design_hash,
                    design_text=(ROOT / "designs" / "default.yaml").read_text()):
        pass
    with pytest.raises(ReportError) as info:
        build_report(path, tmp_path / "out")
    message = str(info.value)
    assert "has no usable screen, refine, confirm or validate trials" in message and "no trials at all" in message
    assert "run `tunelab run DESIGN`" in message
    assert not (tmp_path / "out").exists()


def test_unknown_study_lists_known_ones(tmp_path: Path) -> None:
    (tmp_path / "alpha.sqlite").touch()
    with pytest.raises(ReportError, match=r"no trial store for study 'nope' .*studies in .*: alpha"):
        load_study("nope", data_dir=tmp_path)


def test_cli_error_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tunelab.cli import main

    assert main(["report", "nope", "--data-dir", str(tmp_path)]) == 2
    assert "tunelab: error: no trial store for study 'nope'" in capsys.readouterr().err


def test_unknown_metric(default_store: Path) -> None:
    from tunelab.report import screen_study

    with pytest.raises(ReportError, match="metric 'nonsense' was not measured"):
        screen_study(load_study(default_store), metric="nonsense", n_boot=100)
