"""Published test functions discretised onto knob-like grids, for ``bench_refine.py`` (SYNTHETIC).

The project did not design these surfaces: each is a standard test function from the Virtual Library of
Simulation Experiments (Surjanovic & Bingham, https://www.sfu.ca/~ssurjano/optimization.html), the same
definitions as the BBOB suite's f15 (Rastrigin), f8 (Rosenbrock) and Hansen et al.'s Ackley/Levy references:

* Rastrigin: ``10 d + sum(x^2 - 10 cos(2 pi x))``, minimum 0 at 0 (many regularly spaced local minima)
* Ackley: ``-20 exp(-0.2 sqrt(mean x^2)) - exp(mean cos(2 pi x)) + 20 + e``, minimum 0 at 0
* Levy: ``sin^2(pi w1) + sum (w-1)^2 (1 + 10 sin^2(pi w + 1)) + (wd-1)^2 (1 + sin^2(2 pi wd))``,
  ``w = 1 + (x-1)/4``, minimum 0 at 1
* Rosenbrock: ``sum 100 (x_{i+1} - x_i^2)^2 + (x_i - 1)^2``, minimum 0 at 1 (a curved valley: every
  neighbouring pair of knobs interacts)
* Styblinski-Tang: ``sum (x^4 - 16 x^2 + 5 x) / 2``, minimum at -2.9035 per coordinate

**Discretised like kernel knobs.** Knob ``i`` has 3-6 levels (cycling 4, 3, 5, 2, 6, 4, 3), equally spaced points
of the function's domain that contain the optimum's coordinate (the grid's optimum is then the function's
global minimum; Styblinski-Tang is separable, so its grid optimum is each coordinate's best point). A knob
is shown as integer levels (``1..L``), log-spaced values (``64, 128, ...``) or named categories whose
levels map to the points through a fixed random permutation (the order of a category's names says
nothing). The first level is the baseline (a point away from the optimum). On some surfaces only the first
``active`` knobs enter the function and the others have no effect (sparse effects, as kernel knobs have; the
embedding of a low-dimensional function in more dimensions of Wang et al. 2016, "Bayesian optimization in a
billion dimensions via random embeddings", JAIR 55).

**Metric.** ``qps = 10000 / (1 + 0.5 (f - f*) / m)`` with ``m`` the median of ``f - f*`` over 2000 random
configurations (so a median configuration reads 80 % of the optimum's qps), and the simulator's noise
(CV 3 %, heteroscedastic 1.5-6 %). A **cliff** (``levy12c``): one level of one categorical knob multiplies
qps by 0.2, as a setting that breaks a service would.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from tunelab.simulator.surface import Surface

LEVEL_CYCLE = (4, 3, 5, 2, 6, 4, 3)
KINDS = ("int", "log", "category")
#: qps of a configuration with the median gap to the optimum, relative to the optimum's
MEDIAN_SHARE = 0.8
CLIFF_FACTOR = 0.2


def rastrigin(x: np.ndarray) -> float:
    return float(10 * x.size + np.sum(x * x - 10 * np.cos(2 * np.pi * x)))


def ackley(x: np.ndarray) -> float:
    return float(-20 * np.exp(-0.2 * np.sqrt(np.mean(x * x))) - np.exp(np.mean(np.cos(2 * np.pi * x))) + 20 + math.e)


def levy(x: np.ndarray) -> float:
    w = 1 + (x - 1) / 4
    middle = np.sum((w[:-1] - 1) ** 2 * (1 + 10 * np.sin(np.pi * w[:-1] + 1) ** 2))
    return float(np.sin(np.pi * w[0]) ** 2 + middle + (w[-1] - 1) ** 2 * (1 + np.sin(2 * np.pi * w[-1]) ** 2))


def rosenbrock(x: np.ndarray) -> float:
    return float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (x[:-1] - 1) ** 2))


def styblinski_tang(x: np.ndarray) -> float:
    return float(np.sum(x ** 4 - 16 * x ** 2 + 5 * x) / 2)


@dataclass(frozen=True)
class Published:
    """One test function: its optimum's coordinate and the grid step of its knobs."""

    function: Callable[[np.ndarray], float]
    optimum: float
    step: float
    low: float
    high: float


FUNCTIONS = {
    "rastrigin": Published(rastrigin, 0.0, 0.7, -5.12, 5.12),
    "ackley": Published(ackley, 0.0, 1.3, -32.768, 32.768),
    "levy": Published(levy, 1.0, 2.2, -10.0, 10.0),
    "rosenbrock": Published(rosenbrock, 1.0, 0.6, -5.0, 10.0),
    "styblinski": Published(styblinski_tang, -2.903534, 1.1, -5.0, 5.0),
}


