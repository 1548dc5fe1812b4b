"""A SYNTHETIC A/B evaluator with a known effect, for checking a decision rule's error rates (the
:class:`~tunelab.optimize.Evaluator` protocol): ``qps = 1000 x (1 + effect_pct/100)`` for the candidate
(config ``{"x": 1}``), ``1000`` for the baseline (``{"x": 0}``), times lognormal noise ``exp(N(0, cv))``.
Each key draws its own value, seeded by ``(seed, key)``, so a run is exact and order-independent.
:class:`KnownEffectPairEvaluator` measures duet pairs (:class:`tunelab.optimize.duet_confirm.PairEvaluator`)
with common-mode noise both sides of a pair share and a fixed side bias.

>>> e = KnownEffectEvaluator(10.0, cv=0.0, seed=1)
>>> e.evaluate({"x": 0}, 0, key="a"), e.evaluate({"x": 1}, 0, key="b"), e.calls
({'qps': 1000.0}, {'qps': 1100.0}, 2)
"""
from __future__ import annotations

import math
import zlib
from typing import Any, Mapping

import numpy as np

from tunelab.duet import crossover_sides
from tunelab.optimize.duet_confirm import pair_key

BASELINE: dict[str, int] = {"x": 0}
CANDIDATE: dict[str, int] = {"x": 1}


class KnownEffectEvaluator:
    """SYNTHETIC measurements with a true effect of ``effect_pct`` % for the candidate; ``calls`` counts them."""

    def __init__(self, effect_pct: float, cv: float, seed: int) -> None:
        self.factor, self.cv, self.seed, self.calls = 1 + effect_pct / 100, float(cv), int(seed), 0

    def evaluate(self, config: Mapping[str, Any], replicate: int = 0, key: str | None = None) -> dict[str, float]:
        self.calls += 1
        rng = np.random.default_rng([self.seed, zlib.crc32(str(key).encode())])
        level = 1000.0 * (self.factor if config.get("x") == 1 else 1.0)
        return {"qps": level * math.exp(rng.normal(0.0, self.cv))}


class KnownEffectPairEvaluator(KnownEffectEvaluator):
    """SYNTHETIC duet pairs: each side is :class:`KnownEffectEvaluator`'s draw (independent noise ``cv``) times
    the pair's common-mode factor ``exp(N(0, common_cv))``, side 1 also times ``1 + side_bias_pct/100``; A on
    the side :func:`tunelab.duet.crossover_sides` gives. ``calls`` counts sides (two per pair).

    >>> e = KnownEffectPairEvaluator(10.0, cv=0.0, seed=1, common_cv=0.2, side_bias_pct=-50)
    >>> configs = {"A": BASELINE, "B": CANDIDATE}
    >>> [(side, arm, round(v["qps"] / e.common(0, ""), 6)) for side, arm, _, v in e.evaluate_pair(0, configs, "")]
    [(0, 'A', 1000.0), (1, 'B', 550.0)]
    """

    def __init__(self, effect_pct: float, cv: float, seed: int, common_cv: float = 0.0,
                 side_bias_pct: float = 0.0) -> None:
        super().__init__(effect_pct, cv, seed)
        self.common_cv, self.side_factor = float(common_cv), 1 + side_bias_pct / 100

    def common(self, pair: int, key_prefix: str) -> float:
        """The common-mode factor of ``pair``: the same for both its sides."""
        rng = np.random.default_rng([self.seed, zlib.crc32(f"{key_prefix}common{pair}".encode())])
        return math.exp(rng.normal(0.0, self.common_cv))

    def evaluate_pair(self, pair: int, configs: Mapping[str, Mapping[str, Any]],
                      key_prefix: str) -> list[tuple[int, str, str, dict[str, float]]]:
        a_side, key, shared = crossover_sides(pair + 1)[pair], pair_key(key_prefix, pair), self.common(pair, key_prefix)
        out = []
        for side in (0, 1):
            arm = "A" if side == a_side else "B"
            value = self.evaluate(configs[arm], 0, key(side, arm))["qps"] * shared * (self.side_factor if side else 1.0)
            out.append((side, arm, key(side, arm), {"qps": value}))
        return out
