"""The refine loop: ask an engine, measure, log, tell; then race the leaders for the winner.

:func:`refine` is the only loop. Engines (:mod:`tunelab.optimize.engines`) propose and learn;
the evaluator measures (the simulator, or real trials recorded in the store); the log
(:mod:`tunelab.optimize.history`) keeps every batch so a killed search resumes where it stopped.

Two stages share the budget (measurements, not configurations):

* **search** (``1 - race_share`` of it): the engine's batches. A configuration asked again is
  not re-measured; the engine is told its pooled measurements.
* **race** (``race_share``): successive halving over the leaders (the engine's, or the best means)
  and the incumbent: each round measures every survivor equally and keeps the better half by
  pooled mean, until one is left or the budget is spent. A lucky single draw has to hold up
  under re-measurement to win. With several objectives the race re-measures the Pareto set.

The winner is the best pooled mean among the last survivors (without a race: among all measured
configurations, as the search libraries report it).

**Warm start** (``warm``): measurements made before the search (the screen's trials, see
:func:`tunelab.optimize.workflow.warm_points`) are told to the engine before its first ask, as one logged
batch (origin ``screen``); they are never measured again and do not count against the budget.

**Continuing** a finished search: run it again with a larger budget (and nothing else changed, see
:func:`tunelab.store.continued_budgets`). The engine is restored from the stored history (told every
point), searches on, and a fresh race spends the race's share of the extra measurements; the first
search and each continuation form one *segment* of the log, so a crash in any of them resumes exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.formatting import fmt_config
from tunelab.model import Direction, Metric, level_value
from tunelab.optimize.engines import (ENGINES, Candidate, EngineSettings, Refiner, RefineError, get_preset,
                                      make_engine, objectives_of, typed_config)
from tunelab.optimize.evaluators import Evaluator
from tunelab.optimize.history import MemorySearchLog, SearchLog, Tally, config_key
from tunelab.optimize.space import SearchSpace

#: default budget when neither the user nor the preset gives one
DEFAULT_BUDGET = 60
#: most configurations a race starts with (4: on hard512 at budget 100, 6 racers hit 87.5 % of 40 seeds, 4 hit 95 %)
RACE_SIZE = 4
#: consecutive batches that bring no new configuration before the search stage ends early
STALE_BATCHES = 3


@dataclass
class RefineResult:
    """What :func:`refine` found (see ``docs/refine.md`` for every column).

    Attributes
    ----------
    winner : the recommended configuration
    objectives : the objectives, first one decides
    estimates : one row per measured configuration: knob columns, ``n``, ``<metric>_mean``, ``<metric>_se``; best first
    history : one row per measurement: ``key, batch, stage, origin, replicate``, knobs, metrics
    batches : one row per batch: ``batch, stage, evaluations, incumbent_mean, incumbent_se, best_mean, mean,
        worst_mean, baseline_mean`` (first objective)
    race : one row per racer and round: ``round, candidate, n, <first>_mean, <first>_se, survived``
    pareto : the non-dominated configurations by means (several objectives), else None
    """

    winner: dict[str, Any]
    objectives: list[Metric]
    estimates: pd.DataFrame
    history: pd.DataFrame
    batches: pd.DataFrame
    race: pd.DataFrame
    pareto: pd.DataFrame | None
    evaluations: int
    engine: str
    preset: str | None
    seed: int
    baseline: dict[str, Any] | None = None
    #: measurements made before the search (warm start: the screen's), told to the engine, not budgeted
    warm: int = 0

    def __repr__(self) -> str:
        """Two lines: the winner and the search; where the tables are."""
        return (f"RefineResult: winner {fmt_config(self.winner)} after {self.evaluations} measurements "
                f"({self.engine}, seed {self.seed})\n  .estimates (every configuration), .batches, .race, .history")


def non_dominated(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``points`` (all objectives minimised) that no other row dominates
    (no worse in every column and better in one). Pure numpy, so a report that draws a front from a
    store needs no optimiser installed.

    >>> non_dominated(np.array([[1, 2], [2, 1], [2, 2]])).tolist()
    [True, True, False]
    """
    points = np.atleast_2d(np.asarray(points, dtype=float))
    no_worse = (points[:, None, :] <= points[None, :, :]).all(axis=2)
    better = (points[:, None, :] < points[None, :, :]).any(axis=2)
    return ~(no_worse & better).any(axis=0)


