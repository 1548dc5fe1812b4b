"""The screen's duet route: each one-at-a-time level against the baseline measured at the same moment.

A duet study (``measurement: duet``, :mod:`tunelab.duet`) measures every planned run (arm B, side
``duet_side``) beside a baseline run on the other side (arm A, same ``duet_pair``). Each pair gives one
log ratio ``d = log(B / A)``: what the two sides suffered together cancels. The sides alternate over a
level's pairs, so a fixed difference between them (``delta``) enters with the orientation ``o`` (+1: A
on side 0) and is fitted away (crossover-balanced least squares, :func:`crossover_fit`)::

    d = mu + delta * o + e          % change of the level: 100 (exp(mu) - 1)

Per level: the Student-t 95 % interval of ``mu`` (``pairs - 2`` df), its two-sided p and the paired TOST
on the log scale with bounds ``log(1 -/+ sesoi/100)``. The levels' p-values are Holm-adjusted within
the knob (the ``posthoc`` rows) and the smallest adjusted p is the knob's family p; the verdict is the
one-way rule (:func:`tunelab.stats.oneway.oneway_verdict`). A level with fewer than :data:`MIN_PAIRS`
usable pairs, or pairs of one orientation only, is left out with a note.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.model import PartKind
from tunelab.stats._validate import level_matches, sorted_levels
from tunelab.stats.multiplicity import adjust
from tunelab.stats.screen_common import (ASSUMPTION_COLUMNS, EFFECT_COLUMNS, EQUIVALENCE_COLUMNS, OMNIBUS_COLUMNS,
                                         POSTHOC_TABLE_COLUMNS, RouteParts, TestedPart, untestable)
from tunelab.stats.screen_data import ScreenRuns

#: the tidy columns of a duet (plan bookkeeping of each trial)
PAIR, SIDE, ARM = "duet_pair", "duet_side", "duet_arm"
#: the fewest usable pairs (of both orientations) that estimate a level's effect, the side difference and a variance
MIN_PAIRS = 3
#: the route's test name (the verdict table's ``test``)
ROUTE = "duet+paired_t"


def crossover_fit(d: np.ndarray, orientation: np.ndarray) -> dict[str, float]:
    """Least squares ``d = mu + delta * orientation``: ``mu``, its standard error ``se``, ``df = n - 2``,
    the residual SD ``sd`` and ``delta`` (the log side difference, side 1 against side 0).

    >>> fit = crossover_fit(np.array([0.12, 0.08, 0.09, 0.11]), np.array([1.0, -1.0, -1.0, 1.0]))
    >>> round(fit["mu"], 6), round(fit["delta"], 6), fit["df"]
    (0.1, 0.015, 2)
    """
    n = len(d)
    design = np.column_stack([np.ones(n), orientation])
    beta, *_ = np.linalg.lstsq(design, d, rcond=None)
    residual = d - design @ beta
    df = n - 2
    sd = float(math.sqrt(residual @ residual / df)) if df > 0 else math.nan
    cov = np.linalg.inv(design.T @ design) * sd ** 2
    return {"mu": float(beta[0]), "delta": float(beta[1]), "se": float(math.sqrt(cov[0, 0])), "df": df, "sd": sd}


def pair_rows(pair: np.ndarray, arm: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the B runs whose pair has an A run, both with a positive finite ``value``, and that A's
    value (a pair's last A, should it have several). Plain arrays: a sequential validation judges its pairs at
    every look.

    >>> pair_rows(np.array([0, 0, 1, 1, 2]), np.array(["A", "B", "B", "A", "B"]), np.array([1.0, 2.0, 3.0, 0.0, 5.0]))
    (array([1]), array([1.]))
    """
    usable = np.isfinite(value) & (value > 0)
    is_a = usable & (arm == "A")
    partner = dict(zip(pair[is_a].tolist(), value[is_a].tolist()))
    rows = [int(i) for i in np.flatnonzero(usable & (arm == "B")) if pair[i] in partner]
    return np.array(rows, dtype=int), np.array([partner[pair[i]] for i in rows], dtype=float)


