"""The screen's duet route against statsmodels: each level's crossover fit, interval, TOST and Holm adjustment."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats as ss
from statsmodels.stats.multitest import multipletests

from tunelab.stats import screen

KNOB, BASE = "k", 1
#: level -> the log ratios of its pairs; A on side 0 (+1) and on side 1 (-1) alternate 0 1 1 0
LOG_RATIOS = {2: [0.12, 0.07, 0.10, 0.13, 0.09, 0.06], 3: [0.01, -0.02, 0.00, 0.03, 0.02, -0.01]}
ORIENTATION = np.array([1.0, -1.0, -1.0, 1.0, 1.0, -1.0])


def duet_runs() -> pd.DataFrame:
    """Tidy duet runs: each level's pairs (B at the level, A at the baseline 1000 qps times a pair factor)."""
    rows, pair = [], 0
    for level, ratios in LOG_RATIOS.items():
        for d, o in zip(ratios, ORIENTATION):
            a_side = 0 if o > 0 else 1
            a = 1000.0 * (1 + 0.05 * math.sin(pair))        # common-mode: the pair's own level
            rows.append({KNOB: BASE, "qps": a, "duet_pair": pair, "duet_side": a_side, "duet_arm": "A",
                         "varied_knob": None, "is_baseline": True})
            rows.append({KNOB: level, "qps": a * math.exp(d), "duet_pair": pair, "duet_side": 1 - a_side,
                         "duet_arm": "B", "varied_knob": KNOB, "is_baseline": False})
            pair += 1
    return pd.DataFrame(rows)


def test_each_level_is_the_crossover_fit_statsmodels_gives_and_the_levels_are_holm_adjusted():
    result = screen(duet_runs(), [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}], [KNOB], {KNOB: BASE},
                    design={"type": "oat", "measurement": "duet"})
    effects = result.effects.set_index("level")
    raw = []
    for level, ratios in LOG_RATIOS.items():
        fit = sm.OLS(np.array(ratios), sm.add_constant(ORIENTATION)).fit()
        low, high = fit.conf_int(0.05)[0]
        assert effects.loc[level, "pct_change"] == pytest.approx(100 * math.expm1(fit.params[0]), rel=1e-9)
        assert effects.loc[level, "ci_low"] == pytest.approx(100 * math.expm1(low), rel=1e-9)
        assert effects.loc[level, "ci_high"] == pytest.approx(100 * math.expm1(high), rel=1e-9)
        raw.append(fit.pvalues[0])
        # the paired TOST: two one-sided t tests of the intercept against log(1 -/+ 5 %)
        lower = fit.t_test(([1, 0], math.log(0.95)))
        upper = fit.t_test(([1, 0], math.log(1.05)))
        t_low, t_high = float(np.ravel(lower.tvalue)[0]), float(np.ravel(upper.tvalue)[0])
        expected_tost = max(ss.t.sf(t_low, fit.df_resid), ss.t.cdf(t_high, fit.df_resid))
        got = result.equivalence.set_index("level").loc[level, "p"]
        assert got == pytest.approx(expected_tost, rel=1e-9)
    posthoc = result.posthoc.set_index("group2")
    holm = multipletests(raw, method="holm")[1]
    assert list(posthoc.loc[list(LOG_RATIOS), "p_adj"]) == pytest.approx(list(holm), rel=1e-9)
    row = result.verdicts.iloc[0]
    assert row["test"] == "duet+paired_t" and row["level"] == 2


def test_without_the_duet_measurement_the_same_runs_take_the_one_way_route():
    result = screen(duet_runs(), [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}], [KNOB], {KNOB: BASE},
                    design={"type": "oat"})
    assert result.verdicts.iloc[0]["test"] != "duet+paired_t"


def test_a_level_with_too_few_pairs_is_left_out_with_a_note():
    spec = [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}]
    runs = duet_runs()
    fewer = runs[~runs["duet_pair"].isin([6, 7, 8, 9])]               # level 3 keeps 2 pairs
    result = screen(fewer, spec, [KNOB], {KNOB: BASE}, design={"type": "oat", "measurement": "duet"})
    assert list(result.effects["level"]) == [2]
    assert any("level 3 has 2 usable pair(s)" in note for note in result.settings["notes"])
    one_sided = runs[~runs["duet_pair"].isin([7, 8, 11])]            # level 3 keeps 3 pairs, all with A on side 0
    result = screen(one_sided, spec, [KNOB], {KNOB: BASE}, design={"type": "oat", "measurement": "duet"})
    assert any("level 3 has 3 usable pair(s) of one orientation only" in n for n in result.settings["notes"])
