"""The search space: knob specs -> integer genes for pymoo, and genes -> knob configs.

Every knob becomes one gene (a scalar) or three genes (a triplet searched per component),
each an integer index ``0 .. n-1`` into an ordered list of candidate values. Integer indices
keep every knob type in one encoding that pymoo's GA and NSGA-II handle (integer sampling,
uniform crossover, random-reset mutation), and make "the same configuration" exact, so
duplicates are recognised and cached evaluations are reused.

Dimension kinds (registry :data:`DIMENSIONS`):

``choice``   a finite list of values: enum names, bools, candidate triplets, or explicit int levels
``int``      an integer range ``low..high`` with ``step`` (linear grid) or ``scale: log`` with ``n`` points
``triplet``  three integer ranges (min/default/max), repaired to be non-decreasing when the knob needs it

Examples
--------
>>> space = SearchSpace([ChoiceDimension("cc", ("cubic", "bbr")),
...                      IntDimension("net.core.somaxconn", 16, 4096, scale="log", n=9)])
>>> space.n_var, space.upper.tolist()
(2, [1, 8])
>>> space.decode([1, 8])
{'cc': 'bbr', 'net.core.somaxconn': 4096}
>>> space.encode({"cc": "bbr", "net.core.somaxconn": 4096}).tolist()
[1, 8]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from tunelab.errors import DesignError
from tunelab.model import level_value
from tunelab.registry import Registry

#: largest number of grid points one integer gene may have (keeps indices exact in float64)
MAX_LEVELS = 1 << 40


@dataclass(frozen=True)
class ChoiceDimension:
    """A knob searched over a fixed, ordered list of values (enum, bool, candidate triplets, levels)."""

    id: str
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        values = tuple(level_value(v) for v in self.values)
        if not values:
            raise DesignError(f"{self.id}: a choice dimension needs at least one value; list its levels")
        if len(set(values)) != len(values):
            raise DesignError(f"{self.id}: choice values {list(values)} contain duplicates; list each once")
        object.__setattr__(self, "values", values)

    @property
    def sizes(self) -> tuple[int, ...]:
        return (len(self.values),)

    def decode(self, genes: Sequence[int]) -> Any:
        return self.values[int(genes[0])]

    def encode(self, value: Any) -> tuple[int, ...]:
        value = level_value(value)
        try:
            return (self.values.index(value),)
        except ValueError:
            pass
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.values) \
                and isinstance(value, (int, float)) and not isinstance(value, bool):
            return (int(np.argmin([abs(v - value) for v in self.values])),)
        raise DesignError(f"{self.id}: value {value!r} is not one of the searched values {list(self.values)}; "
                          "add it to the knob's levels")


@dataclass(frozen=True)
class IntDimension:
    """An integer knob searched on a grid: ``low..high`` by ``step``, or ``n`` points on a log scale."""

    id: str
    low: int
    high: int
    step: int | None = None
    scale: str = "linear"
    n: int | None = None
    grid: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise DesignError(f"{self.id}: `low < high` must hold, but got low={self.low}, high={self.high}")
        if self.scale not in ("linear", "log"):
            raise DesignError(f"{self.id}: scale {self.scale!r} is unknown; use 'linear' or 'log'")
        if self.scale == "log":
            if self.low <= 0:
                raise DesignError(f"{self.id}: scale: log needs low > 0, got low={self.low}")
            n = self.n or 16
            grid = sorted({int(round(p)) for p in np.geomspace(self.low, self.high, n)})
        elif self.n is not None and self.step is None:
            grid = sorted({int(round(p)) for p in np.linspace(self.low, self.high, self.n)})
        else:
            step = self.step or 1
            if step < 1:
                raise DesignError(f"{self.id}: step must be >= 1, got {step}")
            count = (self.high - self.low) // step + 1
            if count > MAX_LEVELS:
                raise DesignError(f"{self.id}: {count} grid points are too many; use a larger step or scale: log")
            object.__setattr__(self, "grid", ())  # arithmetic grid, computed on the fly
            object.__setattr__(self, "_count", count)
            return
        object.__setattr__(self, "grid", tuple(grid))
        object.__setattr__(self, "_count", len(grid))

    @property
    def sizes(self) -> tuple[int, ...]:
        return (self._count,)  # type: ignore[attr-defined]

    def value_at(self, index: int) -> int:
        if self.grid:
            return self.grid[index]
        return self.low + index * (self.step or 1)

    def decode(self, genes: Sequence[int]) -> int:
        return self.value_at(int(genes[0]))

    def encode(self, value: Any) -> tuple[int, ...]:
        value = level_value(value)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise DesignError(f"{self.id}: value {value!r} is not an integer; this knob is searched over "
                              f"{self.low}..{self.high}")
        if self.grid:
            if self.scale == "log" and value > 0:
                distances = [abs(math.log(g) - math.log(value)) for g in self.grid]
            else:
                distances = [abs(g - value) for g in self.grid]
            return (int(np.argmin(distances)),)
        index = round((value - self.low) / (self.step or 1))
        return (int(min(max(index, 0), self._count - 1)),)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class TripletDimension:
    """A triplet knob (e.g. ``tcp_rmem``) searched per component: three integer dimensions.

    With ``ordered`` (min <= default <= max, as the kernel requires) decoded components are
    sorted, so every decoded value is valid.
    """

    id: str
    components: tuple[IntDimension, IntDimension, IntDimension]
    ordered: bool = True

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(c.sizes[0] for c in self.components)

    def decode(self, genes: Sequence[int]) -> tuple[int, int, int]:
        values = [c.decode([g]) for c, g in zip(self.components, genes)]
        return tuple(sorted(values)) if self.ordered else tuple(values)  # type: ignore[return-value]

    def encode(self, value: Any) -> tuple[int, ...]:
        value = level_value(value)
        if not isinstance(value, tuple) or len(value) != 3:
            raise DesignError(f"{self.id}: value {value!r} is not a triplet of 3 integers")
        return tuple(c.encode(v)[0] for c, v in zip(self.components, value))


Dimension = ChoiceDimension | IntDimension | TripletDimension

#: how a knob spec of each ``kind`` becomes a dimension
DIMENSIONS: Registry[Any] = Registry("search dimension kind")
DIMENSIONS.add("choice", lambda kid, spec: ChoiceDimension(kid, tuple(spec["values"])))
DIMENSIONS.add("int", lambda kid, spec: IntDimension(kid, int(spec["low"]), int(spec["high"]), spec.get("step"),
                                                     spec.get("scale", "linear"), spec.get("n")))
DIMENSIONS.add("triplet", lambda kid, spec: TripletDimension(
    kid, tuple(IntDimension(f"{kid}[{i}]", int(c["low"]), int(c["high"]), c.get("step"), c.get("scale", "linear"),
                            c.get("n")) for i, c in enumerate(spec["components"])),  # type: ignore[arg-type]
    bool(spec.get("ordered", True))))


class SearchSpace:
    """An ordered set of dimensions; maps configs (knob id -> value) to integer gene vectors and back."""

    def __init__(self, dimensions: Iterable[Dimension]) -> None:
        self.dimensions: tuple[Dimension, ...] = tuple(dimensions)
        if not self.dimensions:
            raise DesignError("the search space is empty; refine needs at least one knob")
        ids = [d.id for d in self.dimensions]
        if len(set(ids)) != len(ids):
            raise DesignError(f"knob ids in the search space must be unique, got {ids}")
        sizes = [s for d in self.dimensions for s in d.sizes]
        self.upper = np.array([s - 1 for s in sizes], dtype=np.int64)
        self.lower = np.zeros_like(self.upper)
        self._slices = []
        start = 0
        for d in self.dimensions:
            self._slices.append(slice(start, start + len(d.sizes)))
            start += len(d.sizes)

    @property
    def ids(self) -> list[str]:
        return [d.id for d in self.dimensions]

    @property
    def n_var(self) -> int:
        return int(self.upper.size)

    @property
    def size(self) -> int:
        """Number of distinct gene vectors (configurations, before triplet sorting)."""
        return int(np.prod((self.upper + 1).astype(float)))

    def decode(self, genes: Sequence[float] | np.ndarray) -> dict[str, Any]:
        """Gene vector (rounded and clipped into range) -> config dict."""
        x = np.clip(np.rint(np.asarray(genes, dtype=float)), self.lower, self.upper).astype(np.int64)
        return {d.id: d.decode(x[s]) for d, s in zip(self.dimensions, self._slices)}

    def encode(self, config: Mapping[str, Any]) -> np.ndarray:
        """Config dict -> gene vector (values off the grid snap to the nearest grid point)."""
        missing = [d.id for d in self.dimensions if d.id not in config]
        if missing:
            raise DesignError(f"config {dict(config)} has no value for knob(s) {', '.join(missing)}")
        genes: list[int] = []
        for d in self.dimensions:
            genes.extend(d.encode(config[d.id]))
        return np.array(genes, dtype=np.int64)

    def key(self, config: Mapping[str, Any]) -> tuple[Any, ...]:
        """A hashable identity of a config (its values in dimension order)."""
        return tuple(level_value(config[i]) for i in self.ids)

    def random_genes(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(self.lower, self.upper + 1, size=(n, self.n_var))

    def all_configs(self, limit: int = 100_000) -> list[dict[str, Any]]:
        """Every configuration (for small spaces: exhaustive truth in tests and benchmarks)."""
        if self.size > limit:
            raise DesignError(f"the space has {self.size} configurations, more than the limit {limit}")
        grids = np.meshgrid(*[np.arange(u + 1) for u in self.upper], indexing="ij")
        stacked = np.stack([g.ravel() for g in grids], axis=1)
        return [self.decode(row) for row in stacked]


def dimension_from_design_knob(spec: Any, refine_points: int = 16) -> Dimension:
    """The search dimension of one design knob (a knob of a :class:`tunelab.designs.Design` or a mapping).

    A knob given as a numeric range (``low``/``high`` + ``step`` or ``scale``) is searched on that
    range (log ranges on ``refine_points`` points, finer than a screen); a knob given as a list of
    levels is searched over those levels.
    """
    get = spec.get if isinstance(spec, Mapping) else (lambda k, d=None: getattr(spec, k, d))
    kid = get("id") or get("name")
    low, high = get("low"), get("high")
    if low is not None and high is not None:
        scale = get("scale", "linear") or "linear"
        step = get("step")
        n = refine_points if scale == "log" else None
        return IntDimension(kid, int(low), int(high), None if scale == "log" else step, scale, n)
    levels = get("levels")
    if not levels:
        raise DesignError(f"{kid}: the knob has neither levels nor a low/high range to search")
    return ChoiceDimension(kid, tuple(levels))


def space_from_spec(spec: Mapping[str, Mapping[str, Any]]) -> SearchSpace:
    """Build a space from ``{knob id: {"kind": "int"|"choice"|"triplet", ...}}``.

    >>> space_from_spec({"a": {"kind": "int", "low": 1, "high": 9, "step": 4},
    ...                  "b": {"kind": "choice", "values": [True, False]}}).decode([2, 1])
    {'a': 9, 'b': False}
    """
    dims = []
    for kid, entry in spec.items():
        kind = entry.get("kind", "choice")
        try:
            build = DIMENSIONS.get(kind)
        except KeyError as exc:
            raise DesignError(f"{kid}: {exc.args[0]}") from None
        dims.append(build(kid, entry))
    return SearchSpace(dims)
