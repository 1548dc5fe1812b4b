"""Factorial ANOVA (types I, II, III) and Lenth's method against R and a published example.

Regenerate the R values with ``Rscript tests/stats/reference/make_reference.R``. The balanced
data sets (warpbreaks, ToothGrowth) give the same sums of squares for all three types; the
``_unbalanced`` ones (fixed rows dropped) make them differ, which is what tells the types apart.
Tolerances: SS, F and partial eta2 ``rel=1e-9``; p ``rel=1e-6``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunelab import stats

REFERENCE_DIR = Path(__file__).parent / "reference"
REFERENCE = json.loads((REFERENCE_DIR / "reference.json").read_text(encoding="utf-8"))
EXACT = 1e-9
P_REL = 1e-6

CASES = sorted(REFERENCE["factorial"])


def load(case: str) -> tuple[pd.DataFrame, dict]:
    ref = REFERENCE["factorial"][case]
    return pd.read_csv(REFERENCE_DIR / "datasets" / f"{ref['dataset']}.csv"), ref


def compare(got: pd.DataFrame, rows: list[dict], call: str) -> None:
    exp = pd.DataFrame(rows).set_index("source")
    got = got.set_index("source")
    assert sorted(got.index) == sorted(exp.index), call
    got = got.loc[exp.index]
    assert got["ss"].tolist() == pytest.approx(exp["ss"].tolist(), rel=EXACT), call
    assert got["df"].tolist() == pytest.approx(exp["df"].tolist(), rel=EXACT), call
    terms = exp.index != "Residual"
    assert got["F"][terms].tolist() == pytest.approx(exp["F"][terms].tolist(), rel=EXACT), call
    assert got["p"][terms].tolist() == pytest.approx(exp["p"][terms].tolist(), rel=P_REL), call
    assert got["partial_eta2"][terms].tolist() == pytest.approx(exp["partial_eta2"][terms].tolist(), rel=EXACT)
    assert np.isnan(got.loc["Residual", "F"])


@pytest.mark.parametrize("case", CASES)
def test_type1_matches_r_anova(case: str) -> None:
    """R: ``anova(lm(dv ~ a * b, data))`` (sequential sums of squares, factors in the given order)."""
    data, ref = load(case)
    got = stats.anova_factorial(data, ref["dv"], ref["factors"], typ=1, interactions=ref["interactions"])
    compare(got, ref["type1"]["rows"], ref["type1"]["call"])


@pytest.mark.parametrize("case", CASES)
def test_type2_matches_car_anova(case: str) -> None:
    """R: ``car::Anova(lm(dv ~ a * b, data), type = 2)``."""
    data, ref = load(case)
    got = stats.anova_factorial(data, ref["dv"], ref["factors"], typ=2, interactions=ref["interactions"])
    compare(got, ref["type2"]["rows"], ref["type2"]["call"])


@pytest.mark.parametrize("case", CASES)
def test_type3_matches_car_anova_with_sum_contrasts(case: str) -> None:
    """R: ``options(contrasts = c("contr.sum", "contr.poly")); car::Anova(lm(dv ~ a * b, data), type = 3)``
    (the ``(Intercept)`` row dropped)."""
    data, ref = load(case)
    got = stats.anova_factorial(data, ref["dv"], ref["factors"], typ=3, interactions=ref["interactions"])
    compare(got, ref["type3"]["rows"], ref["type3"]["call"])


def test_unbalanced_reference_really_separates_the_types() -> None:
    """Guard on the reference itself: on unbalanced data the three types give different SS for wool."""
    ref = REFERENCE["factorial"]["warpbreaks_unbalanced"]
    wool = {t: next(r["ss"] for r in ref[t]["rows"] if r["source"] == "wool") for t in ("type1", "type2", "type3")}
    assert len({round(v, 6) for v in wool.values()}) == 3, wool


# Montgomery, D. C. (2013) Design and Analysis of Experiments, 8th ed., Wiley, Example 6.2 (filtration
# rate, unreplicated 2^4, Table 6.10 data in standard order; Table 6.11 effect estimates). Montgomery
# (from the normal probability plot) and Lenth's method both find A, C, D, AC and AD active.
MONTGOMERY_EFFECTS = {
    "A": 21.625, "B": 3.125, "C": 9.875, "D": 14.625, "A:B": 0.125, "A:C": -18.125, "A:D": 16.625,
    "B:C": 2.375, "B:D": -0.375, "C:D": -1.125, "A:B:C": 1.875, "A:B:D": 4.125, "A:C:D": -1.625,
    "B:C:D": -2.625, "A:B:C:D": 1.375,
}


def filtration() -> pd.DataFrame:
    return pd.read_csv(REFERENCE_DIR / "datasets" / "filtration_rate.csv")


def test_lenth_effects_match_montgomery_example_6_2() -> None:
    """Published effects (Montgomery Table 6.11) and Lenth (1989) by hand from them:
    median|c| = 2.625, s0 = 3.9375, the 10 effects below 2.5 s0 = 9.84 have median 1.75, so
    PSE = 2.625; d = 15/3 = 5, ME = t(0.975, 5) PSE = 2.5706 * 2.625 = 6.748."""
    got = stats.lenth_effects(filtration(), "rate", ["A", "B", "C", "D"]).set_index("term")
    assert sorted(got.index) == sorted(MONTGOMERY_EFFECTS)
    for term, effect in MONTGOMERY_EFFECTS.items():
        assert got.loc[term, "effect"] == pytest.approx(effect, abs=1e-9), term
    assert got["pse"].iloc[0] == pytest.approx(2.625, abs=1e-9)
    assert sorted(got.index[got["significant_me"]]) == ["A", "A:C", "A:D", "C", "D"]


def test_lenth_matches_r_formula() -> None:
    """R: ``2 * coef(lm(rate ~ A * B * C * D))``, PSE, ``ME = qt(0.975, m/3) PSE``,
    ``SME = qt((1 + 0.95^(1/m)) / 2, m/3) PSE`` (make_reference.R)."""
    ref = REFERENCE["lenth"]
    exp = pd.DataFrame(ref["rows"]).set_index("term")
    got = stats.lenth_effects(filtration(), "rate", ["A", "B", "C", "D"]).set_index("term").loc[exp.index]
    assert got["effect"].tolist() == pytest.approx(exp["effect"].tolist(), rel=EXACT, abs=1e-12), ref["call"]
    assert got["pse"].tolist() == pytest.approx(exp["pse"].tolist(), rel=EXACT)
    assert got["t"].tolist() == pytest.approx(exp["t"].tolist(), rel=EXACT, abs=1e-12)
    assert got["significant_me"].tolist() == exp["significant_me"].tolist()
    assert got["significant_sme"].tolist() == exp["significant_sme"].tolist()
    # SME (13.70) is stricter than ME (6.75): only A, D, A:C and A:D pass it
    assert sorted(got.index[got["significant_sme"]]) == ["A", "A:C", "A:D", "D"]
