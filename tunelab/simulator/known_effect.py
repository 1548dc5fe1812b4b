"""A SYNTHETIC A/B evaluator with a known effect, for checking a decision rule's error rates (the
:class:`~tunelab.optimize.Evaluator` protocol): ``qps = 1000 x (1 + effect_pct/100)`` for the candidate
(config ``{"x": 1}``), ``1000`` for the baseline (``{"x": 0}``), times lognormal noise ``exp(N(0, cv))``.
Each key draws its own value, seeded by ``(seed, key)``, so a run is exact and order-independent.

>>> e = KnownEffectEvaluator(10.0, cv=0.0, seed=1)
>>> e.evaluate({"x": 0}, 0, key="a"), e.evaluate({"x": 1}, 0, key="b"), e.calls
({'qps': 1000.0}, {'qps': 1100.0}, 2)
"""
from __future__ import annotations

import math
import zlib
from typing import Any, Mapping

import numpy as np

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
