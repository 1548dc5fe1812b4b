"""Exact fits of a factorial at a 1e12 offset, with exactly tied levels, against exact arithmetic.

The data set is made here with known answers: a 5 × 2 full factorial, 3 runs per cell, values
``1e12 + tenths/10 + hundredths/100`` (integers), whose knob ``a`` levels differ from the baseline
by exactly +0.1 (levels 2 and 4, identical runs) and -0.1 (levels 3 and 5, identical runs) in the
decimal data. Reference values are exact rational arithmetic (:class:`fractions.Fraction`) on the
float64 values as stored (the balanced design's marginal means, type II sums of squares and F);
the decimal ±0.1 are checked too, as the true differences the intervals must cover.

The verdict's tie rule: among levels whose effects are equal up to rounding (here: identical runs),
the first level in the knob's level order is chosen (:func:`tunelab.stats.numerics.first_best`).

Lenth's route (a saturated two-level design) is checked on Montgomery's published 2^4 example moved
to 1e12, whose integer rates float64 holds exactly (before issue 24: effect A 21.62487 for 21.625).
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunelab import stats
from tunelab.stats.linear_model import fit_model

OFFSET = 10 ** 12
A_TENTHS = {1: 0, 2: 1, 3: -1, 4: 1, 5: -1}           # a's effect against level 1: exactly ±0.1
B_TENTHS = {0: 0, 1: 3}
AB_TENTHS = {(3, 0): 1, (3, 1): -1, (5, 0): 1, (5, 1): -1}   # an interaction that sums to 0 over b
NOISE_HUNDREDTHS = {0: (-1, 0, 1), 1: (2, -1, -1)}    # each cell's runs around its mean (sum 0)
REPLICATES = 3


def decimal_runs() -> list[tuple[int, int, Fraction]]:
    """``(a, b, y)`` of every run, ``y`` exactly as the decimal data give it."""
    return [(a, b, OFFSET + Fraction(A_TENTHS[a] + B_TENTHS[b] + AB_TENTHS.get((a, b), 0), 10) + Fraction(e, 100))
            for a, b in itertools.product(A_TENTHS, B_TENTHS) for e in NOISE_HUNDREDTHS[b]]


def frame(seed: int | None = None) -> pd.DataFrame:
    """The runs as float64 (rows shuffled with ``seed``)."""
    data = pd.DataFrame([{"a": a, "b": b, "y": float(y)} for a, b, y in decimal_runs()])
    return data if seed is None else data.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def exact_tables() -> dict[str, object]:
    """Marginal means of ``a``, type II sums of squares and F of the stored values, exactly."""
    runs = [(a, b, Fraction(float(y))) for a, b, y in decimal_runs()]
    cells = {(a, b): sum(y for ra, rb, y in runs if (ra, rb) == (a, b)) / REPLICATES for a in A_TENTHS for b in B_TENTHS}
    grand = sum(cells.values()) / len(cells)
    mean_a = {a: sum(cells[a, b] for b in B_TENTHS) / len(B_TENTHS) for a in A_TENTHS}
    mean_b = {b: sum(cells[a, b] for a in A_TENTHS) / len(A_TENTHS) for b in B_TENTHS}
    ss = {"a": len(B_TENTHS) * REPLICATES * sum((m - grand) ** 2 for m in mean_a.values()),
          "b": len(A_TENTHS) * REPLICATES * sum((m - grand) ** 2 for m in mean_b.values()),
          "a:b": REPLICATES * sum((cells[a, b] - mean_a[a] - mean_b[b] + grand) ** 2 for a, b in cells),
          "Residual": sum((y - cells[a, b]) ** 2 for a, b, y in runs)}
    df = {"a": len(A_TENTHS) - 1, "b": len(B_TENTHS) - 1, "a:b": (len(A_TENTHS) - 1) * (len(B_TENTHS) - 1),
          "Residual": len(runs) - len(cells)}
    f = {t: float((ss[t] / df[t]) / (ss["Residual"] / df["Residual"])) for t in ("a", "b", "a:b")}
    return {"ss": {t: float(v) for t, v in ss.items()}, "F": f,
            "difference": {a: float(mean_a[a] - mean_a[1]) for a in A_TENTHS if a != 1}}


def test_the_data_set_has_exact_ties_and_exact_decimal_steps() -> None:
    """The premise: levels 2/4 and 3/5 have the same runs, and their decimal steps are ±0.1."""
    data = frame()
    for first, second in ((2, 4), (3, 5)):
        assert data.loc[data["a"] == first, "y"].tolist() == data.loc[data["a"] == second, "y"].tolist()
    decimal = {a: sum(y for ra, _, y in decimal_runs() if ra == a) / 6 for a in A_TENTHS}
    assert {a: decimal[a] - decimal[1] for a in (2, 3)} == {2: Fraction(1, 10), 3: Fraction(-1, 10)}


@pytest.mark.parametrize("typ", [2, 3])
def test_anova_factorial_is_exact_at_a_1e12_offset(typ: int) -> None:
    want = exact_tables()
    table = stats.anova_factorial(frame(), "y", ["a", "b"], typ=typ).set_index("source")
    for term in ("a", "b", "a:b", "Residual"):
        assert table.loc[term, "ss"] == pytest.approx(want["ss"][term], rel=1e-10), term
    ms_resid = table.loc["Residual", "ss"] / table.loc["Residual", "df"]
    for term in ("a", "b", "a:b"):
        assert table.loc[term, "F"] == pytest.approx(want["F"][term], rel=1e-10), term
        assert table.loc[term, "F"] == pytest.approx(table.loc[term, "ss"] / table.loc[term, "df"] / ms_resid, rel=1e-14)


def test_the_model_route_is_exact_at_a_1e12_offset() -> None:
    """Before issue 24 the raw-value fit gave level differences off by up to 17 % here."""
    want = exact_tables()
    fit = fit_model(frame(), "y", ["a", "b"], baseline={"a": 1, "b": 0}, interactions="all")
    terms = fit.terms.set_index("term")
    for term in ("a", "b", "a:b"):
        assert terms.loc[term, "statistic"] == pytest.approx(want["F"][term], rel=1e-10), term
    contrasts = fit.contrasts[(fit.contrasts["knob"] == "a") & (fit.contrasts["at"] == "")].set_index("level")
    for level, difference in want["difference"].items():
        row = contrasts.loc[level]
        assert row["estimate"] == pytest.approx(difference, rel=1e-10)
        decimal = A_TENTHS[level] / 10
        assert row["adj_ci_low"] < min(difference, decimal) and max(difference, decimal) < row["adj_ci_high"]
    assert contrasts.loc[2, "estimate"] == pytest.approx(contrasts.loc[4, "estimate"], rel=1e-12)


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
@pytest.mark.parametrize(("direction", "level"), [("maximize", 2), ("minimize", 3)])
def test_the_verdict_takes_the_first_of_exactly_tied_levels(seed: int | None, direction: str, level: int) -> None:
    """Levels 2 and 4 (3 and 5) have the same runs: the verdict names 2 (3), whatever the row order."""
    metric = {"name": "y", "direction": direction, "sesoi_abs": 0.05}
    result = stats.screen(frame(seed), [metric], ["a", "b"], {"a": 1, "b": 0})
    row = result.verdicts.set_index("knob").loc["a"]
    assert row["test"] in ("ols_type2", "ols_type3", "hc3_wald", "freedman_lane")
    assert row["level"] == level
    assert abs(row["effect_abs"]) == pytest.approx(exact_tables()["difference"][level].__abs__(), rel=1e-9)


#: Montgomery (2013), *Design and Analysis of Experiments*, 8th ed., Example 6.2 (filtration rate,
#: unreplicated 2^4): the effects of Table 6.11 and Lenth's PSE = 2.625; every rate is an integer,
#: so ``1e12 + rate`` is exact in float64 and the effects stay the published ones
MONTGOMERY_EFFECTS = {"A": 21.625, "B": 3.125, "C": 9.875, "D": 14.625, "AB": 0.125, "AC": -18.125, "AD": 16.625,
                      "BC": 2.375, "BD": -0.375, "CD": -1.125, "ABC": 1.875, "ABD": 4.125, "ACD": -1.625,
                      "BCD": -2.625, "ABCD": 1.375}


def _filtration_at_1e12() -> pd.DataFrame:
    data = pd.read_csv(Path(__file__).parent / "reference" / "datasets" / "filtration_rate.csv")
    for word in MONTGOMERY_EFFECTS:
        data[word] = np.prod([data[letter] for letter in word], axis=0)
    return data.assign(rate=data["rate"] + float(OFFSET))


def test_lenths_route_is_exact_at_a_1e12_offset() -> None:
    """The saturated model (no residual df, Lenth's PSE) and lenth_effects on Montgomery's 2^4 + 1e12."""
    data = _filtration_at_1e12()
    fit = fit_model(data, "rate", list(MONTGOMERY_EFFECTS), baseline={w: -1 for w in MONTGOMERY_EFFECTS})
    assert fit.test == "lenth"
    assert fit.assumptions["pse"] == pytest.approx(2.625, abs=1e-9)
    effects = fit.effects.set_index("term")["estimate"]
    table = stats.lenth_effects(data, "rate", list("ABCD")).set_index("term")["effect"]
    for word, effect in MONTGOMERY_EFFECTS.items():
        assert effects[word] == pytest.approx(effect, abs=1e-9), word
        assert table[":".join(word)] == pytest.approx(effect, abs=1e-9), word
    assert sorted(fit.terms.loc[fit.terms["p"] < 0.05, "term"]) == ["A", "AC", "AD", "C", "D"]
