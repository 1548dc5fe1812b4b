"""Where a search keeps its state: the pooled measurements (:class:`Tally`) and the batch log.

Every batch a search measures is logged as one JSON record (format: :meth:`tunelab.store.Store.add_search_batch`
and ``docs/refine.md``): the candidates with their new measurements and estimates, the
incumbent and the engine's state. A :class:`StoreSearchLog` keeps the log in the study's store,
so a killed refinement resumes from its last batch (the engine is restored from its stored
state, the tally from the stored measurements: nothing is re-run), and the report draws the
search from the log without re-running it. :class:`MemorySearchLog` is the same in memory
(benchmarks, notebooks).

Examples
--------
>>> from tunelab.model import Metric
>>> tally = Tally([Metric("qps", "maximize")])
>>> tally.add({"a": 1}, {"qps": 10.0}); tally.add({"a": 1}, {"qps": 12.0}); tally.add({"a": 2}, {"qps": 9.0})
>>> tally.estimate({"a": 1})["qps"]["mean"], tally.n({"a": 1})
(11.0, 2)
>>> tally.best()
{'a': 1}
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from tunelab.model import Metric, level_value
from tunelab.store import Store, continued_budgets


def config_key(config: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A hashable identity of a configuration (knob order does not matter; lists and tuples compare equal).

    >>> config_key({"b": [1, 2], "a": True}) == config_key({"a": True, "b": (1, 2)})
    True
    """
    return tuple(sorted((k, level_value(v)) for k, v in config.items()))


@dataclass
class Tally:
    """Every measurement of every configuration a search measured, pooled per configuration.

    ``se`` of a configuration's mean uses its own SD when it has 3 or more measurements, else the
    pooled coefficient of variation of all replicated configurations times its mean (``None``
    without any replicated configuration).
    """

    objectives: Sequence[Metric]
    configs: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    values: dict[tuple, list[dict[str, float]]] = field(default_factory=dict)

    def add(self, config: Mapping[str, Any], measurement: Mapping[str, float]) -> None:
        key = config_key(config)
        self.configs.setdefault(key, dict(config))
        self.values.setdefault(key, []).append({k: float(v) if v is not None else math.nan
                                                for k, v in measurement.items()})

    def measurements(self, config: Mapping[str, Any]) -> list[dict[str, float]]:
        return list(self.values.get(config_key(config), []))

    def n(self, config: Mapping[str, Any]) -> int:
        return len(self.values.get(config_key(config), []))

    def __len__(self) -> int:
        return len(self.values)

    def total(self) -> int:
        """Measurements in all."""
        return sum(len(v) for v in self.values.values())

    def _finite(self, key: tuple, metric: str) -> np.ndarray:
        v = np.array([m.get(metric, math.nan) for m in self.values.get(key, [])], dtype=float)
        return v[np.isfinite(v)]

    def pooled_cv(self, metric: str) -> float | None:
        """Pooled coefficient of variation of ``metric`` over configurations with 2+ finite values."""
        ss, df = 0.0, 0
        for key in self.values:
            v = self._finite(key, metric)
            if len(v) >= 2 and v.mean() != 0:
                ss += float((((v / v.mean()) - 1.0) ** 2).sum())
                df += len(v) - 1
        return math.sqrt(ss / df) if df else None

    def estimate(self, config: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
        """Per objective ``{"mean", "se", "n"}`` of ``config`` (mean NaN when nothing finite was measured)."""
        key = config_key(config)
        out: dict[str, dict[str, float | None]] = {}
        for o in self.objectives:
            v = self._finite(key, o.name)
            mean = float(v.mean()) if v.size else math.nan
            if v.size >= 3:
                se: float | None = float(v.std(ddof=1) / math.sqrt(v.size))
            else:
                cv = self.pooled_cv(o.name)
                se = cv * abs(mean) / math.sqrt(v.size) if cv is not None and v.size else None
            out[o.name] = {"mean": mean, "se": se, "n": int(v.size)}
        return out

    def score(self, config: Mapping[str, Any]) -> float:
        """The first objective's pooled mean, signed so that larger is better (-inf when unmeasured or failed)."""
        o = self.objectives[0]
        v = self._finite(config_key(config), o.name)
        return float(-o.sign * v.mean()) if v.size else -math.inf

    def best(self, among: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any] | None:
        """The configuration with the best first-objective mean (ties: more measurements, then first measured)."""
        pool = [self.configs[config_key(c)] for c in among] if among is not None else list(self.configs.values())
        if not pool:
            return None
        return max(pool, key=lambda c: (self.score(c), self.n(c)))

    def entry(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``{"config", "n", "estimates"}``: how a configuration appears in a stored record."""
        return {"config": dict(config), "n": self.n(config), "estimates": self.estimate(config)}


class SearchLog(Protocol):
    """Where the driver logs a search: ``start`` returns the batches stored so far (resume), and
    ``continued_from`` then lists the smaller budgets a continued search ran with before (a finished
    search run again with a larger budget continues; any other changed setting is refused)."""

    continued_from: list[int]

    def start(self, settings: Mapping[str, Any]) -> list[dict[str, Any]]:
        ...

    def add(self, batch: int, record: Mapping[str, Any]) -> None:
        ...

    def finish(self, winner: Mapping[str, Any]) -> None:
        ...


@dataclass
class MemorySearchLog:
    """A search log in memory (benchmarks, notebooks): ``records`` and ``winner`` after the search."""

    settings: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    winner: dict[str, Any] | None = None
    continued_from: list[int] = field(default_factory=list)

    def start(self, settings: Mapping[str, Any]) -> list[dict[str, Any]]:
        if self.settings:
            self.continued_from = continued_budgets({**self.settings, "continued_from": self.continued_from},
                                                    dict(settings), "this search log holds a search")
        self.settings = dict(settings)
        return list(self.records)

    def add(self, batch: int, record: Mapping[str, Any]) -> None:
        self.records.append(dict(record))

    def finish(self, winner: Mapping[str, Any]) -> None:
        self.winner = dict(winner)


class StoreSearchLog:
    """A search log in the study's store (tables ``searches`` and ``search_batches``).

    Parameters
    ----------
    store : the study's writable :class:`~tunelab.store.Store`
    search_id : names the search in the store (``"refine"`` for ``tunelab refine``)
    """

    def __init__(self, store: Store, search_id: str = "refine") -> None:
        self.store, self.search_id = store, search_id
        self.continued_from: list[int] = []

    def start(self, settings: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.continued_from = self.store.begin_search(self.search_id, settings)
        return list(self.store.search_batches(self.search_id)["record"])

    def add(self, batch: int, record: Mapping[str, Any]) -> None:
        self.store.add_search_batch(self.search_id, batch, record)

    def finish(self, winner: Mapping[str, Any]) -> None:
        self.store.finish_search(self.search_id, winner)
