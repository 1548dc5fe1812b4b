"""The pymoo engines ``ga`` (one objective) and ``nsga2`` (several) as ask/tell refiners, and their presets.

Each configuration is an integer gene vector (:class:`~tunelab.optimize.space.SearchSpace`);
pymoo's GA or NSGA-II evolves them with uniform crossover and a random-reset mutation
(:class:`~tunelab.optimize.engines.pymoo_operators.ResetMutation`), eliminating duplicates. The engine never measures: the driver asks for
a population, measures it and tells each configuration's measurements back.

* ``ask(n=None)`` returns pymoo's next population (generation 0: the baseline, origin
  ``"baseline"``, then ``settings.initial`` and unique random genes, seeded, origin ``"initial"``;
  later generations ``"offspring"``), one :class:`~tunelab.optimize.engines.base.Candidate` per distinct
  configuration. With ``n`` smaller than the population only the first ``n`` are returned; the
  rest stay *pending* and the next ``ask`` returns them before pymoo is asked for a new
  generation. Once every pending member has been handed out, ``ask`` returns the ones not yet
  told again (what a resumed search lost), so it never skips a generation.
* ``tell(candidate, measurements)`` stores the objective vector
  (:func:`~tunelab.optimize.engines.base.objective_vector`: minimised, failed ->
  ``FAILED_PENALTY``) on every pending and population member holding that configuration; once
  every pending member is told, pymoo is told the population (``algorithm.tell``) and, with
  ``adaptive``, the crossover and mutation rates follow the population's diversity (IOPerf). A
  configuration told again later (re-measured) updates the objectives of the population members
  holding it; pymoo ranks with them from its next generation on. A told configuration matches in
  its asked form and in its :func:`~tunelab.optimize.engines.base.typed_config` form.
* ``leaders(n)``: the best distinct configurations of the current population (for the race).
* ``state()`` is plain JSON: population genes, objectives, ranks and crowding, pending genes,
  generation counters, current rates, initial diversity and the bit-generator state of pymoo's
  random generator (``algorithm.random_state``). ``restore(state, told)`` on a fresh engine made
  with the same settings continues exactly as the uninterrupted engine; ``told`` (the last
  measurements of each configuration) completes a generation whose tells came after the state.

Options (``settings.options``; a preset's, then the user's): ``pop_size``, ``offspring`` (per
generation; default ``round(selection * pop_size)`` with ``selection``, else ``pop_size``),
``selection`` (GA only: parents drawn uniformly from the best share, seed 000), ``crossover`` and
``mutation`` (a probability, or ``[start, end]`` moved by ``adaptive``; without ``adaptive`` the
start is used), ``adaptive`` (bool), ``gene_mutation`` (per-gene reset probability of a mutated
individual; default: exactly one gene, seed 000). Without a preset: population 8, offspring =
population, crossover 0.9, mutation 0.3. The population shrinks to the budget:
``pop_size = max(2, min(pop_size, settings.budget))``, and to the number of distinct
configurations when the space is smaller.

``nsga2`` also runs with one objective (rank = order of that objective, crowding breaks ties);
``ga`` is the engine meant for that.

Examples
--------
>>> from tunelab.optimize.space import space_from_spec
>>> from tunelab.model import Metric
>>> space = space_from_spec({"a": {"kind": "int", "low": 0, "high": 9}})
>>> engine = ENGINES.get("ga")(EngineSettings(space, (Metric("qps"),), seed=1, options={"pop_size": 4}))
>>> batch = engine.ask()
>>> len(batch), batch[0].origin
(4, 'initial')
>>> for c in batch:
...     engine.tell(c, [{"qps": float(c.config["a"])}])
>>> [c.origin for c in engine.ask()][:1]
['offspring']
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from tunelab.errors import TunelabError
from tunelab.model import Metric
from tunelab.optimize.engines.base import (ENGINES, PRESETS, Candidate, EngineSettings, Measurement, Preset,
                                           RefineError, objective_vector, objectives_of, typed_config)
from tunelab.optimize.space import SearchSpace

#: the options the pymoo engines read (anything else is refused)
OPTION_NAMES = ("pop_size", "offspring", "selection", "crossover", "mutation", "adaptive", "gene_mutation")
#: the options used where neither a preset nor the user sets one
DEFAULT_OPTIONS: Mapping[str, Any] = {"pop_size": 8, "crossover": 0.9, "mutation": 0.3}
#: version of :meth:`PymooRefiner.state`'s layout
STATE_FORMAT = 1


# ---- pure helpers -------------------------------------------------------------------------------


def population_diversity(X: np.ndarray, upper: np.ndarray) -> float:
    """Mean pairwise share of (movable) genes that differ: 0 when all are identical, up to 1.

    >>> population_diversity(np.array([[0, 0], [1, 1]]), np.array([1, 1]))
    1.0
    """
    X = np.asarray(X)
    movable = np.asarray(upper) > 0
    if len(X) < 2 or not movable.any():
        return 0.0
    X = X[:, movable]
    diff = (X[:, None, :] != X[None, :, :]).mean(axis=2)
    n = len(X)
    return float(diff.sum() / (n * (n - 1)))


def adaptive_rates(diversity: float, initial_diversity: float, crossover: tuple[float, float],
                   mutation: tuple[float, float]) -> tuple[float, float]:
    """IOPerf (seed 002): (crossover, mutation) probabilities for the current diversity.

    Convergence ``c = 1 - diversity / initial`` (clipped to 0..1) moves each rate linearly from its
    start to its end value.

    >>> adaptive_rates(0.0, 0.8, (0.9, 0.7), (0.1, 0.25))
    (0.7, 0.25)
    >>> adaptive_rates(0.4, 0.8, (0.9, 0.7), (0.1, 0.25))
    (0.8, 0.175)
    """
    c = 0.0 if initial_diversity <= 0 else float(np.clip(1.0 - diversity / initial_diversity, 0.0, 1.0))
    (c0, c1), (m0, m1) = crossover, mutation
    return round(c0 + (c1 - c0) * c, 6), round(m0 + (m1 - m0) * c, 6)


def initial_population(space: SearchSpace, pop_size: int, seed: int, baseline: Mapping[str, Any] | None,
                       initial: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Gene rows of generation 0: the baseline, the ``initial`` configurations, then unique random
    genes (seeded) up to ``pop_size`` (fewer when the space is smaller).

    >>> from tunelab.optimize.space import space_from_spec
    >>> space = space_from_spec({"a": {"kind": "int", "low": 0, "high": 9}})
    >>> initial_population(space, 3, 0, {"a": 7}, [{"a": 7}, {"a": 2}])[:2].tolist()
    [[7.0], [2.0]]
    """
    rng = np.random.default_rng([seed, 1])   # a stream of its own: pymoo's generator is seeded with ``seed``
    rows: list[np.ndarray] = []
    seen: set[tuple[int, ...]] = set()
    for config in ([baseline] if baseline else []) + list(initial):
        genes = space.encode(config)
        if tuple(genes) not in seen:
            seen.add(tuple(genes))
            rows.append(genes)
    attempts = 0
    while len(rows) < pop_size and attempts < 100 * pop_size:
        attempts += 1
        genes = space.random_genes(rng, 1)[0]
        if tuple(genes) not in seen:
            seen.add(tuple(genes))
            rows.append(genes)
    return np.array(rows[:pop_size], dtype=float).reshape(-1, space.n_var)


