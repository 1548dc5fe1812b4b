"""A study read over numeric ranges (seed 004's Latin hypercube, recorded in the lab) in the report: its key
figure is the response curves (there are no levels to draw effect sizes for), and the post-hoc notebook
has no pairs to compare for knobs read over a range."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tunelab.report.build import index_html
from tunelab.report.tables import RANGE_TESTS, significant_pairs
from tunelab.report.loading import load_study, screen_study

STORE = Path(__file__).resolve().parents[2] / "data" / "examples" / "seeds" / "004-wayfinder-space.sqlite"


@pytest.fixture(scope="module")
def lhs_screen(tmp_path_factory: pytest.TempPathFactory):
    copy = tmp_path_factory.mktemp("lhs") / STORE.name
    shutil.copyfile(STORE, copy)
    study = load_study(copy)
    inputs, result = screen_study(study, n_boot=200)
    return study, inputs, result


def test_a_range_study_has_significant_knobs_but_no_post_hoc_pairs(lhs_screen) -> None:
    _, _, result = lhs_screen
    ranged = result.verdicts[result.verdicts["significant"].astype(bool)]
    assert not ranged.empty and set(ranged["test"]) <= set(RANGE_TESTS)     # somaxconn matters for qps there
    assert significant_pairs(result.verdicts) == []


def test_the_index_of_a_range_study_shows_response_curves(lhs_screen) -> None:
    study, inputs, result = lhs_screen
    page = index_html(study, inputs, result, runs=[])
    assert "response curves of qps" in page
    assert "effect sizes for qps" not in page
