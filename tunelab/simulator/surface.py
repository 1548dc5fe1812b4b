"""The :class:`Surface` type: a SYNTHETIC, seeded function from a knob configuration to metric values.

A surface knows its *truth* (noise-free values) and draws noisy measurements with
heteroscedastic multiplicative noise: each configuration has its own coefficient of variation
``cv * 2**(2u-1)`` (``u`` a stable hash of the configuration in [0, 1), so CVs range from
``cv/2`` to ``2 cv``).

Examples
--------
>>> 0 <= stable_unit("simple", 1) < 1
True
>>> stable_seed("a", 1) == stable_seed("a", 1)
True
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from tunelab.model import Direction, DirectionName, level_from_json, level_to_json
from tunelab.optimize.space import SearchSpace, space_from_spec


def stable_unit(*parts: Any) -> float:
    """A number in [0, 1) determined only by ``parts`` (sha256 of their repr)."""
    return stable_seed(*parts) / 2.0**64


def stable_seed(*parts: Any) -> int:
    """A 64-bit seed determined only by ``parts`` (sha256 of their repr)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


def config_key(config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """An order-independent, hashable key of a configuration (knob id -> repr of its level)."""
    return tuple(sorted((k, repr(v)) for k, v in config.items()))


@dataclass(frozen=True)
class Surface:
    """A SYNTHETIC response surface with known truth.

    Parameters
    ----------
    name : registry name
    description : one line, starting with SYNTHETIC
    space : ``{knob id: {"kind": ..., ...}}`` (see :func:`tunelab.optimize.space.space_from_spec`)
    baseline : the "default" configuration
    metrics : metric name -> ``"maximize"`` | ``"minimize"``
    truth_fn : ``(config, effect scale) -> {metric: true value}``
    cv : median coefficient of variation of the noise
    low_load_scale : effects are multiplied by this under the ``low`` load profile (defaults are
        fine at low load, as seed 001 found)
    """

    name: str
    description: str
    space: Mapping[str, Mapping[str, Any]]
    baseline: Mapping[str, Any]
    metrics: Mapping[str, DirectionName]
    truth_fn: Callable[[Mapping[str, Any], float], dict[str, float]]
    cv: float = 0.03
    low_load_scale: float = 0.1
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def truth(self, config: Mapping[str, Any], profile: str = "overload") -> dict[str, float]:
        """The noise-free metric values of ``config``."""
        scale = self.low_load_scale if profile == "low" else 1.0
        return self.truth_fn(config, scale)

    def config_cv(self, config: Mapping[str, Any]) -> float:
        """This configuration's noise CV: ``cv * 2**(2u - 1)`` (heteroscedastic, from cv/2 to 2 cv)."""
        return self.cv * 2.0 ** (2.0 * stable_unit(self.name, config_key(config)) - 1.0)

    def draw(self, config: Mapping[str, Any], rng: np.random.Generator, profile: str = "overload") -> dict[str, float]:
        """One noisy measurement (multiplicative Gaussian noise, floored at 0)."""
        cv = self.config_cv(config)
        return {m: max(0.0, v * (1.0 + cv * rng.standard_normal())) for m, v in self.truth(config, profile).items()}

    def search_space(self) -> SearchSpace:
        """The surface's knobs as a search space (built once)."""
        if "space" not in self._cache:
            self._cache["space"] = space_from_spec(self.space)
        return self._cache["space"]

    def table(self, metric: str | None = None, profile: str = "overload") -> pd.DataFrame:
        """Every configuration with its true metric values (exhaustive; for small spaces)."""
        key = ("table", profile)
        if key not in self._cache:
            configs = self.search_space().all_configs()
            rows = [{**c, **self.truth(c, profile)} for c in configs]
            self._cache[key] = pd.DataFrame(rows)
        return self._cache[key]

    def optimum(self, metric: str | None = None) -> dict[str, Any]:
        """The configuration with the best true value of ``metric`` (default: the first metric)."""
        metric = metric or next(iter(self.metrics))
        table = self.table()
        index = table[metric].idxmax() if self.metrics[metric] == Direction.MAXIMIZE else table[metric].idxmin()
        return {k: level_from_json(level_to_json(table.at[index, k])) for k in self.space}

    def within(self, config: Mapping[str, Any], tolerance_pct: float = 2.0, metric: str | None = None) -> bool:
        """Whether ``config`` is truly within ``tolerance_pct`` % of the optimum."""
        metric = metric or next(iter(self.metrics))
        best = self.truth(self.optimum(metric))[metric]
        value = self.truth(config)[metric]
        if self.metrics[metric] == Direction.MAXIMIZE:
            return value >= best * (1 - tolerance_pct / 100)
        return value <= best * (1 + tolerance_pct / 100)
