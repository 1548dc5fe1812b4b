"""The screen's range route: Latin-hypercube and Morris designs, whose knobs take many values once.

A level-by-level comparison is impossible there (one run per value), so a Latin hypercube is read
through :func:`tunelab.stats.response.range_effects` (linear and quadratic terms per knob, the
predicted change from the baseline value across the range) and a Morris design through
:func:`tunelab.stats.response.morris_effects` (elementary effects, μ* and σ). Effects are judged
against the SESOI on the model's scale: ``log(1 + sesoi_pct/100)`` on the log scale, ``sesoi_abs``
for absolute metrics.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from tunelab.errors import DataError
from tunelab.model import DesignType, Direction, PartKind, Verdict
from tunelab.stats.model_screen import metric_scale, to_metric_scale
from tunelab.stats.screen_common import direction_of
from tunelab.stats.screen_design import ScreenDesign
from tunelab.stats.response import morris_effects, range_effects

RESPONSE_COLUMNS = ["metric", "knob", "x", "scale", "estimate", "ci_low", "ci_high", "effect_pct", "effect_ci_low",
                    "effect_ci_high"]
MORRIS_COLUMNS = ["metric", "knob", "scale", "mu", "mu_star", "sigma", "mu_star_conf"]
#: a Morris grid's levels when the design does not say
MORRIS_LEVELS = 4


def _sesoi(metric: Mapping[str, Any], scale: str, values: pd.Series) -> tuple[float, float]:
    """The SESOI on the model's scale, and the reference mean that turns a linear change into a %."""
    mean = float(values.mean()) if len(values) else math.nan
    if metric.get("sesoi_abs") is not None:
        return float(metric["sesoi_abs"]), mean
    if scale == "log":
        return math.log1p(metric["sesoi_pct"] / 100.0), mean
    if not mean > 0:
        raise DataError(f"{metric['name']!r} has a mean of {mean:.3g}, so a % SESOI is undefined; give the metric "
                        "an absolute smallest effect (sesoi_abs)")
    return metric["sesoi_pct"] / 100.0 * mean, mean


def range_parts(data: pd.DataFrame, metric: Mapping[str, Any], knobs: list[str], baseline: Mapping[str, Any],
                design: ScreenDesign, alpha: float, seed: int) -> tuple[list[tuple[str, dict]], dict]:
    """Parts (one per knob) and tables (``response`` or ``morris``) of a range design's metric."""
    name = metric["name"]
    values = pd.to_numeric(data[name], errors="coerce").dropna()
    scale = metric_scale(metric, values)
    sesoi, mean = _sesoi(metric, scale, values)
    ranges = design.ranges or {}
    if design.type == DesignType.MORRIS:
        points = design.points
        if points is None:
            raise DataError("a Morris screen needs the design's points in trajectory order; screen the study's store")
        bounds = {k: (ranges[k]["low"], ranges[k]["high"]) for k in knobs}
        table = morris_effects(points[knobs], data, name, knobs, bounds, levels=int(design.levels or MORRIS_LEVELS),
                               log_y=scale == "log", seed=seed)
        parts = [(row.knob, _morris_part(row, metric, scale, sesoi, mean)) for row in table.itertuples(index=False)]
        return parts, {"morris": table.assign(metric=name, scale=scale)[MORRIS_COLUMNS]}
    x_scale = {k: (ranges.get(k) or {}).get("scale", "linear") for k in knobs}
    terms, curves = range_effects(data, name, knobs, baseline, x_scale=x_scale, log_y=scale == "log", alpha=alpha)
    parts = [(row.knob, _regression_part(row, metric, scale, sesoi, mean, alpha)) for row in terms.itertuples(index=False)]
    response = curves.assign(metric=name, scale=scale)
    for column, source in (("effect_pct", "estimate"), ("effect_ci_low", "ci_low"), ("effect_ci_high", "ci_high")):
        response[column] = [to_metric_scale(v, scale, mean) for v in response[source]]
    return parts, {"response": response[RESPONSE_COLUMNS]}


def reported_change(better: tuple[float, ...], worse: tuple[float, ...], sesoi: float) -> tuple[float, ...]:
    """Which of a knob's two extreme predicted changes ``(estimate, ci_low, ci_high, at)`` a verdict reports.

    The change in the better direction when its CI excludes 0 and it reaches the SESOI (a gain worth
    having); else a change whose CI excludes 0 (a clear loss outranks a gain the data cannot tell from
    none); else the larger of the two.

    >>> reported_change((15.8, -23.0, 75.0, 2000), (-99.6, -99.8, -99.2, 17), sesoi=5.0)[3]
    17
    >>> reported_change((12.0, 4.0, 20.0, 9000), (-99.6, -99.8, -99.2, 17), sesoi=5.0)[3]
    9000
    >>> reported_change((3.0, -1.0, 7.0, 9000), (-2.0, -6.0, 2.0, 17), sesoi=5.0)[3]
    9000
    """
    def clear(change: tuple[float, ...]) -> bool:
        return bool(change[1] > 0 or change[2] < 0)

    if clear(better) and abs(better[0]) >= sesoi:
        return better
    if clear(worse):
        return worse
    if clear(better):
        return better
    return better if abs(better[0]) >= abs(worse[0]) else worse


