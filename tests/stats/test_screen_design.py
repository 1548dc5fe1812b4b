"""The screen's typed hand-offs: :class:`ScreenInputs` and :class:`ScreenDesign`, read once per call.

On the recorded default study (data/examples, an OAT design run in rounds, with guards), so nothing runs.
"""
from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest

import tunelab
import tunelab.study_data
from tunelab.errors import DataError
from tunelab.model import AnalysisKind, DesignType, Metric
from tunelab.stats import screen
from tunelab.stats.screen_design import RoundLooks, ScreenDesign, as_screen_design

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"


def test_api_screen_parses_the_stored_design_once(monkeypatch) -> None:
    calls = []
    parse = tunelab.study_data.load_design_text
    monkeypatch.setattr(tunelab.study_data, "load_design_text", lambda *a, **k: calls.append(1) or parse(*a, **k))
    result = tunelab.screen("default", data_dir=EXAMPLES, n_boot=100)
    assert len(calls) == 1 and "sequential" in result.settings      # the looks came through the one parse


def test_the_inputs_and_the_design_are_typed_and_frozen() -> None:
    inputs = tunelab.study_data.screen_inputs("default", data_dir=EXAMPLES)
    assert inputs.design.type is DesignType.OAT and inputs.design.looks.max_replicates >= 1
    assert inputs.knobs == list(inputs.baseline) and inputs.alpha == 0.05
    with pytest.raises(FrozenInstanceError):
        inputs.design.looks = None       # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        inputs.alpha = 0.1               # type: ignore[misc]


def test_the_dict_form_and_the_view_screen_alike() -> None:
    """A notebook's dict (with the looks as ``rounds``) reads as the same view."""
    inputs = tunelab.study_data.screen_inputs("default", data_dir=EXAMPLES)
    view = inputs.design
    as_dict = {"type": "oat", "interactions": view.interactions, "guards": view.guards,
               "rounds": {"max_replicates": view.looks.max_replicates, "spending": view.looks.spending}}
    assert as_screen_design(as_dict) == replace(view, looks=RoundLooks(view.looks.max_replicates,
                                                                            view.looks.spending))
    assert as_screen_design({}) is None and as_screen_design(None) is None


def test_a_dict_without_a_type_still_finds_a_range_design_by_its_runs() -> None:
    """No design at all lets the runs decide the route; a view with a type decides it."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(1)
    data = pd.DataFrame({"a": rng.uniform(0, 10, 24).round(3), "b": rng.uniform(0, 10, 24).round(3)})
    data["y"] = 100 + 3 * data["a"] + rng.normal(0, 1, 24)
    args = (data, [{"name": "y", "sesoi_pct": 5}], ["a", "b"], {"a": data["a"].iloc[0], "b": data["b"].iloc[0]})
    assert screen(*args, n_boot=100).design is screen(*args, n_boot=100, design={}).design is AnalysisKind.RANGE


def test_a_bad_design_or_input_is_one_clear_error() -> None:
    with pytest.raises(DataError, match="must be a ScreenDesign or a dict"):
        as_screen_design(["oat"])
    with pytest.raises(DataError, match="design: DesignType 'oats' must be one of"):
        ScreenDesign(type="oats")
    with pytest.raises(DataError, match=r"Metric.parse\('qps:max:5'\)"):
        tunelab.screen("default", data_dir=EXAMPLES, metrics=["qps:max"])
    with pytest.raises(DataError, match="baselines must map a knob column"):
        tunelab.screen("default", data_dir=EXAMPLES, baselines=["net.core.somaxconn=4096"])


def test_typed_choices_override_the_design() -> None:
    inputs = tunelab.study_data.screen_inputs("default", data_dir=EXAMPLES, metrics=[Metric.parse("qps:max:10")],
                                              baselines={"net.core.somaxconn": "16"})
    assert [m["name"] for m in inputs.metrics] == ["qps"] and inputs.metrics[0]["sesoi_pct"] == 10
    assert inputs.baseline["net.core.somaxconn"] == 16          # the text names the data's level
