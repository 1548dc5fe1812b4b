"""The screen's inputs checked and prepared: usable and failed runs, metrics, knobs, the analysis kind.

:func:`prepare_runs` turns the arguments of :func:`tunelab.stats.screen` into a
:class:`ScreenRuns`: every argument checked (one :class:`~tunelab.errors.DataError` naming the
fix), the metrics as dicts, the usable runs apart from the failed ones, the :class:`AnalysisKind`
that picks the route, the load profiles and testbeds in the data, and the guards.

:func:`metric_runs` is what the model and range routes share: one metric's runs and the knobs that vary in them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.errors import DataError
from tunelab.model import (DEFAULT_SESOI_PCT, METRIC_SCALES, RANGE_DESIGNS, USABLE_STATUSES, AnalysisKind, Direction,
                           Metric)
from tunelab.stats._validate import level_matches, sorted_levels
from tunelab.stats.blocking import TESTBED, TESTBED_COLUMNS, between_testbed_spread, present_testbeds, spread_note
from tunelab.stats.effects import check_bootstrap
from tunelab.stats.guards import check_guards
from tunelab.stats.multiplicity import METHODS
from tunelab.stats.screen_common import PROFILE, RouteParts, failure_summary, untestable
from tunelab.stats.screen_design import ScreenDesign, as_screen_design


@dataclass(frozen=True)
class ScreenRuns:
    """The checked runs and settings of one look of the screen: what every route takes."""

    #: the usable runs (status ``ok``/``flagged``), with a profile and a testbed column when the study has several
    data: pd.DataFrame
    #: the other runs (failed, interrupted): they only explain untestable levels
    failed: pd.DataFrame
    #: the metrics as checked dicts (``name``, ``direction``, ``sesoi_pct``/``sesoi_abs``, ``scale``)
    metrics: list[dict[str, Any]]
    knobs: list[str]
    baseline: dict[str, Any]
    #: which route reads the runs (OAT, model, range)
    kind: AnalysisKind
    alpha: float
    correction: str
    n_boot: int
    seed: int
    #: what the screen knows of the design (an empty view when none was given)
    design: ScreenDesign = field(default_factory=ScreenDesign)
    profiles: list[Any] = field(default_factory=list)
    testbeds: list[Any] = field(default_factory=list)
    #: guards, the metrics measured on survivors of each guard, and trade-offs
    #: (:func:`tunelab.stats.guards.check_guards`)
    guard_specs: list[dict[str, Any]] = field(default_factory=list)
    dependents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    trade_offs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the between-testbed table
    spread: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TESTBED_COLUMNS))
    #: what preparing the runs had to say
    notes: list[str] = field(default_factory=list)


def prepare_runs(data: pd.DataFrame, metrics: Sequence[Metric | dict[str, Any]], knobs: list[str],
                 baseline: dict[str, Any], alpha: float, correction: str, n_boot: int, seed: int,
                 design: ScreenDesign | Mapping[str, Any] | None, guards: Mapping[str, Any] | None) -> ScreenRuns:
    """The arguments of :func:`tunelab.stats.screen` checked and prepared (see :class:`ScreenRuns`)."""
    check_alpha(alpha)
    check_bootstrap(n_boot, seed)
    if correction not in METHODS:
        raise DataError(f"unknown correction {correction!r}; choose one of {', '.join(METHODS)}")
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    metrics = normalise_metrics(metrics, data)
    knobs = list(knobs) if not isinstance(knobs, str) else knobs
    view = as_screen_design(design)
    design = view or ScreenDesign()
    guard_specs, dependents, trade_offs = check_guards(guards if guards is not None else design.guards, metrics)
    check_knobs(data, knobs, baseline, need_runs=design.type not in RANGE_DESIGNS)
    failed = data.iloc[0:0]
    if "status" in data.columns:
        usable = data["status"].isin(USABLE_STATUSES)
        data, failed = data[usable], data[~usable]
    kind = analysis_kind(data, knobs, baseline, view)
    notes: list[str] = []
    profiles = profile_levels(data, knobs, design)
    if profiles:
        data, notes = with_profiles(data, kind, profiles)
    testbeds = present_testbeds(data, knobs)
    spread = pd.DataFrame(columns=TESTBED_COLUMNS)
    if testbeds:
        data, more = with_testbeds(data)
        spread = between_testbed_spread(data, metrics, [*knobs, *([PROFILE] if profiles else [])], baseline)
        notes += [*more, spread_note(spread, testbeds)]
        if kind == AnalysisKind.RANGE:
            notes.append(f"the Latin hypercube / Morris route has no block term: the runs of the {len(testbeds)} "
                         "testbeds are pooled, so a testbed offset adds to the noise (see the testbeds table)")
    return ScreenRuns(data, failed, metrics, knobs, dict(baseline), kind, alpha, correction, n_boot, seed, design,
                      profiles, testbeds, guard_specs, dependents, trade_offs, spread, notes)


def check_alpha(alpha: float) -> None:
    """DataError unless ``0 < alpha < 1``."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0 < alpha < 1:
        raise DataError(f"alpha must be between 0 and 1, got {alpha!r}; 0.05 is the usual choice")


