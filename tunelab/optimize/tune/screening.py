"""tune's screen: the screening runs built from a search space, their analysis, and what refine may reuse.

A knob is screened at two levels, its baseline and its *alternative*: the end of its range (or of its list of
values) farther from the baseline. One at a time, the baseline and each knob at its alternative; on a two-level
design (Plackett–Burman, fractional factorial: :mod:`tunelab.designs.generators`) the coded -1 is the baseline and
+1 the alternative. The analysis is :func:`tunelab.stats.screen`'s, on the measured runs as a tidy frame.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.designs import fractional_factorial, plackett_burman
from tunelab.model import DesignType, Metric, Verdict, level_value
from tunelab.optimize.history import config_key
from tunelab.optimize.space import SearchSpace

#: the plan columns of a screen run (Contract 2) tune records with each trial
PLAN_COLUMNS = ("run_id", "config_id", "replicate", "is_baseline", "varied_knob")


def alternative_level(space: SearchSpace, knob: str, baseline: Any) -> Any:
    """The level ``knob`` is screened at besides ``baseline``: the end of its range farther from it
    (the other end when the baseline is an end). Raises nothing: a one-value knob gets its baseline back."""
    dimension = space.dimensions[space.ids.index(knob)]
    sizes = np.array(dimension.sizes)
    at = np.array(dimension.encode(baseline))
    low, high = dimension.decode(np.zeros_like(sizes)), dimension.decode(sizes - 1)
    far_low, far_high = float(np.abs(at).sum()), float(np.abs(sizes - 1 - at).sum())
    first, second = (high, low) if far_high >= far_low else (low, high)
    return first if level_value(first) != level_value(baseline) else second


@dataclass(frozen=True)
class ScreenPlan:
    """The screen's runs (one row per measurement, in run order: plan columns then one column per knob)."""

    design: DesignType
    knobs: tuple[str, ...]
    baseline: dict[str, Any]
    alternative: dict[str, Any]
    runs: pd.DataFrame = field(repr=False)

    def config(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {kid: row[kid] for kid in self.knobs}


def coded_matrix(design: DesignType, knobs: int, runs: int) -> np.ndarray:
    """One replicate of a two-level ``design`` for ``knobs`` knobs in ``runs`` runs, coded ±1."""
    if design == DesignType.PLACKETT_BURMAN:
        return plackett_burman(knobs, runs=runs)
    return fractional_factorial(knobs, runs=runs).matrix


def screen_plan(space: SearchSpace, baseline: Mapping[str, Any], design: DesignType, runs: int,
                replicates: int, seed: int) -> ScreenPlan:
    """The screen's runs: ``replicates`` replicates of ``design`` (``runs`` runs each) over every knob of
    ``space``, each replicate in its own seeded random order."""
    knobs = tuple(space.ids)
    alternative = {kid: alternative_level(space, kid, baseline[kid]) for kid in knobs}
    if design == DesignType.OAT:
        configs = [(dict(baseline), None)] + [({**baseline, kid: alternative[kid]}, kid) for kid in knobs]
    else:
        matrix = coded_matrix(design, len(knobs), runs)
        configs = [({kid: (alternative[kid] if code > 0 else baseline[kid]) for kid, code in zip(knobs, row)}, None)
                   for row in matrix]
    rng = np.random.default_rng(seed)
    rows = []
    for replicate in range(replicates):
        for config_id in rng.permutation(len(configs)):
            config, varied = configs[int(config_id)]
            rows.append({"run_id": len(rows), "config_id": int(config_id), "replicate": replicate,
                         "is_baseline": all(level_value(config[k]) == level_value(baseline[k]) for k in knobs),
                         "varied_knob": varied, **{kid: config[kid] for kid in knobs}})
    frame = pd.DataFrame(rows, columns=[*PLAN_COLUMNS, *knobs])
    return ScreenPlan(design, knobs, {k: baseline[k] for k in knobs}, alternative, frame)


@dataclass(frozen=True)
class KnobCall:
    """The screen's call on one knob: whether refine searches it, the verdict and why (one line)."""

    knob: str
    kept: bool
    verdict: str
    why: str
    better_at_alternative: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"knob": self.knob, "kept": self.kept, "verdict": self.verdict, "why": self.why}


