"""Post-hoc tests of tunelab.stats against R (tests/stats/reference/reference.json).

Regenerate with ``Rscript tests/stats/reference/make_reference.R``. Pairs are matched by their
two groups; R and tunelab both order groups alphabetically (C locale) and report
``estimate = mean(group2) - mean(group1)``. Tolerances: estimates, intervals and statistics
``rel=1e-9`` except where a quantile of the studentized range is involved (``rel=1e-7``);
unadjusted p ``rel=1e-6``; studentized-range p (Tukey, Games–Howell) ``abs=1e-6``: R's
``ptukey`` and scipy's ``studentized_range`` integrate numerically by different routes (measured
agreement on these data: 2e-11 for Tukey, 5e-9 for Games–Howell; intervals 1e-9).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tunelab import stats

REFERENCE_DIR = Path(__file__).parent / "reference"
REFERENCE = json.loads((REFERENCE_DIR / "reference.json").read_text(encoding="utf-8"))
EXACT = 1e-9
P_REL = 1e-6
PTUKEY_ABS = 1e-6

CASES = sorted(REFERENCE["oneway"])


def load(case: str) -> tuple[pd.DataFrame, dict]:
    ref = REFERENCE["oneway"][case]
    return pd.read_csv(REFERENCE_DIR / "datasets" / f"{ref['dataset']}.csv"), ref


def aligned(got: pd.DataFrame, rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both tables indexed by (group1, group2), checking that they hold the same pairs."""
    exp = pd.DataFrame(rows).set_index(["group1", "group2"])
    got = got.assign(group1=got["group1"].astype(str), group2=got["group2"].astype(str)).set_index(["group1", "group2"])
    assert sorted(got.index) == sorted(exp.index), "pairs (and their group1/group2 order) differ from R"
    return got.loc[exp.index], exp


@pytest.mark.parametrize("case", CASES)
def test_tukey_hsd_matches_r_tukeyhsd(case: str) -> None:
    """R: ``TukeyHSD(aov(dv ~ between, data))`` (diff, lwr, upr, p adj) and
    ``pairwise.t.test(dv, between, pool.sd = TRUE, p.adjust.method = "none")`` (p)."""
    data, ref = load(case)
    got, exp = aligned(stats.tukey_hsd(data, ref["dv"], ref["between"]), ref["tukey"]["rows"])
    assert got["estimate"].tolist() == pytest.approx(exp["estimate"].tolist(), rel=EXACT), ref["tukey"]["call"]
    assert got["ci_low"].tolist() == pytest.approx(exp["ci_low"].tolist(), rel=1e-7)
    assert got["ci_high"].tolist() == pytest.approx(exp["ci_high"].tolist(), rel=1e-7)
    assert got["p"].tolist() == pytest.approx(exp["p"].tolist(), rel=P_REL)
    assert got["p_adj"].tolist() == pytest.approx(exp["p_adj"].tolist(), abs=PTUKEY_ABS)


@pytest.mark.parametrize("case", CASES)
def test_games_howell_matches_r_formula(case: str) -> None:
    """R: ``games_howell_formula(dv, between)`` (tests/stats/reference/games_howell_formula.R, ptukey
    and qtukey; agrees with ``rstatix::games_howell_test``); p from ``t.test(var.equal = FALSE)``."""
    data, ref = load(case)
    got, exp = aligned(stats.games_howell(data, ref["dv"], ref["between"]), ref["games_howell"]["rows"])
    assert got["estimate"].tolist() == pytest.approx(exp["estimate"].tolist(), rel=EXACT), ref["games_howell"]["call"]
    assert got["statistic"].tolist() == pytest.approx(exp["statistic"].tolist(), rel=EXACT)
    # qtukey at a fractional Welch df: R and scipy invert the integral by different root finders
    # (measured up to 4e-8 apart), so the bounds get an absolute tolerance too
    assert got["ci_low"].tolist() == pytest.approx(exp["ci_low"].tolist(), rel=1e-7, abs=1e-6)
    assert got["ci_high"].tolist() == pytest.approx(exp["ci_high"].tolist(), rel=1e-7, abs=1e-6)
    assert got["p"].tolist() == pytest.approx(exp["p"].tolist(), rel=P_REL)
    assert got["p_adj"].tolist() == pytest.approx(exp["p_adj"].tolist(), abs=PTUKEY_ABS)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("p_adjust, r_method", [("none", "none"), ("bonferroni", "bonferroni"),
                                                ("holm", "holm"), ("fdr_bh", "BH")])
def test_dunn_matches_r(case: str, p_adjust: str, r_method: str) -> None:
    """R: ``dunn_formula(dv, between, method)`` (tests/stats/reference/dunn_formula.R, Dunn 1964 with
    tie correction), identical to ``rstatix::dunn_test(p.adjust.method = method)``."""
    data, ref = load(case)
    got, exp = aligned(stats.dunn(data, ref["dv"], ref["between"], p_adjust=p_adjust),
                       ref["dunn"]["rows"][r_method])
    assert got["estimate"].tolist() == pytest.approx(exp["estimate"].tolist(), rel=EXACT), ref["dunn"]["call"]
    assert got["statistic"].tolist() == pytest.approx(exp["statistic"].tolist(), rel=1e-7)
    assert got["p"].tolist() == pytest.approx(exp["p"].tolist(), rel=P_REL)
    assert got["p_adj"].tolist() == pytest.approx(exp["p_adj"].tolist(), rel=P_REL)
    assert got["ci_low"].isna().all() and got["ci_high"].isna().all()


def test_to_matrix_and_compact_letters_follow_tukey_p_adj() -> None:
    """R: ``TukeyHSD(aov(breaks ~ tension, warpbreaks))`` p adj: H-L 0.0014, M-H 0.46, M-L 0.038, so
    at alpha 0.05 L differs from H and M, and H and M share a letter."""
    data, ref = load("warpbreaks")
    long = stats.tukey_hsd(data, "breaks", "tension")
    matrix = stats.to_matrix(long, value="p_adj")
    exp = {(r["group1"], r["group2"]): r["p_adj"] for r in ref["tukey"]["rows"]}
    for (a, b), p in exp.items():
        assert matrix.loc[a, b] == pytest.approx(p, abs=PTUKEY_ABS)
        assert matrix.loc[b, a] == pytest.approx(p, abs=PTUKEY_ABS)
    assert all(matrix.loc[g, g] == 1.0 for g in ("H", "L", "M"))
    letters = stats.compact_letters(long, alpha=0.05).set_index("group")["letters"]
    assert set(letters["H"]) & set(letters["M"])
    assert not set(letters["L"]) & set(letters["H"])
    assert not set(letters["L"]) & set(letters["M"])
