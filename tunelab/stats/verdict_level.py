"""The level that decides a verdict, every significant level, and why a post-hoc page may disagree.

One rule for every level-based route (the OAT one-way route and the model route), written down in
docs/screen-json-schema.md and docs/stats-notes.md:

* Each non-baseline level has **one comparison with the baseline**: the recommended post-hoc test's
  pair (Tukey HSD, Games–Howell or Dunn: OAT one-way route) or the model's Dunnett contrast (model
  route), with its adjusted p (``p_adj``), and the level's effect with its 95 % interval
  (percentile bootstrap of the ratio of means, or the Dunnett interval back-transformed from the
  log scale: both lie in (-100 %, +inf)).
* A level is **significant** when the row's omnibus test is significant over the family
  (``p_adj < alpha`` of the row) *and* its own comparison is (``p_adj < alpha`` of the pair).
* The **level** of the row (the one whose effect decides the verdict): among the significant
  levels, the one that improves the metric most if one improves it by at least the SESOI, else the
  one with the largest change; with no significant level, the one with the largest TOST p-value
  (the level that decides the intersection–union equivalence test: the row is equivalent only if
  it is).
* ``significant`` (the row) = some level is significant; ``levels`` lists every significant level.
"""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

from tunelab.formatting import fmt_ci, fmt_level, fmt_p_exact, fmt_pct, level_label
from tunelab.stats.numerics import first_best
from tunelab.model import Direction

#: the keys of each entry of a verdict row's ``levels``
LEVEL_KEYS = ["level", "effect_pct", "ci_low", "ci_high", "effect_abs", "abs_ci_low", "abs_ci_high", "p_adj"]
#: post-hoc methods whose pair interval is the test's own simultaneous ``1 - alpha`` interval of the
#: difference of means (metric units, ``group2 - group1``): it excludes 0 exactly when ``p_adj < alpha``
DIFFERENCE_INTERVALS = frozenset({"tukey_hsd", "games_howell"})
#: the columns of :func:`verdict_intervals`
INTERVAL_COLUMNS = ["level", "ci_low", "ci_high", "abs_ci_low", "abs_ci_high", "from_posthoc"]


def baseline_pairs(posthoc: pd.DataFrame, baseline: Any, levels: list[Any]) -> list[float]:
    """The adjusted p of each level's pair with the baseline in a post-hoc table (NaN where absent)."""
    out = []
    for level in levels:
        match = [p for g1, g2, p in zip(posthoc["group1"], posthoc["group2"], posthoc["p_adj"])
                 if (g1 == baseline and g2 == level) or (g1 == level and g2 == baseline)]
        out.append(float(match[0]) if match else math.nan)
    return out


def pair_difference(posthoc: pd.DataFrame, baseline: Any, level: Any) -> tuple[float, float]:
    """The interval of ``mean(level) - mean(baseline)`` of the pair in a post-hoc table whose method is in
    :data:`DIFFERENCE_INTERVALS` (either orientation), else ``(nan, nan)``.

    >>> table = pd.DataFrame({"method": ["games_howell"], "group1": [2], "group2": [1], "ci_low": [3.0],
    ...                       "ci_high": [5.0]})
    >>> pair_difference(table, 2, 1)      # group2 - group1 = mean(1) - mean(2)
    (3.0, 5.0)
    >>> pair_difference(table, 1, 2)
    (-5.0, -3.0)
    """
    methods = posthoc["method"] if "method" in posthoc.columns else pd.Series([None] * len(posthoc), dtype=object)
    for method, g1, g2, low, high in zip(methods, posthoc["group1"], posthoc["group2"], posthoc["ci_low"],
                                         posthoc["ci_high"]):
        if method not in DIFFERENCE_INTERVALS:
            continue
        if g1 == baseline and g2 == level:
            return float(low), float(high)
        if g1 == level and g2 == baseline:
            return -float(high), -float(low)
    return math.nan, math.nan


def as_percent(low: float, high: float, mean: float, baseline_mean: float) -> tuple[float, float]:
    """An interval of a difference of means as % of the baseline mean; a change below -100 % is impossible
    for a positive metric, so with both means positive the low end stops at -100 % (this never changes
    whether the interval excludes 0).

    >>> as_percent(-6.0, 2.0, 97.0, 100.0), as_percent(-130.0, -50.0, 10.0, 100.0)
    ((-6.0, 2.0), (-100.0, -50.0))
    """
    ends = sorted((100.0 * low / baseline_mean, 100.0 * high / baseline_mean))
    if mean > 0 and baseline_mean > 0:
        ends[0] = max(ends[0], -100.0)
    return ends[0], ends[1]


