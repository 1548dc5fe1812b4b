"""Simulation checks of the screen's model route (factorial, fractional and Plackett–Burman designs).

Designs that are not one-at-a-time are read through one linear model per metric
(:mod:`tunelab.stats.model_screen`): log scale for positive metrics, main effects plus the
estimable two-factor interactions, type II F tests (or HC3 / Freedman–Lane when the residual
checks fail), Holm over every main-effect and interaction row. These tests run the full
:func:`tunelab.stats.screen` on simulated studies with fixed seeds and check

1. the family-wise error under the complete null of a 2^(7-3) resolution IV design ×2 (32 runs,
   7 main effects and 7 interaction alias chains in the family) is at most alpha;
2. the power of PB 8 × 2 (16 runs) for a ±10 % knob at noise CV 4 % reaches its Bonferroni
   planning value (Holm can only do better), and null knobs' family-wise error is at most alpha;
3. a 2 × 2 factorial finds a large interaction (a knob's +10 % effect reverses to -10 % when the
   other knob is high) at least as often as Bonferroni planning predicts, and a null interaction
   is flagged in at most alpha of the studies.

Truth: ``y = 1000 exp(sum_j b_j x_j + g x_a x_b + e)``, ``x`` in {0, 1} (0 = the baseline),
``e ~ N(0, 0.04)``. In ±1 coding a main effect's coefficient is ``b / 2`` and an interaction's
``g / 4``, each with standard error ``0.04 / sqrt(runs)`` in these orthogonal designs, which gives
the planned powers (noncentral t, computed in the tests).

Monte-Carlo error: each check counts studies out of ``S`` and compares the count with an exact
binomial limit (:func:`upper_limit`, :func:`lower_limit`): a rate that is at most ``r`` fails when
its count is above the ``1 - TAIL`` quantile of Binomial(S, r), a rate that is at least ``r`` when
its count is below the ``TAIL`` quantile, with TAIL = 0.00135 (the normal 3-sigma tail): a correct
procedure fails a check about once in 740 seeds, and the seeds are fixed. ``S`` is 40 studies (60
for the PB power, so that its limit stays above 0.65); each ``screen`` call takes 0.1-0.3 s, the file
~25 s (180 studies; ~57 s with the 100 studies per check it had before).
benchmarks/bench_model_screen_sim.py runs the same four simulations on more studies (default 400, the
same seeds) and prints every rate with its limit; benchmarks/bench_screen_power.py gives the full
picture over designs. Measured (these seeds): FWER 0.125 (5 of 40; limit 0.175), unadjusted 0.575 (1);
power 0.87 (k0 +10 %, limit 0.667) and 0.88 (k1 -10 %, limit 0.767), null FWER 0.067 (2); interaction
found 1.0 (median -17.4 %), null interaction 0.0, a's main effect 0.975 (3).
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as ss

from tunelab.designs.generators import fractional_factorial, plackett_burman
from tunelab.stats import screen
from tunelab.model import AnalysisKind

ALPHA = 0.05
NOISE_SD = 0.04
#: one-sided chance that a correct procedure falls outside a limit (the normal 3-sigma tail)
TAIL = float(ss.norm.sf(3))
#: simulated studies per check (the PB power check: more, so that its limit says something)
N_STUDIES = 40
N_POWER_STUDIES = 60
KNOBS = [f"k{j}" for j in range(7)]
METRICS = [{"name": "y", "direction": "maximize", "sesoi_pct": 5}]


def upper_limit(rate: float, n: int) -> float:
    """Largest share of ``n`` studies compatible with a true rate of at most ``rate``: the ``1 - TAIL``
    quantile of Binomial(n, rate), over n (0.175 for alpha and 40 studies).

    >>> upper_limit(0.05, 40), upper_limit(0.05, 100)
    (0.175, 0.13)
    """
    return float(ss.binom.ppf(1 - TAIL, n, rate)) / n


def lower_limit(rate: float, n: int) -> float:
    """Smallest share of ``n`` studies compatible with a true rate of at least ``rate``: the ``TAIL``
    quantile of Binomial(n, rate), over n.

    >>> lower_limit(0.98, 40), lower_limit(0.82, 60)
    (0.9, 0.6666666666666666)
    """
    return float(ss.binom.ppf(TAIL, n, rate)) / n


def bonferroni_power(coefficient: float, n_runs: int, df: float, m: int) -> float:
    """Power of a two-sided t test of a ±1-coded coefficient at alpha / m (Bonferroni; Holm does at least as well)."""
    delta = abs(coefficient) / (NOISE_SD / math.sqrt(n_runs))
    crit = float(ss.t.ppf(1 - ALPHA / (2 * m), df))
    return float(ss.nct.sf(crit, df, delta) + ss.nct.cdf(-crit, df, delta))


def simulate(matrix01: np.ndarray, knobs: list[str], rng: np.random.Generator, effects_pct: dict[str, float],
             interaction: tuple[str, str, float] | None = None) -> pd.DataFrame:
    frame = pd.DataFrame(matrix01.astype(int), columns=knobs)
    eta = rng.normal(0.0, NOISE_SD, len(frame))
    for knob, pct in effects_pct.items():
        eta += math.log1p(pct / 100) * frame[knob].to_numpy()
    if interaction is not None:
        a, b, pct = interaction
        eta += math.log1p(pct / 100) * frame[a].to_numpy() * frame[b].to_numpy()
    frame["y"] = 1000.0 * np.exp(eta)
    return frame


def run_studies(matrix01: np.ndarray, knobs: list[str], seed: int, effects_pct: dict[str, float],
                interaction: tuple[str, str, float] | None = None, n: int = N_STUDIES) -> list[pd.DataFrame]:
    """The verdict tables of ``n`` simulated studies (fixed seeds), indexed by knob / term."""
    out = []
    for study in range(n):
        data = simulate(matrix01, knobs, np.random.default_rng([seed, study]), effects_pct, interaction)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = screen(data, METRICS, knobs, {k: 0 for k in knobs}, alpha=ALPHA, correction="holm",
                            n_boot=100, seed=study)
        assert result.design is AnalysisKind.FACTORIAL
        out.append(result.verdicts.set_index("knob"))
    return out


def two_level(matrix: np.ndarray, replicates: int) -> np.ndarray:
    """±1 coded runs as 0/1 levels (-1 = the baseline), the whole design ``replicates`` times."""
    return np.tile((np.asarray(matrix) + 1) // 2, (replicates, 1))


# ---- the four simulations (shared with benchmarks/bench_model_screen_sim.py) -------------------------------

#: PB 8 × 2: the two active knobs and their effects (%); k2..k6 are null
PB_EFFECTS = {"k0": 10.0, "k1": -10.0}
#: 2 × 2 factorial: a's effect reverses when b is high (ratio of ratios 0.9 / 1.1, -18 %)
INTERACTION_PCT = 100 * (0.9 / 1.1 - 1)
CELLS_2X2 = np.array(list(itertools.product([-1, 1], repeat=2)))


def null_fractional_factorial(n: int) -> dict[str, float]:
    """2^(7-3) resolution IV × 2, every knob null: the share of studies with any significant row
    (``fwer``), any ``matters`` verdict (``matters``) and any raw p < alpha (``raw``)."""
    ff = fractional_factorial(7, runs=16, resolution=4)
    verdicts = run_studies(two_level(ff.matrix, 2), KNOBS, 20260601, {}, n=n)
    assert all(len(v) == 14 and v.index[7:].str.contains(":").all() for v in verdicts), "7 mains + 7 chains expected"
    return {"fwer": float(np.mean([v["significant"].astype(bool).any() for v in verdicts])),
            "matters": float(np.mean([(v["verdict"] == "matters").any() for v in verdicts])),
            "raw": float(np.mean([(v["p"] < ALPHA).any() for v in verdicts]))}


def pb_power(n: int) -> dict[str, float]:
    """PB 8 × 2 with :data:`PB_EFFECTS`: per active knob the share of studies where it is ``matters``
    with the right sign; ``null_fwer``: the share with any null knob significant."""
    verdicts = run_studies(two_level(plackett_burman(7, 8), 2), KNOBS, 20260602, PB_EFFECTS, n=n)
    found = {knob: float(np.mean([v.loc[knob, "verdict"] == "matters"
                                  and np.sign(v.loc[knob, "effect_pct"]) == np.sign(pct) for v in verdicts]))
             for knob, pct in PB_EFFECTS.items()}
    return {**found, "null_fwer": float(np.mean([v.loc[KNOBS[2:], "significant"].astype(bool).any()
                                                 for v in verdicts]))}


def pb_planned_power(knob: str) -> float:
    """Bonferroni planning power of an active PB knob: t test of its coefficient at alpha / 7, 8 df."""
    return bonferroni_power(math.log1p(PB_EFFECTS[knob] / 100) / 2, 16, 8, 7)


def large_interaction(n: int) -> dict[str, float]:
    """2 × 2 × 4 with a +10 % and the reversing interaction: the share of studies whose ``a:b`` row is
    significant with a negative effect (``found``), and the median ``a:b`` effect (%)."""
    verdicts = run_studies(two_level(CELLS_2X2, 4), ["a", "b"], 20260603, {"a": 10.0}, ("a", "b", INTERACTION_PCT), n=n)
    rows = [v.loc["a:b"] for v in verdicts]
    return {"found": float(np.mean([bool(r["significant"]) and r["effect_pct"] < 0 for r in rows])),
            "median_pct": float(np.median([r["effect_pct"] for r in rows]))}


def interaction_planned_power() -> float:
    """Bonferroni planning power of the ``a:b`` row: t test of the coefficient g / 4 at alpha / 3, 12 df."""
    return bonferroni_power(math.log1p(INTERACTION_PCT / 100) / 4, 16, 12, 3)


def null_interaction(n: int) -> dict[str, float]:
    """2 × 2 × 4 with a +10 % and no interaction: the share of studies with ``a:b`` significant
    (``flagged``) and with a ``matters`` (``found_a``)."""
    verdicts = run_studies(two_level(CELLS_2X2, 4), ["a", "b"], 20260604, {"a": 10.0}, n=n)
    return {"flagged": float(np.mean([bool(v.loc["a:b", "significant"]) for v in verdicts])),
            "found_a": float(np.mean([v.loc["a", "verdict"] == "matters" for v in verdicts]))}


# ---- the checks ---------------------------------------------------------------------------------------------


def test_family_wise_error_of_a_null_fractional_factorial_is_at_most_alpha() -> None:
    """2^(7-3) resolution IV × 2 (32 runs), every knob null: 7 main effects and 7 interaction alias
    chains (``k0:k1 = k2:k4 = k3:k5`` …) enter one Holm family of 14 rows. The share of studies
    with any significant row stays within the upper limit of alpha (0.175 for 40 studies); without
    the adjustment about 1 - 0.95^14 ≈ 0.5 of the studies have a raw p < alpha, checked above that
    limit: the same check would catch a missing adjustment."""
    rates = null_fractional_factorial(N_STUDIES)
    bound = upper_limit(ALPHA, N_STUDIES)
    assert rates["fwer"] <= bound, f"FWER {rates['fwer']:.3f} > {bound:.3f} under the complete null"
    assert rates["matters"] <= rates["fwer"]
    assert rates["raw"] > bound, f"unadjusted FWER {rates['raw']:.3f}: the family is too small for the check to bite"


def test_power_of_plackett_burman_8x2_for_active_knobs() -> None:
    """PB 8 × 2 (16 runs, 8 residual df): k0 +10 %, k1 -10 %, k2..k6 null, no interaction. Each
    active knob is ``matters`` (significant after Holm, |effect| >= 5 %, right sign) at least at the
    lower limit of its Bonferroni planning power (t test of one coefficient at alpha / 7, 8 df: 0.83
    for k0, 0.91 for k1) less the chance of an estimate below the SESOI (<= 0.01); a null knob is
    significant in at most the upper limit of alpha."""
    rates = pb_power(N_POWER_STUDIES)
    for knob in PB_EFFECTS:
        planned = pb_planned_power(knob)
        bound = lower_limit(planned - 0.01, N_POWER_STUDIES)
        assert rates[knob] >= bound, f"{knob}: power {rates[knob]:.2f} < {bound:.2f} (planned {planned:.2f})"
        assert bound > 0.65, "the bound should say something"
    bound = upper_limit(ALPHA, N_POWER_STUDIES)
    assert rates["null_fwer"] <= bound, f"null knobs' FWER {rates['null_fwer']:.3f} > {bound:.3f} beside active knobs"


def test_a_large_interaction_in_a_2x2_factorial_is_found() -> None:
    """2 × 2 factorial × 4 (16 runs): a is +10 % at b's baseline and -10 % when b is high (ratio of
    ratios 0.9 / 1.1, -18 %), b alone null. The ``a:b`` row is significant (Holm over a, b, a:b)
    with the right sign at least at the lower limit of the Bonferroni planning power (t test of the
    coefficient g / 4 at alpha / 3, 12 df: 0.977; 0.875 for 40 studies). Its median effect is within
    3 points of -18 %: one study's estimate has a standard error of about 3.3 points, so the median of
    40 about 0.65."""
    rates = large_interaction(N_STUDIES)
    planned = interaction_planned_power()
    bound = lower_limit(planned, N_STUDIES)
    assert rates["found"] >= bound, f"interaction found in {rates['found']:.2f} < {bound:.2f} (planned {planned:.2f})"
    assert bound > 0.85, "the bound should say something"        # 0.875 for 40 studies: 35 of 40
    assert rates["median_pct"] == pytest.approx(INTERACTION_PCT, abs=3.0)


def test_a_null_interaction_in_a_2x2_factorial_is_rarely_flagged() -> None:
    """The same 2 × 2 factorial × 4 with a +10 % main effect of a and no interaction: ``a:b`` is
    significant in at most the upper limit of alpha (its own test is at level alpha; Holm only makes
    it stricter)."""
    rates = null_interaction(N_STUDIES)
    bound = upper_limit(ALPHA, N_STUDIES)
    assert rates["flagged"] <= bound, f"a null interaction significant in {rates['flagged']:.3f} of the studies"
    assert rates["found_a"] > 0.9, f"a's +10 % main effect found in only {rates['found_a']:.2f} of the studies"