def analysis_kind(data: pd.DataFrame, knobs: list[str], baseline: dict[str, Any],
                  design: ScreenDesign | None) -> AnalysisKind:
    """The route's kind: ``RANGE`` for a space-filling design (by its type, or without a design by
    :func:`looks_like_ranges`), else :func:`design_kind` of the runs."""
    kind = design_kind(data, knobs, baseline)
    if design is None:
        return AnalysisKind.RANGE if kind == AnalysisKind.FACTORIAL and looks_like_ranges(data, knobs) else kind
    if design.type in RANGE_DESIGNS:
        return AnalysisKind.RANGE
    return kind


def design_kind(data: pd.DataFrame, knobs: list[str], baseline: dict[str, Any]) -> AnalysisKind:
    """``AnalysisKind.OAT`` when every run has at most one knob away from its baseline, else ``FACTORIAL``.

    >>> runs = pd.DataFrame({"a": [0, 1, 0], "b": [0, 0, 1]})
    >>> design_kind(runs, ["a", "b"], {"a": 0, "b": 0}).value
    'oat'
    """
    off = np.zeros(len(data), dtype=int)
    for knob in knobs:
        off += ~level_matches(data[knob], baseline[knob])
    return AnalysisKind.OAT if (off <= 1).all() else AnalysisKind.FACTORIAL


def normalise_metrics(metrics: Sequence[Metric | dict[str, Any]], data: pd.DataFrame) -> list[dict[str, Any]]:
    """Each metric as a checked ``{name, direction, sesoi_pct}`` dict (the form ``settings`` and the JSON keep)."""
    if isinstance(metrics, (dict, Metric)) or not metrics:
        raise DataError("metrics must be a non-empty list of Metric or {name, direction, sesoi_pct} dicts, "
                        f"got {metrics!r}")
    out = []
    for spec in metrics:
        if isinstance(spec, Metric):
            spec = spec.to_json()
        if not isinstance(spec, dict) or "name" not in spec:
            raise DataError(f"each metric must be a dict with a 'name', got {spec!r}")
        name = spec["name"]
        direction = spec.get("direction", "maximize")
        if direction not in (Direction.MAXIMIZE, Direction.MINIMIZE):
            raise DataError(f"metric {name!r}: direction must be 'maximize' or 'minimize', got {direction!r}")
        sesoi, sesoi_abs, scale = spec.get("sesoi_pct"), spec.get("sesoi_abs"), spec.get("scale", "auto")
        if sesoi_abs is not None and sesoi is not None:
            raise DataError(f"metric {name!r}: give sesoi_pct (a % of the baseline) or sesoi_abs (a difference in "
                            "the metric's units), not both")
        if sesoi is None and sesoi_abs is not None:
            sesoi = DEFAULT_SESOI_PCT
        if not isinstance(sesoi, (int, float)) or isinstance(sesoi, bool) or not sesoi > 0:
            raise DataError(f"metric {name!r}: sesoi_pct must be a positive number (smallest effect of interest, "
                            f"in %), got {sesoi!r}")
        if sesoi_abs is not None and (not isinstance(sesoi_abs, (int, float)) or isinstance(sesoi_abs, bool)
                                      or not math.isfinite(sesoi_abs) or not sesoi_abs > 0):
            raise DataError(f"metric {name!r}: sesoi_abs must be a positive number in the metric's units, "
                            f"got {sesoi_abs!r}")
        if scale not in METRIC_SCALES or (scale == "log" and sesoi_abs is not None):
            raise DataError(f"metric {name!r}: scale must be one of {', '.join(METRIC_SCALES)} (log not with "
                            f"sesoi_abs), got {scale!r}")
        if name not in data.columns:
            raise DataError(f"unknown metric column {name!r}; the data has: {', '.join(map(str, data.columns))}")
        item = {"name": name, "direction": direction, "sesoi_pct": float(sesoi)}
        if sesoi_abs is not None:
            item["sesoi_abs"] = float(sesoi_abs)
        if scale != "auto":
            item["scale"] = scale
        out.append(item)
    names = [m["name"] for m in out]
    if len(set(names)) != len(names):
        raise DataError(f"metrics are listed twice: {names}")
    return out