def verdict_intervals(effects: pd.DataFrame, posthoc: pd.DataFrame) -> pd.DataFrame:
    """Each level's interval at the verdict's level, columns :data:`INTERVAL_COLUMNS`.

    ``effects`` has one row per level (``level``, ``baseline``, ``mean``, ``baseline_mean``,
    ``ci_low``, ``ci_high``), ``posthoc`` the pairs of the test that decides (computed at the
    verdict's alpha). Where that test is Tukey HSD or Games–Howell the interval is its simultaneous
    interval of the difference (``abs_ci_*``, metric units) and the same as % of the baseline mean
    (:func:`as_percent`), so it excludes 0 exactly when the pair's ``p_adj < alpha``; otherwise
    (Dunn, a duet's paired t, the model's Dunnett contrasts) the effects table's own interval.
    """
    rows = []
    for row in effects.to_dict(orient="records"):
        low, high = pair_difference(posthoc, row["baseline"], row["level"])
        base_mean = float(row.get("baseline_mean", math.nan))
        usable = all(math.isfinite(v) for v in (low, high, base_mean)) and base_mean != 0
        if usable:
            pct = as_percent(low, high, float(row["mean"]), base_mean)
        else:
            pct, low, high = (float(row["ci_low"]), float(row["ci_high"])), math.nan, math.nan
        rows.append({"level": row["level"], "ci_low": pct[0], "ci_high": pct[1], "abs_ci_low": low,
                     "abs_ci_high": high, "from_posthoc": usable})
    frame = pd.DataFrame(rows, columns=INTERVAL_COLUMNS)
    frame["level"] = pd.Series([row["level"] for row in rows], dtype=object)
    return frame


def level_comparisons(effects: pd.DataFrame, posthoc: pd.DataFrame, tost_p: pd.Series, effect_abs: Any,
                      abs_ci_low: Any = math.nan, abs_ci_high: Any = math.nan) -> pd.DataFrame:
    """Each non-baseline level's comparison with the baseline, in the shape :func:`choose_level` takes.

    ``effects`` has one row per level (``level``, ``baseline``, ``pct_change``, ``ci_low``,
    ``ci_high``), ``posthoc`` the pairs whose ``p_adj`` compares each level with the baseline
    (:func:`baseline_pairs`), ``tost_p`` each level's TOST p; the difference in the metric's units
    and its interval (``effect_abs``, ``abs_ci_low``, ``abs_ci_high``) are the route's own, unless the
    deciding test has its own interval of the difference (:func:`verdict_intervals`). ``ci_low`` and
    ``ci_high`` are the interval at the verdict's level; ``effects_ci_low``/``effects_ci_high`` keep the
    effects table's (unadjusted) one.
    """
    levels = effects["level"].tolist()
    base = effects["baseline"].tolist()[0] if len(effects) else None
    own = verdict_intervals(effects, posthoc) if {"mean", "baseline_mean"} <= set(effects.columns) else None
    low, high = (own["ci_low"], own["ci_high"]) if own is not None else (effects["ci_low"], effects["ci_high"])
    if own is not None and own["from_posthoc"].any():
        abs_ci_low, abs_ci_high = own["abs_ci_low"].to_numpy(float), own["abs_ci_high"].to_numpy(float)
    return pd.DataFrame({"level": pd.Series(levels, dtype=object), "effect_pct": effects["pct_change"].astype(float),
                         "ci_low": pd.Series(low, dtype=float).to_numpy(), "ci_high": pd.Series(high, dtype=float).to_numpy(),
                         "effect_abs": effect_abs, "abs_ci_low": abs_ci_low, "abs_ci_high": abs_ci_high,
                         "p_adj": baseline_pairs(posthoc, base, levels), "tost_p": tost_p.astype(float).tolist(),
                         "effects_ci_low": effects["ci_low"].astype(float).to_numpy(),
                         "effects_ci_high": effects["ci_high"].astype(float).to_numpy()})


def choose_level(comparisons: pd.DataFrame, family_significant: bool, alpha: float, direction: str, sesoi: float,
                 absolute: bool = False) -> tuple[int, list[int]]:
    """``(position of the row's level, positions of the significant levels)`` in ``comparisons``.

    ``comparisons`` has one row per non-baseline level with ``effect_pct`` (or ``effect_abs`` when
    ``absolute``), ``p_adj`` (its comparison with the baseline) and ``tost_p``; the rule is the
    module docstring's. The significant levels come in the order of the rule (the decisive first).

    >>> table = pd.DataFrame({"effect_pct": [-99.6, -84.8, -1.0], "p_adj": [1e-9, 1e-6, 0.8],
    ...                       "tost_p": [1.0, 1.0, 0.01]})
    >>> choose_level(table, True, 0.05, "maximize", 5.0)
    (0, [0, 1])
    >>> choose_level(table, False, 0.05, "maximize", 5.0)
    (0, [])
    """
    size = comparisons["effect_abs" if absolute else "effect_pct"].astype(float).tolist()
    gain = [s if direction == Direction.MAXIMIZE else -s for s in size]
    p_adj = comparisons["p_adj"].astype(float).tolist()
    significant = [i for i, p in enumerate(p_adj) if family_significant and p < alpha] if len(size) else []
    if significant:
        gains = [i for i in significant if gain[i] >= sesoi]
        first = _first_best(gains, gain) if gains else _first_best(significant, [abs(s) for s in size])
        rest = sorted((i for i in significant if i != first), key=lambda i: -abs(size[i]))
        return first, [first, *rest]
    tost = comparisons["tost_p"].astype(float).fillna(1.0).tolist()
    worst = max(range(len(size)), key=lambda i: (tost[i], abs(size[i]) if math.isfinite(size[i]) else 0.0))
    return worst, []


