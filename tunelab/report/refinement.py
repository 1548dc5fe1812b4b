"""Refinement and confirmation as a report sees them: read back from the store's trials.

Refine trials carry run keys ``refine:<event>:r<replicate>``; confirmation trials
``confirm:<digest>:b<block>:<position><arm>`` and validation trials
``validate:<profile>:<digest>:b<block>:<position><arm>`` (arm A = baseline, B = candidate).

The store does not record which generation a refine measurement belonged to, so
:func:`replay_search` replays :func:`tunelab.optimize.refine` with the recorded preset, seed and
budget against an evaluator that only *reads* the stored measurements: the search is
deterministic, so the replay asks for exactly the stored keys and returns the original
:class:`~tunelab.optimize.search.RefineResult` (generations, estimates, winner). If the replay
asks for anything the store does not hold (other objectives, an interrupted search), it gives
up and the report shows the measurements in order instead (:func:`search_history`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.errors import LoadError, TunelabError
from tunelab.loads import get_load
from tunelab.model import USABLE_STATUSES, Metric, TrialStatus, level_value
from tunelab.optimize.confirm import analyse_blocks, goals_of
from tunelab.optimize.evaluators import ReplayEvaluator, trial_metrics
from tunelab.optimize.search import RefineResult, non_dominated, objectives_of, refine
from tunelab.optimize.space import SearchSpace, dimension_from_design_knob
from tunelab.report.study import ReportError, Study
from tunelab.simulator import Surface, get_surface

REFINE_KEY = re.compile(r"^refine:(?P<event>\d+):r(?P<replicate>\d+)$")
ABBA_KEY = re.compile(r"^(?P<phase>confirm|validate):(?:(?P<profile>[^:]+):)?(?P<digest>[0-9a-f]{8}):"
                      r"b(?P<block>\d+):(?P<position>\d+)(?P<arm>[AB])$")
#: statuses of the trials read back: usable ones, and failed ones (shown, with no metrics)
_READ_BACK = (*USABLE_STATUSES, TrialStatus.FAILED)


def search_knobs(study: Study) -> list[str]:
    """Knob ids the refinement searched (the keys of its trials' configurations)."""
    trials = study.trials[study.trials["phase"] == "refine"]
    knobs: dict[str, None] = {}
    for config in trials["config"]:
        knobs.update(dict.fromkeys(config or {}))
    return list(knobs)


def _surface(study: Study) -> Surface | None:
    """The simulator surface of a simulator-only study (JSON design text), else ``None``."""
    try:
        spec = json.loads(study.design_text) if study.design_text.lstrip().startswith("{") else {}
    except json.JSONDecodeError:
        return None
    if "surface" not in spec:
        return None
    return get_surface(spec["surface"], float(spec.get("cv", 0.03)))


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
    """One row per refine measurement in order: ``measurement, trial_id, event, replicate, status``,
    the knob columns, the metric columns and ``is_baseline``."""
    trials = study.trials[study.trials["phase"] == "refine"]
    rows = []
    for row in trials.itertuples():
        match = REFINE_KEY.match(row.run_key)
        if match is None or row.status not in _READ_BACK:
            continue
        config = {k: level_value(v) for k, v in (row.config or {}).items()}
        rows.append({"trial_id": row.trial_id, "event": int(match["event"]), "replicate": int(match["replicate"]),
                     "status": row.status, **config, **trial_metrics(row)})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.sort_values("trial_id").reset_index(drop=True)
    frame.insert(0, "measurement", np.arange(1, len(frame) + 1))
    base = search_baseline(study)
    knobs = search_knobs(study)
    frame["is_baseline"] = [base is not None and all(level_value(r[k]) == base[k] for k in knobs)
                            for r in frame[knobs].to_dict("records")]
    return frame


def _search_space(study: Study, knobs: Sequence[str]) -> SearchSpace | None:
    """The space the refinement searched: the design's knobs, or the simulator surface's; ``None`` if unknown."""
    if study.design is not None:
        by_id = {k.id: k for k in study.design.knobs}
        if all(k in by_id for k in knobs):
            return SearchSpace([dimension_from_design_knob(by_id[k]) for k in knobs])
        return None
    surface = _surface(study)
    if surface is None:
        return None
    space = surface.search_space()
    return space if list(space.ids) == list(knobs) else None


def _objective_candidates(study: Study, objectives: Sequence[str] | None) -> list[list[Metric]]:
    """The objective lists a replay tries: the given ones, else the first metric, then all metrics."""
    if objectives:
        return [objectives_of(objectives)]
    directions = metric_directions(study)
    goals = [Metric(name, direction) for name, direction in directions.items()]
    candidates = [goals[:1]] if goals else []
    if len(goals) > 1:
        candidates.append(goals)
    return candidates


def replay_search(study: Study, objectives: Sequence[str] | None = None) -> RefineResult | None:
    """Replay the study's refinement from its stored measurements; the :class:`RefineResult`, or ``None``.

    Parameters
    ----------
    objectives : list of str, optional
        ``"metric:max|min"`` as given to ``tunelab refine --objective``; by default the design's
        first metric (the CLI's default) and then all of the design's metrics are tried.
    """
    history = search_history(study)
    if history.empty:
        return None
    knobs = search_knobs(study)
    space = _search_space(study, knobs)
    baseline = search_baseline(study, knobs)
    if space is None:
        return None
    provenance = (study.trials[study.trials["phase"] == "refine"]["provenance"].iloc[0] or {}).get("refine", {})
    replicates = int((history["event"] == history["event"].min()).sum())
    first_new = history.loc[history["event"] == 1, knobs]
    initials: list[list[dict[str, Any]]] = [[]]
    if not first_new.empty:
        initials.append([{k: level_value(v) for k, v in first_new.iloc[0].items()}])
    for objs in _objective_candidates(study, objectives):
        for initial in initials:
            evaluator = ReplayEvaluator(study.trials, "refine", study.path)
            try:
                result = refine(space, evaluator, objs, budget=provenance.get("budget"),
                                preset=provenance.get("preset", "lab"), seed=int(provenance.get("seed", 0)),
                                baseline=baseline, initial=initial, replicates=replicates)
            except TunelabError:   # ReplayMismatch: other settings, or an interrupted search
                continue
            if evaluator.reused == len(history):
                return result
    return None


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
    """``means`` with ``front`` (non-dominated in ``x`` and ``y`` by their directions) and ``is_winner``."""
    points = means.dropna(subset=[x, y]).reset_index(drop=True)
    signs = [-1.0 if directions.get(m, "maximize") == "maximize" else 1.0 for m in (x, y)]
    vectors = np.column_stack([signs[0] * points[x].to_numpy(float), signs[1] * points[y].to_numpy(float)])
    points["front"] = non_dominated(vectors) if len(points) else []
    if winner and knobs:
        points["is_winner"] = [all(level_value(r[k]) == level_value(winner[k]) for k in knobs)
                               for r in points[list(knobs)].to_dict("records")]
    return points


@dataclass(frozen=True)
class Comparison:
    """One baseline-vs-candidate comparison in ABBA blocks (a confirmation or a validation profile)."""

    phase: str
    profile: str
    digest: str
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    measurements: pd.DataFrame

    @property
    def label(self) -> str:
        return f"{self.phase} {self.profile} ({self.digest})"


def abba_comparisons(study: Study) -> list[Comparison]:
    """Every ABBA comparison recorded in the confirm and validate phases, oldest first."""
    trials = study.trials[study.trials["phase"].isin(("confirm", "validate"))]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    configs: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for row in trials.sort_values("trial_id").itertuples():
        match = ABBA_KEY.match(row.run_key)
        if match is None or row.status not in _READ_BACK:
            continue
        key = (match["phase"], match["profile"] or "default", match["digest"])
        configs.setdefault(key, {})[match["arm"]] = {k: level_value(v) for k, v in (row.config or {}).items()}
        groups.setdefault(key, []).append({"trial_id": row.trial_id, "block": int(match["block"]),
                                           "position": int(match["position"]), "arm": match["arm"],
                                           "status": row.status, **trial_metrics(row)})
    return [Comparison(phase=k[0], profile=k[1], digest=k[2], baseline=configs[k].get("A", {}),
                       candidate=configs[k].get("B", {}), measurements=pd.DataFrame(rows))
            for k, rows in groups.items()]


def comparison_goals(study: Study, measured: Sequence[str], metric: str | None = None,
                     sesoi_pct: float | None = None) -> list[Metric]:
    """The metrics to judge a comparison on (:class:`~tunelab.model.Metric`).

    The design's metrics (or the simulator surface's, SESOI 5 %) that were measured; without
    either (``tunelab validate`` stores) the load's first metric, as ``tunelab validate`` defaults
    to. ``metric`` (``NAME`` or ``NAME:max|min[:SESOI]``) puts that one first or adds it;
    ``sesoi_pct`` overrides the SESOI of the first goal.
    """
    directions = metric_directions(study)
    if study.design is not None:
        goals = [Metric(m.name, m.direction, m.sesoi_pct) for m in study.design.metrics]
    else:
        goals = [Metric(name, direction) for name, direction in directions.items()]
        goals = goals if _surface(study) is not None else [g for g in goals if g.name in measured][:1]
    goals = [g for g in goals if g.name in measured]
    if metric:
        name = metric.split(":")[0]
        known = {g.name: g for g in goals}
        default = "min" if directions.get(name) == "minimize" else "max"
        goal = known[name] if name in known and ":" not in metric else goals_of(
            [metric if ":" in metric else f"{metric}:{default}"])[0]
        goals = [goal] + [g for g in goals if g.name != name]
    if not goals:
        raise ReportError(f"no metric to judge the comparisons of {study.path.name} on; pass metric='NAME:max|min' "
                          f"(measured: {', '.join(measured)})")
    if sesoi_pct is not None:
        goals[0] = replace(goals[0], sesoi_pct=float(sesoi_pct))
    return goals


def judge(comparison: Comparison, goals: Sequence[Metric], alpha: float = 0.05) -> pd.DataFrame:
    """:func:`tunelab.optimize.confirm.analyse_blocks` for each goal: gain, 95 % CI, TOST and verdict."""
    rows = [{"comparison": comparison.label, "profile": comparison.profile,
             **analyse_blocks(comparison.measurements, goal, alpha)}
            for goal in goals if goal.name in comparison.measurements.columns]
    return pd.DataFrame(rows)
