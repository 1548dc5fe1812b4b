"""Benchmark-only peer engines for ``bench_refine.py``: SMAC3 (``pip install 'tunelab[bench]'``).

``smac``: SMAC3's ``HyperparameterOptimizationFacade`` (Lindauer et al. 2022, JMLR 23(54)): a random-forest
surrogate with log-transformed costs, expected improvement, local and random search with random
interleaving, and its own Sobol initial design (sized by SMAC from ``n_trials`` = the budget). It is the
random-forest algorithm configurator; used through its ask/tell interface as a user would. Each gene of
the search space is one hyperparameter: ordered genes an ``OrdinalHyperparameter`` of their indices, other
genes a ``CategoricalHyperparameter``. The baseline goes first (told to SMAC as a trial). Cost =
``-sign * log(mean)`` of the first objective (failed: a large cost). A proposal already measured is told
again (SMAC then proposes elsewhere). ``restore`` rebuilds SMAC and tells it the history (the benchmark
never resumes; the contract asks for it).

This module registers ``smac`` in :data:`tunelab.optimize.engines.ENGINES` when imported (never from
tunelab itself: SMAC3 is not a dependency of tunelab).
"""
from __future__ import annotations

import importlib.util
import math
import tempfile
from typing import Any, Mapping, Sequence

import numpy as np

from tunelab.optimize.engines import ENGINES, Candidate, EngineSettings, Measurement, first_batch
from tunelab.optimize.engines.model import finite_mean, ordered_genes
from tunelab.optimize.history import config_key

FAILED_COST = 1e6


def smac_installed() -> bool:
    return importlib.util.find_spec("smac") is not None


class SmacSearch:
    """SMAC3's HPO facade behind tunelab's ask/tell contract (see the module docstring)."""

    name = "smac"

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.space = settings.space
        self.asks = 0
        self.pending: dict[tuple, Any] = {}        # config key -> SMAC's TrialInfo not yet told
        self.told: set[tuple] = set()
        self.workdir = tempfile.TemporaryDirectory(prefix="tunelab-smac-")
        self.smac, self.configspace = self.build()

    def build(self) -> tuple[Any, Any]:
        from ConfigSpace import CategoricalHyperparameter, ConfigurationSpace, OrdinalHyperparameter
        from smac import HyperparameterOptimizationFacade, Scenario

        cs = ConfigurationSpace(seed=self.settings.seed)
        for g, (size, ordered) in enumerate(zip(self.space.upper + 1, ordered_genes(self.space))):
            levels = [int(i) for i in range(int(size))]
            cs.add(OrdinalHyperparameter(f"g{g}", levels) if ordered and size > 2
                   else CategoricalHyperparameter(f"g{g}", levels))
        scenario = Scenario(cs, deterministic=True, n_trials=max(10, self.settings.budget) * 10,
                            seed=self.settings.seed, output_directory=self.workdir.name)
        initial = HyperparameterOptimizationFacade.get_initial_design(scenario, n_configs=max(
            2, min(10, self.settings.budget // 4)))
        smac = HyperparameterOptimizationFacade(scenario, lambda config, seed=0: 0.0, initial_design=initial,
                                                overwrite=True, logging_level=40)
        return smac, cs

    def config_of(self, values: Mapping[str, Any]) -> dict[str, Any]:
        genes = np.array([int(values[f"g{g}"]) for g in range(len(self.space.upper))])
        return self.space.decode(genes)

    def ask(self, n: int | None = None) -> list[Candidate]:
        self.asks += 1
        if self.asks == 1:
            out = first_batch(self.settings)
            if out:
                return out
        out = []
        for _ in range(n or 1):
            info = self.smac.ask()
            config = self.config_of(dict(info.config))
            self.pending[config_key(config)] = info
            out.append(Candidate(config, "smac"))
        return out

    def tell(self, candidate: Candidate, measurements: Sequence[Measurement]) -> None:
        from ConfigSpace import Configuration
        from smac.runhistory.dataclasses import TrialInfo, TrialValue

        objective = self.settings.objectives[0]
        mean = finite_mean([m.get(objective.name, math.nan) for m in measurements])
        cost = (FAILED_COST if math.isnan(mean) else
                objective.sign * math.log(mean) if mean > 0 else objective.sign * mean)
        key = config_key(candidate.config)
        info = self.pending.pop(key, None)
        if info is None:
            genes = self.space.encode(candidate.config)
            info = TrialInfo(Configuration(self.configspace, values={f"g{g}": int(v) for g, v in enumerate(genes)}),
                             seed=self.settings.seed)
        self.smac.tell(info, TrialValue(cost=float(cost)))
        self.told.add(key)

    def state(self) -> dict[str, Any]:
        return {"asks": self.asks}

    def restore(self, state: Mapping[str, Any], told: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]]) -> None:
        self.smac, self.configspace = self.build()
        self.asks = int(state.get("asks", 0))
        for config, measurements in told:
            self.tell(Candidate(dict(config), "told"), measurements)


if smac_installed() and "smac" not in ENGINES:
    ENGINES.add("smac", SmacSearch)