def _first_best(positions: list[int], scores: list[float]) -> int:
    """The position with the largest score, the first among scores tied to rounding (:func:`first_best`)."""
    return int(first_best(pd.Series([scores[i] for i in positions], index=positions, dtype=float)))


def level_entries(comparisons: pd.DataFrame, positions: list[int]) -> list[dict[str, Any]]:
    """The ``levels`` of a verdict row: :data:`LEVEL_KEYS` of the levels at ``positions``."""
    rows = comparisons.to_dict(orient="records")
    return [{key: rows[i].get(key, math.nan) for key in LEVEL_KEYS} for i in positions]


def posthoc_note(comparisons: pd.DataFrame, family_significant: bool, family_p_adj: float, alpha: float,
                 method: str) -> str | None:
    """One sentence where the post-hoc comparisons with the baseline and what else the row shows
    disagree, else None: an omnibus test that is significant while no level differs from the
    baseline, a level whose unadjusted interval in the effects table (``effects_ci_low``/``_high``,
    at ``1 - alpha``) excludes 0 while its (multiplicity-adjusted) comparison does not reach
    ``alpha``, or a level whose comparison is clear while the family's test is not (the family decides).

    >>> table = pd.DataFrame({"level": [576, 9000], "effect_pct": [-14.7, 1.0], "ci_low": [-25.1, -3.0],
    ...                       "ci_high": [-4.4, 5.0], "p_adj": [0.052, 0.9]})
    >>> print(posthoc_note(table, True, 0.01, 0.05, "Tukey HSD"))
    the omnibus test is significant (p_adj 0.01) but Tukey HSD finds no level different from the baseline \
(closest: 576, p_adj 0.052; it adjusts for every comparison it makes), though 576's unadjusted 95 % interval, \
-14.7 % [95 % CI -25.1 % to -4.4 %], excludes 0: the verdict follows Tukey HSD
    >>> print(posthoc_note(table.assign(p_adj=[0.001, 0.9]), False, 0.028, 0.0083, "Games–Howell"))
    the family's test decides: the row's p_adj 0.028 is not below alpha 0.0083 (the knob × metric \
family is adjusted together), so no level counts as different from the baseline, though Games–Howell alone \
would separate 576 (p_adj 0.001)
    """
    if not len(comparisons):
        return None
    p_adj = comparisons["p_adj"].astype(float)
    low = comparisons["effects_ci_low"] if "effects_ci_low" in comparisons else comparisons["ci_low"]
    high = comparisons["effects_ci_high"] if "effects_ci_high" in comparisons else comparisons["ci_high"]
    clear = [(level, effect, lo, hi, p) for level, effect, lo, hi, p in
             zip(comparisons["level"].tolist(), comparisons["effect_pct"], low, high, comparisons["p_adj"])
             if not p < alpha and (lo > 0 or hi < 0)]
    clear.sort(key=lambda c: c[4])
    excludes = ""
    level_text = fmt_level(1 - alpha)
    if clear:
        level, effect, lo, hi, _ = clear[0]
        excludes = (f", though {level_label(level)}'s unadjusted {level_text} interval, {fmt_pct(effect)} "
                    f"{fmt_ci(lo, hi, level=1 - alpha)}, excludes 0: the verdict follows {method}")
    if family_significant and not (p_adj < alpha).any():
        closest = int(p_adj.fillna(1.0).to_numpy().argmin())
        return (f"the omnibus test is significant (p_adj {fmt_p_exact(family_p_adj)}) but {method} finds no level "
                f"different from the baseline (closest: {level_label(comparisons['level'].tolist()[closest])}, p_adj "
                f"{fmt_p_exact(p_adj.iloc[closest])}; it adjusts for every comparison it makes){excludes}")
    if clear and family_significant:
        level, _, _, _, p = clear[0]
        return (f"{method} does not separate {level_label(level)} from the baseline (p_adj {fmt_p_exact(p)}; "
                f"it adjusts for every comparison it makes){excludes}")
    return _family_note(comparisons, family_significant, family_p_adj, alpha, method)


def _family_note(comparisons: pd.DataFrame, family_significant: bool, family_p_adj: float, alpha: float,
                 method: str) -> str | None:
    """The sentence for a level its own comparison separates from the baseline while the row's family test
    (adjusted over every knob × metric) does not reach ``alpha``: the family decides; else None."""
    p_adj = comparisons["p_adj"].astype(float)
    if family_significant or not math.isfinite(float(family_p_adj)) or not (p_adj < alpha).any():
        return None
    first = int(p_adj.fillna(1.0).to_numpy().argmin())
    return (f"the family's test decides: the row's p_adj {fmt_p_exact(family_p_adj)} is not below alpha "
            f"{fmt_p_exact(alpha)} (the knob × metric family is adjusted together), so no level counts as different "
            f"from the baseline, though {method} alone would separate "
            f"{level_label(comparisons['level'].tolist()[first])} (p_adj {fmt_p_exact(p_adj.iloc[first])})")
