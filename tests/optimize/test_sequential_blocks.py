"""Blocks in rounds until decided (tunelab/optimize/blocks_in_rounds.py) on SYNTHETIC data with a known truth.

A large effect stops at the first look; an effect that sits on the SESOI with noise that cannot resolve it runs
to ``max``; under A/A (no effect) the rate of a false ``improve``/``regress`` stays within alpha (the union bound
over the looks' alpha-spending increments); the looks' levels are the screen's spending. Every draw is seeded,
so each figure is exact for these seeds.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from tunelab.designs.change import BlockRule
from tunelab.optimize.confirm import ValidationError, block_rule
from tunelab.optimize.blocks_in_rounds import block_looks, confirm_in_rounds
from tunelab.simulator.known_effect import BASELINE, CANDIDATE, KnownEffectEvaluator
from tunelab.stats.rounds import spent_alpha

RULE = BlockRule(4, 16, 4)


def run(effect_pct: float, cv: float, seed: int, rule: BlockRule = RULE, profiles: int = 1):
    evaluators = {f"p{i}": KnownEffectEvaluator(effect_pct, cv, seed * 10 + i) for i in range(profiles)}
    return confirm_in_rounds(evaluators, BASELINE, CANDIDATE, ["qps:max:5"], rule, bootstrap=False), evaluators


def test_the_looks_spend_the_screens_alpha() -> None:
    looks = block_looks(BlockRule(4, 16, 4, spending="obrien-fleming"), 0.05)
    assert [n for n, _ in looks] == [4, 8, 12, 16]
    assert sum(a for _, a in looks) == pytest.approx(0.05)
    assert looks[0][1] == pytest.approx(spent_alpha(0.25, 0.05, "obrien-fleming"))
    assert block_looks(BlockRule.fixed(6), 0.05) == [(6, 0.05)]


def test_a_large_effect_stops_at_the_first_look() -> None:
    for seed in range(20):
        result, evaluators = run(30.0, 0.03, seed)
        row = result.table.iloc[0]
        assert (result.verdict, row["look"], row["blocks"]) == ("improve", 1, 4)
        assert evaluators["p0"].calls == 4 * 4
        assert "looks at 4 of at most 16" in result.note and "every metric decided" in result.note
        assert row["alpha_nominal"] == pytest.approx(0.0125)


def test_an_effect_on_the_sesoi_that_the_noise_cannot_resolve_runs_to_max() -> None:
    used = []
    for seed in range(40):
        result, evaluators = run(5.0, 0.08, seed)
        used.append(evaluators["p0"].calls // 4)
    assert np.mean(used) > 14 and sum(n == RULE.max for n in used) >= 30, used
    assert max(used) == RULE.max


def test_never_beyond_max_and_a_profile_stops_on_its_own() -> None:
    # seed 2: the +5 % effect under 8 % noise is still undecided at 16 blocks (seeded: exact)
    evaluators = {"big": KnownEffectEvaluator(30.0, 0.03, 1), "slow": KnownEffectEvaluator(5.0, 0.08, 2)}
    result = confirm_in_rounds(evaluators, BASELINE, CANDIDATE, ["qps:max:5"], RULE, bootstrap=False)
    assert evaluators["big"].calls == 4 * 4 and evaluators["slow"].calls == 16 * 4
    assert list(result.table["profile"]) == ["big", "slow"] and list(result.table["look"]) == [1, 4]
    assert "max=16 blocks reached" in result.note and result.verdict == "inconclusive"
    assert result.table.iloc[1]["blocks_needed"] > 16


def test_aa_false_improve_or_regress_rate_stays_within_alpha() -> None:
    """100 seeded A/A validations (benchmarks/bench_validate_blocks.py runs 2,000 per row and prints the figures)."""
    false, blocks = 0, []
    for seed in range(100):
        result, evaluators = run(0.0, 0.03, 1000 + seed)
        false += result.verdict in ("improve", "regress")
        blocks.append(evaluators["p0"].calls // 4)
    assert false / 100 <= 0.05, false
    assert 4 <= np.mean(blocks) < 16


def test_every_trial_failing_stops_at_the_first_look_untestable() -> None:
    class Broken:
        calls = 0

        def evaluate(self, config, replicate, key=None):
            self.calls += 1
            return {"qps": math.nan}

    broken = Broken()
    result = confirm_in_rounds({"p": broken}, BASELINE, CANDIDATE, ["qps:max:5"], RULE, bootstrap=False)
    assert result.verdict == "untestable" and broken.calls == 16
    assert "no usable block (every trial failed)" in result.note


def test_a_fixed_count_is_one_look_at_the_full_alpha_and_no_note() -> None:
    result, evaluators = run(3.0, 0.03, 7, BlockRule.fixed(6))
    assert evaluators["p0"].calls == 24 and result.note is None
    assert result.table.iloc[0]["alpha_nominal"] == 0.05


def test_a_rule_with_too_few_blocks_is_refused() -> None:
    with pytest.raises(ValidationError, match="at least 2 ABBA blocks"):
        block_rule(BlockRule(1, 4, 1))
    with pytest.raises(ValidationError, match="max"):
        block_rule(BlockRule(4, 2, 1))
