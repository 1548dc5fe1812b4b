"""Effect sizes, TOST, power and multiplicity of tunelab.stats against R.

Values in tests/stats/reference/reference.json (``Rscript tests/stats/reference/make_reference.R``).
Tolerances: closed-form quantities ``rel=1e-9``; p-values and power ``rel=1e-6``.
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


def dataset(name: str) -> pd.DataFrame:
    return pd.read_csv(REFERENCE_DIR / "datasets" / f"{name}.csv")


def row_id(row: dict) -> str:
    return "-".join(str(v) for v in row.values())[:60]


@pytest.mark.parametrize("exp", REFERENCE["cohens_d"], ids=row_id)
def test_cohens_d_and_hedges_g_match_r_formula(exp: dict) -> None:
    """R: ``sp = sqrt(((n1-1) var(x1) + (n2-1) var(x2)) / (n1+n2-2)); d = (mean(x2) - mean(x1)) / sp;
    g = d (1 - 3 / (4 (n1+n2) - 9)); g -/+ qt(0.975, n1+n2-2) sqrt((n1+n2)/(n1 n2) + g^2 / (2 (n1+n2)))``."""
    got = stats.cohens_d(dataset(exp["dataset"]), exp["dv"], exp["between"], exp["group1"], exp["group2"]).iloc[0]
    assert got["d"] == pytest.approx(exp["d"], rel=EXACT)
    assert got["g"] == pytest.approx(exp["g"], rel=EXACT)
    assert got["ci_low"] == pytest.approx(exp["ci_low"], rel=1e-7)
    assert got["ci_high"] == pytest.approx(exp["ci_high"], rel=1e-7)


@pytest.mark.parametrize("exp", REFERENCE["tost"], ids=row_id)
def test_tost_matches_two_one_sided_welch_t_tests_in_r(exp: dict) -> None:
    """R: ``m = sesoi_pct / 100 * abs(mean(baseline));
    t.test(level, baseline, alternative = "greater", mu = -m, var.equal = FALSE)$p.value`` (p_lower) and
    ``t.test(level, baseline, alternative = "less", mu = m, var.equal = FALSE)$p.value`` (p_upper)."""
    got = stats.tost(dataset(exp["dataset"]), exp["dv"], exp["between"], exp["level"], exp["baseline"],
                     sesoi_pct=exp["sesoi_pct"]).iloc[0]
    assert got["pct_change"] == pytest.approx(exp["pct_change"], rel=EXACT)
    assert got["lower_bound"] == pytest.approx(exp["lower_bound"], rel=EXACT)
    assert got["upper_bound"] == pytest.approx(exp["upper_bound"], rel=EXACT)
    assert got["p_lower"] == pytest.approx(exp["p_lower"], rel=P_REL)
    assert got["p_upper"] == pytest.approx(exp["p_upper"], rel=P_REL)
    assert got["p"] == pytest.approx(exp["p"], rel=P_REL)
    assert bool(got["equivalent"]) is exp["equivalent"]


def test_tost_reference_covers_both_outcomes() -> None:
    """Guard on the reference: some TOST cases are equivalent and some are not."""
    assert {row["equivalent"] for row in REFERENCE["tost"]} == {True, False}


@pytest.mark.parametrize("exp", REFERENCE["replicates_needed"], ids=row_id)
def test_replicates_needed_matches_r_power_functions(exp: dict) -> None:
    """R, 2 groups: ``ceiling(power.t.test(delta = pct/100 * mean, sd, power = 0.8, strict = TRUE)$n)``;
    k groups: ``ceiling(power.anova.test(groups = k, between.var = delta^2 / (2 (k - 1)),
    within.var = sd^2, power = 0.8)$n)`` (two means at -/+ delta/2, the others in the middle)."""
    got = stats.replicates_needed(pilot_sd=exp["pilot_sd"], baseline_mean=exp["baseline_mean"],
                                  pct_change=exp["pct_change"], n_groups=exp["n_groups"])
    assert got == exp["n_needed"], f"R's exact n is {exp['n_exact']}"


@pytest.mark.parametrize("exp", REFERENCE["achieved_power"], ids=row_id)
def test_achieved_power_matches_r_power_functions(exp: dict) -> None:
    """R: sd = sqrt(residual mean square of ``aov``), delta = pct/100 * mean(dv), n = smallest group;
    2 groups ``power.t.test(n, delta, sd, strict = TRUE)$power``, k groups
    ``power.anova.test(groups = k, n, between.var = delta^2 / (2 (k - 1)), within.var = sd^2)$power``."""
    got = stats.achieved_power(dataset(exp["dataset"]), exp["dv"], exp["between"], exp["pct_change"]).iloc[0]
    assert got["n_per_group"] == exp["n_per_group"]
    assert got["effect_size"] == pytest.approx(exp["effect_size"], rel=EXACT)
    assert got["power"] == pytest.approx(exp["power"], rel=P_REL)


@pytest.mark.parametrize("method", ["holm", "bonferroni", "fdr_bh"])
def test_adjust_matches_r_p_adjust(method: str) -> None:
    """R: ``p.adjust(c(0.01, 0.04, 0.03, 0.2, 0.0001, 0.049, 0.5, 0.012), method)`` with method
    holm, bonferroni, BH."""
    ref = REFERENCE["multiplicity"]
    got = stats.adjust(np.array(ref["p"]), method=method)
    assert got.tolist() == pytest.approx(ref[method], rel=1e-12)


def test_pct_change_point_estimate_matches_r_means() -> None:
    """R: ``100 * (mean(weight[group == "trt1"]) / mean(weight[group == "ctrl"]) - 1)`` = -7.3728 %
    (the same quantity as the TOST reference's pct_change); the bootstrap interval must contain it."""
    exp = {r["level"]: r["pct_change"] for r in REFERENCE["tost"] if r["dataset"] == "PlantGrowth"}
    got = stats.pct_change(dataset("PlantGrowth"), "weight", "group", "ctrl", n_boot=500, seed=1).set_index("level")
    for level, pct in exp.items():
        assert got.loc[level, "pct_change"] == pytest.approx(pct, rel=EXACT)
        assert got.loc[level, "ci_low"] < pct < got.loc[level, "ci_high"]
