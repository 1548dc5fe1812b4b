"""GA and NSGA-II refinement over a :class:`~tunelab.optimize.space.SearchSpace`, driven by ask/tell.

pymoo proposes (``algorithm.ask()``); tunelab measures through an
:class:`~tunelab.optimize.evaluators.Evaluator`, then tells pymoo the estimates
(``algorithm.tell(infills=pop)``). Around that loop tunelab handles what pymoo does not know
about: measurement noise and a budget of real trials.

* **Budget** counts measurements (trials), not configurations; re-measurements count too.
* **Cache**: a configuration asked again is not re-measured; its estimate is the mean of all
  its measurements so far.
* **Elites** (``elite_reevals`` per generation) are re-measured, so the best-looking
  configurations accumulate replicates and a lucky draw regresses towards its mean.
* **Final reserve**: a share of the budget re-measures the leading candidates at the end.
* **Winner** by a pessimistic confidence bound: ``mean - t * se`` when maximising
  (``mean + t * se`` when minimising), not its best single draw; ``se`` comes from the
  configuration's own replicates when it has 3 or more, else from the pooled CV of all
  replicated configurations.
* **Determinism**: pymoo and the initial population are seeded, evaluation keys are
  ``"<event>:r<replicate>"`` in a fixed order, so a replay with the same seed asks the same
  keys; with a store-backed evaluator a crashed search resumes without repeating a measurement.

Presets (registry :data:`PRESETS`): ``gembala2013`` (seed 000: population 80, 40 generations,
10 % selection, crossover 50 %, mutation 16 %), ``ioperf`` (seed 002: crossover 0.9 -> 0.7,
mutation 0.1 -> 0.25 as the population's diversity falls), ``lab`` (small: population 8).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.errors import TunelabError
from tunelab.model import Metric, ParseError, level_value
from tunelab.optimize.evaluators import Evaluator
from tunelab.optimize.space import SearchSpace
from tunelab.registry import Registry

#: objective value given to a failed measurement (pymoo minimises; finite so crowding stays defined)
FAILED_PENALTY = 1e18


class RefineError(TunelabError):
    """A refinement cannot run as asked (bad objective, budget, preset, or no usable measurement)."""


# ---- objectives ---------------------------------------------------------------------------------


def objectives_of(objectives: Sequence[Metric | str]) -> list[Metric]:
    """Each objective as a :class:`~tunelab.model.Metric` (``"qps:max"``, ``"latency_p99_ms:min"``);
    :class:`RefineError` if one cannot be read.

    >>> objectives_of(["qps:max"])
    [Metric(name='qps', direction='maximize', sesoi_pct=5.0)]
    """
    try:
        return [Metric.coerce(o) for o in objectives]
    except ParseError as exc:
        raise RefineError(f"{exc}; an objective must look like METRIC:max or METRIC:min, e.g. qps:max") from None


# ---- presets ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preset:
    """Settings of one search strategy.

    ``selection`` is the share of the population replaced per generation (offspring count =
    ``max(2, round(selection * pop_size))``, parents drawn from the best ``selection`` share);
    ``None`` means pymoo's defaults (binary tournament, ``pop_size`` offspring). ``adaptive``
    moves crossover from ``crossover[0]`` to ``crossover[1]`` and mutation from ``mutation[0]``
    to ``mutation[1]`` as the population's diversity falls (IOPerf).
    """

    name: str
    pop_size: int
    budget: int
    crossover: tuple[float, float]
    mutation: tuple[float, float]
    selection: float | None = None
    offspring: int | None = None
    adaptive: bool = False
    replicates: int = 1
    elite_reevals: int = 1
    final_share: float = 0.2
    description: str = ""


PRESETS: Registry[Preset] = Registry("refine preset")
PRESETS.add("gembala2013", Preset(
    "gembala2013", pop_size=80, budget=80 + 40 * 8, crossover=(0.5, 0.5), mutation=(0.16, 0.16), selection=0.10,
    elite_reevals=0, final_share=0.0,
    description="seed 000: population 80, 40 generations, selection 10 %, crossover 50 %, mutation 16 %"))
PRESETS.add("ioperf", Preset(
    "ioperf", pop_size=20, budget=200, crossover=(0.9, 0.7), mutation=(0.1, 0.25), adaptive=True, offspring=10,
    description="seed 002: adaptive crossover 0.9 -> 0.7 and mutation 0.1 -> 0.25 as diversity falls"))
PRESETS.add("lab", Preset(
    "lab", pop_size=8, budget=40, crossover=(0.9, 0.9), mutation=(0.3, 0.3), offspring=6, elite_reevals=1,
    final_share=0.2, description="small default for the lab: population 8, 40 measurements"))


def get_preset(name: str) -> Preset:
    try:
        return PRESETS.get(name)
    except KeyError as exc:
        raise RefineError(str(exc.args[0])) from None


# ---- pymoo operators ----------------------------------------------------------------------------


def _operators() -> tuple[type, type]:
    from pymoo.core.mutation import Mutation
    from pymoo.core.selection import Selection

    class ResetMutation(Mutation):
        """Give one random gene of a mutated individual a new random level (seed 000's mutation)."""

        def _do(self, problem: Any, X: np.ndarray, random_state: Any = None, **kwargs: Any) -> np.ndarray:
            X = np.array(X, dtype=float, copy=True)
            xl, xu = np.asarray(problem.xl, dtype=int), np.asarray(problem.xu, dtype=int)
            movable = np.flatnonzero(xu > xl)
            if movable.size == 0:
                return X
            for row in X:
                gene = int(random_state.choice(movable))
                choices = [v for v in range(xl[gene], xu[gene] + 1) if v != int(round(row[gene]))]
                row[gene] = float(random_state.choice(choices))
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

    return ResetMutation, TruncationSelection


def population_diversity(X: np.ndarray, upper: np.ndarray) -> float:
    """Mean pairwise share of genes that differ (0: all identical, up to 1).

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


def adaptive_rates(diversity: float, initial_diversity: float, preset: Preset) -> tuple[float, float]:
    """IOPerf: (crossover, mutation) probabilities for the current diversity.

    Convergence ``c = 1 - diversity / initial`` (clipped to 0..1) moves the rates linearly from
    their start to their end values.

    >>> adaptive_rates(0.0, 0.8, get_preset("ioperf"))
    (0.7, 0.25)
    """
    c = 0.0 if initial_diversity <= 0 else float(np.clip(1.0 - diversity / initial_diversity, 0.0, 1.0))
    (c0, c1), (m0, m1) = preset.crossover, preset.mutation
    return round(c0 + (c1 - c0) * c, 6), round(m0 + (m1 - m0) * c, 6)


# ---- estimates and the pessimistic bound --------------------------------------------------------


def pessimistic_bounds(values: Mapping[Any, Sequence[float]], direction: str = "maximize",
                       level: float = 0.95) -> pd.DataFrame:
    """Mean, n, standard error and one-sided pessimistic bound of each configuration's measurements.

    ``bound = mean - t * se`` for maximise (``+`` for minimise), ``t`` the one-sided Student
    quantile at ``level``. ``se`` uses the configuration's own SD when it has >= 3 values, else
    the pooled CV of every configuration with >= 2 values times its mean (df = pooled df). With
    no replicated configuration at all, the bound is the mean (no noise information).

    Returns
    -------
    DataFrame indexed by configuration key, columns ``[n, mean, sd, se, bound]``.

    Examples
    --------
    >>> t = pessimistic_bounds({"stable": [104, 105, 106, 105], "lucky": [111], "other": [90, 100, 110]})
    >>> t["bound"].idxmax()
    'stable'
    """
    from scipy import stats as ss   # deferred: scipy.stats costs about 1 s of CLI start-up

    rel_ss, rel_df = 0.0, 0
    for vals in values.values():
        v = np.asarray([x for x in vals if np.isfinite(x)], dtype=float)
        if len(v) >= 2 and v.mean() != 0:
            rel = v / v.mean()
            rel_ss += float(((rel - 1.0) ** 2).sum())
            rel_df += len(v) - 1
    pooled_cv = math.sqrt(rel_ss / rel_df) if rel_df else math.nan
    sign = -1.0 if direction == "maximize" else 1.0
    rows = {}
    for key, vals in values.items():
        v = np.asarray([x for x in vals if np.isfinite(x)], dtype=float)
        n = len(v)
        if n == 0:
            rows[key] = {"n": 0, "mean": math.nan, "sd": math.nan, "se": math.nan,
                         "bound": -math.inf if direction == "maximize" else math.inf}
            continue
        mean = float(v.mean())
        if n >= 3:
            sd, df = float(v.std(ddof=1)), n - 1
        elif rel_df:
            sd, df = pooled_cv * abs(mean), rel_df
        else:
            sd, df = math.nan, 0
        se = sd / math.sqrt(n) if df else math.nan
        t = float(ss.t.ppf(level, df)) if df else 0.0
        bound = mean + sign * t * se if df else mean
        rows[key] = {"n": n, "mean": mean, "sd": sd, "se": se, "bound": bound}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["n", "mean", "sd", "se", "bound"])


def non_dominated(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``points`` (all objectives minimised) no other row dominates.

    >>> non_dominated(np.array([[1, 2], [2, 1], [2, 2]])).tolist()
    [True, True, False]
    """
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

    points = np.asarray(points, dtype=float)
    mask = np.zeros(len(points), dtype=bool)
    if len(points):
        mask[NonDominatedSorting().do(points, only_non_dominated_front=True)] = True
    return mask


# ---- the search ---------------------------------------------------------------------------------


@dataclass
class _Record:
    """The measurements of one configuration so far (one dict of objective values per measurement)."""

    config: dict[str, Any]
    values: list[dict[str, float]] = field(default_factory=list)


@dataclass
class RefineResult:
    """What :func:`refine` found.

    Attributes
    ----------
    winner : the recommended configuration (best pessimistic bound on the first objective; for
        NSGA-II the Pareto point chosen that way)
    estimates : one row per measured configuration: knob columns, ``n``, per objective
        ``<metric>_mean``, ``<metric>_se``, ``<metric>_bound``; sorted best first
    history : one row per measurement: ``key, event, generation, kind, replicate``, knobs, metrics
    generations : per generation ``best, worst, mean, baseline`` of the first objective's
        estimates in the population, and the crossover/mutation rates used (seed 000's plot)
    pareto : the non-dominated configurations by mean estimates (multi-objective only)
    """

    winner: dict[str, Any]
    objectives: list[Metric]
    estimates: pd.DataFrame
    history: pd.DataFrame
    generations: pd.DataFrame
    pareto: pd.DataFrame | None
    evaluations: int
    preset: str
    seed: int
    baseline: dict[str, Any] | None = None


class _StopSearch(Exception):
    """Internal: the budget is used up."""


@dataclass(frozen=True)
class _Plan:
    """A checked refine request: objectives, preset and how the budget is split."""

    objectives: list[Metric]
    preset: Preset
    budget: int
    replicates: int
    pop_size: int
    search_budget: int


def _plan(objectives: Sequence[Metric | str], preset: Preset | str, budget: int | None,
          replicates: int | None) -> _Plan:
    """Check the request and split the budget: the search gets all but the preset's final reserve."""
    preset = get_preset(preset) if isinstance(preset, str) else preset
    objs = objectives_of(objectives)
    if not objs:
        raise RefineError("give at least one objective, e.g. --objective qps:max")
    budget = int(budget if budget is not None else preset.budget)
    replicates = int(replicates if replicates is not None else preset.replicates)
    if replicates < 1:
        raise RefineError(f"replicates must be >= 1, got {replicates}")
    if budget < 2 * replicates:
        raise RefineError(f"budget {budget} is too small: it must allow at least two configurations of "
                          f"{replicates} replicate(s); raise --budget")
    pop_size = max(2, min(preset.pop_size, budget // replicates))
    reserve = int(math.floor(preset.final_share * budget))
    return _Plan(objs, preset, budget, replicates, pop_size, budget - reserve)


class _Measurements:
    """Every measurement of a search: per-configuration records, the history, and the counters
    that make evaluation keys (``"<event>:r<replicate>"``) deterministic."""

    def __init__(self, space: SearchSpace, evaluator: Evaluator, objectives: Sequence[Metric],
                 on_measure: Callable[[int, str], None] | None) -> None:
        self.ids = space.ids
        self.evaluator, self.objectives, self.on_measure = evaluator, list(objectives), on_measure
        self.records: dict[tuple[Any, ...], _Record] = {}
        self.history: list[dict[str, Any]] = []
        self.count = 0        # measurements so far
        self.event = 0        # measurement requests so far (one per configuration asked for)
        self.generation = 0

    def key(self, config: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(config[i] for i in self.ids)

    def measured(self, key: tuple[Any, ...]) -> bool:
        return key in self.records and bool(self.records[key].values)

    def measure(self, config: Mapping[str, Any], count: int, kind: str, limit: int) -> None:
        """Measure ``config`` ``count`` times; :class:`_StopSearch` once ``limit`` measurements are spent."""
        record = self.records.setdefault(self.key(config), _Record(dict(config)))
        event = self.event
        self.event += 1
        for _ in range(count):
            if self.count >= limit:
                raise _StopSearch
            rep = len(record.values)
            eval_key = f"{event}:r{rep}"
            metrics = self.evaluator.evaluate(dict(config), rep, key=eval_key)
            record.values.append({o.name: float(metrics.get(o.name, math.nan)) for o in self.objectives})
            self.count += 1
            self.history.append({"key": eval_key, "event": event, "generation": self.generation, "kind": kind,
                                 "replicate": rep, **dict(config), **{m: float(v) for m, v in metrics.items()}})
            if self.on_measure is not None:
                self.on_measure(self.count, eval_key)

    def vector(self, key: tuple[Any, ...]) -> np.ndarray:
        """The objective vector pymoo minimises: ``sign * mean`` per objective (failed: :data:`FAILED_PENALTY`)."""
        out = []
        for o in self.objectives:
            v = np.array([x[o.name] for x in self.records[key].values], dtype=float)
            v = v[np.isfinite(v)]
            out.append(o.sign * float(v.mean()) if v.size else FAILED_PENALTY)
        return np.array(out)


def _initial_population(space: SearchSpace, pop_size: int, seed: int, baseline: Mapping[str, Any] | None,
                        initial: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Gene rows of the first population: the baseline, the given configurations, then unique random
    ones (seeded) up to ``pop_size`` (fewer when the space is smaller)."""
    rng = np.random.default_rng(seed)
    seeds = ([dict(baseline)] if baseline else []) + [dict(c) for c in initial]
    rows: list[np.ndarray] = []
    seen: set[tuple[int, ...]] = set()
    for config in seeds:
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
    return np.array(rows[:pop_size], dtype=float)


def _algorithm(space: SearchSpace, plan: _Plan, X0: np.ndarray, seed: int) -> tuple[Any, Any]:
    """The pymoo problem and the set-up GA (one objective) or NSGA-II (several), seeded with ``X0``."""
    from pymoo.algorithms.moo.nsga2 import NSGA2
    from pymoo.algorithms.soo.nonconvex.ga import GA
    from pymoo.core.problem import Problem
    from pymoo.operators.crossover.ux import UniformCrossover
    from pymoo.termination import get_termination

    preset, pop_size = plan.preset, len(X0)
    ResetMutation, TruncationSelection = _operators()
    crossover = UniformCrossover(prob=preset.crossover[0])
    mutation = ResetMutation(prob=preset.mutation[0])
    n_offsprings = preset.offspring or (max(2, round(preset.selection * pop_size)) if preset.selection else None)
    problem = Problem(n_var=space.n_var, n_obj=len(plan.objectives), xl=space.lower.astype(float),
                      xu=space.upper.astype(float), vtype=int)
    if len(plan.objectives) == 1:
        kwargs: dict[str, Any] = {}
        if preset.selection:
            kwargs["selection"] = TruncationSelection(preset.selection)
        algorithm = GA(pop_size=pop_size, sampling=X0, crossover=crossover, mutation=mutation,
                       n_offsprings=n_offsprings, eliminate_duplicates=True, **kwargs)
    else:
        algorithm = NSGA2(pop_size=pop_size, sampling=X0, crossover=crossover, mutation=mutation,
                          n_offsprings=n_offsprings, eliminate_duplicates=True)
    algorithm.setup(problem, termination=get_termination("n_gen", 10**9), seed=seed, verbose=False)
    return problem, algorithm


def _evaluate_offspring(algorithm: Any, problem: Any, space: SearchSpace, m: _Measurements, plan: _Plan) -> bool:
    """Ask pymoo for a population, measure its new configurations (``plan.replicates`` each; known
    ones keep their estimates) and tell pymoo the estimates. False when pymoo has nothing left to ask."""
    from pymoo.core.evaluator import Evaluator as PymooEvaluator
    from pymoo.problems.static import StaticProblem

    pop = algorithm.ask()
    if pop is None or len(pop) == 0:
        return False  # the space is exhausted (pymoo returns None): the final reserve spends the rest
    X = np.asarray(pop.get("X"), dtype=float)
    if len(X) == 0:
        return False
    F = []
    kind = "initial" if m.generation == 0 else "offspring"
    for x in X:
        config = space.decode(x)
        key = m.key(config)
        if not m.measured(key):
            m.measure(config, plan.replicates, kind, plan.search_budget)
        F.append(m.vector(key))
    PymooEvaluator().eval(StaticProblem(problem, F=np.array(F)), pop)
    algorithm.tell(infills=pop)
    return True


def _remeasure_elites(members: Sequence[tuple[tuple[Any, ...], Any]], m: _Measurements, plan: _Plan) -> None:
    """Re-measure the best-looking members with the fewest measurements (``preset.elite_reevals`` of
    them; Pareto members first with several objectives), then refresh every member's estimate."""
    elites = plan.preset.elite_reevals
    if not elites:
        return
    ranked = sorted({k for k, _ in members}, key=lambda k: (tuple(m.vector(k)), len(m.records[k].values)))
    if len(plan.objectives) > 1:
        front = non_dominated(np.array([m.vector(k) for k in ranked]))
        ranked = [k for k, f in zip(ranked, front) if f] + [k for k, f in zip(ranked, front) if not f]
    leaders = sorted(ranked[: max(elites, 1) * 2], key=lambda k: len(m.records[k].values))
    for key in leaders[:elites]:
        m.measure(m.records[key].config, 1, "elite", plan.search_budget)
    for key, ind in members:
        ind.set("F", m.vector(key))


def _generation_row(members: Sequence[tuple[tuple[Any, ...], Any]], m: _Measurements, first: Metric,
                    baseline_key: tuple[Any, ...] | None, diversity: float, algorithm: Any) -> dict[str, Any]:
    """One row of :attr:`RefineResult.generations`: best, worst and mean estimate of the first
    objective in the population, the baseline's, the diversity and the rates used."""
    means = np.array([first.sign * m.vector(k)[0] for k, _ in members])
    finite = means[np.abs(means) < FAILED_PENALTY / 10]
    maximize = first.direction == "maximize"
    return {
        "generation": m.generation, "evaluations": m.count,
        "best": float(finite.max() if maximize else finite.min()) if finite.size else math.nan,
        "worst": float(finite.min() if maximize else finite.max()) if finite.size else math.nan,
        "mean": float(finite.mean()) if finite.size else math.nan,
        "baseline": (first.sign * m.vector(baseline_key)[0]
                     if baseline_key is not None and m.measured(baseline_key) else math.nan),
        "diversity": diversity,
        "crossover": float(algorithm.mating.crossover.prob.value),
        "mutation": float(algorithm.mating.mutation.prob.value),
    }


def _evolve(space: SearchSpace, m: _Measurements, plan: _Plan, seed: int, X0: np.ndarray,
            baseline: Mapping[str, Any] | None,
            callback: Callable[[dict[str, Any]], None] | None) -> list[dict[str, Any]]:
    """Run generations (ask, measure, tell, elites, adaptive rates) until the search budget is
    spent or pymoo has nothing left to ask; returns one :func:`_generation_row` per generation."""
    problem, algorithm = _algorithm(space, plan, X0, seed)
    generations: list[dict[str, Any]] = []
    initial_diversity: float | None = None
    baseline_key = m.key(baseline) if baseline else None
    try:
        while m.count < plan.search_budget:
            if not _evaluate_offspring(algorithm, problem, space, m, plan):
                break
            members = [(m.key(space.decode(ind.X)), ind) for ind in algorithm.pop]
            _remeasure_elites(members, m, plan)
            m.generation += 1
            diversity = population_diversity(np.array([ind.X for ind in algorithm.pop]), space.upper)
            if initial_diversity is None:
                initial_diversity = diversity
            if plan.preset.adaptive:
                cx, mx = adaptive_rates(diversity, initial_diversity, plan.preset)
                algorithm.mating.crossover.prob.value = cx
                algorithm.mating.mutation.prob.value = mx
            generations.append(_generation_row(members, m, plan.objectives[0], baseline_key, diversity, algorithm))
            if callback is not None:
                callback({"generation": m.generation, "algorithm": algorithm, "evaluations": m.count,
                          "records": m.records})
    except _StopSearch:
        pass
    return generations


def _spend_reserve(m: _Measurements, plan: _Plan) -> None:
    """Final reserve: re-measure the leaders (the best 3 by mean, or the Pareto set), least-measured
    first, until the whole budget is spent."""
    try:
        while m.count < plan.budget and m.records:
            keys = [k for k in m.records if m.records[k].values]
            if len(plan.objectives) == 1:
                leaders = sorted(keys, key=lambda k: tuple(m.vector(k)))[:3]
            else:
                vectors = np.array([m.vector(k) for k in keys])
                leaders = [k for k, f in zip(keys, non_dominated(vectors)) if f]
            target = min(leaders, key=lambda k: (len(m.records[k].values), tuple(m.vector(k))))
            m.measure(m.records[target].config, 1, "final", plan.budget)
    except _StopSearch:
        pass


def _winner(estimates: pd.DataFrame, objectives: Sequence[Metric],
            ids: Sequence[str]) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """The winner (first row of the estimates, or of the Pareto set with several objectives) and the Pareto set."""
    pareto = None
    chosen = estimates
    if len(objectives) > 1:
        vectors = np.column_stack([o.sign * estimates[f"{o.name}_mean"].to_numpy() for o in objectives])
        vectors = np.nan_to_num(vectors, nan=FAILED_PENALTY)
        pareto = chosen = estimates[non_dominated(vectors)].reset_index(drop=True)
    best = chosen.iloc[:1].to_dict("records")[0]   # per-column dtypes (a row Series would turn ints into floats)
    return {i: level_value(best[i]) for i in ids}, pareto


def refine(
    space: SearchSpace,
    evaluator: Evaluator,
    objectives: Sequence[Metric | str],
    *,
    budget: int | None = None,
    preset: Preset | str = "lab",
    seed: int = 0,
    baseline: Mapping[str, Any] | None = None,
    initial: Sequence[Mapping[str, Any]] = (),
    replicates: int | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    on_measure: Callable[[int, str], None] | None = None,
) -> RefineResult:
    """Search ``space`` for the configuration that best meets ``objectives`` within ``budget`` measurements.

    The phases: check the request (:func:`_plan`), build the initial population
    (:func:`_initial_population`), evolve it (:func:`_evolve`), spend the final reserve on the
    leaders (:func:`_spend_reserve`), then estimate every configuration and pick the winner.

    Parameters
    ----------
    space : the search space (knob ids and candidate values)
    evaluator : :class:`~tunelab.optimize.evaluators.Evaluator`
    objectives : one (GA) or more (NSGA-II) :class:`~tunelab.model.Metric` or ``"metric:max|min"`` strings
    budget : total measurements (default: the preset's)
    preset : a :class:`Preset` or its name in :data:`PRESETS`
    seed : seeds pymoo and the initial population (same seed + same measurements -> same search)
    baseline, initial : configurations put in the initial population (the baseline first, then
        e.g. the screen's best levels); the rest is random
    replicates : measurements per new configuration (default: the preset's)
    callback : called after each generation with a dict (``generation``, ``algorithm``,
        ``evaluations``, ``records``); may change ``algorithm.mating`` rates
    on_measure : called after each measurement with (number of measurements so far, key);
        tests use it to simulate a crash

    Examples
    --------
    >>> from tunelab.simulator import SimulatorEvaluator, get_surface
    >>> surface = get_surface("simple")
    >>> result = refine(surface.search_space(), SimulatorEvaluator(surface, seed=1), ["qps:max"],
    ...                 budget=40, seed=1, baseline=surface.baseline)
    >>> result.evaluations
    40
    """
    plan = _plan(objectives, preset, budget, replicates)
    X0 = _initial_population(space, plan.pop_size, seed, baseline, initial)
    m = _Measurements(space, evaluator, plan.objectives, on_measure)
    generations = _evolve(space, m, plan, seed, X0, baseline, callback)
    _spend_reserve(m, plan)
    if not m.records:
        raise RefineError("no configuration was measured; raise the budget")
    estimates = _estimates(m.records, plan.objectives, space.ids)
    winner, pareto = _winner(estimates, plan.objectives, space.ids)
    return RefineResult(winner=winner, objectives=plan.objectives, estimates=estimates,
                        history=pd.DataFrame(m.history), generations=pd.DataFrame(generations), pareto=pareto,
                        evaluations=m.count, preset=plan.preset.name, seed=seed,
                        baseline=dict(baseline) if baseline else None)


def _estimates(records: Mapping[tuple[Any, ...], _Record], objs: Sequence[Metric], ids: Sequence[str]) -> pd.DataFrame:
    """One row per configuration with per-objective mean/se/bound, sorted by the first objective's bound."""
    keys = list(records)
    frame = pd.DataFrame([{i: records[k].config[i] for i in ids} for k in keys])
    frame["n"] = [len(records[k].values) for k in keys]
    for o in objs:
        table = pessimistic_bounds({j: [v[o.name] for v in records[k].values] for j, k in enumerate(keys)},
                                   o.direction)
        frame[f"{o.name}_mean"] = table["mean"].to_numpy()
        frame[f"{o.name}_se"] = table["se"].to_numpy()
        frame[f"{o.name}_bound"] = table["bound"].to_numpy()
    first = objs[0]
    order = frame[f"{first.name}_bound"] * first.sign
    frame = frame.assign(_order=order.fillna(np.inf)).sort_values(["_order", "n"], ascending=[True, False],
                                                                   kind="stable")
    return frame.drop(columns="_order").reset_index(drop=True)


def random_search(space: SearchSpace, evaluator: Evaluator, objective: Metric | str, budget: int, seed: int = 0,
                  baseline: Mapping[str, Any] | None = None) -> RefineResult:
    """The reference strategy: ``budget`` distinct random configurations, one measurement each,
    winner by best mean (all have n = 1). Used by the benchmark to judge the GA."""
    obj = objectives_of([objective])[0]
    rng = np.random.default_rng(seed)
    ids = space.ids
    records: dict[tuple[Any, ...], _Record] = {}
    history = []
    configs = [dict(baseline)] if baseline else []
    attempts = 0
    while len(configs) < min(budget, space.size) and attempts < 100 * budget:
        attempts += 1
        config = space.decode(space.random_genes(rng, 1)[0])
        if all(tuple(config[i] for i in ids) != tuple(c[i] for i in ids) for c in configs):
            configs.append(config)
    for event, config in enumerate(configs[:budget]):
        metrics = evaluator.evaluate(config, 0, key=f"{event}:r0")
        records[tuple(config[i] for i in ids)] = _Record(config, [{obj.name: float(metrics[obj.name])}])
        history.append({"key": f"{event}:r0", "event": event, "kind": "random", **config, **metrics})
    estimates = _estimates(records, [obj], ids)
    by_mean = estimates.sort_values(f"{obj.name}_mean", ascending=obj.direction == "minimize", kind="stable")
    first = by_mean.iloc[:1].to_dict("records")[0]
    winner = {i: level_value(first[i]) for i in ids}
    return RefineResult(winner, [obj], by_mean.reset_index(drop=True), pd.DataFrame(history), pd.DataFrame(), None,
                        len(configs[:budget]), "random", seed, dict(baseline) if baseline else None)
