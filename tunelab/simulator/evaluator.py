"""The fast path for searches and benchmarks: evaluate configurations on a surface (no store, no runner)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from tunelab.duet import pair_trials
from tunelab.optimize.duet_confirm import pair_key
from tunelab.simulator.noise import slot_factor, with_interference
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


class InterferedEvaluator(SimulatorEvaluator):
    """A :class:`SimulatorEvaluator` on a busy machine: each measurement also gets a common-mode factor
    shared by everything measured in its time slot, and duet side 1 a bias (:mod:`tunelab.simulator.noise`).

    ``evaluate`` (a sequential measurement) is its own slot; ``evaluate_pair`` measures a duet pair
    (:class:`tunelab.optimize.duet_confirm.PairEvaluator`): both sides in one slot, A and B on the sides
    :func:`tunelab.duet.pair_trials` gives them.
    """

    def __init__(self, surface: Surface | str, seed: int = 0, profile: str = "overload", cv: float | None = None,
                 common_cv: float = 0.0, side_bias_pct: float = 0.0) -> None:
        super().__init__(surface, seed, profile, cv)
        self.common_cv, self.side_bias_pct = float(common_cv), float(side_bias_pct)

    def _interfered(self, config: Mapping[str, Any], key: Any, slot: Any, side: int) -> dict[str, float]:
        draw = super().evaluate(config, 0, key=key)
        return with_interference(draw, self.surface.metrics, slot_factor(self.seed, slot, self.common_cv), side,
                                 self.side_bias_pct)

    def evaluate(self, config: Mapping[str, Any], replicate: int = 0, key: str | None = None) -> dict[str, float]:
        """One sequential measurement: its own slot (the key, else config and replicate), side 0."""
        ident = key if key is not None else f"{config_key(config)}:{replicate}"
        return self._interfered(config, ident, ident, 0)

    def evaluate_pair(self, pair: int, configs: Mapping[str, Mapping[str, Any]],
                      key_prefix: str) -> list[tuple[int, str, str, dict[str, float]]]:
        """Both sides of duet pair ``pair`` in one slot."""
        trials = pair_trials(pair, configs, pair_key(key_prefix, pair), {})
        return [(side, trial.plan_info["duet_arm"], trial.run_key,
                 self._interfered(trial.config, trial.run_key, f"{key_prefix}p{pair}", side))
                for side, trial in enumerate(trials)]
