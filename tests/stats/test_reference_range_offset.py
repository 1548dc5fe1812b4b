"""The range route's least-squares fit is exact on data with a large constant offset: the same runs
with 1e12 added give the same changes (exact: quarter units are exact in float64 at 1e12)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tunelab.stats.response import range_effects


def test_range_effects_do_not_depend_on_a_large_constant_offset() -> None:
    rng = np.random.default_rng(7)
    a = np.tile(np.arange(1.0, 9.0), 3)
    b = np.repeat([10.0, 20.0, 40.0], 8)
    steps = np.round(4 * (3 * a - 0.2 * a * a + 0.05 * b + rng.normal(0, 1, len(a)))) / 4   # quarter units
    plain = pd.DataFrame({"a": a, "b": b, "y": steps})
    offset = plain.assign(y=1e12 + steps)
    assert (offset["y"] - 1e12).tolist() == steps.tolist()          # the offset data hold the steps exactly
    terms_plain, curves_plain = range_effects(plain, "y", ["a", "b"], baseline={"a": 1.0, "b": 10.0})
    terms_offset, curves_offset = range_effects(offset, "y", ["a", "b"], baseline={"a": 1.0, "b": 10.0})
    for column in ("linear", "quadratic", "change_max", "change_min", "statistic", "p"):
        assert terms_offset[column].to_numpy(float) == pytest.approx(terms_plain[column].to_numpy(float),
                                                                     rel=1e-9, abs=1e-9, nan_ok=True), column
    assert curves_offset["estimate"].to_numpy() == pytest.approx(curves_plain["estimate"].to_numpy(), abs=1e-9)
