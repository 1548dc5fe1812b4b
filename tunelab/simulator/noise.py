"""SYNTHETIC interference for the simulator: noise every measurement of one time slot shares, and a side bias.

A real machine's interference (another job, a frequency change) is *common-mode*: whatever runs in the
same time slot sees the same slowdown. The simulator target draws one factor ``exp(common_cv * z)`` per
slot (seeded by the slot, so both sides of a duet pair see the same one; a trial without a slot is its
own slot) and multiplies a maximised metric by it (divides a minimised one). ``side_bias_pct`` makes
duet side 1 that much worse than side 0 on every metric, as a busier lab would be.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from tunelab.simulator.surface import stable_seed
from tunelab.model import Direction


def slot_factor(seed: int, slot: Any, common_cv: float) -> float:
    """The common-mode factor of ``slot``: ``exp(common_cv * z)``, the same for every trial of that slot.

    >>> slot_factor(0, "pair3", 0.1) == slot_factor(0, "pair3", 0.1), slot_factor(0, "pair3", 0.0)
    (True, 1.0)
    """
    if not common_cv:
        return 1.0
    rng = np.random.default_rng(stable_seed(seed, "common-mode", str(slot)))
    return math.exp(common_cv * float(rng.standard_normal()))


def with_interference(metrics: Mapping[str, float], directions: Mapping[str, str], factor: float,
                      side: int, side_bias_pct: float) -> dict[str, float]:
    """``metrics`` slowed (``factor`` < 1) or sped up by the slot's factor and, on side 1, by the side bias.

    >>> with_interference({"qps": 100.0, "latency_ms": 2.0}, {"qps": "maximize", "latency_ms": "minimize"},
    ...                   0.5, side=1, side_bias_pct=-10)
    {'qps': 45.0, 'latency_ms': 4.444444444444445}
    """
    total = factor * (1 + side_bias_pct / 100 if side == 1 else 1.0)
    return {name: value * total if directions.get(name) == Direction.MAXIMIZE else value / total
            for name, value in metrics.items()}
