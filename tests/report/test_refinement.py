"""Refine, confirm and validate trials read back from the example stores."""
from __future__ import annotations

from pathlib import Path

import pytest

from report_helpers import copy_store, store_params, stores_with
from tunelab.report import load_study, refinement

REFINES = stores_with("refine")
ABBAS = stores_with("confirm", "validate")


@pytest.mark.parametrize("store", store_params(REFINES, "holds refine trials"))
def test_search_is_replayed_from_the_store(store: Path, tmp_path: Path) -> None:
    study = load_study(copy_store(store, tmp_path))
    history = refinement.search_history(study)
    assert len(history) and history["measurement"].is_monotonic_increasing
    replay = refinement.replay_search(study)
    assert replay is not None, ("the refinement could not be replayed from the store (objectives other than the "
                                "design's?), so 03_refine cannot show generations")
    assert replay.evaluations == len(history)
    if not replay.generations.empty:  # empty when the budget ended inside the initial population
        assert replay.generations["evaluations"].max() <= len(history)
    knobs = refinement.search_knobs(study)
    means = refinement.config_means(history, knobs, [replay.objectives[0].name])
    assert means["n"].sum() == len(history)


@pytest.mark.parametrize("store", store_params(ABBAS, "holds confirm or validate trials"))
def test_abba_comparisons(store: Path, tmp_path: Path) -> None:
    from tunelab.optimize.confirm import VERDICTS

    study = load_study(copy_store(store, tmp_path))
    comparisons = refinement.abba_comparisons(study)
    assert comparisons
    for comparison in comparisons:
        assert set(comparison.measurements["arm"]) == {"A", "B"} and comparison.baseline and comparison.candidate
        goals = refinement.comparison_goals(study, list(comparison.measurements.columns))
        table = refinement.judge(comparison, goals)
        assert set(table["verdict"]) <= set(VERDICTS)


def test_run_key_patterns() -> None:
    assert refinement.REFINE_KEY.match("refine:17:r2").group("event", "replicate") == ("17", "2")
    match = refinement.ABBA_KEY.match("validate:overload:0123abcd:b3:2B")
    assert match.group("phase", "profile", "digest", "block", "position", "arm") == (
        "validate", "overload", "0123abcd", "3", "2", "B")
    assert refinement.ABBA_KEY.match("confirm:0123abcd:b0:0A").group("profile") is None