@dataclass(frozen=True)
class GeneticOptions:
    """Checked options of a pymoo engine (see the module docstring)."""

    pop_size: int
    offspring: int
    selection: float | None
    crossover: tuple[float, float]
    mutation: tuple[float, float]
    adaptive: bool
    gene_mutation: float | None


def _probability(name: str, value: Any) -> float:
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise RefineError(f"option {name}={value!r} is not a number; give a probability between 0 and 1") from None
    if not 0.0 <= p <= 1.0:
        raise RefineError(f"option {name}={value!r} is outside 0..1; give a probability between 0 and 1")
    return p


def _rate_pair(name: str, value: Any) -> tuple[float, float]:
    if isinstance(value, str) and "," in value:
        value = value.split(",")
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise RefineError(f"option {name}={value!r} must be one probability or [start, end]")
        return _probability(name, value[0]), _probability(name, value[1])
    p = _probability(name, value)
    return p, p


def _count(name: str, value: Any, minimum: int) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number != int(number) or number < minimum:
        raise RefineError(f"option {name}={value!r} must be a whole number >= {minimum}")
    return int(number)


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise RefineError(f"option {name}={value!r} must be true or false")


def genetic_options(options: Mapping[str, Any], budget: int | None, engine: str = "ga") -> GeneticOptions:
    """Read and check ``options`` (over :data:`DEFAULT_OPTIONS`); the population shrinks to the budget
    (``max(2, min(pop_size, budget))``).

    >>> o = genetic_options({"pop_size": 80, "selection": 0.1}, budget=400)
    >>> o.pop_size, o.offspring, o.crossover, o.adaptive
    (80, 8, (0.9, 0.9), False)
    >>> genetic_options({"pop_size": 80}, budget=10).pop_size
    10
    """
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise RefineError(f"the {engine} engine has no option(s) {', '.join(unknown)}; "
                          f"known: {', '.join(OPTION_NAMES)}")
    merged = {**DEFAULT_OPTIONS, **{k: v for k, v in options.items() if v is not None}}
    pop_size = _count("pop_size", merged["pop_size"], 2)
    if budget is not None:
        pop_size = max(2, min(pop_size, int(budget)))
    selection = None
    if "selection" in merged:
        selection = _probability("selection", merged["selection"])
        if selection <= 0:
            raise RefineError("option selection must be > 0 (the share of the population that breeds)")
        if engine != "ga":
            raise RefineError(f"option selection (truncation selection) is a GA option; {engine} selects "
                              "parents by rank and crowding: drop it (set offspring for the batch size)")
    if "offspring" in merged:
        offspring = _count("offspring", merged["offspring"], 1)
    elif selection is not None:
        offspring = max(2, round(selection * pop_size))
    else:
        offspring = pop_size
    gene = merged.get("gene_mutation")
    return GeneticOptions(pop_size, offspring, selection, _rate_pair("crossover", merged["crossover"]),
                          _rate_pair("mutation", merged["mutation"]), _flag("adaptive", merged.get("adaptive", False)),
                          None if gene is None else _probability("gene_mutation", gene))


