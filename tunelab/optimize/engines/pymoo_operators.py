"""pymoo operators of the ``ga`` and ``nsga2`` engines: random-reset mutation and truncation selection.

Kept apart from :mod:`tunelab.optimize.engines.pymoo_engine` so that importing tunelab (the report, the
CLI) never needs pymoo: the engine imports this module only when it builds an algorithm.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from pymoo.core.mutation import Mutation
from pymoo.core.selection import Selection


class ResetMutation(Mutation):
    """Random reset: a mutated individual's gene takes another random level of its range.

    ``gene_prob=None`` resets exactly one random gene (seed 000); a probability resets each gene
    with that probability (seed 003's per-gene ``p_mut``). Which individuals mutate is pymoo's
    ``prob``.
    """

    def __init__(self, prob: float = 1.0, gene_prob: float | None = None, **kwargs: Any) -> None:
        super().__init__(prob=prob, **kwargs)
        self.gene_prob = gene_prob

    def _do(self, problem: Any, X: np.ndarray, *args: Any, random_state: Any = None, **kwargs: Any) -> np.ndarray:
        X = np.array(X, dtype=float, copy=True)
        xl, xu = np.asarray(problem.xl, dtype=np.int64), np.asarray(problem.xu, dtype=np.int64)
        movable = np.flatnonzero(xu > xl)
        if movable.size == 0:
            return X
        for row in X:
            if self.gene_prob is None:
                genes = [int(random_state.choice(movable))]
            else:
                genes = movable[random_state.random(movable.size) < self.gene_prob].tolist()
            for g in genes:
                new = int(random_state.integers(xl[g], xu[g]))     # one of the xu - xl other levels
                row[g] = float(new + 1 if new >= int(round(row[g])) else new)
        return X


class TruncationSelection(Selection):
    """Parents drawn uniformly from the best ``fraction`` of the population (seed 000: 10 %)."""

    def __init__(self, fraction: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fraction = fraction

    def _do(self, problem: Any, pop: Any, n_select: int, n_parents: int, random_state: Any = None,
            **kwargs: Any) -> np.ndarray:
        F = pop.get("F")[:, 0]
        n_best = max(2, int(math.ceil(self.fraction * len(pop))))
        best = np.argsort(F, kind="stable")[:n_best]
        return random_state.choice(best, size=(n_select, n_parents))
