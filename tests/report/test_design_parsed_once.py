"""A report reads its study's stored design once: load_study parses it, study_inputs reuses it (issue 36)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tunelab.designs as designs
from tunelab import study_data
from tunelab.report import loading

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "examples" / "default.sqlite"


def test_the_stored_design_is_parsed_once_per_report_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, store)
    parses = []
    real = designs.load_design_text

    def counted(text, **kwargs):
        parses.append(kwargs.get("source"))
        return real(text, **kwargs)

    monkeypatch.setattr(loading, "load_design_text", counted)
    monkeypatch.setattr(study_data, "load_design_text", counted)
    inputs = loading.study_inputs(loading.load_study(store))
    assert len(parses) == 1, parses
    assert inputs.design is not None and inputs.knobs        # the one parse served the screen's inputs
