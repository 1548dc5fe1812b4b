"""Simulation checks of the TOST equivalence test and of ``screen``'s equivalence verdict.

``tunelab.stats.tost`` is called directly (~2 ms per call) on seeded normal data: baseline mean
100, sd 5, SESOI 5 % (a margin of ±5, one sd), 30 runs per group. Rates carry a 2.58-standard-
error (99 %, one-sided) allowance for simulation error.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tunelab import stats

ALPHA = 0.05
SESOI_PCT = 5.0
MEAN, SD, N = 100.0, 5.0, 30
N_SIM = 1000
Z99 = 2.58


def equivalence_rate(true_difference: float, seed: int) -> float:
    """Share of ``N_SIM`` simulated two-group data sets that ``tost`` declares equivalent."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(N_SIM):
        y = np.concatenate([rng.normal(MEAN, SD, N), rng.normal(MEAN + true_difference, SD, N)])
        frame = pd.DataFrame({"k": ["base"] * N + ["level"] * N, "y": y})
        result = stats.tost(frame, "y", "k", "level", "base", sesoi_pct=SESOI_PCT, alpha=ALPHA)
        hits += bool(result["equivalent"].iloc[0])
    return hits / N_SIM


def test_tost_declares_a_null_level_equivalent_with_enough_data() -> None:
    """True difference 0: with 30 runs per group the Welch TOST (margin = 1 sd) has power
    ~0.97 (normal approximation: P(|Z| < (5 - 1.67 * 1.29) / 1.29)); require >= 0.9."""
    rate = equivalence_rate(0.0, seed=11)
    assert rate >= 0.9, f"equivalence declared in only {rate:.3f} of null data sets"


def test_tost_never_declares_an_effect_of_twice_the_sesoi_equivalent() -> None:
    """True difference = 2 x SESOI (+10 %): equivalence must (practically) never be declared."""
    rate = equivalence_rate(2 * SESOI_PCT / 100 * MEAN, seed=12)
    assert rate <= 0.01, f"equivalence declared in {rate:.3f} of data sets with a 2 x SESOI effect"


@pytest.mark.parametrize("sign", [1, -1], ids=["upper", "lower"])
def test_tost_size_at_the_equivalence_bound_is_at_most_alpha(sign: int) -> None:
    """True difference exactly at a bound (±5 %): the chance of (wrongly) declaring equivalence
    is the test's size, <= alpha + 2.58 SE (0.068 with 1,000 data sets)."""
    rate = equivalence_rate(sign * SESOI_PCT / 100 * MEAN, seed=13 if sign > 0 else 14)
    assert rate <= ALPHA + Z99 * math.sqrt(ALPHA * (1 - ALPHA) / N_SIM), f"size {rate:.3f} at the bound"


def test_screen_verdicts_separate_an_equivalent_knob_from_an_active_one() -> None:
    """Through ``screen`` (OAT, 2 knobs × 3 levels × 30 runs, sd 5 %, SESOI 5 %): a null knob gets
    'no effect (equivalent)'; a knob whose level 2 is +10 % (2 x SESOI) 'matters', is not
    equivalent, and is reported as better with best level 2."""
    rng = np.random.default_rng(21)
    rows = [{"quiet": 0, "active": 0, "y": y} for y in rng.normal(MEAN, SD, N)]
    for level in (1, 2):
        rows += [{"quiet": level, "active": 0, "y": y} for y in rng.normal(MEAN, SD, N)]
        shift = 10.0 if level == 2 else 0.0
        rows += [{"quiet": 0, "active": level, "y": y} for y in rng.normal(MEAN + shift, SD, N)]
    result = stats.screen(pd.DataFrame(rows), [{"name": "y", "direction": "maximize", "sesoi_pct": SESOI_PCT}],
                          ["quiet", "active"], {"quiet": 0, "active": 0}, alpha=ALPHA, n_boot=200)
    verdicts = result.verdicts.set_index("knob")
    assert verdicts.loc["quiet", "verdict"] == "no effect (equivalent)"
    assert bool(verdicts.loc["quiet", "equivalent"])
    assert not bool(verdicts.loc["quiet", "significant"])
    assert verdicts.loc["active", "verdict"] == "matters"
    assert not bool(verdicts.loc["active", "equivalent"])
    assert verdicts.loc["active", "direction"] == "better"
    assert verdicts.loc["active", "level"] == 2
    assert verdicts.loc["active", "effect_ci_low"] < verdicts.loc["active", "effect_pct"] < \
        verdicts.loc["active", "effect_ci_high"]