def _to_json_number(value: Any) -> float | str | None:
    """A float for JSON: finite as is, infinities and NaN as text (plain JSON has none)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else str(value)


def _from_json_number(value: Any) -> float | None:
    return None if value is None else float(value)


# ---- the engine ---------------------------------------------------------------------------------


class PymooRefiner:
    """pymoo's GA (``algorithm="ga"``) or NSGA-II (``"nsga2"``) behind the ask/tell contract.

    Attributes
    ----------
    name : ``"ga"`` or ``"nsga2"``
    algorithm : the pymoo algorithm (set up, seeded with ``settings.seed``)
    options : the checked :class:`GeneticOptions` (population already scaled to the budget)
    generation : pymoo generations told so far (0 while generation 0 is measured)
    generations : one row per told generation: ``generation, diversity, crossover, mutation``
        (the rates pymoo will use for the next one)
    """

    def __init__(self, settings: EngineSettings, algorithm: str = "ga") -> None:
        if algorithm not in ("ga", "nsga2"):
            raise RefineError(f"pymoo engine {algorithm!r} is unknown; use 'ga' or 'nsga2'")
        objectives = objectives_of(settings.objectives)
        if not objectives:
            raise RefineError("give at least one objective, e.g. --objective qps:max")
        if algorithm == "ga" and len(objectives) > 1:
            raise RefineError(f"the ga engine optimises one objective, got {len(objectives)} "
                              f"({', '.join(str(o.name) for o in objectives)}); use --engine nsga2 for several")
        if int(settings.seed) < 0:
            raise RefineError(f"seed must be >= 0, got {settings.seed}")
        self.name = algorithm
        self.space: SearchSpace = settings.space
        self.objectives: list[Metric] = objectives
        self.seed = int(settings.seed)
        self.options = genetic_options(settings.options, settings.budget, algorithm)
        X0 = initial_population(self.space, self.options.pop_size, self.seed, settings.baseline, settings.initial)
        self.problem, self.algorithm = self._setup(X0)
        self.generation = 0
        self.generations: list[dict[str, Any]] = []
        self.initial_diversity: float | None = None
        self.exhausted = False
        self._pending: Any = None                      # the asked pymoo Population not yet told to pymoo
        self._pending_keys: list[tuple[Any, ...]] = []  # its distinct configurations, in order
        self._pending_configs: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._handed = 0                               # how many of _pending_keys ask() has returned
        self._told: dict[tuple[Any, ...], np.ndarray] = {}
        self._aliases: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
        self._baseline_key = self.space.key(self.space.decode(X0[0])) if settings.baseline and len(X0) else None

    # -- set-up --

    def _setup(self, X0: np.ndarray) -> tuple[Any, Any]:
        from pymoo.algorithms.moo.nsga2 import NSGA2
        from pymoo.algorithms.soo.nonconvex.ga import GA
        from pymoo.core.problem import Problem
        from pymoo.operators.crossover.ux import UniformCrossover
        from pymoo.termination.max_gen import MaximumGenerationTermination
        from tunelab.optimize.engines import pymoo_operators as operators

        o = self.options
        problem = Problem(n_var=self.space.n_var, n_obj=len(self.objectives), xl=self.space.lower.astype(float),
                          xu=self.space.upper.astype(float), vtype=int)
        common: dict[str, Any] = dict(
            pop_size=len(X0), sampling=X0, crossover=UniformCrossover(prob=o.crossover[0]),
            mutation=operators.ResetMutation(prob=o.mutation[0], gene_prob=o.gene_mutation), n_offsprings=o.offspring,
            eliminate_duplicates=True)
        if self.name == "ga":
            if o.selection is not None:
                common["selection"] = operators.TruncationSelection(o.selection)
            algorithm = GA(**common)
        else:
            algorithm = NSGA2(**common)
        algorithm.setup(problem, termination=MaximumGenerationTermination(10**9), seed=self.seed, verbose=False)
        return problem, algorithm

    # -- ask / tell --

    @property
    def crossover_rate(self) -> float:
        return float(self.algorithm.mating.crossover.prob.value)

    @property
    def mutation_rate(self) -> float:
        return float(self.algorithm.mating.mutation.prob.value)

    def _origin(self, key: tuple[Any, ...]) -> str:
        if self.generation:
            return "offspring"
        return "baseline" if key == self._baseline_key else "initial"

    def _identities(self, config: Mapping[str, Any]) -> set[tuple[Any, ...]]:
        """The keys a told configuration may match: its own, and that of its re-typed form
        (:func:`~tunelab.optimize.engines.base.typed_config` may snap a sorted triplet's component)."""
        key = self.space.key(config)
        if key not in self._aliases:
            try:
                self._aliases[key] = {key, self.space.key(typed_config(self.space, config))}
            except TunelabError:
                self._aliases[key] = {key}
        return self._aliases[key]

    def _set_pending(self, pop: Any) -> None:
        self._pending, self._handed, self._told = pop, 0, {}
        self._pending_keys, self._pending_configs = [], {}
        for x in pop.get("X"):
            config = self.space.decode(x)
            key = self.space.key(config)
            if key not in self._pending_configs:
                self._pending_keys.append(key)
                self._pending_configs[key] = config

    def ask(self, n: int | None = None) -> list[Candidate]:
        """The next configurations to measure (see the module docstring: pending members first,
        then a new pymoo generation; ``[]`` once pymoo cannot produce a new configuration)."""
        if n is not None and n < 1:
            return []
        if self._pending is None:
            if self.exhausted:
                return []
            pop = self.algorithm.ask()
            if pop is None or len(pop) == 0:
                self.exhausted = True
                return []
            self._set_pending(pop)
        if self._handed < len(self._pending_keys):
            chosen = self._pending_keys[self._handed: self._handed + (n or len(self._pending_keys))]
            self._handed += len(chosen)
        else:
            chosen = [k for k in self._pending_keys if k not in self._told][:n]
        return [Candidate(dict(self._pending_configs[k]), self._origin(k)) for k in chosen]

    def tell(self, candidate: Candidate, measurements: Sequence[Measurement]) -> None:
        """Store the objective vector of ``candidate``'s configuration; tell pymoo once the pending
        population is complete."""
        self._apply(candidate.config, objective_vector(measurements, self.objectives))
        self._advance_if_complete()

    def _apply(self, config: Mapping[str, Any], F: np.ndarray) -> None:
        """Set ``F`` on the population and pending members holding ``config``."""
        told = self._identities(config)
        if self.algorithm.is_initialized and self.algorithm.pop is not None:
            for ind in self.algorithm.pop:
                if self._identities(self.space.decode(ind.X)) & told:
                    ind.set("F", F.copy())
        for key in self._pending_keys:
            if self._identities(self._pending_configs[key]) & told:
                self._told[key] = F.copy()

    def _advance_if_complete(self) -> None:
        if self._pending is None or any(k not in self._told for k in self._pending_keys):
            return
        from pymoo.core.evaluator import Evaluator
        from pymoo.problems.static import StaticProblem

        pop = self._pending
        F = np.array([self._told[self.space.key(self.space.decode(x))] for x in pop.get("X")])
        Evaluator().eval(StaticProblem(self.problem, F=F), pop)
        self.algorithm.tell(infills=pop)
        self._pending, self._pending_keys, self._pending_configs, self._told, self._handed = None, [], {}, {}, 0
        self.generation += 1
        diversity = population_diversity(np.array([ind.X for ind in self.algorithm.pop]), self.space.upper)
        if self.initial_diversity is None:
            self.initial_diversity = diversity
        if self.options.adaptive:
            cx, mx = adaptive_rates(diversity, self.initial_diversity, self.options.crossover, self.options.mutation)
            self.algorithm.mating.crossover.prob.value = cx
            self.algorithm.mating.mutation.prob.value = mx
        self.generations.append({"generation": self.generation, "diversity": diversity,
                                 "crossover": self.crossover_rate, "mutation": self.mutation_rate})

    def leaders(self, n: int) -> list[dict[str, Any]]:
        """Up to ``n`` distinct configurations of the current population, best first (GA: by the
        objective; NSGA-II: by front, then crowding distance, larger first)."""
        if not self.algorithm.is_initialized or self.algorithm.pop is None:
            return []
        def order(ind: Any) -> tuple[float, ...]:
            if self.name == "ga":
                return (float(ind.F[0]),)
            rank, crowding = ind.get("rank"), ind.get("crowding")
            return (math.inf if rank is None else float(rank), -(0.0 if crowding is None else float(crowding)))
        out: dict[tuple[Any, ...], dict[str, Any]] = {}
        for ind in sorted(self.algorithm.pop, key=order):
            config = self.space.decode(ind.X)
            out.setdefault(self.space.key(config), config)
            if len(out) >= n:
                break
        return list(out.values())

    # -- state --

    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly, as plain JSON (no pickle)."""
        algorithm = self.algorithm
        population = []
        if algorithm.is_initialized and algorithm.pop is not None:
            for ind in algorithm.pop:
                rank = ind.get("rank")
                population.append({"genes": [int(round(g)) for g in ind.X], "F": [float(f) for f in ind.F],
                                   "rank": None if rank is None else int(rank),
                                   "crowding": _to_json_number(ind.get("crowding"))})
        pending = None
        if self._pending is not None:
            X = self._pending.get("X")
            told = [self._told.get(self.space.key(self.space.decode(x))) for x in X]
            pending = {"genes": [[int(round(g)) for g in x] for x in X], "handed": self._handed,
                       "F": [None if f is None else [float(v) for v in f] for f in told]}
        return {
            "format": STATE_FORMAT, "engine": self.name, "generation": self.generation,
            "initialized": bool(algorithm.is_initialized), "n_iter": algorithm.n_iter,
            "population": population, "pending": pending, "exhausted": self.exhausted,
            "crossover": self.crossover_rate, "mutation": self.mutation_rate,
            "initial_diversity": self.initial_diversity, "generations": [dict(g) for g in self.generations],
            "rng": _json_rng_state(algorithm.random_state.bit_generator.state),
        }

    def restore(self, state: Mapping[str, Any],
                told: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]] = ()) -> None:
        """Continue from ``state`` (of an engine made with the same settings), then apply ``told``
        (every ``(config, measurements)`` told so far; the last pair of a configuration wins), so a
        state recorded before a batch's tells resumes as well as one recorded after.

        Raises
        ------
        RefineError
            When the engine was used already, or ``state`` is not this engine's or does not match
            its settings.
        """
        if self.generation or self._pending is not None or self.algorithm.is_initialized:
            raise RefineError("restore() needs a freshly made engine; make a new one with the same settings")
        try:
            self._restore(state)
        except RefineError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise RefineError(f"the stored {self.name} engine state is unreadable ({exc!r}); "
                              "start a new search") from None
        latest: dict[tuple[Any, ...], tuple[Mapping[str, Any], Sequence[Measurement]]] = {}
        for config, measurements in told:
            latest[self.space.key(config)] = (config, measurements)
        for config, measurements in latest.values():
            self._apply(config, objective_vector(measurements, self.objectives))
        self._advance_if_complete()

    def _restore(self, state: Mapping[str, Any]) -> None:
        from pymoo.core.evaluator import Evaluator
        from pymoo.core.population import Population
        from pymoo.problems.static import StaticProblem
        from pymoo.util.optimum import filter_optimum

        if state.get("format") != STATE_FORMAT or state.get("engine") != self.name:
            raise RefineError(f"the stored engine state (engine {state.get('engine')!r}, format "
                              f"{state.get('format')!r}) is not a {self.name} state of format {STATE_FORMAT}; "
                              "resume with the engine the search was started with")
        algorithm, pending = self.algorithm, state["pending"]
        if state["initialized"] or pending is not None:
            first = algorithm.ask()        # generation 0 from the settings (uses no random number)
        if not state["initialized"]:
            if pending is not None:
                if np.array(pending["genes"], dtype=float).tolist() != first.get("X").tolist():
                    raise RefineError("the stored engine state does not match the search's settings "
                                      "(initial population differs); resume with the same settings and seed")
                self._set_pending(first)
        else:
            rows = state["population"]
            pop = Population.new(X=np.array([r["genes"] for r in rows], dtype=float).reshape(-1, self.space.n_var))
            Evaluator().eval(StaticProblem(self.problem, F=np.array([r["F"] for r in rows], dtype=float)), pop)
            for ind, r in zip(pop, rows):
                if r["rank"] is not None:
                    ind.set("rank", int(r["rank"]))
                if r["crowding"] is not None:
                    ind.set("crowding", _from_json_number(r["crowding"]))
            algorithm.pop, algorithm.is_initialized, algorithm.n_iter = pop, True, int(state["n_iter"])
            algorithm.opt = filter_optimum(pop, least_infeasible=True)
            if pending is not None:
                off = Population.new(X=np.array(pending["genes"], dtype=float).reshape(-1, self.space.n_var))
                off.set("n_gen", algorithm.n_iter)
                off.set("n_iter", algorithm.n_iter)
                self._set_pending(off)
        if pending is not None:
            self._handed = min(int(pending["handed"]), len(self._pending_keys))
            for x, f in zip(self._pending.get("X"), pending["F"]):
                if f is not None:
                    self._told[self.space.key(self.space.decode(x))] = np.array(f, dtype=float)
        self.generation = int(state["generation"])
        self.exhausted = bool(state["exhausted"])
        algorithm.mating.crossover.prob.value = float(state["crossover"])
        algorithm.mating.mutation.prob.value = float(state["mutation"])
        self.initial_diversity = None if state["initial_diversity"] is None else float(state["initial_diversity"])
        self.generations = [dict(g) for g in state["generations"]]
        algorithm.random_state.bit_generator.state = dict(state["rng"])


def _json_rng_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A bit generator's state with numpy integers as Python ints (JSON-able; big ints are exact)."""
    def plain(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.ndarray):
            return value.tolist()
        return value
    return plain(state)


def ga_engine(settings: EngineSettings) -> PymooRefiner:
    """Factory of the ``ga`` engine (one objective)."""
    return PymooRefiner(settings, "ga")


def nsga2_engine(settings: EngineSettings) -> PymooRefiner:
    """Factory of the ``nsga2`` engine (several objectives; runs with one as well)."""
    return PymooRefiner(settings, "nsga2")


ENGINES.add("ga", ga_engine)
ENGINES.add("nsga2", nsga2_engine)

PRESETS.add("gembala2013", Preset(
    "gembala2013", "ga", {"pop_size": 80, "selection": 0.10, "crossover": 0.5, "mutation": 0.16}, 80 + 40 * 8,
    "seed 000 (Gembala et al.): population 80, 40 generations, selection 10 % (8 offspring per generation), "
    "crossover 50 %, mutation 16 %"))
PRESETS.add("ioperf", Preset(
    "ioperf", "ga", {"pop_size": 20, "offspring": 10, "crossover": [0.9, 0.7], "mutation": [0.1, 0.25],
                     "adaptive": True}, 200,
    "seed 002 (IOPerf): population 20, 10 offspring per generation, adaptive crossover 0.9 -> 0.7 and "
    "mutation 0.1 -> 0.25 as the population's diversity falls"))
PRESETS.add("lab", Preset(
    "lab", "ga", {"pop_size": 8, "offspring": 6, "crossover": 0.9, "mutation": 0.3}, 40,
    "small default for the lab: population 8, 6 offspring per generation, crossover 0.9, mutation 0.3"))
PRESETS.add("nsga2-crowding", Preset(
    "nsga2-crowding", "nsga2", {"pop_size": 32, "offspring": 32, "crossover": 1.0, "mutation": 0.75,
                                "gene_mutation": 0.05}, 32 + 200 * 32,
    "seed 003 (Martinez-Alvarez et al. 2015, NSGA-II with crowding distance): population 32, uniform crossover "
    "until the population is doubled (32 offspring), 3/4 of the offspring mutate with per-gene p_mut 0.05, "
    "200 iterations (islands left out)"))
