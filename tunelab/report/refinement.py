"""Refinement and confirmation as a report sees them: read back from the store, never re-run.

A refinement (:func:`tunelab.optimize.driver.refine` with a
:class:`~tunelab.optimize.history.StoreSearchLog`) stores its search as it goes (store schema 2):
one row per search in ``searches`` (its settings, status and winner) and one JSON record per
batch in ``search_batches`` (the candidates with their pooled estimates, the incumbent, the race
rounds). The report reads that history only: :func:`searches`, :func:`search_batches`,
:func:`convergence`, :func:`generations` (a genetic search per generation), :func:`race_rounds`,
:func:`candidate_estimates` and :func:`stored_winner`.
Stores are shared files, so every record is untrusted JSON: each field read is checked first and
a malformed one is a :class:`ReportError` naming the store and the field.

Measurements are trials of phase ``refine`` with run keys ``refine:b<batch>:c<i>:r<k>`` (search),
``refine:race<round>:c<i>:r<k>`` (race), or ``refine:<event>:r<k>`` in stores written before the
search was stored; :func:`search_history` lists them in order for stores without a stored search.
Confirmation trials are ``confirm:<digest>:b<block>:<position><arm>`` and validation trials
``validate:<profile>:<digest>:b<block>:<position><arm>`` (arm A = baseline, B = candidate); duet validations
``validate:duet:<profile>:<digest>:p<pair>:s<side><arm>``.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.designs.change import BlockRule
from tunelab.errors import LoadError, TunelabError
from tunelab.formatting import fmt_pct, level_label
from tunelab.loads import get_load
from tunelab.model import USABLE_STATUSES, Direction, MeasurementKind, Metric, Phase, TrialStatus, level_value
from tunelab.optimize.confirm import analyse_blocks, block_rule, goals_of
from tunelab.optimize.driver import non_dominated
from tunelab.optimize.duet_confirm import analyse_pairs, duet_look
from tunelab.optimize.evaluators import trial_metrics
from tunelab.optimize.blocks_in_rounds import block_looks, replay_looks
from tunelab.report.loading import ReportError, Study
from tunelab.simulator import Surface, get_surface

REFINE_KEY = re.compile(r"^refine:(?:(?P<search>[a-z0-9][a-z0-9-]*)/)?(?:(?P<event>\d+)|b(?P<batch>\d+):c(?P<candidate>\d+)"
                        r"|race(?P<round>\d+):c(?P<racer>\d+)):r(?P<replicate>\d+)$")
ABBA_KEY = re.compile(r"^(?P<phase>confirm|validate):(?:(?P<profile>[^:]+):)?(?P<digest>[0-9a-f]{8}):"
                      r"b(?P<block>\d+):(?P<position>\d+)(?P<arm>[AB])$")
DUET_KEY = re.compile(r"^(?P<phase>validate):duet:(?P<profile>[^:]+):(?P<digest>[0-9a-f]{8}):"
                      r"p(?P<pair>\d+):s(?P<side>[01])(?P<arm>[AB])$")
#: statuses of the trials read back: usable ones, and failed ones (shown, with no metrics)
_READ_BACK = (*USABLE_STATUSES, TrialStatus.FAILED)
#: statuses a stored candidate may have (``measured`` in the search stage, the others in race rounds)
CANDIDATE_STATUSES = ("measured", "survived", "eliminated")
#: columns of :func:`searches`
SEARCH_TABLE_COLUMNS = ["search_id", "engine", "preset", "seed", "budget", "objectives", "knobs", "baseline",
                        "race_share", "options", "status", "winner", "created", "batches", "evaluations"]
#: columns of :func:`search_batches`
BATCH_TABLE_COLUMNS = ["search_id", "engine", "batch", "stage", "race_round", "evaluations", "objectives",
                       "baseline", "record"]
#: columns of :func:`convergence`
CONVERGENCE_COLUMNS = ["search_id", "engine", "batch", "stage", "race_round", "evaluations", "incumbent_mean",
                       "incumbent_se", "best_mean", "mean", "worst_mean", "baseline_mean", "baseline_se"]
#: columns of :func:`generations`
GENERATION_COLUMNS = ["search_id", "engine", "generation", "evaluations", "offspring", "population", "best", "mean",
                      "worst", "offspring_best", "offspring_mean", "offspring_worst", "baseline", "baseline_se"]
#: columns of :func:`race_rounds`
RACE_COLUMNS = ["search_id", "engine", "round", "racer", "candidate", "n", "mean", "se", "ci_low", "ci_high",
                "status", "survived", "is_baseline"]
#: what a damaged record's message tells the reader to do
_DAMAGED = "the stored search is damaged or was edited by hand; report from the original store"


# ---- checking the stored search state (untrusted JSON) -------------------------------------------

def _shown(value: Any) -> str:
    """A short text of a bad value for an error line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(where: str, field: str, expected: str, value: Any) -> ReportError:
    return ReportError(f"{where}: {field} must be {expected}, got {_shown(value)}; {_DAMAGED}")


def _get(record: Mapping[str, Any], key: str, where: str, field: str) -> Any:
    if key not in record:
        raise ReportError(f"{where}: {field}{key} is missing; {_DAMAGED}")
    return record[key]


