"""The screen's model route: factorial, fractional and Plackett–Burman designs, one model per metric.

:func:`model_route` fits, per metric, one model of all usable runs
(:func:`tunelab.stats.model_screen.model_parts`): every knob's main effect and the estimated
two-factor interactions, with the load profile as a factor (not a knob) of a profile-crossed
study and the testbed or the design's blocks as the model's block. It returns the parts, the
model's tables and its notes as a :class:`~tunelab.stats.screen_common.RouteParts`.
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import pandas as pd

from tunelab.errors import DataError
from tunelab.stats.blocking import TESTBED
from tunelab.stats.linear_model import MIN_RESIDUAL_DF, TermKind
from tunelab.stats.model_screen import model_part_tables, model_parts
from tunelab.stats.screen_common import PROFILE, RouteParts, TestedPart, untestable
from tunelab.stats.screen_data import ScreenRuns, metric_runs

#: the model route's block column when the design's blocks and the testbeds both vary: one block per pair
BLOCK_BY_TESTBED = f"block|{TESTBED}"


def model_route(runs: ScreenRuns) -> RouteParts:
    """Factorial, fractional and Plackett–Burman designs: one model per metric on all usable runs.

    With load ``profiles`` the profile joins the model's factors (reference: the first profile),
    with its interaction with every knob (:func:`profile_interactions`); it gets no verdict row.
    With ``testbeds`` the testbed is the model's additive block, or, when the design's own blocks
    vary too, one block per design block × testbed (:func:`model_block`).
    """
    return RouteParts.combine([_metric_model(runs, metric) for metric in runs.metrics])


def _metric_model(runs: ScreenRuns, metric: dict[str, Any]) -> RouteParts:
    """One metric's model and its parts."""
    name = metric["name"]
    sub, active, found = metric_runs(runs, name)
    if not active:
        return found
    data = runs.data
    design_block = "block" if "block" in data.columns and data["block"].nunique(dropna=True) > 1 else None
    sub, block = model_block(sub, design_block, bool(runs.testbeds))
    interactions = runs.design.interactions
    try:
        if runs.profiles and sub[PROFILE].nunique() > 1:
            reference = next(p for p in runs.profiles if (sub[PROFILE] == p).any())
            parts, tables = model_parts(sub, metric, [*active, PROFILE], {**runs.baseline, PROFILE: reference},
                                        runs.alpha, runs.seed, block=block,
                                        interactions=profile_interactions(sub, active, interactions, block))
            parts = [(label, part) for label, part in parts if label != PROFILE]
        else:
            parts, tables = model_parts(sub, metric, active, runs.baseline, runs.alpha, runs.seed, block=block,
                                        interactions=interactions)
    except DataError as exc:
        problem = RouteParts.combine([untestable(knob, name, f"the model of {name} cannot be fitted: {exc}")
                                      for knob in active])
        return found + problem + RouteParts(notes=[f"model of {name} not fitted: {exc}"])
    for label, part in parts:
        model_part_tables(part, label)
    notes = [f"{name}: {note}" for note in parts[0][1]["fit"].notes]
    terms = tables["model_terms"]
    aliased = terms[(terms["kind"] == TermKind.MAIN.value) & (terms["aliases"] != "")]
    if len(aliased):
        pairs = "; ".join(f"{t} = {a}" for t, a in zip(aliased["term"], aliased["aliases"]))
        notes.append(f"{name}: main effects are aliased with two-factor interactions (resolution III): {pairs}; "
                     "a main effect's estimate includes its aliases")
    return found + RouteParts([TestedPart(label, metric, part) for label, part in parts], [],
                              {key: [frame] for key, frame in tables.items()}, notes)


def profile_interactions(sub: pd.DataFrame, knobs: list[str], setting: Any, block: str | None) -> Any:
    """The model's interactions when the load profile is a factor: every knob × profile, plus the
    knob × knob pairs ``setting`` asks for (``auto``: every pair, when the knobs form a full
    factorial in the runs; a list: its pairs among ``knobs``; ``none``: none).

    Falls back to knob × profile only, then to ``auto``, when the runs leave fewer than
    :data:`~tunelab.stats.linear_model.MIN_RESIDUAL_DF` residual degrees of freedom.
    """
    with_profile = [(knob, PROFILE) for knob in knobs]
    if setting == "all":
        pairs = list(itertools.combinations(knobs, 2))
    elif setting == "auto":
        full = len(sub[knobs].astype(str).drop_duplicates()) == math.prod(sub[k].nunique() for k in knobs)
        pairs = list(itertools.combinations(knobs, 2)) if full else []
    elif isinstance(setting, (list, tuple)):
        pairs = [(a, b) for a, b in setting if a in knobs and b in knobs]
    else:
        pairs = []
    levels = {f: sub[f].nunique() for f in [*knobs, PROFILE]}
    fixed = 1 + sum(n - 1 for n in levels.values()) + (sub[block].nunique() - 1 if block else 0)
    for candidate in (pairs + with_profile, with_profile):
        size = fixed + sum((levels[a] - 1) * (levels[b] - 1) for a, b in candidate)
        if len(sub) - size >= MIN_RESIDUAL_DF:
            return candidate
    return "auto"


def model_block(sub: pd.DataFrame, design_block: str | None, testbeds: bool) -> tuple[pd.DataFrame, str | None]:
    """The model's block column: the design's ``block``, the ``testbed``, or both combined into one
    label per pair (``'2|lab1'`` in column :data:`BLOCK_BY_TESTBED`) when both vary in ``sub``.

    >>> runs = pd.DataFrame({"block": [1, 2, 1, 2], "testbed": ["a", "a", "b", "b"]})
    >>> frame, block = model_block(runs, "block", True)
    >>> block, frame[block].tolist()
    ('block|testbed', ['1|a', '2|a', '1|b', '2|b'])
    """
    if not testbeds or sub[TESTBED].nunique() < 2:
        return sub, design_block
    if design_block is None or sub[design_block].nunique() < 2:
        return sub, TESTBED
    label = sub[design_block].astype(str) + "|" + sub[TESTBED].astype(str)
    return sub.assign(**{BLOCK_BY_TESTBED: label}), BLOCK_BY_TESTBED
