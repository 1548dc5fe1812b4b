"""tune's screen: the screening runs built from a search space, their analysis, and what refine may reuse.

One at a time, the baseline and each knob at its *alternative*: the end of its range (or of its list of
values) farther from the baseline. On a two-level design (Plackett–Burman, fractional factorial:
:mod:`tunelab.designs.generators`) the coded -1 is the baseline and +1 is *changed*: the knob's runs at +1 cycle
through a few of its other levels (:func:`screen_levels`: its ends and points between, in a seeded random
order), so the screen asks "does moving this knob from its baseline matter?" over its whole range, not at
one end only (a knob whose best level is in the middle, as a buffer that helps until it costs memory, shows
no effect at its far end), and refine's warm start sees every part of the range. The analysis is
:func:`tunelab.stats.screen`'s, on the measured runs as a tidy frame, each knob coded baseline / changed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.designs import fractional_factorial, plackett_burman
from tunelab.model import DesignType, Direction, Metric, TrialStatus, Verdict, level_value
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


#: the levels a two-level screen visits between a knob's baseline and each end of its range (fractions of the way)
LADDER = (1.0, 2 / 3, 1 / 3)
#: the code of a knob's runs away from its baseline in a two-level screen's analysis
CHANGED, UNCHANGED = "changed", "baseline"


def screen_levels(space: SearchSpace, knob: str, baseline: Any) -> tuple[Any, ...]:
    """The levels a two-level screen sets ``knob`` to besides ``baseline``: the end of its range farther from it
    first, then the other end and the points :data:`LADDER` of the way from the baseline to each end (on the
    knob's grid; at most six, all the other values of a short list).

    >>> from tunelab.optimize.space import space_from_spec
    >>> space = space_from_spec({"a": {"kind": "int", "low": 0, "high": 90, "step": 10}})
    >>> screen_levels(space, "a", 30)
    (90, 0, 70, 10, 50, 20)
    """
    dimension = space.dimensions[space.ids.index(knob)]
    sizes = np.array(dimension.sizes)
    at = np.array(dimension.encode(baseline))
    ends = [sizes - 1, np.zeros_like(sizes)]
    if np.abs(at).sum() > np.abs(sizes - 1 - at).sum():
        ends.reverse()
    levels: dict[Any, Any] = {}
    for fraction in LADDER:
        for end in ends:
            level = dimension.decode(np.rint(at + fraction * (end - at)).astype(int))
            if level_value(level) != level_value(baseline):
                levels.setdefault(level_value(level), level)
    return tuple(levels.values())


@dataclass(frozen=True)
class ScreenPlan:
    """The screen's runs (one row per measurement, in run order: plan columns then one column per knob);
    ``alternative`` is each knob's far level, ``changed`` the levels a two-level design's +1 cycles through."""

    design: DesignType
    knobs: tuple[str, ...]
    baseline: dict[str, Any]
    alternative: dict[str, Any]
    runs: pd.DataFrame = field(repr=False)
    changed: dict[str, tuple[Any, ...]] = field(default_factory=dict)

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
    ``space``, each replicate in its own seeded random order; a two-level design's +1 of each knob cycles through
    :func:`screen_levels` over its runs, in a seeded random order."""
    knobs = tuple(space.ids)
    alternative = {kid: alternative_level(space, kid, baseline[kid]) for kid in knobs}
    rng = np.random.default_rng(seed)
    if design == DesignType.OAT:
        changed = {kid: (alternative[kid],) for kid in knobs}
        configs = [(dict(baseline), None)] + [({**baseline, kid: alternative[kid]}, kid) for kid in knobs]
        order = [(replicate, int(i)) for replicate in range(replicates) for i in rng.permutation(len(configs))]
        rows = [(replicate, i, *configs[i]) for replicate, i in order]
    else:
        changed = {kid: screen_levels(space, kid, baseline[kid]) or (alternative[kid],) for kid in knobs}
        matrix = np.tile(coded_matrix(design, len(knobs), runs), (replicates, 1))
        levels = {kid: _cycled(changed[kid], matrix[:, j] > 0, rng) for j, kid in enumerate(knobs)}
        order = [(replicate, replicate * runs + int(i)) for replicate in range(replicates)
                 for i in rng.permutation(runs)]
        rows = [(replicate, index % runs, {kid: levels[kid][index] if levels[kid][index] is not None
                                           else baseline[kid] for kid in knobs}, None) for replicate, index in order]
    frame = pd.DataFrame([{"run_id": run_id, "config_id": config_id, "replicate": replicate,
                           "is_baseline": all(level_value(config[k]) == level_value(baseline[k]) for k in knobs),
                           "varied_knob": varied, **{kid: config[kid] for kid in knobs}}
                          for run_id, (replicate, config_id, config, varied) in enumerate(rows)],
                         columns=[*PLAN_COLUMNS, *knobs])
    return ScreenPlan(design, knobs, {k: baseline[k] for k in knobs}, alternative, frame, changed)


def _cycled(levels: Sequence[Any], at_plus: np.ndarray, rng: np.random.Generator) -> list[Any]:
    """One entry per run: None at -1, and ``levels`` in turn over the +1 runs (shuffled, each as often)."""
    plus = np.flatnonzero(at_plus)
    picks = np.resize(rng.permutation(len(levels)), len(plus))
    out: list[Any] = [None] * len(at_plus)
    for run, pick in zip(rng.permutation(plus), picks):
        out[int(run)] = levels[int(pick)]
    return out


def coded_frame(plan: ScreenPlan, measured: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``measured`` with each knob coded :data:`UNCHANGED` / :data:`CHANGED` (a two-level design's analysis) and
    the coded baseline; one at a time, unchanged."""
    if plan.design == DesignType.OAT:
        return measured, dict(plan.baseline)
    coded = measured.copy()
    for kid in plan.knobs:
        base = level_value(plan.baseline[kid])
        coded[kid] = [UNCHANGED if level_value(v) == base else CHANGED for v in measured[kid]]
    return coded, {kid: UNCHANGED for kid in plan.knobs}


def best_levels(plan: ScreenPlan, measured: pd.DataFrame, goal: Metric) -> dict[str, Any]:
    """Each knob's level with the best mean of ``goal`` over the screen's usable runs, where that is not its
    baseline (a marginal mean: every other knob varies alike under a balanced design)."""
    usable = measured[measured["status"] == TrialStatus.OK] if "status" in measured else measured
    sign = 1.0 if goal.direction == Direction.MAXIMIZE else -1.0
    best = {}
    for kid in plan.knobs:
        best_level, best_mean = None, -math.inf
        groups: dict[Any, tuple[Any, list[float]]] = {}
        for level, value in zip(usable[kid], usable[goal.name].to_numpy(dtype=float)):
            groups.setdefault(level_value(level), (level, []))[1].append(value)
        for key, (level, values) in groups.items():
            mean = sign * float(np.mean(values))
            if mean > best_mean:
                best_level, best_mean = (None if key == level_value(plan.baseline[kid]) else level), mean
        if best_level is not None:
            best[kid] = best_level
    return best


@dataclass(frozen=True)
class KnobCall:
    """The screen's call on one knob: whether refine searches it, the verdict and why (one line)."""

    knob: str
    kept: bool
    verdict: str
    why: str
    #: the screen's estimated change of the goal away from the knob's baseline (percent; NaN: none): at its
    #: alternative one at a time, over its changed levels on a two-level design
    estimate_pct: float = math.nan

    def to_json(self) -> dict[str, Any]:
        return {"knob": self.knob, "kept": self.kept, "verdict": self.verdict, "why": self.why,
                "estimate_pct": self.estimate_pct}


def screen_calls(plan: ScreenPlan, measured: pd.DataFrame, goal: Metric, alpha: float = 0.05,
                 width: int | None = None) -> list[KnobCall]:
    """Which knobs refine searches, from :func:`tunelab.stats.screen` on the measured runs (one row per run with
    ``status`` and the goal's column).

    Kept first: the knobs found to change ``goal`` by its SESOI either way and, on a two-level design (one
    replicate, most knobs inert), those it cannot decide on whose estimated change reaches the SESOI (too few runs
    to rule them out). One at a time, each level against one shared baseline, an undecided knob is not kept this
    way: a baseline mean high by chance moves every knob's estimate together. When any knob is kept so, refine's
    ``width`` (how many knobs its measurements can search) is filled with the other knobs of largest estimated
    change (:func:`fill_width`): a knob acting through an interaction, or several effects each below the SESOI,
    show small main effects, and dropping them costs the optimum. None kept first: nothing to refine, whatever
    the width.
    """
    from tunelab.stats import screen           # deferred: scipy and statsmodels

    coded, baseline = coded_frame(plan, measured)
    result = screen(coded, [goal], list(plan.knobs), baseline, alpha=alpha,
                    design={"type": plan.design.value, "interactions": "none"})
    verdicts = result.verdicts[result.verdicts["metric"] == goal.name]
    undecided = plan.design != DesignType.OAT
    calls = [_call(knob, verdicts[verdicts["knob"] == knob], goal, undecided) for knob in plan.knobs]
    return fill_width(calls, width)


def fill_width(calls: list[KnobCall], width: int | None) -> list[KnobCall]:
    """``calls`` with refine's ``width`` filled (:func:`screen_calls`) by the other knobs of largest estimated
    change, in order, equivalent ones too (within the SESOI is not no effect: small effects add up in a winner).
    Nothing kept: unchanged.

    >>> calls = [KnobCall("a", True, "matters", ""), KnobCall("b", False, "inconclusive", "", estimate_pct=-2.0),
    ...          KnobCall("c", False, "inconclusive", "", estimate_pct=3.0),
    ...          KnobCall("d", False, "no effect (equivalent)", "", estimate_pct=4.0)]
    >>> [c.knob for c in fill_width(calls, 2) if c.kept], [c.knob for c in fill_width(calls, 9) if c.kept]
    (['a', 'd'], ['a', 'b', 'c', 'd'])
    """
    kept = sum(c.kept for c in calls)
    if not kept or width is None or kept >= width:
        return calls
    candidates = sorted((c for c in calls if not c.kept and math.isfinite(c.estimate_pct)),
                        key=lambda c: -abs(c.estimate_pct))
    added = {c.knob for c in candidates[:width - kept]}
    left = {c.knob for c in candidates[width - kept:]}
    return [replace(c, kept=True, why=f"{c.why}: kept, among the {width} largest estimated changes refine can "
                    "search") if c.knob in added
            else replace(c, why=f"{c.why}: dropped, a smaller estimated change than the {width} refine can search")
            if c.knob in left else c for c in calls]


def _call(knob: str, rows: pd.DataFrame, goal: Metric, keep_undecided: bool) -> KnobCall:
    """One knob's call from its verdict rows (one per screened level); ``keep_undecided``: keep an inconclusive
    knob whose estimate reaches the SESOI."""
    if rows.empty:
        return KnobCall(knob, False, "untested", "the screen returned no verdict for it")
    matters = rows[rows["verdict"] == Verdict.MATTERS]
    if len(matters):
        return KnobCall(knob, True, Verdict.MATTERS.value, _why(matters.iloc[0], goal),
                        estimate_pct=_pct(matters.iloc[0]))
    row = rows.iloc[0]
    big = abs(_pct(row)) >= goal.sesoi_pct
    if keep_undecided and row["verdict"] == Verdict.INCONCLUSIVE and big:
        return KnobCall(knob, True, Verdict.INCONCLUSIVE.value, _why(row, goal) + ": kept, its estimate reaches the "
                        "SESOI", estimate_pct=_pct(row))
    return KnobCall(knob, False, _verdict_text(row["verdict"]), _why(row, goal), estimate_pct=_pct(row))


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