@dataclass(frozen=True)
class PublishedSurface(Surface):
    """A :class:`~tunelab.simulator.surface.Surface` whose optimum is known from the function, not enumerated."""

    best_config: Mapping[str, Any] = field(default_factory=dict)

    def optimum(self, metric: str | None = None) -> dict[str, Any]:
        return dict(self.best_config)


def knob_points(published: Published, levels: int, rng: np.random.Generator) -> np.ndarray:
    """``levels`` equally spaced points of the domain, one of them the optimum's coordinate (not the first)."""
    at = int(rng.integers(1, levels))
    points = published.optimum + published.step * (np.arange(levels) - at)
    return np.clip(points, published.low, published.high)


def knob_values(kind: str, levels: int, index: int) -> list[Any]:
    if kind == "int":
        return list(range(1, levels + 1))
    if kind == "log":
        return [64 * 2 ** k for k in range(levels)]
    return [f"k{index}_{name}" for name in "abcdefgh"[:levels]]


def build(name: str, function: str, knobs: int, active: int, seed: int, cliff: bool = False,
          cv: float = 0.03) -> PublishedSurface:
    """The surface ``name``: ``function`` of the first ``active`` of ``knobs`` knobs (the others have no effect),
    grids drawn with ``seed`` (see the module docstring)."""
    published = FUNCTIONS[function]
    rng = np.random.default_rng(seed)
    space: dict[str, dict[str, Any]] = {}
    points: dict[str, dict[Any, float]] = {}
    for i in range(knobs):
        levels = LEVEL_CYCLE[i % len(LEVEL_CYCLE)]
        kind = KINDS[i % len(KINDS)]
        grid = knob_points(published, levels, rng)
        values = knob_values(kind, levels, i)
        order = np.r_[0, 1 + rng.permutation(levels - 1)] if kind == "category" else np.arange(levels)
        kid = f"knob{i:02d}"
        space[kid] = {"kind": "choice", "values": values}
        points[kid] = {values[j]: float(grid[order[j]]) for j in range(levels)}
    ids = list(space)[:active]
    best = {k: min(points[k], key=lambda v, k=k: published.function(np.array([points[k][v]])) if function ==
                   "styblinski" else abs(points[k][v] - published.optimum)) for k in ids}
    best.update({k: spec["values"][0] for k, spec in space.items() if k not in best})
    cliff_level = (ids[2], [v for v in space[ids[2]]["values"] if v != best[ids[2]]][-1]) if cliff else None

    def raw(config: Mapping[str, Any]) -> float:
        return published.function(np.array([points[k][config[k]] for k in ids]))

    f_best = raw(best)
    draws = [{k: space[k]["values"][int(rng.integers(len(space[k]["values"])))] for k in ids} for _ in range(2000)]
    best = {k: best[k] for k in space}
    median_gap = float(np.median([raw(c) - f_best for c in draws])) or 1.0
    slope = (1 / MEDIAN_SHARE - 1) / median_gap

    def truth(config: Mapping[str, Any], scale: float) -> dict[str, float]:
        qps = 10_000.0 / (1.0 + scale * slope * (raw(config) - f_best))
        if cliff_level is not None and config[cliff_level[0]] == cliff_level[1]:
            qps *= CLIFF_FACTOR
        return {"qps": qps, "latency_mean_ms": 4000.0 / qps}

    baseline = {k: spec["values"][0] for k, spec in space.items()}
    description = (f"SYNTHETIC {function} (Surjanovic & Bingham) of {active} of {knobs} knob-like grids"
                   + (" with a cliff" if cliff else ""))
    return PublishedSurface(name, description, space, baseline, {"qps": "maximize", "latency_mean_ms": "minimize"},
                            truth, cv, best_config=best)


#: name -> (function, knobs, active knobs, grid seed, cliff)
PUBLISHED = {
    "rastrigin10": ("rastrigin", 10, 10, 10, False),
    "ackley12": ("ackley", 12, 12, 12, False),
    "levy12c": ("levy", 12, 8, 120, True),
    "rosenbrock12": ("rosenbrock", 12, 12, 121, False),
    "styblinski27": ("styblinski", 27, 8, 27, False),
    "ackley27": ("ackley", 27, 10, 270, False),
}


def published_surface(name: str, cv: float = 0.03) -> PublishedSurface:
    """The published-function surface called ``name`` (a key of :data:`PUBLISHED`)."""
    function, knobs, active, seed, cliff = PUBLISHED[name]
    return build(name, function, knobs, active, seed, cliff, cv)
