"""What every route of the screen shares: the table columns, a route's answer, the untestable row.

A route (:mod:`tunelab.stats.oat_route`, :mod:`tunelab.stats.model_route`,
:mod:`tunelab.stats.range_route`) takes the checked runs (:class:`tunelab.stats.screen_data.ScreenRuns`)
and returns a :class:`RouteParts`: the knob × metric parts it tested (each with its p-value, adjusted
later over the whole family, and its per-part tables), the rows it could not test, the route's own
tables and its notes. Nothing is passed in to be filled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tunelab.model import AnalysisKind, Verdict
from tunelab.stats._validate import level_matches
from tunelab.stats.posthoc import POSTHOC_COLUMNS

VERDICT_COLUMNS = ["knob", "metric", "test", "reason", "p", "p_adj", "significant", "level", "effect_pct",
                   "effect_ci_low", "effect_ci_high", "ci_level", "eta2", "direction", "relevant", "equivalent",
                   "verdict", "effect_abs", "effect_abs_ci_low", "effect_abs_ci_high", "scale", "only_when", "guard",
                   "levels", "posthoc_note", "trade_off"]
ASSUMPTION_COLUMNS = ["knob", "metric", "test", "statistic", "df1", "df2", "p", "n"]
OMNIBUS_COLUMNS = ["knob", "metric", "test", "source", "statistic", "df1", "df2", "p", "effect_size",
                   "effect_size_name", "recommended", "reason"]
POSTHOC_TABLE_COLUMNS = ["knob", "metric", "method", *POSTHOC_COLUMNS, "recommended"]
EFFECT_COLUMNS = ["knob", "metric", "level", "baseline", "mean", "baseline_mean", "pct_change", "ci_low", "ci_high"]
EQUIVALENCE_COLUMNS = ["knob", "metric", "level", "baseline", "pct_change", "lower_bound", "upper_bound",
                       "p_lower", "p_upper", "p", "equivalent", "sesoi_pct"]
#: the looks of a sequential screen (:attr:`ScreenResult.rounds`, see :mod:`tunelab.stats.rounds`)
ROUND_COLUMNS = ["round", "runs", "replicates", "information_fraction", "alpha_spent", "alpha_nominal", "decided",
                 "inconclusive"]
#: the per-part tables every tested part carries (without its ``knob`` and ``metric`` columns)
PART_TABLES = {"assumptions": ASSUMPTION_COLUMNS, "omnibus": OMNIBUS_COLUMNS, "posthoc": POSTHOC_TABLE_COLUMNS,
               "effects": EFFECT_COLUMNS, "equivalence": EQUIVALENCE_COLUMNS}

#: the tidy column naming each run's load profile (plan column ``profile``); a factor, never a knob
PROFILE = "profile"


@dataclass(frozen=True)
class TestedPart:
    """One tested knob × metric (or interaction × metric): ``label`` names the knob or the term
    (``'a:b'``, ``'knob:profile'``), ``part`` holds its p-value, route, reason and per-part tables."""

    label: str
    metric: dict[str, Any]
    part: dict[str, Any]


@dataclass(frozen=True)
class RouteParts:
    """What a route found: the tested parts, the untestable verdict rows, the route's own tables
    (name -> frames to concatenate, e.g. ``model_terms``) and its notes."""

    tested: list[TestedPart] = field(default_factory=list)
    untestable: list[dict[str, Any]] = field(default_factory=list)
    tables: dict[str, list[pd.DataFrame]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __add__(self, other: RouteParts) -> RouteParts:
        tables = {name: list(frames) for name, frames in self.tables.items()}
        for name, frames in other.tables.items():
            tables.setdefault(name, []).extend(frames)
        return RouteParts([*self.tested, *other.tested], [*self.untestable, *other.untestable], tables,
                          [*self.notes, *other.notes])

    @classmethod
    def combine(cls, pieces: list[RouteParts]) -> RouteParts:
        """All ``pieces`` in order, as one."""
        out = cls()
        for piece in pieces:
            out = out + piece
        return out


def untestable(knob: str, metric: str, problem: str, note: bool = False) -> RouteParts:
    """A route's answer for a knob × metric it cannot test: an ``untestable`` row whose reason is
    ``problem`` (and, with ``note``, the same text in the notes)."""
    notes = [f"{knob} × {metric} not tested: {problem}"] if note else []
    return RouteParts(untestable=[untestable_verdict(knob, metric, problem)], notes=notes)


def untestable_verdict(knob: str, metric: str, problem: str) -> dict[str, Any]:
    """The verdict row of a knob × metric that cannot be tested (``test`` null, ``reason`` says why)."""
    return {"knob": knob, "metric": metric, "test": None, "reason": problem, "p": math.nan, "p_adj": math.nan,
            "significant": False, "level": None, "effect_pct": math.nan, "effect_ci_low": math.nan,
            "effect_ci_high": math.nan, "ci_level": math.nan, "eta2": math.nan, "direction": "none", "relevant": False,
            "equivalent": False, "verdict": Verdict.UNTESTABLE.value, "effect_abs": math.nan,
            "effect_abs_ci_low": math.nan, "effect_abs_ci_high": math.nan, "scale": None, "only_when": None,
            "levels": [], "posthoc_note": None, "trade_off": None}


def direction_of(verdict: Verdict, gain: float) -> str:
    """``'better'``/``'worse'`` (the sign of the decisive effect in the metric's direction) for a
    ``matters`` verdict, else ``'none'``: a significant effect smaller than the SESOI, or one a guard
    makes not comparable, has no direction that matters (its sign stays in ``effect_pct``).

    >>> direction_of(Verdict.MATTERS, -40.0), direction_of(Verdict.EQUIVALENT, -1.6e-5)
    ('worse', 'none')
    """
    if verdict != Verdict.MATTERS or not gain or math.isnan(gain):
        return "none"
    return "better" if gain > 0 else "worse"


def failure_summary(failed: pd.DataFrame, knob: str, level: Any) -> str:
    """``', 3 failed: REASON'`` for the failed runs of ``knob = level`` (their commonest reason), or ``''``."""
    at_level = failed[level_matches(failed[knob], level)] if len(failed) else failed
    if not len(at_level):
        return ""
    reasons = at_level["reason"].dropna().astype(str) if "reason" in at_level.columns else pd.Series(dtype=str)
    common = f": {reasons.mode().iloc[0]!r}" if len(reasons) else ""
    return f", {len(at_level)} failed{common}"


def rows_per_knob(data: pd.DataFrame, knobs: list[str], baseline: dict[str, Any],
                  kind: AnalysisKind) -> dict[str, np.ndarray]:
    """Per knob, the rows that compare its levels: all rows, or in an OAT design those whose
    other knobs sit at their baselines (one pass per knob: O(knobs x rows))."""
    if kind != AnalysisKind.OAT:
        return {knob: np.ones(len(data), dtype=bool) for knob in knobs}
    off = {knob: ~level_matches(data[knob], baseline[knob]) for knob in knobs}
    n_off = np.sum(list(off.values()), axis=0) if knobs else np.zeros(len(data), dtype=int)
    return {knob: (n_off - off[knob]) == 0 for knob in knobs}
