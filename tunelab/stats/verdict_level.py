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

from tunelab.formatting import fmt_ci, fmt_p_exact, fmt_pct, level_label
from tunelab.stats.numerics import first_best
from tunelab.model import Direction

#: the keys of each entry of a verdict row's ``levels``
LEVEL_KEYS = ["level", "effect_pct", "ci_low", "ci_high", "effect_abs", "abs_ci_low", "abs_ci_high", "p_adj"]


def baseline_pairs(posthoc: pd.DataFrame, baseline: Any, levels: list[Any]) -> list[float]:
    """The adjusted p of each level's pair with the baseline in a post-hoc table (NaN where absent)."""
    out = []
    for level in levels:
        match = [p for g1, g2, p in zip(posthoc["group1"], posthoc["group2"], posthoc["p_adj"])
                 if (g1 == baseline and g2 == level) or (g1 == level and g2 == baseline)]
        out.append(float(match[0]) if match else math.nan)
    return out


def level_comparisons(effects: pd.DataFrame, posthoc: pd.DataFrame, tost_p: pd.Series, effect_abs: Any,
                      abs_ci_low: Any = math.nan, abs_ci_high: Any = math.nan) -> pd.DataFrame:
    """Each non-baseline level's comparison with the baseline, in the shape :func:`choose_level` takes.

    ``effects`` has one row per level (``level``, ``baseline``, ``pct_change``, ``ci_low``,
    ``ci_high``), ``posthoc`` the pairs whose ``p_adj`` compares each level with the baseline
    (:func:`baseline_pairs`), ``tost_p`` each level's TOST p; the difference in the metric's units
    and its interval (``effect_abs``, ``abs_ci_low``, ``abs_ci_high``) are the route's own.
    """
    levels = effects["level"].tolist()
    base = effects["baseline"].tolist()[0] if len(effects) else None
    return pd.DataFrame({"level": pd.Series(levels, dtype=object), "effect_pct": effects["pct_change"].astype(float),
                         "ci_low": effects["ci_low"].astype(float), "ci_high": effects["ci_high"].astype(float),
                         "effect_abs": effect_abs, "abs_ci_low": abs_ci_low, "abs_ci_high": abs_ci_high,
                         "p_adj": baseline_pairs(posthoc, base, levels), "tost_p": tost_p.astype(float).tolist()})


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
    baseline, or a level whose 95 % interval excludes 0 while its (multiplicity-adjusted) comparison
    does not reach ``alpha``.

    >>> table = pd.DataFrame({"level": [576, 9000], "effect_pct": [-14.7, 1.0], "ci_low": [-25.1, -3.0],
    ...                       "ci_high": [-4.4, 5.0], "p_adj": [0.052, 0.9]})
    >>> print(posthoc_note(table, True, 0.01, 0.05, "Tukey HSD"))
    the omnibus test is significant (p_adj 0.01) but Tukey HSD finds no level different from the baseline \
(closest: 576, p_adj 0.052; it adjusts for every comparison it makes), though 576's unadjusted 95 % interval, \
-14.7 % [95 % CI -25.1 % to -4.4 %], excludes 0: the verdict follows Tukey HSD
    """
    if not len(comparisons):
        return None
    p_adj = comparisons["p_adj"].astype(float)
    clear = [(level, effect, low, high, p) for level, effect, low, high, p in
             zip(comparisons["level"].tolist(), comparisons["effect_pct"], comparisons["ci_low"],
                 comparisons["ci_high"], comparisons["p_adj"]) if not p < alpha and (low > 0 or high < 0)]
    clear.sort(key=lambda c: c[4])
    excludes = ""
    if clear:
        level, effect, low, high, _ = clear[0]
        excludes = (f", though {level_label(level)}'s unadjusted 95 % interval, {fmt_pct(effect)} "
                    f"{fmt_ci(low, high)}, excludes 0: the verdict follows {method}")
    if family_significant and not (p_adj < alpha).any():
        closest = int(p_adj.fillna(1.0).to_numpy().argmin())
        return (f"the omnibus test is significant (p_adj {fmt_p_exact(family_p_adj)}) but {method} finds no level "
                f"different from the baseline (closest: {level_label(comparisons['level'].tolist()[closest])}, p_adj "
                f"{fmt_p_exact(p_adj.iloc[closest])}; it adjusts for every comparison it makes){excludes}")
    if clear and family_significant:
        level, _, _, _, p = clear[0]
        return (f"{method} does not separate {level_label(level)} from the baseline (p_adj {fmt_p_exact(p)}; "
                f"it adjusts for every comparison it makes){excludes}")
    return None
