"""One look of the screen: pick the route for the runs, adjust the family, state the verdicts.

:func:`screen_look` is :func:`tunelab.stats.screen` without sequential looks (which
:mod:`tunelab.stats.rounds` replays by calling it once per look): it prepares the runs
(:func:`tunelab.stats.screen_data.prepare_runs`), runs the route of their
:class:`~tunelab.model.AnalysisKind` (:data:`ROUTES`), adjusts the tested parts' p-values over the
whole knob × metric family (padded by the rows that earlier looks of a sequential screen decided:
``settled``), turns each part into its verdict row by the rule of its kind
(:data:`VERDICT_RULES`), applies the guards and gathers the tables into a :class:`ScreenResult`.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.model import AnalysisKind, DesignType, MeasurementKind, Metric, PartKind
from tunelab.stats.duet_route import duet_route
from tunelab.stats.guards import apply_guards, guard_notes, guard_table, trade_off_texts
from tunelab.stats.model_route import model_route
from tunelab.stats.model_screen import model_verdict
from tunelab.stats.multiplicity import adjust
from tunelab.stats.oat_route import oat_route
from tunelab.stats.oneway import NORMALITY_ALPHA, SD_RATIO_MAX, VARIANCE_ALPHA, oneway_verdict
from tunelab.stats.range_route import range_route
from tunelab.stats.range_screen import range_verdict
from tunelab.stats.screen_common import PART_TABLES, VERDICT_COLUMNS, RouteParts, TestedPart
from tunelab.stats.screen_data import ScreenRuns, prepare_runs
from tunelab.stats.screen_design import ScreenDesign
from tunelab.stats.screen_result import ScreenResult

#: a route: the checked runs in, the tested parts, untestable rows, tables and notes out
Route = Callable[[ScreenRuns], RouteParts]
ROUTES: dict[AnalysisKind, Route] = {AnalysisKind.OAT: oat_route, AnalysisKind.FACTORIAL: model_route,
                                     AnalysisKind.RANGE: range_route}
#: routes of a design's ``measurement`` other than one trial at a time (``ScreenDesign.measurement``), per kind
MEASUREMENT_ROUTES: dict[tuple[MeasurementKind, AnalysisKind], Route] = {
    (MeasurementKind.DUET, AnalysisKind.OAT): duet_route}


def route_of(runs: ScreenRuns) -> Route:
    """The route for the runs: their measurement's (:data:`MEASUREMENT_ROUTES`), else their kind's."""
    return MEASUREMENT_ROUTES.get((runs.design.measurement, runs.kind), ROUTES[runs.kind])

#: a part's verdict rule: ``(part, label, metric, p_adj, alpha, significant interaction terms) -> row``
VerdictRule = Callable[[dict[str, Any], str, dict[str, Any], float, float, set[str]], dict[str, Any]]
VERDICT_RULES: dict[PartKind, VerdictRule] = {
    PartKind.ONEWAY: lambda part, label, metric, q, alpha, terms: oneway_verdict(part, metric, q, alpha),
    PartKind.MAIN: model_verdict,
    PartKind.INTERACTION: model_verdict,
    PartKind.RANGE: lambda part, label, metric, q, alpha, terms: range_verdict(part, metric, q, alpha),
    PartKind.MORRIS: lambda part, label, metric, q, alpha, terms: range_verdict(part, metric, q, alpha),
}


def screen_look(data: pd.DataFrame, metrics: Sequence[Metric | dict[str, Any]], knobs: list[str],
                baseline: dict[str, Any], alpha: float = 0.05, correction: str = "holm", n_boot: int = 1000,
                seed: int = 0, design: ScreenDesign | Mapping[str, Any] | None = None,
                guards: Mapping[str, Any] | None = None,
                settled: Mapping[tuple[str, str], bool] | None = None) -> ScreenResult:
    """One look of :func:`tunelab.stats.screen` (same arguments and answer, without sequential looks).

    ``settled`` (sequential looks only): the ``(knob, metric)`` rows decided at earlier looks, each
    mapped to whether it stays in this look's family with p = 1 (True) or has left it (False); see
    :func:`family_p_adj`. The verdict rows are then judged once, by the normal rule, on the padded family.
    """
    runs = prepare_runs(data, metrics, knobs, baseline, alpha, correction, n_boot, seed, design, guards)
    found = route_of(runs)(runs)
    p_adj = family_p_adj(found.tested, correction, settled or {})
    rows = verdict_rows(found.tested, p_adj, alpha)
    verdicts = pd.DataFrame(rows + found.untestable, columns=VERDICT_COLUMNS)
    # levels keep their type: pandas would turn [128, 16, None] (an interaction row) into floats
    verdicts["level"] = pd.Series([row.get("level") for row in rows + found.untestable], dtype=object)
    verdicts["levels"] = pd.Series([row.get("levels", []) for row in rows + found.untestable], dtype=object)
    adjusted = {(t.metric["name"], t.label): float(q) for t, q in zip(found.tested, p_adj)}
    for frame in found.tables.get("model_terms", []):
        frame["p_adj"] = [adjusted.get((m, t), math.nan) for m, t in zip(frame["metric"], frame["term"])]
    tables = {name: gather(found.tested, name, columns) for name, columns in PART_TABLES.items()}
    guard_rows = guard_table(runs.data, runs.knobs, runs.baseline, runs.guard_specs, runs.kind, alpha,
                             tables["effects"])
    verdicts, guarded = apply_guards(verdicts, guard_rows, runs.dependents, runs.guard_specs)
    verdicts["trade_off"] = pd.Series(trade_off_texts(verdicts, guard_rows, runs.trade_offs, runs.guard_specs),
                                      dtype=object, index=verdicts.index)
    notes = [*runs.notes, *found.notes, *guard_notes(runs.data, runs.guard_specs, runs.kind), *guarded]
    tables.update({name: pd.concat(frames, ignore_index=True) for name, frames in found.tables.items() if frames})
    if runs.testbeds:
        tables["testbeds"] = runs.spread
    return ScreenResult(design=runs.kind, settings=_settings(runs, notes), verdicts=verdicts, guards=guard_rows,
                        **tables)


def family_p_adj(tested: list[TestedPart], correction: str,
                 settled: Mapping[tuple[str, str], bool]) -> list[float]:
    """The tested parts' p-values adjusted over the knob × metric family.

    A part whose ``(knob, metric)`` is in ``settled`` was decided at an earlier look: it is not
    tested again (its p_adj is NaN) and the family holds instead a p of 1 for every settled row that
    stays (True), none for a row that left (False). Padding with p = 1 never adds a rejection.

    >>> part = lambda knob, p: TestedPart(part={"p": p}, label=knob, metric={"name": "y"})
    >>> family_p_adj([part("a", 0.01), part("b", 0.5)], "holm", {})
    [0.02, 0.5]
    >>> family_p_adj([part("a", 0.01), part("b", 0.5)], "holm", {("b", "y"): True, ("c", "y"): True})
    [0.03, nan]
    """
    open_part = [(t.label, t.metric["name"]) not in settled for t in tested]
    p = [t.part["p"] for t, is_open in zip(tested, open_part) if is_open]
    padding = [1.0] * sum(bool(stays) for stays in settled.values())
    adjusted = iter(adjust([*p, *padding], method=correction)[:len(p)].tolist())
    return [next(adjusted) if is_open else math.nan for is_open in open_part]


def verdict_rows(tested: list[TestedPart], p_adj: Sequence[float], alpha: float) -> list[dict[str, Any]]:
    """Each tested part's verdict row, by the rule of its kind (:data:`VERDICT_RULES`); a model's main
    effect learns which of its interactions are significant in the family. Every route states its
    intervals at ``1 - alpha`` (the row's ``ci_level``), the level its tests use."""
    significant_terms = {(t.metric["name"], t.label) for t, q in zip(tested, p_adj)
                         if t.part.get("kind") is PartKind.INTERACTION and q < alpha}
    rows = []
    for t, q in zip(tested, p_adj):
        terms = {term for name, term in significant_terms if name == t.metric["name"]}
        rule = VERDICT_RULES[t.part.get("kind", PartKind.ONEWAY)]
        rows.append({"knob": t.label, "metric": t.metric["name"], "ci_level": 1.0 - alpha,
                     **rule(t.part, t.label, t.metric, float(q), alpha, terms)})
    return rows


def gather(tested: list[TestedPart], name: str, columns: list[str]) -> pd.DataFrame:
    """The per-part table ``name`` of every tested part, with its knob and metric, as one frame."""
    keep = [t for t in tested if len(t.part[name])]
    if not keep:
        return pd.DataFrame(columns=columns)
    sizes = [len(t.part[name]) for t in keep]
    keyed = pd.concat([t.part[name] for t in keep], ignore_index=True)   # one concat, then the keys in one go
    for column, values in (("metric", [t.metric["name"] for t in keep]), ("knob", [t.label for t in keep])):
        keyed.insert(0, column, np.repeat(np.array(values, dtype=object), sizes))
    return keyed[columns]


def _settings(runs: ScreenRuns, notes: list[str]) -> dict[str, Any]:
    """The result's ``settings``: what was screened, how, and the notes."""
    settings = {"alpha": runs.alpha, "correction": runs.correction, "n_boot": runs.n_boot, "seed": runs.seed,
                "metrics": runs.metrics, "knobs": runs.knobs, "baseline": runs.baseline, "n_runs": len(runs.data),
                "normality_alpha": NORMALITY_ALPHA, "variance_alpha": VARIANCE_ALPHA, "sd_ratio_max": SD_RATIO_MAX,
                "design_type": _text(runs.design.type), "notes": notes,
                "guards": {"guards": runs.guard_specs,
                           "conditional_on": {m: list(g) for m, g in runs.dependents.items()},
                           "trade_offs": {m: list(g) for m, g in runs.trade_offs.items()}}}
    if runs.profiles:
        settings["profiles"] = runs.profiles
    if runs.testbeds:
        settings["testbeds"] = runs.testbeds
    return settings


def _text(kind: DesignType | None) -> str | None:
    """A design type's text for the settings (None without a type)."""
    return None if kind is None else kind.value