def check_knobs(data: pd.DataFrame, knobs: list[str], baseline: dict[str, Any], need_runs: bool = True) -> None:
    if isinstance(knobs, str) or not knobs:
        raise DataError(f"knobs must be a non-empty list of knob column names, got {knobs!r}")
    for knob in knobs:
        if knob not in data.columns:
            raise DataError(f"unknown knob column {knob!r}; the data has: {', '.join(map(str, data.columns))}")
        if knob not in baseline:
            raise DataError(f"no baseline level for knob {knob!r}; pass baseline={{{knob!r}: <level>}}")
        levels = sorted_levels(data[knob].dropna())
        if need_runs and not level_matches(data[knob], baseline[knob]).any():
            raise DataError(f"baseline {baseline[knob]!r} of knob {knob!r} never occurs in the data; "
                            f"its levels are {levels}")


def looks_like_ranges(data: pd.DataFrame, knobs: list[str]) -> bool:
    """A space-filling design without its design file: some numeric knob takes at least 5 values and
    most configurations have a value of it of their own (so levels cannot be compared)."""
    configs = len(data[knobs].astype(str).drop_duplicates())
    for knob in knobs:
        values = data[knob]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            distinct = values.nunique()
            if distinct >= 5 and distinct > configs / 2:
                return True
    return False


def profile_levels(data: pd.DataFrame, knobs: Sequence[str], design: ScreenDesign | None = None) -> list[Any]:
    """The load profiles of a profile-crossed study, reference first; empty unless the data's
    ``profile`` column holds two or more profiles (and is not one of ``knobs``).

    The order is the design's (``design.profiles``, from :func:`tunelab.study_data.design_info`),
    then any other profile in sorted order; the first profile is the reference level of the
    profile factor (its contrasts and the interaction contrasts are against it).

    >>> profile_levels(pd.DataFrame({"profile": ["overload", "low", "low"]}), ["k"], ScreenDesign(profiles=("low", "overload")))
    ['low', 'overload']
    >>> profile_levels(pd.DataFrame({"profile": ["low", "low"]}), ["k"])
    []
    """
    if PROFILE in knobs or PROFILE not in data.columns:
        return []
    present = sorted_levels(data[PROFILE].dropna())
    if len(present) < 2:
        return []
    listed = [p for p in (design.profiles if design else ()) if p in present]
    return listed + [p for p in present if p not in listed]


def with_profiles(data: pd.DataFrame, kind: AnalysisKind, profiles: list[Any]) -> tuple[pd.DataFrame, list[str]]:
    """The usable runs that name a profile, and the notes: the runs left out, and what the profiles mean."""
    if kind == AnalysisKind.RANGE:
        raise DataError(f"the data holds {len(profiles)} load profiles ({', '.join(map(str, profiles))}), but a "
                        "Latin hypercube or Morris screen has no load factor; screen each profile's runs on their own")
    notes = []
    missing = int(data[PROFILE].isna().sum())
    if missing:
        notes.append(f"{missing} run(s) without a load profile left out (the other runs name one)")
        data = data[data[PROFILE].notna()]
    notes.append(f"load profiles {', '.join(map(str, profiles))}: the profile is a factor of every knob's model, not a "
                 f"knob; each knob's effect is estimated at every profile (contrasts at '{PROFILE}=...') and its "
                 f"knob × {PROFILE} interaction is tested (verdict rows 'knob:{PROFILE}'); the reference profile is "
                 f"{profiles[0]}")
    return data, notes


def with_testbeds(data: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The usable runs that name a testbed, and a note on the others."""
    missing = int(data[TESTBED].isna().sum())
    if not missing:
        return data, []
    return data[data[TESTBED].notna()], [f"{missing} run(s) without a testbed left out (the other runs name one)"]


def metric_runs(runs: ScreenRuns, name: str) -> tuple[pd.DataFrame, list[str], RouteParts]:
    """The runs with a value of metric ``name``, the knobs that vary among them, and the notes and
    untestable rows of the others (shared by the model and range routes)."""
    data = runs.data
    sub = data.dropna(subset=[name])
    found = RouteParts(notes=[f"{name}: {len(data) - len(sub)} run(s) without a value left out"]
                       if len(sub) < len(data) else [])
    active = [k for k in runs.knobs if sub[k].nunique() > 1]
    for knob in (k for k in runs.knobs if k not in active):
        failures = failure_summary(runs.failed, knob, runs.baseline[knob]) if len(runs.failed) else ""
        found = found + untestable(knob, name, f"only one level of {knob} has usable runs of {name}{failures}")
    return sub, active, found