def _mapping(value: Any, where: str, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _bad(where, field, "an object", value)
    return value


def _text(value: Any, where: str, field: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise _bad(where, field, "a text" + (" or null" if optional else ""), value)
    return value


def _count(value: Any, where: str, field: str, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(where, field, "a whole number >= 0" + (" or null" if optional else ""), value)
    return value


def _number(value: Any, where: str, field: str) -> float:
    """A finite number, or NaN for ``null`` (how JSON stores NaN)."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(where, field, "a finite number or null", value)
    return float(value)


def _level(value: Any, where: str, field: str) -> Any:
    """A knob level: a number, a word, a bool, or a list of numbers (triplets) -> its Python form."""
    if isinstance(value, list):
        if not value or len(value) > 16 or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value):
            raise _bad(where, field, "a level (a number, text, true/false or a list of numbers)", value)
    elif not isinstance(value, (str, int, float, bool)):
        raise _bad(where, field, "a level (a number, text, true/false or a list of numbers)", value)
    return level_value(value)


def _config(value: Any, where: str, field: str) -> dict[str, Any]:
    config = _mapping(value, where, field)
    if not config:
        raise _bad(where, field, "a configuration (knob -> level)", value)
    return {k: _level(v, where, f"{field}.{k}") for k, v in config.items()}


def _estimates(value: Any, where: str, field: str) -> dict[str, dict[str, float]]:
    """``{metric: {"mean", "se"}}`` with NaN for null; other keys (``n``) are ignored."""
    out = {}
    for metric, estimate in _mapping(value, where, field).items():
        estimate = _mapping(estimate, where, f"{field}.{metric}")
        out[metric] = {part: _number(_get(estimate, part, where, f"{field}.{metric}."), where,
                                     f"{field}.{metric}.{part}") for part in ("mean", "se")}
    return out


def _entry(value: Any, where: str, field: str, candidate: bool = True) -> dict[str, Any]:
    """A stored configuration with its estimates: the winner, the incumbent, or a batch's candidate."""
    entry = _mapping(value, where, field)
    out: dict[str, Any] = {"config": _config(_get(entry, "config", where, f"{field}."), where, f"{field}.config"),
                           "n": _count(_get(entry, "n", where, f"{field}."), where, f"{field}.n"),
                           "estimates": _estimates(_get(entry, "estimates", where, f"{field}."), where,
                                                   f"{field}.estimates")}
    if candidate:
        out["origin"] = _text(entry.get("origin") or "?", where, f"{field}.origin")
        status = _get(entry, "status", where, f"{field}.")
        if status not in CANDIDATE_STATUSES:
            raise _bad(where, f"{field}.status", " or ".join(CANDIDATE_STATUSES), status)
        out["status"] = status
    return out


def _objective_texts(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise _bad(where, "settings.objectives", "a non-empty list of METRIC:max|min", value)
    for i, text in enumerate(value):
        try:
            Metric.parse(_text(text, where, f"settings.objectives[{i}]"))
        except TunelabError:
            raise _bad(where, f"settings.objectives[{i}]", "METRIC:max or METRIC:min", text) from None
    return list(value)


def check_settings(settings: Any, where: str) -> dict[str, Any]:
    """A search's stored settings, checked: ``engine, preset, seed, budget, objectives, knobs, baseline,
    race_share, options`` (:class:`ReportError` naming ``where`` and the bad field)."""
    settings = _mapping(settings, where, "settings")
    knobs = _get(settings, "knobs", where, "settings.")
    if not isinstance(knobs, list) or not knobs or not all(isinstance(k, str) and k for k in knobs):
        raise _bad(where, "settings.knobs", "a non-empty list of knob ids", knobs)
    baseline = settings.get("baseline")
    race_share = settings.get("race_share", 0.0)
    if race_share is not None and (isinstance(race_share, bool) or not isinstance(race_share, (int, float))
                                   or not 0 <= race_share < 1):
        raise _bad(where, "settings.race_share", "a number in [0, 1)", race_share)
    seed = _get(settings, "seed", where, "settings.")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _bad(where, "settings.seed", "a whole number", seed)
    return {"engine": _text(_get(settings, "engine", where, "settings."), where, "settings.engine"),
            "preset": _text(settings.get("preset"), where, "settings.preset", optional=True),
            "seed": seed,
            "budget": _count(_get(settings, "budget", where, "settings."), where, "settings.budget"),
            "objectives": _objective_texts(_get(settings, "objectives", where, "settings."), where),
            "knobs": list(knobs),
            "baseline": None if baseline is None else _config(baseline, where, "settings.baseline"),
            "race_share": float(race_share or 0.0),
            "options": dict(_mapping(settings.get("options") or {}, where, "settings.options"))}


def check_record(record: Any, where: str) -> dict[str, Any]:
    """One stored batch record, checked: ``stage, engine, evaluations, race_round, candidates,
    incumbent`` (the engine's own state is not read)."""
    record = _mapping(record, where, "record")
    stage = _get(record, "stage", where, "record.")
    if stage not in ("search", "race"):
        raise _bad(where, "record.stage", "search or race", stage)
    candidates = _get(record, "candidates", where, "record.")
    if not isinstance(candidates, list):
        raise _bad(where, "record.candidates", "a list", candidates)
    incumbent = record.get("incumbent")
    race_round = _count(record.get("race_round"), where, "record.race_round", optional=True)
    if stage == "race" and race_round is None:
        raise _bad(where, "record.race_round", "a whole number in a race batch", race_round)
    return {"stage": stage, "engine": _text(_get(record, "engine", where, "record."), where, "record.engine"),
            "evaluations": _count(_get(record, "evaluations", where, "record."), where, "record.evaluations"),
            "race_round": race_round,
            "candidates": [_entry(c, where, f"record.candidates[{i}]") for i, c in enumerate(candidates)],
            "incumbent": None if incumbent is None else _entry(incumbent, where, "record.incumbent", candidate=False)}


def _missing(value: Any) -> bool:
    """True for ``None`` or NaN (how pandas may show a missing JSON column)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _where(study: Study, search_id: Any, batch: Any = None) -> str:
    return f"{study.path}: search {search_id!r}" + (f" batch {batch!r}" if batch is not None else "")


def _stored(study: Study) -> tuple[pd.DataFrame, pd.DataFrame]:
    if study.search_error:
        raise ReportError(study.search_error)
    return study.searches, study.search_batches


def has_search(study: Study) -> bool:
    """True when the store holds a stored search (schema 2, written by ``tunelab refine``)."""
    return study.search_error is not None or not study.searches.empty


def searches(study: Study) -> pd.DataFrame:
    """Every stored search, checked: one row per search with its settings (``engine, preset, seed,
    budget, objectives, knobs, baseline, race_share, options``), ``status`` (``running`` for an
    interrupted one), ``winner`` (``{"config", "n", "estimates"}`` or None), ``created``, and the
    ``batches`` and ``evaluations`` (measurements) stored. Empty for a store without a stored search.

    Raises
    ------
    ReportError
        A malformed stored setting or winner (one line naming the store and the field).
    """
    stored, batches = _stored(study)
    rows = []
    for row in stored.itertuples(index=False):
        where = _where(study, row.search_id)
        mine = batches[batches["search_id"] == row.search_id]
        winner = None if _missing(row.winner) else _entry(row.winner, where, "winner", candidate=False)
        rows.append({"search_id": row.search_id, **check_settings(row.settings, where), "status": row.status,
                     "winner": winner, "created": row.created, "batches": len(mine),
                     "evaluations": int(mine["evaluations"].max()) if len(mine) else 0})
    return pd.DataFrame(rows, columns=SEARCH_TABLE_COLUMNS)


def search_batches(study: Study, search_id: str | None = None) -> pd.DataFrame:
    """The stored batches of every search (or of ``search_id``) in order, checked: ``search_id, engine,
    batch, stage, race_round, evaluations``, the search's ``objectives`` and ``baseline`` (from its
    settings), and the checked ``record`` (:func:`check_record`: configurations with Python levels,
    NaN for missing estimates).

    Raises
    ------
    ReportError
        A malformed record, or a batch of a search the store does not hold.
    """
    stored, batches = _stored(study)
    settings = {row.search_id: check_settings(row.settings, _where(study, row.search_id))
                for row in stored.itertuples(index=False)}
    if search_id is not None:
        if search_id not in settings:
            raise ReportError(f"{study.path} holds no search {search_id!r}; it holds "
                              f"{', '.join(map(repr, settings)) or 'none'}")
        batches = batches[batches["search_id"] == search_id]
    rows = []
    for row in batches.itertuples(index=False):
        where = _where(study, row.search_id, row.batch)
        if row.search_id not in settings:
            raise ReportError(f"{where} belongs to no stored search; {_DAMAGED}")
        record = check_record(row.record, where)
        if record["stage"] != row.stage or record["evaluations"] != row.evaluations:
            raise ReportError(f"{where}: record.stage/evaluations disagree with the batch row; {_DAMAGED}")
        own = settings[row.search_id]
        rows.append({"search_id": row.search_id, "engine": own["engine"], "batch": int(row.batch),
                     "stage": row.stage, "race_round": record["race_round"], "evaluations": int(row.evaluations),
                     "objectives": own["objectives"], "baseline": own["baseline"], "record": record})
    frame = pd.DataFrame(rows, columns=BATCH_TABLE_COLUMNS)
    frame["race_round"] = frame["race_round"].astype("Int64")
    order = {sid: i for i, sid in enumerate(settings)}      # searches in the order they were created
    return frame.sort_values(["search_id", "batch"], key=lambda c: c.map(order) if c.name == "search_id" else c,
                             kind="stable").reset_index(drop=True)


# ---- what the stored search shows ------------------------------------------------------------------

def _same(config: Mapping[str, Any], other: Mapping[str, Any] | None) -> bool:
    """True when ``config`` holds every knob of ``other`` at the same level."""
    return bool(other) and all(k in config and level_value(config[k]) == level_value(v) for k, v in other.items())


def _objective(objective: Metric | str, batches: pd.DataFrame) -> Metric:
    """``objective`` as a Metric: a Metric, ``NAME:max|min``, or a bare name whose direction the stored
    settings give."""
    if isinstance(objective, Metric):
        return objective
    text = str(objective)
    if ":" not in text:
        stored = [t for texts in batches.get("objectives", []) for t in texts if t.split(":")[0] == text]
        if not stored:
            raise ReportError(f"objective {text!r} is not an objective of the stored searches; give it as "
                              f"{text}:max or {text}:min")
        text = stored[0]
    try:
        return Metric.parse(text)
    except TunelabError as exc:
        raise ReportError(f"{exc}; write the objective as METRIC:max or METRIC:min") from None


def _check_batches(batches: pd.DataFrame) -> None:
    missing = [c for c in ("search_id", "engine", "batch", "stage", "evaluations", "record") if c not in batches]
    if missing:
        raise ReportError(f"the batches lack column(s) {', '.join(missing)}; pass search_batches(study)")


def _estimate(entry: Mapping[str, Any] | None, metric: str) -> tuple[float, float]:
    if not entry:
        return math.nan, math.nan
    found = entry["estimates"].get(metric) or {}
    return found.get("mean", math.nan), found.get("se", math.nan)


def convergence(batches: pd.DataFrame, objective: Metric | str) -> pd.DataFrame:
    """One row per stored batch of each search: the measurements so far (``evaluations``), the
    incumbent's estimate of ``objective`` (``incumbent_mean``, ``incumbent_se``), the best, mean and
    worst estimate among the batch's candidates, and the baseline's latest estimate.

    Parameters
    ----------
    batches : :func:`search_batches`
    objective : a :class:`~tunelab.model.Metric`, ``NAME:max|min``, or the name of a stored objective
    """
    _check_batches(batches)
    goal = _objective(objective, batches)
    better, worse = (np.max, np.min) if goal.maximize else (np.min, np.max)
    rows = []
    for _, group in batches.groupby("search_id", sort=False):
        base_mean = base_se = math.nan
        for row in group.itertuples(index=False):
            record = row.record
            baseline = getattr(row, "baseline", None)
            means = np.array([_estimate(c, goal.name)[0] for c in record["candidates"]], dtype=float)
            means = means[np.isfinite(means)]
            for entry in [*record["candidates"], record["incumbent"]]:
                if entry and _same(entry["config"], baseline):
                    base_mean, base_se = _estimate(entry, goal.name)
            inc_mean, inc_se = _estimate(record["incumbent"], goal.name)
            rows.append({"search_id": row.search_id, "engine": row.engine, "batch": row.batch, "stage": row.stage,
                         "race_round": record["race_round"], "evaluations": row.evaluations,
                         "incumbent_mean": inc_mean, "incumbent_se": inc_se,
                         "best_mean": float(better(means)) if means.size else math.nan,
                         "mean": float(means.mean()) if means.size else math.nan,
                         "worst_mean": float(worse(means)) if means.size else math.nan,
                         "baseline_mean": base_mean, "baseline_se": base_se})
    frame = pd.DataFrame(rows, columns=CONVERGENCE_COLUMNS)
    frame["race_round"] = frame["race_round"].astype("Int64")
    return frame


def _key(config: Mapping[str, Any]) -> tuple:
    """A configuration as a hashable key (knob -> canonical level, sorted by knob)."""
    return tuple(sorted((k, level_value(v)) for k, v in config.items()))


def _spread(values: Sequence[float], maximize: bool) -> tuple[float, float, float]:
    """(best, mean, worst) of the finite ``values``; NaN for none."""
    finite = np.array([v for v in values if math.isfinite(v)], dtype=float)
    if not finite.size:
        return math.nan, math.nan, math.nan
    best, worst = (finite.max(), finite.min()) if maximize else (finite.min(), finite.max())
    return float(best), float(finite.mean()), float(worst)


def _population(estimates: Mapping[tuple, float], size: int, maximize: bool) -> list[float]:
    """The ``size`` best estimates (failed configurations, NaN, rank last), as an elitist GA keeps them."""
    ranked = sorted(estimates.values(), key=lambda v: (not math.isfinite(v), -v if maximize else v))
    return ranked[:size]


def generations(batches: pd.DataFrame, objective: Metric | str) -> pd.DataFrame:
    """One row per generation of each genetic search (``ga``, ``nsga2``): best, mean and worst estimate
    of ``objective`` in the population and among the generation's offspring, and the baseline's.

    A search batch of a pymoo engine is one generation (``generation`` is the batch number): batch 0 is
    the initial population (the baseline first), each later batch the offspring of one generation. pymoo's GA survival is elitist
    (the fittest of parents and offspring survive), so the population after generation ``g`` is the
    ``population`` best configurations measured up to ``g``, where ``population`` is the size of
    generation 0; this is what Gembala et al. plot per generation (best, worst and default
    individuals). Race batches are not generations and are left out. Estimates are the stored
    pooled means (one measurement each in the search stage).

    Parameters
    ----------
    batches : :func:`search_batches`
    objective : a :class:`~tunelab.model.Metric`, ``NAME:max|min``, or the name of a stored objective

    Returns
    -------
    DataFrame
        ``search_id, engine, generation, evaluations, offspring`` (configurations asked in this
        generation), ``population`` (its size), ``best, mean, worst`` (population),
        ``offspring_best, offspring_mean, offspring_worst`` and ``baseline, baseline_se`` (the
        baseline's latest estimate; NaN when the search never measured it).
    """
    _check_batches(batches)
    goal = _objective(objective, batches)
    rows = []
    for search_id, group in batches.groupby("search_id", sort=False):
        estimates: dict[tuple, float] = {}
        size = 0
        base_mean = base_se = math.nan
        for row in group[group["stage"] == "search"].itertuples(index=False):
            baseline = getattr(row, "baseline", None)
            asked = []
            for entry in row.record["candidates"]:
                mean, se = _estimate(entry, goal.name)
                asked.append(mean)
                estimates[_key(entry["config"])] = mean
                if _same(entry["config"], baseline):
                    base_mean, base_se = mean, se
            size = size or len(estimates)
            best, middle, worst = _spread(_population(estimates, size, goal.maximize), goal.maximize)
            o_best, o_mean, o_worst = _spread(asked, goal.maximize)
            rows.append({"search_id": search_id, "engine": row.engine, "generation": int(row.batch),
                         "evaluations": row.evaluations, "offspring": len(asked),
                         "population": min(size, len(estimates)),
                         "best": best, "mean": middle, "worst": worst, "offspring_best": o_best,
                         "offspring_mean": o_mean, "offspring_worst": o_worst, "baseline": base_mean,
                         "baseline_se": base_se})
    return pd.DataFrame(rows, columns=GENERATION_COLUMNS)


def config_label(config: Mapping[str, Any], knobs: Sequence[str] | None = None) -> str:
    """A configuration as text: ``'a = 1, b = 1 2'`` (triplets as in sysctl).

    >>> config_label({"a": 1, "b": (1, 2)})
    'a = 1, b = 1 2'
    """
    keys = list(knobs) if knobs is not None else list(config)
    return ", ".join(f"{k} = {level_label(config[k])}" for k in keys if k in config)


def _interval(mean: float, se: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """A t-interval ``mean ± t(n-1) · se`` (NaN without an SE or with fewer than 2 measurements)."""
    if n < 2 or not (math.isfinite(mean) and math.isfinite(se)):
        return math.nan, math.nan
    half = float(ss.t.ppf(0.5 + level / 2, n - 1)) * se
    return mean - half, mean + half


def race_rounds(batches: pd.DataFrame, objective: Metric | str) -> pd.DataFrame:
    """One row per racer and race round of each search: ``round``, ``racer`` (its index in the race's
    first round), ``candidate`` (the configuration as text), its pooled ``n``, ``mean`` and ``se`` of
    ``objective`` after the round with a 95 % t-interval (``ci_low``, ``ci_high``), ``status``
    (``survived``/``eliminated``), ``survived`` and ``is_baseline``. Empty without a race.

    Parameters
    ----------
    batches : :func:`search_batches`
    objective : a :class:`~tunelab.model.Metric`, ``NAME:max|min``, or the name of a stored objective
    """
    _check_batches(batches)
    goal = _objective(objective, batches)
    racers: dict[str, dict[str, int]] = {}
    rows = []
    for row in batches[batches["stage"] == "race"].itertuples(index=False):
        order = racers.setdefault(row.search_id, {})
        for entry in row.record["candidates"]:
            label = config_label(entry["config"])
            order.setdefault(label, len(order))
            mean, se = _estimate(entry, goal.name)
            low, high = _interval(mean, se, entry["n"])
            rows.append({"search_id": row.search_id, "engine": row.engine, "round": row.record["race_round"],
                         "racer": order[label], "candidate": label, "n": entry["n"], "mean": mean, "se": se,
                         "ci_low": low, "ci_high": high, "status": entry["status"],
                         "survived": entry["status"] != "eliminated",
                         "is_baseline": _same(entry["config"], getattr(row, "baseline", None))})
    return pd.DataFrame(rows, columns=RACE_COLUMNS)


def candidate_estimates(batches: pd.DataFrame) -> pd.DataFrame:
    """Every configuration a search measured, with its latest stored estimates: ``search_id, engine``,
    the knob columns, ``origin`` (how the engine came to it first), ``n``, each objective's mean
    (column named after the metric) and ``<metric>_se``, ``last_batch``, ``status`` and ``is_baseline``.
    One row per search and configuration, in first-measured order."""
    _check_batches(batches)
    latest: dict[tuple[str, tuple], dict[str, Any]] = {}
    for row in batches.itertuples(index=False):
        baseline = getattr(row, "baseline", None)
        for entry in [*row.record["candidates"], row.record["incumbent"]]:
            if not entry or not entry["n"]:
                continue
            key = (row.search_id, tuple(sorted(entry["config"].items())))
            first = latest.get(key, {})
            out = {"search_id": row.search_id, "engine": row.engine, **entry["config"],
                   "origin": first.get("origin", entry.get("origin", "incumbent")), "n": entry["n"]}
            for metric, estimate in entry["estimates"].items():
                out[metric], out[f"{metric}_se"] = estimate["mean"], estimate["se"]
            out.update(last_batch=row.batch, status=entry.get("status", first.get("status", "measured")),
                       is_baseline=_same(entry["config"], baseline))
            latest[key] = out
    metrics = list(dict.fromkeys(t.split(":")[0] for texts in batches.get("objectives", []) for t in texts))
    columns = ["search_id", "engine", "origin", "n", *(c for m in metrics for c in (m, f"{m}_se")), "last_batch",
               "status", "is_baseline"]
    frame = pd.DataFrame(list(latest.values()))
    return frame.reindex(columns=[*frame.columns, *(c for c in columns if c not in frame.columns)])


def stored_winner(study: Study, search_id: str | None = None) -> dict[str, Any] | None:
    """The winner a finished search stored: ``{"search_id", "engine", "config", "n", "estimates"}`` of
    ``search_id`` (default: the newest finished search); ``None`` when no search finished."""
    table = searches(study)
    if search_id is not None:
        table = table[table["search_id"] == search_id]
    done = table[(table["status"] == "done") & table["winner"].notna()]
    if done.empty:
        return None
    row = done.iloc[-1]
    return {"search_id": row["search_id"], "engine": row["engine"], **row["winner"]}


def winners_table(study: Study) -> pd.DataFrame:
    """One row per finished search: ``search_id, engine``, the winner's knob columns, ``n`` and each
    objective's stored ``<metric>_mean`` and ``<metric>_se``."""
    rows = []
    for row in searches(study).itertuples(index=False):
        if row.winner is None:
            continue
        out: dict[str, Any] = {"search_id": row.search_id, "engine": row.engine, **row.winner["config"],
                               "n": row.winner["n"]}
        for metric, estimate in row.winner["estimates"].items():
            out[f"{metric}_mean"], out[f"{metric}_se"] = estimate["mean"], estimate["se"]
        rows.append(out)
    return pd.DataFrame(rows)


def search_objectives(table: pd.DataFrame, objectives: Sequence[str] | None = None) -> list[Metric]:
    """The objectives to show: ``objectives`` (``METRIC:max|min``, as given to ``tunelab refine
    --objective``; a bare stored name takes its stored direction), else every stored search's
    objectives in order (the first one decided the winner)."""
    stored = list(dict.fromkeys(t for texts in table["objectives"] for t in texts))
    by_name = {t.split(":")[0]: t for t in stored}
    wanted = [by_name.get(o, o) if ":" not in o else o for o in objectives] if objectives else stored
    try:
        goals = [Metric.parse(o) for o in wanted]
    except TunelabError as exc:
        raise ReportError(f"{exc}; give objectives as METRIC:max or METRIC:min") from None
    return list({g.name: g for g in goals}.values())


def settings_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`searches` as text for a reader: one row per search with its engine, preset, seed, budget,
    race share, objectives, knobs, options, status and what it stored."""
    def words(values: Any) -> str:
        return ", ".join(map(str, values)) if values else "-"

    return pd.DataFrame({
        "search": table["search_id"], "engine": table["engine"], "preset": table["preset"].fillna("-"),
        "seed": table["seed"], "budget": table["budget"],
        "race share": [fmt_pct(100 * s, signed=False, decimals=0) for s in table["race_share"]],
        "objectives": table["objectives"].map(words), "knobs": table["knobs"].map(words),
        "options": [words(f"{k}={v}" for k, v in (o or {}).items()) for o in table["options"]],
        "status": ["finished" if s == "done" else "interrupted (running)" for s in table["status"]],
        "batches": table["batches"], "measurements": table["evaluations"]})


# ---- stores without a stored search: the measurements in order ------------------------------------

def search_knobs(study: Study) -> list[str]:
    """Knob ids the refinement searched (the keys of its trials' configurations)."""
    trials = study.trials[study.trials["phase"] == Phase.REFINE]
    knobs: dict[str, None] = {}
    for config in trials["config"]:
        knobs.update(dict.fromkeys(config or {}))
    return list(knobs)


def _surface(study: Study) -> Surface | None:
    """The simulator surface of a simulator-only study (JSON design text: a refinement's ``surface``, or a
    ``tunelab validate`` run's ``options.surface``), else ``None``."""
    try:
        spec = json.loads(study.design_text) if study.design_text.lstrip().startswith("{") else {}
    except json.JSONDecodeError:
        return None
    if isinstance(spec, dict) and "surface" not in spec and isinstance(spec.get("options"), dict):
        spec = spec["options"]
    if not isinstance(spec, dict) or "surface" not in spec:
        return None
    try:
        return get_surface(spec["surface"], float(spec.get("cv", 0.03)))
    except (TunelabError, TypeError, ValueError):
        return None


def search_baseline(study: Study, knobs: Sequence[str] | None = None) -> dict[str, Any] | None:
    """The baseline (default) configuration of the searched knobs: the design's baselines, or the
    simulator surface's; ``None`` when neither is known."""
    knobs = list(knobs) if knobs is not None else search_knobs(study)
    if study.design is not None:
        base = study.design.baseline
    else:
        surface = _surface(study)
        base = dict(surface.baseline) if surface is not None else {}
    if not knobs or any(k not in base for k in knobs):
        return None
    return {k: level_value(base[k]) for k in knobs}


def _load_metrics(study: Study) -> dict[str, str]:
    """Metric -> direction of the load generator named in the trials' provenance (``{}`` if unknown)."""
    for provenance in study.trials.get("provenance", pd.Series(dtype=object)):
        name = provenance.get("load") if isinstance(provenance, Mapping) else None
        if name:
            try:
                return {m: info.direction for m, info in get_load(name)().metrics.items()}
            except LoadError:
                return {}
    return {}


def metric_directions(study: Study) -> dict[str, str]:
    """Metric -> ``'maximize'|'minimize'``: the design's metrics, else the simulator surface's, else
    every metric of the load generator the trials ran (``tunelab validate`` stores)."""
    if study.design is not None:
        return {m.name: m.direction for m in study.design.metrics}
    surface = _surface(study)
    return dict(surface.metrics) if surface is not None else _load_metrics(study)


def search_history(study: Study) -> pd.DataFrame:
    """One row per refine measurement in order: ``measurement, trial_id, key`` (the run key without
    ``refine:``), ``stage`` (``search``/``race``), ``batch`` (race round for the race; missing in
    stores written before the search was stored), ``replicate, status``, the knob columns, the
    metric columns and ``is_baseline``."""
    trials = study.trials[study.trials["phase"] == Phase.REFINE]
    rows = []
    for row in trials.itertuples():
        match = REFINE_KEY.match(row.run_key)
        if match is None or row.status not in _READ_BACK:
            continue
        config = {k: level_value(v) for k, v in (row.config or {}).items()}
        stage = "race" if match["round"] is not None else "search"
        batch = match["batch"] if match["batch"] is not None else match["round"]
        rows.append({"trial_id": row.trial_id, "key": row.run_key.split(":", 1)[1], "stage": stage,
                     "batch": pd.NA if batch is None else int(batch), "replicate": int(match["replicate"]),
                     "status": row.status, **config, **trial_metrics(row)})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["batch"] = frame["batch"].astype("Int64")
    frame = frame.sort_values("trial_id").reset_index(drop=True)
    frame.insert(0, "measurement", np.arange(1, len(frame) + 1))
    base = search_baseline(study)
    knobs = search_knobs(study)
    frame["is_baseline"] = [base is not None and all(level_value(r[k]) == base[k] for k in knobs)
                            for r in frame[knobs].to_dict("records")]
    return frame


def config_means(history: pd.DataFrame, knobs: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Per configuration: ``n`` measurements and the mean of each metric, plus ``is_baseline``."""
    frame = history.copy()
    frame["_config"] = [tuple(level_value(r[k]) for k in knobs) for r in frame[list(knobs)].to_dict("records")]
    grouped = frame.groupby("_config", sort=False)
    means = grouped[list(metrics)].mean()
    means.insert(0, "n", grouped.size())
    means["is_baseline"] = grouped["is_baseline"].first()
    out = means.reset_index(drop=True)
    for i, knob in enumerate(knobs):
        out.insert(i, knob, [key[i] for key in means.index])
    return out


def pareto_points(means: pd.DataFrame, x: str, y: str, directions: Mapping[str, str],
                  winner: Mapping[str, Any] | None = None, knobs: Sequence[str] = ()) -> pd.DataFrame:
    """``means`` (:func:`config_means` or :func:`candidate_estimates`) with ``front`` (non-dominated in
    ``x`` and ``y`` by their directions) and ``is_winner``."""
    points = means.dropna(subset=[x, y]).reset_index(drop=True)
    signs = [-1.0 if directions.get(m, "maximize") == Direction.MAXIMIZE else 1.0 for m in (x, y)]
    vectors = np.column_stack([signs[0] * points[x].to_numpy(float), signs[1] * points[y].to_numpy(float)])
    points["front"] = non_dominated(vectors) if len(points) else []
    if winner and knobs:
        points["is_winner"] = [all(level_value(r[k]) == level_value(winner[k]) for k in knobs)
                               for r in points[list(knobs)].to_dict("records")]
    return points


@dataclass(frozen=True)
class Comparison:
    """One baseline-vs-candidate comparison (a confirmation or a validation profile): in ABBA blocks
    (``measurement`` ``sequential``: measurements ``block, position, arm``) or in duet pairs (``duet``:
    ``pair, side, arm``)."""

    phase: str
    profile: str
    digest: str
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    measurements: pd.DataFrame
    measurement: MeasurementKind = MeasurementKind.SEQUENTIAL
    #: how ``tunelab validate`` judged it, as its newest trial recorded (:func:`stored_judging`): the block rule,
    #: the goals as asked (metrics and SESOI) and the level; None/empty for a confirmation or an older store
    rule: BlockRule | None = None
    goals: tuple[Metric, ...] = ()
    alpha: float | None = None

    @property
    def label(self) -> str:
        return f"{self.phase} {self.profile} ({self.digest})"

    @property
    def unit(self) -> str:
        """The column that groups its measurements: ``block`` (ABBA) or ``pair`` (duet)."""
        return "pair" if self.measurement is MeasurementKind.DUET else "block"

    @property
    def units_text(self) -> str:
        """How its units read: ``'ABBA blocks'`` or ``'duet pairs'``."""
        return {"pair": "duet pairs", "block": "ABBA blocks"}[self.unit]


def abba_comparisons(study: Study) -> list[Comparison]:
    """Every ABBA comparison recorded in the confirm and validate phases, oldest first."""
    return _keyed_comparisons(study, ABBA_KEY, ("block", "position"), MeasurementKind.SEQUENTIAL)


def duet_comparisons(study: Study) -> list[Comparison]:
    """Every duet validation (``tunelab validate --measurement duet``) recorded in the validate phase, one
    per profile, oldest first; judge them with :func:`judge` (the crossover fit of the paired log ratios)."""
    return _keyed_comparisons(study, DUET_KEY, ("pair", "side"), MeasurementKind.DUET)


def _keyed_comparisons(study: Study, pattern: re.Pattern[str], fields: Sequence[str],
                       measurement: MeasurementKind) -> list[Comparison]:
    """The comparisons whose run keys match ``pattern`` (groups phase, profile, digest, arm and ``fields``)."""
    trials = study.trials[study.trials["phase"].isin(("confirm", "validate"))]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    configs: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    judging: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in trials.sort_values("trial_id").itertuples():
        match = pattern.match(row.run_key)
        if match is None or row.status not in _READ_BACK:
            continue
        key = (match["phase"], match["profile"] or "default", match["digest"])
        configs.setdefault(key, {})[match["arm"]] = {k: level_value(v) for k, v in (row.config or {}).items()}
        groups.setdefault(key, []).append({"trial_id": row.trial_id, **{f: int(match[f]) for f in fields},
                                           "arm": match["arm"], "status": row.status, **trial_metrics(row)})
        judging[key] = stored_judging(getattr(row, "provenance", None), f"{study.path.name}: trial {row.trial_id}")
    return [Comparison(phase=k[0], profile=k[1], digest=k[2], baseline=configs[k].get("A", {}),
                       candidate=configs[k].get("B", {}), measurements=pd.DataFrame(rows), measurement=measurement,
                       **judging[k])
            for k, rows in groups.items()]


def stored_judging(provenance: Any, where: str) -> dict[str, Any]:
    """``{"rule", "goals", "alpha"}`` of a validation trial's provenance (written by
    :func:`tunelab.optimize.confirm.validation_provenance`): its :class:`BlockRule`, its goals (metrics and SESOI
    as asked) and its level; None/empty for what the trial did not record (a confirmation, an older store). A
    malformed record is a :class:`ReportError`."""
    record = provenance if isinstance(provenance, Mapping) else {}
    alpha = record.get("validate_alpha")
    if alpha is not None and not 0 < _number(alpha, where, "provenance.validate_alpha") < 1:
        raise _bad(where, "provenance.validate_alpha", "a level between 0 and 1", alpha)
    goals = record.get("validate_goals")
    blocks = record.get("validate_pairs", record.get("validate_blocks"))   # a duet's rule counts its pairs
    return {"alpha": None if alpha is None else float(alpha),
            "goals": () if goals is None else _stored_goals(goals, where),
            "rule": None if blocks is None else _stored_rule(blocks, where, 0.05 if alpha is None else float(alpha))}


def _stored_goals(value: Any, where: str) -> tuple[Metric, ...]:
    """The goals a validation stored (``Metric.to_json`` records)."""
    field = "provenance.validate_goals"
    if not isinstance(value, list) or not value:
        raise _bad(where, field, "a list of metrics", value)
    records = [_mapping(goal, where, f"{field}[]") for goal in value]
    try:
        return tuple(Metric.coerce(goal) for goal in records)
    except (TunelabError, KeyError, TypeError) as exc:
        raise _bad(where, field, f"a list of metrics ({exc})", value) from None


def _stored_rule(value: Any, where: str, alpha: float) -> BlockRule:
    """The block rule a validation stored (``min, max, step, until, spending``), checked as validate checks it."""
    field = "provenance.validate_blocks"
    fields = _mapping(value, where, field)
    counts = {k: _count(_get(fields, k, where, f"{field}."), where, f"{field}.{k}") for k in ("min", "max", "step")}
    words = {k: _text(_get(fields, k, where, f"{field}."), where, f"{field}.{k}") for k in ("until", "spending")}
    try:
        rule = block_rule(BlockRule(**counts, **words))
        block_looks(rule, alpha)
    except TunelabError as exc:
        raise _bad(where, field, f"a block rule ({exc})", value) from None
    return rule


def comparison_goals(study: Study, measured: Sequence[str], metric: str | None = None,
                     sesoi_pct: float | None = None, stored: Sequence[Metric] = ()) -> list[Metric]:
    """The metrics to judge a comparison on (:class:`~tunelab.model.Metric`).

    ``stored``: the goals a validation recorded (:attr:`Comparison.goals`: the metrics and SESOI
    ``tunelab validate`` judged), those measured; else the design's metrics (or the simulator surface's,
    SESOI 5 %) that were measured; without either (older ``tunelab validate`` stores) the load's first
    metric, as ``tunelab validate`` defaults to. ``metric`` (``NAME`` or ``NAME:max|min[:SESOI]``) puts
    that one first or adds it; ``sesoi_pct`` overrides the SESOI of the first goal.
    """
    directions = metric_directions(study)
    if stored:
        goals = list(stored)
    elif study.design is not None:
        goals = [Metric(m.name, m.direction, m.sesoi_pct) for m in study.design.metrics]
    else:
        goals = [Metric(name, direction) for name, direction in directions.items()]
        goals = goals if _surface(study) is not None else [g for g in goals if g.name in measured][:1]
    goals = [g for g in goals if g.name in measured]
    if metric:
        name = metric.split(":")[0]
        known = {g.name: g for g in goals}
        default = "min" if directions.get(name) == Direction.MINIMIZE else "max"
        goal = known[name] if name in known and ":" not in metric else goals_of(
            [metric if ":" in metric else f"{metric}:{default}"])[0]
        goals = [goal] + [g for g in goals if g.name != name]
    if not goals:
        raise ReportError(f"no metric to judge the comparisons of {study.path.name} on; pass metric='NAME:max|min' "
                          f"(measured: {', '.join(measured)})")
    if sesoi_pct is not None:
        goals[0] = replace(goals[0], sesoi_pct=float(sesoi_pct))
    return goals


def comparison_alpha(comparison: Comparison, alpha: float | None = None, default: float = 0.05) -> float:
    """The level to judge ``comparison`` at: ``alpha`` when given (a report's parameter), else the level the
    validation stored (the one ``tunelab validate`` used), else ``default``."""
    if alpha is not None:
        return float(alpha)
    return comparison.alpha if comparison.alpha is not None else float(default)


def judge(comparison: Comparison, goals: Sequence[Metric], alpha: float | None = None) -> pd.DataFrame:
    """Gain, CI, TOST and verdict of each goal at :func:`comparison_alpha` (default: the stored level, else 0.05).

    A validation that stored its block rule is judged as ``tunelab validate`` judged it:
    :func:`tunelab.optimize.blocks_in_rounds.replay_looks` makes the same looks at the same nominal levels
    (``look``, ``alpha_nominal``: the interval is ``1 - alpha_nominal``), so with the stored goals the verdict
    is the one validate printed; so is a duet's, look by look on its pairs (``blocks`` counts the pairs; an older
    duet store: :func:`tunelab.optimize.duet_confirm.analyse_pairs` on all of them); other ABBA blocks
    (confirmations, older stores): :func:`tunelab.optimize.confirm.analyse_blocks` (95 % interval at the default
    level)."""
    level = comparison_alpha(comparison, alpha)
    frame = comparison.measurements
    measured = [goal for goal in goals if goal.name in frame.columns]
    duet = {"analyse": duet_look, "unit": "pair"} if comparison.measurement is MeasurementKind.DUET else {}
    if comparison.rule is not None:
        rows = replay_looks(frame, measured, comparison.rule, level, comparison.profile, **duet)
    elif duet:
        rows = [analyse_pairs(frame, goal, level) for goal in measured]
    else:
        rows = [analyse_blocks(frame, goal, level) for goal in measured]
    return pd.DataFrame([{"comparison": comparison.label, "profile": comparison.profile, **row} for row in rows])
