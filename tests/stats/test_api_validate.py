"""check_input and the functions built on it reject bad input with messages that name the fix."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tunelab.errors import DataError, TunelabError
from tunelab.stats import (anova_oneway, check_input, dunn, games_howell, kruskal, normality, pct_change,
                           tukey_hsd, welch_anova)


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame({"knob": ["a"] * 3 + ["b"] * 3, "qps": [1.0, 2, 3, 4, 5, 6], "label": list("uvwxyz")})


def test_unknown_column_is_named_and_columns_listed(frame: pd.DataFrame) -> None:
    with pytest.raises(DataError, match=r"unknown column 'latency'.*knob, qps, label"):
        check_input(frame, "latency", "knob")


def test_non_numeric_dv_suggests_to_numeric(frame: pd.DataFrame) -> None:
    with pytest.raises(DataError, match=r"'label' is not numeric.*pd\.to_numeric"):
        check_input(frame, "label", "knob")


@pytest.mark.parametrize("column", ["qps", "knob"])
def test_missing_values_are_counted(frame: pd.DataFrame, column: str) -> None:
    frame.loc[[1, 4], column] = None
    with pytest.raises(DataError, match=rf"'{column}' has 2 missing value\(s\).*dropna"):
        check_input(frame, "qps", "knob")


def test_single_level_is_refused(frame: pd.DataFrame) -> None:
    frame["knob"] = "a"
    with pytest.raises(DataError, match=r"between column 'knob' has a single level 'a'; a comparison needs at least two"):
        check_input(frame, "qps", "knob")


def test_group_with_one_observation_is_named(frame: pd.DataFrame) -> None:
    frame.loc[5, "knob"] = "c"
    with pytest.raises(DataError, match=r"group knob='c' has 1 observation.*add replicates"):
        check_input(frame, "qps", "knob")


def test_data_error_is_a_tunelab_error() -> None:
    assert issubclass(DataError, TunelabError)


def test_every_test_function_validates(frame: pd.DataFrame) -> None:
    for function in (anova_oneway, welch_anova, kruskal, tukey_hsd, games_howell, dunn, normality):
        with pytest.raises(DataError, match="unknown column"):
            function(frame, "nope", "knob")


def test_functions_never_mutate_their_input(frame: pd.DataFrame) -> None:
    before = frame.copy()
    for function in (anova_oneway, welch_anova, kruskal, tukey_hsd, games_howell, dunn, normality):
        function(frame, "qps", "knob")
    pct_change(frame, "qps", "knob", baseline="a", n_boot=200)
    pd.testing.assert_frame_equal(frame, before)


def test_returns_clean_float_copy(frame: pd.DataFrame) -> None:
    frame["qps"] = frame["qps"].astype(int)
    out = check_input(frame, "qps", "knob")
    assert out.columns.tolist() == ["knob", "qps"]
    assert out["qps"].dtype == np.float64


def test_tuple_levels_work(frame: pd.DataFrame) -> None:
    frame["knob"] = [(4096, 1, 2)] * 3 + [(8192, 1, 2)] * 3
    table = tukey_hsd(frame, "qps", "knob")
    assert table.loc[0, "group1"] == (4096, 1, 2) and table.loc[0, "group2"] == (8192, 1, 2)