@dataclass(frozen=True)
class Request:
    """A checked refine request: objectives, budget split and the settings that identify the search."""

    objectives: list[Metric]
    engine: str
    preset: str | None
    budget: int
    race_budget: int
    seed: int
    settings: dict[str, Any]


def check_request(space: SearchSpace, objectives: Sequence[Metric | str], engine: str, preset: str | None,
                  budget: int | None, seed: int, race_share: float | None, baseline: Mapping[str, Any] | None,
                  options: Mapping[str, Any]) -> Request:
    """Check a refine request (one :class:`RefineError` line per problem) and split the budget."""
    objs = objectives_of(objectives)
    if not objs:
        raise RefineError("give at least one objective, e.g. --objective qps:max")
    factory = ENGINES.get(engine)
    budget = check_engine(engine, preset, budget)
    share = float(race_share if race_share is not None else getattr(factory, "race_share", 0.0))
    if not 0.0 <= share < 1.0:
        raise RefineError(f"race_share must be in [0, 1), got {share}")
    race_budget = race_budget_of(share, budget)
    settings = {"engine": engine, "preset": preset, "seed": int(seed), "budget": budget,
                "objectives": [f"{o.name}:{'max' if o.direction == Direction.MAXIMIZE else 'min'}" for o in objs],
                "knobs": space.ids, "baseline": dict(baseline) if baseline else None, "race_share": share,
                "options": dict(options)}
    return Request(objs, engine, preset, budget, race_budget, int(seed), settings)


def race_budget_of(share: float, budget: int) -> int:
    """The race's measurements out of ``budget`` (none below 8: too few to race).

    >>> race_budget_of(0.3, 60), race_budget_of(0.3, 7)
    (18, 0)
    """
    return int(math.floor(share * budget)) if budget >= 8 else 0


def check_engine(engine: str, preset: str | None, budget: int | None) -> int:
    """Check the engine, its preset and the budget (one :class:`RefineError` line each); returns the budget.

    >>> check_engine("ga", "gembala2013", None)
    400
    >>> check_engine("tpe", "gembala2013", 60)
    Traceback (most recent call last):
    ...
    tunelab.optimize.engines.base.RefineError: preset 'gembala2013' is for the 'ga' engine, not 'tpe'; use --engine ga --preset gembala2013, or drop --preset
    """
    check_installed = getattr(ENGINES.get(engine), "check_installed", None)
    if check_installed is not None:   # an engine needing an optional extra (gp: torch) says so before anything runs
        check_installed()
    if preset is not None:
        chosen = get_preset(preset)
        if chosen.engine != engine:
            raise RefineError(f"preset {preset!r} is for the {chosen.engine!r} engine, not {engine!r}; "
                              f"use --engine {chosen.engine} --preset {preset}, or drop --preset")
        budget = budget if budget is not None else chosen.budget
    budget = int(budget if budget is not None else DEFAULT_BUDGET)
    if budget <= 0:
        raise RefineError(f"budget must be a positive number of measurements, got {budget}; e.g. --budget 60")
    if budget < 2:
        raise RefineError(f"budget {budget} is too small to compare two configurations; raise --budget")
    return budget


