"""The ask/tell contract every search engine meets, and the registries of engines and presets.

A search engine (a *refiner*) proposes configurations and learns from their measurements; it
never measures anything itself. :func:`tunelab.optimize.driver.refine` owns the loop: it asks,
measures through an :class:`~tunelab.optimize.evaluators.Evaluator`, records, and tells.

* ``ask(n)`` returns up to ``n`` :class:`Candidate` s (``n=None``: the engine's natural batch,
  e.g. one pymoo generation). Asking again before telling is allowed only where an engine says so.
* ``tell(candidate, measurements)`` gives the engine *every* measurement of that configuration so
  far (one ``{metric: value}`` dict each; a failed measurement holds NaN). A configuration told
  twice (re-measured) replaces its earlier estimate.
* ``state()`` is a JSON-serialisable dict; ``restore(state, told)`` rebuilds an engine made with
  the same :class:`EngineSettings` from that state and the ``(config, measurements)`` pairs told so
  far, so a killed search resumes from the store without re-running (replaying) the search.
* The same settings and the same measurements give the same candidates (seeded determinism).

Engines register a factory ``EngineSettings -> Refiner`` in :data:`ENGINES`; presets (named
settings of one engine, e.g. seed 000's GA) register a :class:`Preset` in :data:`PRESETS`.

Examples
--------
>>> ENGINES.kind, PRESETS.kind
('search engine', 'refine preset')
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from tunelab.errors import TunelabError
from tunelab.model import Metric, level_value
from tunelab.optimize.space import ChoiceDimension, SearchSpace
from tunelab.registry import Registry

#: objective value given to a failed measurement when an engine minimises (finite, so crowding stays defined)
FAILED_PENALTY = 1e18

#: one measurement of one configuration: metric name -> value (NaN when the trial failed)
Measurement = Mapping[str, float]


class RefineError(TunelabError):
    """A refinement cannot run as asked (unknown engine, wrong preset, bad budget or objective)."""


@dataclass(frozen=True)
class Candidate:
    """A configuration an engine asks to be measured.

    Attributes
    ----------
    config : knob id -> value, each value of the type its search dimension holds (int, str, bool, tuple)
    origin : how the engine came to it (``"initial"``, ``"offspring"``, ``"model"``, ``"tpe"``, ...)
    """

    config: dict[str, Any]
    origin: str = ""


@dataclass(frozen=True)
class Preset:
    """Named settings of one engine (e.g. seed 000's GA).

    Attributes
    ----------
    name : registry name
    engine : the :data:`ENGINES` name the preset belongs to (another engine refuses it)
    options : engine-specific settings (pymoo: ``pop_size``, ``crossover``, ``mutation``, ...)
    budget : measurements the preset was designed for (used when the user gives no budget)
    description : one line naming the source (``"seed 000: population 80, ..."``)
    """

    name: str
    engine: str
    options: Mapping[str, Any] = field(default_factory=dict)
    budget: int | None = None
    description: str = ""


@dataclass(frozen=True)
class EngineSettings:
    """What an engine factory is given.

    Attributes
    ----------
    space : the search space
    objectives : one metric (single-objective) or several (multi-objective engines)
    seed : seeds every random choice of the engine
    budget : the measurements the engine's share of the search may use (a hint for batch sizes)
    baseline : the default configuration (engines put it in their first batch), or None
    initial : further configurations for the first batch (e.g. the screen's best levels)
    options : the preset's options, then the user's (``--option``) on top
    """

    space: SearchSpace
    objectives: tuple[Metric, ...]
    seed: int = 0
    budget: int = 60
    baseline: Mapping[str, Any] | None = None
    initial: tuple[Mapping[str, Any], ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Refiner(Protocol):
    """The ask/tell interface of a search engine (see the module docstring for the contract)."""

    name: str

    def ask(self, n: int | None = None) -> list[Candidate]:
        ...

    def tell(self, candidate: Candidate, measurements: Sequence[Measurement]) -> None:
        ...

    def state(self) -> dict[str, Any]:
        ...

    def restore(self, state: Mapping[str, Any], told: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]]) -> None:
        ...


#: engine name -> factory ``EngineSettings -> Refiner``
ENGINES: Registry[Callable[[EngineSettings], Refiner]] = Registry("search engine", error=RefineError)
#: preset name -> :class:`Preset`
PRESETS: Registry[Preset] = Registry("refine preset", error=RefineError)


def get_preset(name: str) -> Preset:
    """The preset called ``name`` (:class:`RefineError` listing the known ones)."""
    return PRESETS.get(name)


def objectives_of(objectives: Sequence[Metric | str]) -> list[Metric]:
    """Each objective as a :class:`~tunelab.model.Metric` (``"qps:max"``, ``"latency_p99_ms:min"``).

    >>> objectives_of(["qps:max"])
    [Metric(name='qps', direction='maximize', sesoi_pct=5.0)]
    """
    from tunelab.model import ParseError

    try:
        return [Metric.coerce(o) for o in objectives]
    except ParseError as exc:
        raise RefineError(f"{exc}; an objective must look like METRIC:max or METRIC:min, e.g. qps:max") from None


def objective_vector(measurements: Sequence[Measurement], objectives: Sequence[Metric]) -> np.ndarray:
    """What a minimising engine is told: ``sign * mean`` per objective over the finite values
    (:data:`FAILED_PENALTY` when none is finite).

    >>> objective_vector([{"qps": 10.0}, {"qps": 12.0}], [Metric("qps", "maximize")]).tolist()
    [-11.0]
    """
    out = []
    for o in objectives:
        values = np.array([float(m.get(o.name, math.nan)) for m in measurements], dtype=float)
        values = values[np.isfinite(values)]
        out.append(o.sign * float(values.mean()) if values.size else FAILED_PENALTY)
    return np.array(out)


def typed_config(space: SearchSpace, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` in the space's knob order with each value of its dimension's type: JSON round trips turn
    tuples into lists and numpy scalars come from arrays; this turns them back without moving any value.

    >>> from tunelab.optimize.space import ChoiceDimension
    >>> typed_config(SearchSpace([ChoiceDimension("r", ((1, 2, 3), (4, 5, 6)))]), {"r": [4, 5, 6]})
    {'r': (4, 5, 6)}

    Raises
    ------
    RefineError
        When ``config`` lacks a knob of the space.
    """
    missing = [i for i in space.ids if i not in config]
    if missing:
        raise RefineError(f"configuration {dict(config)} has no value for knob(s) {', '.join(missing)}")
    out: dict[str, Any] = {}
    for dim in space.dimensions:
        value = level_value(config[dim.id])
        if isinstance(dim, ChoiceDimension):
            same = [v for v in dim.values if v == value]
            value = next((v for v in same if type(v) is type(value)), same[0] if same else value)
        elif isinstance(value, tuple):
            value = tuple(int(v) for v in value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            value = int(value)
        out[dim.id] = value
    return out


def first_batch(settings: EngineSettings) -> list[Candidate]:
    """The baseline (origin ``"baseline"``) and then the initial configurations, each once.

    >>> from tunelab.optimize.space import space_from_spec
    >>> space = space_from_spec({"a": {"kind": "choice", "values": [1, 2]}})
    >>> [c.config for c in first_batch(EngineSettings(space, (), baseline={"a": 1}, initial=({"a": 1}, {"a": 2})))]
    [{'a': 1}, {'a': 2}]
    """
    out: list[Candidate] = []
    seen: set[tuple] = set()
    configs = ([("baseline", settings.baseline)] if settings.baseline else []) + \
        [("initial", c) for c in settings.initial]
    for origin, config in configs:
        typed = typed_config(settings.space, config)
        key = tuple(sorted((k, level_value(v)) for k, v in typed.items()))
        if key not in seen:
            seen.add(key)
            out.append(Candidate(typed, origin))
    return out


def make_engine(name: str, settings: EngineSettings, preset: str | None = None) -> Refiner:
    """Build engine ``name`` with ``preset``'s options under ``settings.options``.

    Raises
    ------
    RefineError
        For an unknown engine or preset, or a preset of another engine.
    """
    factory = ENGINES.get(name)
    options: dict[str, Any] = {}
    if preset:
        chosen = get_preset(preset)
        if chosen.engine != name:
            raise RefineError(f"preset {preset!r} is for the {chosen.engine!r} engine, not {name!r}; "
                              f"use --engine {chosen.engine} --preset {preset}, or drop --preset")
        options.update(chosen.options)
    options.update(settings.options)
    return factory(EngineSettings(settings.space, tuple(settings.objectives), settings.seed, settings.budget,
                                  settings.baseline, tuple(settings.initial), options))
