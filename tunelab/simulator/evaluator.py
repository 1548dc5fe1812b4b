"""The fast path for searches and benchmarks: evaluate configurations on a surface (no store, no runner)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from tunelab.simulator.surface import Surface, config_key, stable_seed
from tunelab.simulator.surfaces import get_surface


class SimulatorEvaluator:
    """Evaluate configurations on a SYNTHETIC surface (the :class:`~tunelab.optimize.Evaluator` protocol).

    Each draw is seeded by ``(seed, key)`` (or ``(seed, config, replicate)`` without a key), so
    an evaluation is reproducible and independent of the order evaluations are made in.
    ``calls`` counts evaluations, ``keys`` lists the keys evaluated.

    Examples
    --------
    >>> best = get_surface("simple").optimum()
    >>> draw = SimulatorEvaluator("simple", seed=1).evaluate(best, 0, key="x")
    >>> draw == SimulatorEvaluator("simple", seed=1).evaluate(best, 0, key="x")
    True
    """

    def __init__(self, surface: Surface | str, seed: int = 0, profile: str = "overload", cv: float | None = None) -> None:
        self.surface = get_surface(surface, cv if cv is not None else 0.03) if isinstance(surface, str) else surface
        self.seed = int(seed)
        self.profile = profile
        self.calls = 0
        self.keys: list[str] = []

    def evaluate(self, config: Mapping[str, Any], replicate: int = 0, key: str | None = None) -> dict[str, float]:
        """One noisy measurement of ``config``; the same ``key`` (or config and replicate) draws the same."""
        self.calls += 1
        if key is not None:
            self.keys.append(key)
        ident = key if key is not None else (config_key(config), replicate)
        rng = np.random.default_rng(stable_seed(self.seed, self.surface.name, self.profile, ident))
        return self.surface.draw(config, rng, self.profile)