class _Search:
    """The state of one run of :func:`refine`: tally, log, counters and the rows of the result tables."""

    def __init__(self, space: SearchSpace, evaluator: Evaluator, request: Request, log: SearchLog,
                 baseline: Mapping[str, Any] | None, on_measure: Callable[[int, str], None] | None,
                 key_prefix: str = "") -> None:
        self.space, self.evaluator, self.request, self.log = space, evaluator, request, log
        self.objectives = request.objectives
        self.tally = Tally(self.objectives)
        self.baseline = dict(baseline) if baseline else None
        self.on_measure = on_measure
        self.key_prefix = key_prefix
        self.history: list[dict[str, Any]] = []
        self.batch_rows: list[dict[str, Any]] = []
        self.race_rows: list[dict[str, Any]] = []
        self.race_labels: dict[tuple, int] = {}     # racer -> its number in the race table (first round's order)
        self.batch = 0
        #: which budget the batches belong to: 0 the first search, 1.. each continuation with a larger budget
        self.segment = 0
        #: measurements told before the search (warm start), outside the budget
        self.warm = 0

    # ---- measuring and logging -----------------------------------------------------------------

    def measure(self, config: Mapping[str, Any], key: str, stage: str, origin: str) -> dict[str, float]:
        return self.measure_many([(config, key, stage, origin)])[0]

    def measure_many(self, items: Sequence[tuple[Mapping[str, Any], str, str, str]]) -> list[dict[str, float]]:
        """Measure ``(config, key, stage, origin)`` items, at once when the evaluator can
        (``evaluate_many``: many testbeds), then tally them in order; returns their values."""
        counts: dict[tuple, int] = {}
        requests = []
        for config, key, _stage, _origin in items:
            seen = counts.get(config_key(config), 0)
            counts[config_key(config)] = seen + 1
            requests.append((dict(config), self.tally.n(config) + seen, key))
        many = getattr(self.evaluator, "evaluate_many", None)
        results = (many(requests) if callable(many) and len(requests) > 1
                   else [self.evaluator.evaluate(config, replicate, key=key) for config, replicate, key in requests])
        out = []
        for (config, key, stage, origin), (_, replicate, _), metrics in zip(items, requests, results):
            values = self.add(config, metrics, key, stage, origin, replicate)
            if self.on_measure is not None:
                self.on_measure(self.tally.total(), key)
            out.append(values)
        return out

    def add(self, config: Mapping[str, Any], metrics: Mapping[str, Any], key: str, stage: str, origin: str,
            replicate: int) -> dict[str, float]:
        """Tally one measurement of ``config`` and add its history row; returns its values."""
        values = {o.name: float(metrics.get(o.name, math.nan)) for o in self.objectives}
        values.update({m: float(v) for m, v in metrics.items() if m not in values and v is not None})
        self.tally.add(config, values)
        self.history.append({"key": key, "batch": self.batch, "stage": stage, "origin": origin,
                             "replicate": replicate, **dict(config), **values})
        return values

    def record(self, stage: str, entries: Sequence[dict[str, Any]], engine: Refiner | None,
               race_round: int | None = None, warm: bool = False) -> None:
        """Log the batch just measured (``warm``: the measurements told before the search) and add its
        row to the batch table."""
        incumbent = self.tally.best()
        record = {"stage": stage, "engine": self.request.engine, "evaluations": self.tally.total(),
                  "race_round": race_round, "candidates": list(entries),
                  "incumbent": self.tally.entry(incumbent) if incumbent is not None else None,
                  "engine_state": engine.state() if engine is not None else {},
                  **({"segment": self.segment} if self.segment else {}), **({"warm": True} if warm else {})}
        self.log.add(self.batch, record)
        self.batch_rows.append(self.batch_row(stage, entries, incumbent))
        self.batch += 1

    def batch_row(self, stage: str, entries: Sequence[dict[str, Any]], incumbent: dict[str, Any] | None
                  ) -> dict[str, Any]:
        first = self.objectives[0]
        means = np.array([self.tally.estimate(e["config"])[first.name]["mean"] for e in entries], dtype=float)
        means = means[np.isfinite(means)]
        better = np.max if first.direction == Direction.MAXIMIZE else np.min
        worse = np.min if first.direction == Direction.MAXIMIZE else np.max
        inc = self.tally.estimate(incumbent)[first.name] if incumbent is not None else {"mean": math.nan, "se": None}
        base = (self.tally.estimate(self.baseline)[first.name]["mean"]
                if self.baseline is not None and self.tally.n(self.baseline) else math.nan)
        return {"batch": self.batch, "stage": stage, "evaluations": self.tally.total(),
                "incumbent_mean": inc["mean"], "incumbent_se": math.nan if inc["se"] is None else inc["se"],
                "best_mean": float(better(means)) if means.size else math.nan,
                "mean": float(means.mean()) if means.size else math.nan,
                "worst_mean": float(worse(means)) if means.size else math.nan, "baseline_mean": base}

    def race_row(self, config: Mapping[str, Any], race_round: int, survived: bool) -> None:
        """Add a racer's row to the race table (numbered in the order racers first ran)."""
        first = self.objectives[0].name
        estimate = self.tally.estimate(config)[first]
        label = self.race_labels.setdefault(config_key(config), len(self.race_labels))
        self.race_rows.append({"round": race_round, "candidate": label, "n": self.tally.n(config),
                               f"{first}_mean": estimate["mean"],
                               f"{first}_se": math.nan if estimate["se"] is None else estimate["se"],
                               "survived": survived})

    # ---- resume --------------------------------------------------------------------------------

    def replay_log(self, records: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any] | None, str | None]:
        """Rebuild the tally and tables from stored batches (no measurement, no engine call); returns the
        last search batch's engine state and the stage the search stopped in."""
        state, stage = None, None
        for record in records:
            stage = record.get("stage")
            entries = record.get("candidates") or []
            for entry in entries:
                config = typed_config(self.space, entry["config"])
                for key, values in zip(entry.get("keys") or [], entry.get("new") or []):
                    self.history.append({"key": key, "batch": self.batch, "stage": stage,
                                         "origin": entry.get("origin", ""), "replicate": self.tally.n(config),
                                         **config, **values})      # as measure() writes it
                    self.tally.add(config, {m: (math.nan if v is None else float(v)) for m, v in values.items()})
            if stage == "search":
                state = record.get("engine_state") or {}
            else:
                for entry in entries:
                    self.race_row(typed_config(self.space, entry["config"]), int(record.get("race_round") or 0),
                                  entry.get("status") == "survived")
            self.batch_rows.append(self.batch_row(stage, [{"config": typed_config(self.space, e["config"])}
                                                          for e in entries], self.tally.best()))
            self.batch += 1
        return state, stage

    def told(self) -> list[tuple[dict[str, Any], list[dict[str, float]]]]:
        """Every measured configuration with its measurements, in first-measured order (for restore)."""
        return [(self.tally.configs[k], list(v)) for k, v in self.tally.values.items()]


