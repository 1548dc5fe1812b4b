"""Duet pairs in rounds until decided (tunelab/optimize/duet_confirm.py over tunelab/optimize/blocks_in_rounds.py) on
SYNTHETIC pairs with a known truth (tunelab.simulator.known_effect.KnownEffectPairEvaluator).

Each pair's log ratio is ``log(1 + effect) + side term + e_B - e_A``: the common-mode factor cancels within the pair,
the side bias is the crossover fit's ``delta`` and the rest is independent normal noise, so every look's t test is
exact at its nominal level ``alpha_r``. A false ``improve``/``regress`` under A/A (or a false ``equivalent`` at an
effect of exactly the SESOI) needs one look's test to err, so its probability is at most ``sum(alpha_r) = alpha``
(the union bound). The bound checked is the 99.9 % quantile of Binomial(runs, alpha): what that alpha allows in
``runs`` validations, computed from alpha alone. Every draw is seeded, so each count is exact for these seeds;
benchmarks/bench_validate_blocks.py (``--methods duet``) prints the rates over more runs.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as ss

from tunelab.designs.change import BlockRule
from tunelab.duet import crossover_sides
from tunelab.optimize.confirm import ValidationError
from tunelab.optimize.duet_confirm import confirm_duet, confirm_duet_in_rounds
from tunelab.optimize.blocks_in_rounds import block_looks
from tunelab.simulator.known_effect import BASELINE, CANDIDATE, KnownEffectPairEvaluator

RULE = BlockRule(4, 16, 4)
ALPHA = 0.05
#: per-side noise, common-mode noise per pair, side 1's bias (%)
CV, COMMON_CV, SIDE_BIAS = 0.02, 0.10, -10.0


def run(effect_pct: float, seed: int, rule: BlockRule = RULE, cv: float = CV, profiles: int = 1):
    evaluators = {f"p{i}": KnownEffectPairEvaluator(effect_pct, cv, seed * 10 + i, COMMON_CV, SIDE_BIAS)
                  for i in range(profiles)}
    result = confirm_duet_in_rounds(evaluators, BASELINE, CANDIDATE, ["qps:max:5"], rule, alpha=ALPHA)
    return result, evaluators


def allowed(runs: int) -> int:
    """The most false decisions in ``runs`` validations that alpha allows (99.9 % quantile of Binomial(runs, alpha))."""
    return int(ss.binom.ppf(0.999, runs, ALPHA))


def test_a_large_effect_stops_at_the_first_look_with_that_look_s_alpha() -> None:
    for seed in range(10):
        result, evaluators = run(40.0, seed, cv=0.01)
        row = result.table.iloc[0]
        assert (result.verdict, row["look"], row["blocks"], row["measurement"]) == ("improve", 1, 4, "duet")
        assert evaluators["p0"].calls == 2 * 4                       # 4 pairs, two sides each
        assert row["alpha_nominal"] == pytest.approx(block_looks(RULE)[0][1]) == pytest.approx(0.0125)
        assert result.note.startswith("pairs: looks at 4 of at most 16 per profile (linear alpha spending)")
        assert result.note.endswith("stopped: every metric decided")


def test_an_unresolvable_effect_runs_to_max_with_every_look_balanced() -> None:
    # +5 % (on the SESOI) under 8 % noise per side: no look decides it (seeded: exact)
    result, evaluators = run(5.0, 3, cv=0.08)
    assert evaluators["p0"].calls == 2 * 16 and result.verdict == "inconclusive"
    assert "max=16 pairs reached" in result.note and "looks at 4, 8, 12, 16" in result.note
    measured = result.measurements
    a_sides = measured[measured["arm"] == "A"].sort_values("pair")["side"].tolist()
    assert a_sides == crossover_sides(16)
    for count in RULE.looks():                       # every look holds as many pairs with A on each side
        assert a_sides[:count].count(0) == a_sides[:count].count(1) == count // 2
    assert result.table.iloc[0]["blocks_needed"] > 16


def test_profiles_stop_on_their_own() -> None:
    evaluators = {"big": KnownEffectPairEvaluator(40.0, 0.01, 1, COMMON_CV, SIDE_BIAS),
                  "slow": KnownEffectPairEvaluator(5.0, 0.08, 3 * 10, COMMON_CV, SIDE_BIAS)}
    result = confirm_duet_in_rounds(evaluators, BASELINE, CANDIDATE, ["qps:max:5"], RULE)
    assert evaluators["big"].calls == 2 * 4 and evaluators["slow"].calls == 2 * 16
    assert list(result.table["profile"]) == ["big", "slow"] and list(result.table["look"]) == [1, 4]


def test_aa_false_improve_or_regress_rate_stays_within_alpha() -> None:
    """200 seeded A/A duets with common-mode noise and a side bias; alpha allows at most ``allowed(200)``."""
    false, pairs = 0, []
    for seed in range(200):
        result, evaluators = run(0.0, 1000 + seed)
        false += result.verdict in ("improve", "regress")
        pairs.append(evaluators["p0"].calls // 2)
    assert false <= allowed(200), false
    assert 4 <= np.mean(pairs) < 16                  # equivalence ends most A/A duets before max


def test_false_equivalence_at_the_sesoi_stays_within_alpha() -> None:
    """200 seeded duets at an effect of exactly +SESOI: ``equivalent`` is false there."""
    false = sum(run(5.0, 2000 + seed)[0].verdict == "equivalent" for seed in range(200))
    assert false <= allowed(200), false


def test_a_fixed_count_is_one_look_at_the_full_alpha_and_no_note() -> None:
    evaluator = KnownEffectPairEvaluator(3.0, CV, 7, COMMON_CV, SIDE_BIAS)
    result = confirm_duet(evaluator, BASELINE, CANDIDATE, ["qps:max:5"], pairs=6)
    assert evaluator.calls == 12 and result.note is None
    assert result.table.iloc[0]["alpha_nominal"] == ALPHA


@pytest.mark.parametrize(("rule", "words"), [
    (BlockRule(4, 16, 3), "even numbers"),
    (BlockRule(6, 15, 4), "even numbers"),
    (BlockRule(2, 16, 2), "at least 4 pairs"),
])
def test_rounds_that_would_unbalance_the_crossover_are_refused(rule: BlockRule, words: str) -> None:
    evaluator = KnownEffectPairEvaluator(0.0, CV, 1)
    with pytest.raises(ValidationError, match=words):
        confirm_duet_in_rounds({"p": evaluator}, BASELINE, CANDIDATE, ["qps:max:5"], rule)
    assert evaluator.calls == 0