def _regression_part(row: Any, metric: Mapping[str, Any], scale: str, sesoi: float, mean: float,
                     alpha: float) -> dict[str, Any]:
    maximize = metric["direction"] == Direction.MAXIMIZE
    better = (row.change_max, row.change_max_low, row.change_max_high, row.x_at_max) if maximize else \
        (row.change_min, row.change_min_low, row.change_min_high, row.x_at_min)
    worse = (row.change_min, row.change_min_low, row.change_min_high, row.x_at_min) if maximize else \
        (row.change_max, row.change_max_low, row.change_max_high, row.x_at_max)
    chosen = reported_change(better, worse, sesoi)
    reason = (f"range design: one regression of {'log ' if scale == 'log' else ''}{metric['name']} on every knob's "
              f"value ({row.shape} term{'s' if row.shape == 'quadratic' else ''} for this knob); the effect is the "
              f"predicted change from the baseline {row.baseline:g} to {chosen[3]:g}, the most extreme value in "
              f"[{row.x_min:g}, {row.x_max:g}]")
    return {"kind": PartKind.RANGE, "p": float(row.p), "route": "range_regression", "reason": reason, "eta2": math.nan,
            "scale": scale, "sesoi": sesoi, "mean": mean, "change": chosen, "max_abs_ci": float(row.max_abs_ci),
            "effects": pd.DataFrame(), "equivalence": pd.DataFrame(), "posthoc": pd.DataFrame(),
            "omnibus": pd.DataFrame([{"test": "range_regression", "source": row.knob, "statistic": row.statistic,
                                      "df1": row.df1, "df2": row.df2, "p": row.p, "effect_size": math.nan,
                                      "effect_size_name": None, "recommended": True, "reason": reason}]),
            "assumptions": pd.DataFrame()}


def _morris_part(row: Any, metric: Mapping[str, Any], scale: str, sesoi: float, mean: float) -> dict[str, Any]:
    low, high = row.mu_star - row.mu_star_conf, row.mu_star + row.mu_star_conf
    reason = (f"Morris elementary effects: mu*={row.mu_star:.3g} (±{row.mu_star_conf:.3g}), sigma={row.sigma:.3g} over "
              f"the knob's range on the {scale} scale, against a SESOI of {sesoi:.3g}; elementary effects give no "
              "p-value, so these verdicts carry no multiplicity control")
    return {"kind": PartKind.MORRIS, "p": math.nan, "route": "morris", "reason": reason, "eta2": math.nan,
            "scale": scale,
            "sesoi": sesoi, "mean": mean, "change": (float(row.mu_star), low, high, math.nan), "mu": float(row.mu),
            "max_abs_ci": float(high), "morris_low": float(low), "effects": pd.DataFrame(),
            "equivalence": pd.DataFrame(), "posthoc": pd.DataFrame(), "omnibus": pd.DataFrame(),
            "assumptions": pd.DataFrame()}


def range_verdict(part: dict[str, Any], metric: Mapping[str, Any], p_adj: float, alpha: float) -> dict[str, Any]:
    """The verdict row (without knob and metric) of a range part."""
    scale, sesoi, mean = part["scale"], part["sesoi"], part["mean"]
    estimate, low, high, at = part["change"]
    absolute = metric.get("sesoi_abs") is not None
    if part["kind"] is PartKind.MORRIS:
        significant = bool(part["morris_low"] > sesoi)
        relevant = significant
    else:
        significant = bool(p_adj < alpha) if not math.isnan(p_adj) else False
        relevant = significant and abs(estimate) >= sesoi
    equivalent = bool(part["max_abs_ci"] < sesoi)
    verdict = Verdict.MATTERS if relevant else (Verdict.EQUIVALENT if equivalent else Verdict.INCONCLUSIVE)
    sign = 1.0 if metric["direction"] == Direction.MAXIMIZE else -1.0
    linear = scale == "linear"
    pct = [to_metric_scale(v, scale, mean) for v in (estimate, low, high)] if not absolute else [math.nan] * 3
    return {"test": part["route"], "reason": part["reason"], "p": part["p"], "p_adj": p_adj,
            "significant": significant, "level": None if math.isnan(at) else (int(at) if float(at).is_integer() else at),
            "effect_pct": pct[0], "effect_ci_low": pct[1], "effect_ci_high": pct[2], "eta2": math.nan,
            "direction": direction_of(verdict, sign * part.get("mu", estimate)),
            "relevant": relevant, "equivalent": equivalent, "verdict": verdict.value,
            "effect_abs": estimate if linear else math.nan, "effect_abs_ci_low": low if linear else math.nan,
            "effect_abs_ci_high": high if linear else math.nan, "scale": scale, "only_when": None, "levels": [],
            "posthoc_note": None}