def _entry(search: _Search, candidate: Candidate, new: Sequence[dict[str, float]], keys: Sequence[str],
           status: str = "measured") -> dict[str, Any]:
    return {**search.tally.entry(candidate.config), "origin": candidate.origin, "status": status,
            "new": list(new), "keys": list(keys)}


#: one measurement made before the search (warm start): configuration, metrics, the key it is stored under
WarmPoint = tuple[Mapping[str, Any], Mapping[str, Any], str]


def warm_stage(search: _Search, engine: Refiner, warm: Sequence[WarmPoint]) -> None:
    """Tally the measurements made before the search (origin ``screen``), tell the engine each configuration
    before its first ask, and log them as one batch: never measured again, not counted in the budget."""
    groups: dict[tuple, tuple[Candidate, list[dict[str, float]], list[str]]] = {}
    for config, metrics, key in warm:
        typed = typed_config(search.space, config)
        candidate, new, keys = groups.setdefault(config_key(typed), (Candidate(typed, "screen"), [], []))
        new.append(search.add(typed, metrics, key, "search", "screen", search.tally.n(typed)))
        keys.append(key)
    for candidate, _new, _keys in groups.values():
        engine.tell(candidate, search.tally.measurements(candidate.config))
    if groups:
        search.record("search", [_entry(search, c, n, k) for c, n, k in groups.values()], engine, warm=True)


def warm_count(records: Sequence[Mapping[str, Any]]) -> int:
    """The measurements a stored search was warm-started with (its ``warm`` batch)."""
    return sum(len(entry.get("new") or []) for record in records if record.get("warm")
               for entry in record.get("candidates") or [])


def search_stage(search: _Search, engine: Refiner, budget: int, stale: int = 0) -> None:
    """Ask, measure new configurations once each, log, tell; until ``budget`` measurements are spent,
    the engine has nothing to ask, or :data:`STALE_BATCHES` batches in a row bring nothing new
    (``stale`` of them already did, before a resume)."""
    while search.tally.total() < budget and stale < STALE_BATCHES:
        asked = engine.ask(None)
        if not asked:
            break
        entries, todo, planned = [], [], set()
        for index, candidate in enumerate(asked):
            candidate = Candidate(typed_config(search.space, candidate.config), candidate.origin)
            keys = []
            if not search.tally.n(candidate.config) and config_key(candidate.config) not in planned:
                if search.tally.total() + len(todo) >= budget:
                    break
                keys.append(search.key_prefix + f"b{search.batch}:c{index}:r0")
                todo.append((candidate.config, keys[0], "search", candidate.origin))
                planned.add(config_key(candidate.config))
            entries.append((candidate, keys))
        measured = iter(search.measure_many(todo))    # the batch at once: in parallel on many testbeds
        entries = [(candidate, [next(measured) for _ in keys], keys) for candidate, keys in entries]
        fresh = len(todo)
        for candidate, _new, _keys in entries:
            engine.tell(candidate, search.tally.measurements(candidate.config))
        search.record("search", [_entry(search, c, n, k) for c, n, k in entries], engine)
        stale = 0 if fresh else stale + 1