def paired_runs(data: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Every pair with a positive value on both arms (:func:`pair_rows`): the B run's columns, ``baseline_value``
    (its A partner's value), ``orientation`` (+1: A on side 0) and ``d = log(B / A)``."""
    if not {PAIR, SIDE, ARM} <= set(data.columns):
        return data.iloc[0:0].assign(baseline_value=[], orientation=[], d=[])
    value = pd.to_numeric(data[metric], errors="coerce").to_numpy(float)
    rows, base = pair_rows(data[PAIR].to_numpy(), data[ARM].to_numpy(), value)
    pairs = data.iloc[rows].reset_index(drop=True)
    paired = pd.DataFrame({"baseline_value": base, "orientation": np.where(pairs[SIDE].astype(int) == 1, 1.0, -1.0),
                           "d": np.log(value[rows] / base)}, index=pairs.index)
    # concat, not assign: a store's hundreds of counter columns leave the frame in many blocks, and
    # inserting into it warns "DataFrame is highly fragmented" once per level and metric
    return pd.concat([pairs, paired], axis=1)


def level_tables(pairs: pd.DataFrame, level: Any, base: Any, metric: dict[str, Any],
                 alpha: float) -> dict[str, dict[str, Any]]:
    """One level's rows of the part's tables (``effects``, ``equivalence``, ``posthoc`` before adjustment)."""
    fit = crossover_fit(pairs["d"].to_numpy(float), pairs["orientation"].to_numpy(float))
    mu, se, df = fit["mu"], fit["se"], fit["df"]
    half = float(ss.t.ppf(1 - alpha / 2, df)) * se
    pct = 100 * math.expm1(mu)
    low, high = 100 * math.expm1(mu - half), 100 * math.expm1(mu + half)
    t = mu / se if se > 0 else math.copysign(math.inf, mu) if mu else 0.0
    p = float(2 * ss.t.sf(abs(t), df))
    bounds = (math.log(1 - metric["sesoi_pct"] / 100), math.log(1 + metric["sesoi_pct"] / 100))
    p_lower = float(ss.t.sf((mu - bounds[0]) / se, df)) if se > 0 else float(mu <= bounds[0])
    p_upper = float(ss.t.cdf((mu - bounds[1]) / se, df)) if se > 0 else float(mu >= bounds[1])
    means = {"mean": float(pairs[metric["name"]].mean()), "baseline_mean": float(pairs["baseline_value"].mean())}
    return {"effects": {"level": level, "baseline": base, **means, "pct_change": pct, "ci_low": low, "ci_high": high},
            "equivalence": {"level": level, "baseline": base, "pct_change": pct, "lower_bound": -metric["sesoi_pct"],
                            "upper_bound": metric["sesoi_pct"], "p_lower": p_lower, "p_upper": p_upper,
                            "p": max(p_lower, p_upper), "equivalent": bool(max(p_lower, p_upper) < alpha),
                            "sesoi_pct": metric["sesoi_pct"]},
            "posthoc": {"method": "duet_paired_t", "group1": base, "group2": level, "estimate": pct, "ci_low": low,
                        "ci_high": high, "statistic": t, "p": p, "p_adj": p, "recommended": True},
            "fit": {**fit, "pairs": len(pairs)}}


def duet_part(rows: list[dict[str, dict[str, Any]]], knob: str) -> dict[str, Any]:
    """The tested part of a knob × metric from its levels' :func:`level_tables` (Holm over the levels)."""
    posthoc = pd.DataFrame([row["posthoc"] for row in rows], columns=POSTHOC_TABLE_COLUMNS[2:])
    posthoc["p_adj"] = adjust(posthoc["p"].to_numpy(float), method="holm")
    family_p = float(posthoc["p_adj"].min())
    fits = [row["fit"] for row in rows]
    reason = (f"duet: each level's runs paired with a baseline measured at the same moment on the other side "
              f"({', '.join(str(f['pairs']) for f in fits)} pairs per level), log ratios fitted with the side "
              "difference (crossover), Student-t; the levels Holm-adjusted")
    omnibus = pd.DataFrame([{"test": ROUTE, "source": knob, "statistic": float(posthoc["statistic"].abs().max()),
                             "df1": math.nan, "df2": float(min(f["df"] for f in fits)), "p": family_p,
                             "effect_size": math.nan, "effect_size_name": None, "recommended": True,
                             "reason": reason}], columns=OMNIBUS_COLUMNS[2:])
    return {"assumptions": pd.DataFrame(columns=ASSUMPTION_COLUMNS[2:]), "omnibus": omnibus, "posthoc": posthoc,
            "effects": pd.DataFrame([row["effects"] for row in rows], columns=EFFECT_COLUMNS[2:]),
            "equivalence": pd.DataFrame([row["equivalence"] for row in rows], columns=EQUIVALENCE_COLUMNS[2:]),
            "route": ROUTE, "reason": reason, "p": family_p, "eta2": math.nan, "kind": PartKind.ONEWAY}


def knob_metric(runs: ScreenRuns, knob: str, metric: dict[str, Any]) -> RouteParts:
    """One knob × metric: its levels' pairs against their concurrent baselines (see the module docstring)."""
    name, base = metric["name"], runs.baseline[knob]
    pairs = paired_runs(runs.data, name)
    if "varied_knob" in pairs.columns:
        pairs = pairs[pairs["varied_knob"] == knob]
    pairs = pairs[~level_matches(pairs[knob], base)] if len(pairs) else pairs
    rows, notes = [], []
    for level in sorted_levels(pairs[knob]) if len(pairs) else []:
        here = pairs[level_matches(pairs[knob], level)]
        if len(here) < MIN_PAIRS or here["orientation"].nunique() < 2:
            notes.append(f"{knob} × {name}: level {level!r} has {len(here)} usable pair(s)"
                         f"{'' if len(here) < MIN_PAIRS else ' of one orientation only'}; left out (a level needs "
                         f"{MIN_PAIRS} pairs with A on each side)")
            continue
        rows.append(level_tables(here, level, base, metric, runs.alpha))
    if not rows:
        return RouteParts(notes=notes) + untestable(knob, name, f"no level of {knob} has {MIN_PAIRS} usable duet "
                                                    "pairs with the baseline on each side", note=True)
    return RouteParts([TestedPart(knob, metric, duet_part(rows, knob))], notes=notes)


def duet_route(runs: ScreenRuns) -> RouteParts:
    """Every knob × metric of a one-at-a-time duet study (see the module docstring)."""
    return RouteParts.combine([knob_metric(runs, knob, metric) for knob in runs.knobs for metric in runs.metrics])


__all__ = ["MIN_PAIRS", "ROUTE", "crossover_fit", "duet_part", "duet_route", "knob_metric", "level_tables",
           "pair_rows", "paired_runs"]