def screen_calls(plan: ScreenPlan, measured: pd.DataFrame, goal: Metric, alpha: float = 0.05) -> list[KnobCall]:
    """Which knobs refine searches: those the screen (:func:`tunelab.stats.screen` on the measured runs, one
    row per run with ``status`` and the goal's column) finds to change ``goal`` by its SESOI either way; on
    a two-level design (one replicate, most knobs inert) also those it cannot decide on whose estimated change
    reaches the SESOI (too few runs to rule them out). One at a time, each level against one shared baseline, an
    undecided knob is dropped: a baseline mean high by chance moves every knob's estimate together."""
    from tunelab.stats import screen           # deferred: scipy and statsmodels

    result = screen(measured, [goal], list(plan.knobs), plan.baseline, alpha=alpha,
                    design={"type": plan.design.value, "interactions": "none"})
    verdicts = result.verdicts[result.verdicts["metric"] == goal.name]
    undecided = plan.design != DesignType.OAT
    return [_call(knob, verdicts[verdicts["knob"] == knob], goal, undecided) for knob in plan.knobs]


def _call(knob: str, rows: pd.DataFrame, goal: Metric, keep_undecided: bool) -> KnobCall:
    """One knob's call from its verdict rows (one per screened level); ``keep_undecided``: keep an inconclusive
    knob whose estimate reaches the SESOI."""
    if rows.empty:
        return KnobCall(knob, False, "untested", "the screen returned no verdict for it")
    matters = rows[rows["verdict"] == Verdict.MATTERS]
    if len(matters):
        return KnobCall(knob, True, Verdict.MATTERS.value, _why(matters.iloc[0], goal),
                        bool((matters["direction"] == "better").any()))
    row = rows.iloc[0]
    big = abs(_pct(row)) >= goal.sesoi_pct
    if keep_undecided and row["verdict"] == Verdict.INCONCLUSIVE and big:
        return KnobCall(knob, True, Verdict.INCONCLUSIVE.value, _why(row, goal) + ": kept, its estimate reaches the "
                        "SESOI")
    return KnobCall(knob, False, _verdict_text(row["verdict"]), _why(row, goal))


def _pct(row: pd.Series) -> float:
    """The row's estimated change of the goal in percent (NaN when the screen gave none)."""
    value = row.get("effect_pct", row.get("pct_change", math.nan))
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def _verdict_text(verdict: Any) -> str:
    return verdict.value if isinstance(verdict, Verdict) else str(verdict)


def _why(row: pd.Series, goal: Metric) -> str:
    """One line: the verdict and the estimated change of the goal at the alternative level."""
    pct = _pct(row)
    change = f"{pct:+.1f} % {goal.name}" if math.isfinite(pct) else f"no estimate of {goal.name}"
    return f"{_verdict_text(row.get('verdict'))}, {change} (SESOI {goal.sesoi_pct:g} %)"


def warm_points(space: SearchSpace, fixed: Mapping[str, Any], measured: Sequence[tuple[dict[str, Any],
                dict[str, float], str]], projected: bool = False) -> list[tuple[dict[str, Any], dict[str, float], str]]:
    """The measurements refine may count as made: each ``(config, metrics, key)`` whose knobs outside ``space``
    are at ``fixed`` (their baselines), projected on ``space``; with ``projected`` the knobs outside are
    ignored (the screen found them not to matter). Failed measurements (any NaN) are left out."""
    out = []
    for config, metrics, key in measured:
        if not metrics or any(not math.isfinite(float(v)) for v in metrics.values()):
            continue
        if not projected and any(level_value(config[k]) != level_value(v) for k, v in fixed.items()):
            continue
        point = {kid: config[kid] for kid in space.ids}
        if config_key(space.decode(space.encode(point))) == config_key(point):
            out.append((point, dict(metrics), key))
    return out