def race_stage(search: _Search, engine: Refiner | None, budget: int,
               resume: tuple[list[dict[str, Any]], int] | None = None, first_round: int = 0) -> list[dict[str, Any]]:
    """Successive halving of the leaders with the measurements left up to ``budget``; returns the survivors.

    ``resume`` is ``(survivors, next round)`` of a race stored before a crash; a fresh race numbers its
    rounds from ``first_round`` (a continued search's race follows the earlier one's)."""
    objs = search.objectives
    if len(objs) > 1:
        return pareto_race(search, budget, resume[1] if resume else first_round)
    racers, race_round = resume if resume else (leaders(search, engine), first_round)
    racers = racers[:max(0, budget - search.tally.total())] if not resume else racers   # each racer runs at least once
    if not racers:
        return []
    rounds = race_round + (max(1, math.ceil(math.log2(len(racers)))) if len(racers) > 1 else 1)
    while search.tally.total() < budget and racers:
        this_round = max(len(racers), (budget - search.tally.total()) // max(1, rounds - race_round))
        planned, todo = [], []
        for index, config in enumerate(racers):
            keys = []
            for k in range(this_round // len(racers) + (index < this_round % len(racers))):
                if search.tally.total() + len(todo) >= budget:
                    break
                keys.append(search.key_prefix + f"race{race_round}:c{index}:r{k}")
                todo.append((config, keys[-1], "race", "race"))
            planned.append((config, keys))
        measured = iter(search.measure_many(todo))    # the round at once: in parallel on many testbeds
        entries = [(config, [next(measured) for _ in keys], keys) for config, keys in planned]
        ranked = sorted(racers, key=lambda c: (search.tally.score(c), search.tally.n(c)), reverse=True)
        kept = {config_key(c) for c in ranked[:math.ceil(len(racers) / 2)]}
        keep = [c for c in racers if config_key(c) in kept]      # in racing order, as the stored record lists them
        for config, _new, _keys in entries:
            search.race_row(config, race_round, config_key(config) in kept)
        search.record("race", [_entry(search, Candidate(c, "race"), n, k,
                                      "survived" if config_key(c) in kept else "eliminated")
                               for c, n, k in entries], None, race_round)
        racers = keep
        race_round += 1
        if len(racers) == 1 and race_round >= rounds:
            break
    return racers


def leaders(search: _Search, engine: Refiner | None) -> list[dict[str, Any]]:
    """The race's entrants: the engine's leaders (when it ranks them) else the best means, plus the
    incumbent; at most :data:`RACE_SIZE`."""
    ranked: list[dict[str, Any]] = []
    if engine is not None and callable(getattr(engine, "leaders", None)):
        ranked = [typed_config(search.space, c) for c in engine.leaders(RACE_SIZE)]
    by_mean = sorted(search.tally.configs.values(), key=lambda c: (search.tally.score(c), search.tally.n(c)),
                     reverse=True)
    out: dict[tuple, dict[str, Any]] = {}
    incumbent = search.tally.best()
    for config in ([incumbent] if incumbent is not None else []) + ranked + by_mean:
        if len(out) >= RACE_SIZE:
            break
        out.setdefault(config_key(config), config)
    return list(out.values())


def pareto_race(search: _Search, budget: int, race_round: int = 0) -> list[dict[str, Any]]:
    """Several objectives: re-measure the Pareto set by means, least-measured first, a round at a time."""
    front: list[dict[str, Any]] = []
    while search.tally.total() < budget:
        front = pareto_configs(search)
        chosen = sorted(front, key=search.tally.n)[:max(0, budget - search.tally.total())]
        keys = [search.key_prefix + f"race{race_round}:c{index}:r0" for index in range(len(chosen))]
        measured = search.measure_many([(config, key, "race", "race") for config, key in zip(chosen, keys)])
        entries = [(config, [values], [key]) for config, values, key in zip(chosen, measured, keys)]
        search.record("race", [_entry(search, Candidate(c, "race"), n, k, "survived") for c, n, k in entries], None,
                      race_round)
        race_round += 1
    return pareto_configs(search) if search.tally.total() else front


def pareto_configs(search: _Search) -> list[dict[str, Any]]:
    configs = list(search.tally.configs.values())
    vectors = np.array([[o.sign * search.tally.estimate(c)[o.name]["mean"] for o in search.objectives]
                        for c in configs], dtype=float)
    vectors = np.nan_to_num(vectors, nan=1e18)
    return [c for c, keep in zip(configs, non_dominated(vectors)) if keep]


def estimates_table(search: _Search) -> pd.DataFrame:
    """One row per measured configuration, best first by the first objective's mean."""
    rows = []
    for config in search.tally.configs.values():
        row: dict[str, Any] = {k: config[k] for k in search.space.ids}
        row["n"] = search.tally.n(config)
        for name, e in search.tally.estimate(config).items():
            row[f"{name}_mean"] = e["mean"]
            row[f"{name}_se"] = math.nan if e["se"] is None else e["se"]
        row["_score"] = search.tally.score(config)
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.sort_values(["_score", "n"], ascending=[False, False], kind="stable").drop(columns="_score") \
        .reset_index(drop=True)


def refine(
    space: SearchSpace,
    evaluator: Evaluator,
    objectives: Sequence[Metric | str],
    *,
    engine: str = "tunelab",
    preset: str | None = None,
    budget: int | None = None,
    seed: int = 0,
    baseline: Mapping[str, Any] | None = None,
    initial: Sequence[Mapping[str, Any]] = (),
    options: Mapping[str, Any] | None = None,
    race_share: float | None = None,
    log: SearchLog | None = None,
    on_measure: Callable[[int, str], None] | None = None,
    key_prefix: str = "",
    warm: Sequence[WarmPoint] = (),
) -> RefineResult:
    """Search ``space`` for the configuration that best meets ``objectives`` within ``budget`` measurements.

    Parameters
    ----------
    space : the knobs and their candidate values
    evaluator : measures one configuration once (:mod:`tunelab.optimize.evaluators`, or the simulator's)
    objectives : ``"metric:max|min"`` or :class:`~tunelab.model.Metric`; the first decides the winner
    engine, preset : a name in :data:`~tunelab.optimize.engines.ENGINES` and optionally a preset of it
    budget : measurements in all (search and race); default the preset's, else :data:`DEFAULT_BUDGET`
    seed : seeds the engine (same seed and measurements -> same search)
    baseline, initial : configurations the engine measures first (the defaults, the screen's best levels)
    options : engine options on top of the preset's
    race_share : share of the budget for the race (default: the engine's, 0 for library engines)
    log : where each batch is logged (:class:`~tunelab.optimize.history.StoreSearchLog` resumes from it)
    on_measure : called after each measurement with (measurements so far, key); tests use it to crash
    key_prefix : put before every evaluator key (several searches in one store: ``"tpe/"``)
    warm : measurements made before the search (``(config, metrics, key)``, e.g. the screen's), told to the
        engine before its first ask and never measured again; they do not count against ``budget``

    Examples
    --------
    >>> from tunelab.simulator import SimulatorEvaluator, get_surface
    >>> surface = get_surface("simple")
    >>> result = refine(surface.search_space(), SimulatorEvaluator(surface, seed=1), ["qps:max"],
    ...                 budget=40, seed=1, baseline=surface.baseline)
    >>> result.evaluations, result.engine
    (40, 'tunelab')
    """
    options = dict(options or {})
    request = check_request(space, objectives, engine, preset, budget, seed, race_share, baseline, options)
    if warm:
        request.settings["warm_start"] = True
    if baseline is not None:
        baseline = typed_config(space, baseline)
    initial = tuple(typed_config(space, c) for c in initial)
    log = log if log is not None else MemorySearchLog()
    search = _Search(space, evaluator, request, log, baseline, on_measure, key_prefix)
    records = log.start(request.settings)
    continued = list(getattr(log, "continued_from", None) or [])
    first_budget = continued[0] if continued else request.budget          # the engine is built as it first was
    share = float(request.settings["race_share"])
    refiner = make_engine(engine, EngineSettings(space, tuple(request.objectives), request.seed,
                                                 first_budget - race_budget_of(share, first_budget), baseline,
                                                 initial, options), preset)
    state, stage = search.replay_log(records)
    if state is not None:
        refiner.restore(state, search.told())
    if not records:
        warm_stage(search, refiner, warm)
    search.warm = warm_count(records) if records else search.tally.total()
    survivors = run_segment(search, refiner, records, continued, stage)
    if not search.tally.configs:
        raise RefineError("no configuration was measured; raise the budget")
    survivors = survivors or list(search.tally.configs.values())
    winner = pick_winner(search, survivors)
    log.finish(search.tally.entry(winner))
    return result_of(search, winner)


def run_segment(search: _Search, refiner: Refiner, records: Sequence[Mapping[str, Any]], continued: Sequence[int],
                stage: str | None) -> list[dict[str, Any]]:
    """Search, then race, within the current budget (module docstring: warm start, continuing): from the
    start, from where a crash stopped (``stage``: the last stored batch's), or for a larger budget after a
    finished search. Returns the race's survivors."""
    request = search.request
    search.segment = len(continued)
    start = continued[-1] if continued else 0                       # measured before this segment
    budget = search.warm + request.budget                            # the warm start is not budgeted
    share = float(request.settings["race_share"])
    if search.segment and not share:    # an engine that races by its own rule cannot see a continuation's budget
        share = float(getattr(refiner, "continued_race_share", 0.0))
    race_budget = race_budget_of(share, request.budget - start)
    same_segment = bool(records) and int(records[-1].get("segment", 0)) == search.segment
    if same_segment and stage == "race":
        return race_stage(search, refiner, budget, race_survivors(search, records))
    search_stage(search, refiner, budget - race_budget, stale_batches(records) if same_segment else 0)
    return race_stage(search, refiner, budget, first_round=next_race_round(records))


def next_race_round(records: Sequence[Mapping[str, Any]]) -> int:
    """The number of a new race's first round: after every stored one."""
    rounds = [int(r.get("race_round") or 0) for r in records if r.get("stage") == "race"]
    return max(rounds) + 1 if rounds else 0


def stale_batches(records: Sequence[Mapping[str, Any]]) -> int:
    """How many stored search batches at the end brought no new measurement (a resumed search counts on)."""
    count = 0
    for record in reversed(records):
        if record.get("stage") != "search" or any(e.get("new") for e in record.get("candidates") or []):
            break
        count += 1
    return count


def race_survivors(search: _Search, records: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The survivors of the last stored race round and the next round's number (a race resumed after a crash)."""
    for record in reversed(records):
        if record.get("stage") == "race":
            return ([typed_config(search.space, e["config"]) for e in record.get("candidates") or []
                     if e.get("status") == "survived"], int(record.get("race_round") or 0) + 1)
    return [], 0


def pick_winner(search: _Search, survivors: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The best first-objective mean among ``survivors`` (several objectives: among their Pareto set).

    Ranking racers by the ``tunelab`` model's prediction instead of their means was tried: on hard512 (40
    seeds) it lowered the hit rate at budget 60 from 85 % to 68 %, so the race trusts its measurements."""
    pool = [c for c in survivors if search.tally.n(c)] or list(search.tally.configs.values())
    if len(search.objectives) > 1:
        front = {config_key(c) for c in pareto_configs(search)}
        pool = [c for c in pool if config_key(c) in front] or pool
    return search.tally.best(pool) or pool[0]


def result_of(search: _Search, winner: Mapping[str, Any]) -> RefineResult:
    request = search.request
    estimates = estimates_table(search)
    pareto = None
    if len(search.objectives) > 1:
        front = {config_key(c) for c in pareto_configs(search)}
        mask = [config_key({k: level_value(r[k]) for k in search.space.ids}) in front
                for r in estimates[search.space.ids].to_dict("records")]
        pareto = estimates[mask].reset_index(drop=True)
    first = search.objectives[0].name
    race = pd.DataFrame(search.race_rows, columns=["round", "candidate", "n", f"{first}_mean", f"{first}_se",
                                                   "survived"])
    return RefineResult(winner=dict(winner), objectives=list(search.objectives), estimates=estimates,
                        history=pd.DataFrame(search.history), batches=pd.DataFrame(search.batch_rows), race=race,
                        pareto=pareto, evaluations=search.tally.total(), engine=request.engine, preset=request.preset,
                        seed=request.seed, baseline=search.baseline, warm=search.warm)
