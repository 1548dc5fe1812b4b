"""The screen's one-at-a-time route: each knob on the baseline runs plus its own runs.

:func:`oat_route` takes, per knob, the runs whose other knobs sit at their baselines and, per
metric, drops the levels with too few runs (:func:`testable_levels`), then analyses the knob's
levels: one-way with the checks that pick the test (:func:`tunelab.stats.oneway.analyse_levels`),
the same with the testbed as a block, a pooled-error one-way model when some level has fewer
than :data:`MIN_RUNS_FOR_CHECKS` runs or the metric has an absolute SESOI, or a knob × profile
model for a profile-crossed study. It returns a :class:`~tunelab.stats.screen_common.RouteParts`.
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from tunelab.errors import DataError
from tunelab.model import AnalysisKind
from tunelab.stats._validate import level_matches, sorted_levels
from tunelab.stats.blocking import TESTBED
from tunelab.stats.model_screen import model_part_tables, model_parts
from tunelab.stats.oneway import analyse_levels, analyse_levels_blocked
from tunelab.stats.screen_common import PROFILE, RouteParts, TestedPart, failure_summary, rows_per_knob, untestable
from tunelab.stats.screen_data import ScreenRuns

#: below this many runs in some level of an OAT comparison the assumption checks say nothing, so the
#: screen uses the pooled-error model (log scale for ratio metrics) instead of choosing a route
MIN_RUNS_FOR_CHECKS = 3
#: the model tables an OAT knob × profile fit keeps (its residuals repeat the shared baseline runs)
PROFILE_OAT_TABLES = ("model_terms", "contrasts", "emmeans", "standardized_effects")


def oat_route(runs: ScreenRuns) -> RouteParts:
    """Every knob × metric of a one-at-a-time design (see the module docstring).

    With load ``profiles`` (a profile-crossed design) each knob's runs and the baseline runs of
    every profile are modelled as knob × profile (:func:`profile_oat_part`). With ``testbeds`` the
    testbed is an additive block of every knob's analysis when the knob's usable runs span two or more.
    """
    boot_cache: dict = {}   # baseline bootstrap resamples, shared by knobs with the same baseline runs
    rows_of = rows_per_knob(runs.data, runs.knobs, runs.baseline, AnalysisKind.OAT)
    failed_rows_of = rows_per_knob(runs.failed, runs.knobs, runs.baseline, AnalysisKind.OAT)
    extra = [*([PROFILE] if runs.profiles else []), *([TESTBED] if runs.testbeds else [])]
    pieces = []
    for knob in runs.knobs:
        # only the columns the analysis reads (copying every knob column per knob is slow)
        subset = runs.data.loc[rows_of[knob], list(dict.fromkeys([knob, *extra, *(m["name"] for m in runs.metrics)]))]
        failed_here = runs.failed[failed_rows_of[knob]]
        pieces += [_knob_metric(runs, knob, metric, subset[[knob, *extra, metric["name"]]], len(subset), failed_here,
                                boot_cache) for metric in runs.metrics]
    return RouteParts.combine(pieces)


def _knob_metric(runs: ScreenRuns, knob: str, metric: dict[str, Any], sub: pd.DataFrame, n_rows: int,
                 failed: pd.DataFrame, boot_cache: dict) -> RouteParts:
    """One knob × metric on the knob's ``sub`` runs (``n_rows`` of them before dropping missing values)."""
    name = metric["name"]
    if sub[name].isna().any():
        sub = sub.dropna(subset=[name])
    notes = [f"{knob} × {name}: {n_rows - len(sub)} run(s) without a value left out"] if len(sub) < n_rows else []
    if runs.testbeds:
        sub, more = without_lone_testbeds(sub, knob, name)
        notes += more
    sub, more, problem = testable_levels(sub, knob, runs.baseline[knob], failed, metric)
    notes += more
    if problem:
        return RouteParts(notes=notes) + untestable(knob, name, problem, note=True)
    block = None
    if runs.testbeds:
        sub, block, more = testbed_block(sub, knob, name)
        notes += more
    return RouteParts(notes=notes) + _analysis(runs, knob, metric, sub, block, boot_cache)


def _analysis(runs: ScreenRuns, knob: str, metric: dict[str, Any], sub: pd.DataFrame, block: str | None,
              boot_cache: dict) -> RouteParts:
    """The analysis of a knob × metric whose levels are testable (see the module docstring)."""
    name, base = metric["name"], runs.baseline[knob]
    if runs.profiles and sub[PROFILE].nunique() > 1:
        try:
            found, tables = profile_oat_part(sub, knob, metric, base, runs.profiles, runs.alpha, runs.seed, block)
        except DataError as exc:
            return untestable(knob, name, f"the model of {knob} × {PROFILE} cannot be fitted: {exc}", note=True)
        return RouteParts([TestedPart(label, metric, part) for label, part in found], [],
                          {key: [frame] for key, frame in tables.items()})
    notes = []
    if runs.profiles:
        notes.append(f"{knob} × {name}: usable runs at one load profile only ({sub[PROFILE].iloc[0]}), analysed "
                     "without the profile factor")
        sub = sub.drop(columns=PROFILE)
    smallest = int(sub.groupby(knob, sort=False).size().min())
    try:
        if metric.get("sesoi_abs") is not None or smallest < MIN_RUNS_FOR_CHECKS:
            found = pooled_oat_part(sub, knob, metric, base, runs.alpha, runs.seed, smallest, block)
            return RouteParts([TestedPart(label, metric, part) for label, part in found], notes=notes)
        if block:
            part = analyse_levels_blocked(sub, knob, metric, base, runs.alpha, runs.correction, runs.n_boot, runs.seed)
        else:
            part = analyse_levels(sub, knob, metric, base, runs.alpha, runs.correction, runs.n_boot, runs.seed,
                                  boot_cache)
    except DataError as exc:
        if block is None:
            raise DataError(f"knob {knob!r}, metric {name!r}: {exc}") from exc
        problem = f"{knob} with the {TESTBED} as a block cannot be analysed: {exc}"
        return RouteParts(notes=notes) + untestable(knob, name, problem, note=True)
    return RouteParts([TestedPart(knob, metric, part)], notes=notes)


def pooled_oat_part(sub: pd.DataFrame, knob: str, metric: dict[str, Any], base: Any, alpha: float,
                     seed: int, smallest: int, block: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """An OAT knob through the one-way model: its runs at some level are fewer than
    :data:`MIN_RUNS_FOR_CHECKS` (``smallest``), or the metric has an absolute SESOI. ``block``
    (the testbed column) enters the model as an additive block."""
    tiny = smallest < MIN_RUNS_FOR_CHECKS
    found, _ = model_parts(sub, metric, [knob], {knob: base}, alpha, seed, block=block,
                           robust="none" if tiny else "auto")
    for label, part in found:
        model_part_tables(part, label)
        if tiny:
            scale = "the log scale" if part["scale"] == "log" else "the linear scale"
            part["reason"] = (f"{smallest} run(s) at some level: too few to check normality or compare variances, so "
                              f"a one-way model on {scale} with the error pooled over the levels "
                              f"({'the same CV' if part['scale'] == 'log' else 'the same variance'} at every level)")
        if block:
            part["reason"] += f"; the {block} is an additive block of the model ({sub[block].nunique()} testbeds)"
    return found


def profile_oat_part(sub: pd.DataFrame, knob: str, metric: dict[str, Any], base: Any, profiles: Sequence[Any],
                      alpha: float, seed: int, block: str | None = None
                      ) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, pd.DataFrame]]:
    """An OAT knob of a profile-crossed design: its runs and the baseline runs of every profile,
    modelled as knob × profile (main effects and their interaction).

    Returns the knob's part (its effect averaged over the profiles; ``only_when`` names the
    profile when the interaction is significant and the effect is clear at some profiles only),
    the ``knob:profile`` interaction part, and the fit's tables restricted to this knob's terms
    (contrasts hold the knob's simple effect at each profile: ``at == 'profile=NAME'``). The
    profile's own main effect is not a part: the profile is not a knob. ``block`` (the testbed
    column) enters the model as an additive block.
    """
    reference = next(p for p in profiles if (sub[PROFILE] == p).any())
    found, model_tables = model_parts(sub, metric, [knob, PROFILE], {knob: base, PROFILE: reference}, alpha, seed,
                                      block=block, interactions=[(knob, PROFILE)])
    kept = [(label, part) for label, part in found if label != PROFILE]
    for label, part in kept:
        model_part_tables(part, label)
        if block:
            part["reason"] += f"; the {block} is an additive block of the model ({sub[block].nunique()} testbeds)"
    terms = {knob, f"{knob}:{PROFILE}"}
    out = {}
    for key in PROFILE_OAT_TABLES:
        frame = model_tables[key]
        column = "knob" if "knob" in frame.columns else "term"
        out[key] = frame[frame[column].isin(terms)].reset_index(drop=True)
    return kept, out



def without_lone_testbeds(sub: pd.DataFrame, knob: str, metric: str) -> tuple[pd.DataFrame, list[str]]:
    """``sub`` without the runs of testbeds that have a single run of this knob × metric, when two
    or more testbeds have more (a lone run only measures its testbed's offset, and has leverage 1),
    and the note saying so."""
    counts = sub[TESTBED].value_counts()
    lone = counts[counts < 2]
    if not len(lone) or len(counts) - len(lone) < 2:
        return sub, []
    names = sorted_levels(list(lone.index))
    return sub[~sub[TESTBED].isin(names)], [
        f"{knob} × {metric}: the single run on testbed(s) {', '.join(map(str, names))} left out (a testbed's only run "
        "measures its own offset, nothing of the knob)"]


def testbed_block(sub: pd.DataFrame, knob: str, metric: str) -> tuple[pd.DataFrame, str | None, list[str]]:
    """``(sub, 'testbed', [])`` when the knob's usable runs span two or more testbeds, else the runs
    without the testbed column, ``None`` and the note that the knob is analysed as on one testbed."""
    present = sorted_levels(sub[TESTBED])
    if len(present) > 1:
        return sub, TESTBED, []
    return sub.drop(columns=TESTBED), None, [f"{knob} × {metric}: usable runs on one testbed only ({present[0]}), "
                                             "analysed without the testbed block"]


def testable_levels(sub: pd.DataFrame, knob: str, base: Any, failed: pd.DataFrame,
                    spec: dict[str, Any]) -> tuple[pd.DataFrame, list[str], str | None]:
    """``(rows, notes, problem)``: the rows without the levels that have fewer than two usable runs,
    a note per level left out, and why the knob cannot be tested (the baseline or every other
    level gone, or a zero baseline mean for a % SESOI) or None.

    A level whose runs all failed (e.g. the load generator could not run at that setting) is
    itself a finding: the problem names the failures so the verdict table shows them.
    """
    metric = spec["name"]
    levels = sorted_levels(pd.concat([sub[knob], failed[knob]]) if len(failed) else sub[knob])
    counts = {i: int(level_matches(sub[knob], level).sum()) for i, level in enumerate(levels)}
    thin = [i for i, n in counts.items() if n < 2]
    described = {i: f"level {levels[i]!r}: {counts[i]} usable run(s){failure_summary(failed, knob, levels[i])}"
                 for i in thin}
    base_index = next((i for i, level in enumerate(levels) if level_matches(pd.Series([level]), base)[0]), None)
    if base_index is None or base_index in thin:
        return sub, [], (described.get(base_index) or f"baseline level {base!r} has no usable run") + \
            " (the baseline is needed for every comparison)"
    if len(levels) - len(thin) < 2:
        return sub, [], "; ".join(described[i] for i in thin) or f"only the baseline level {base!r} was run"
    notes = [f"{knob} × {metric}: {described[i]}; level left out (a level needs at least two runs)" for i in thin]
    for i in thin:
        sub = sub[~level_matches(sub[knob], levels[i])]
    base_mean = float(sub.loc[level_matches(sub[knob], base), metric].mean())
    if base_mean == 0 and spec.get("sesoi_abs") is None:
        return sub, notes, (f"the baseline level {base!r} has mean 0 for {metric!r}, so % changes and the SESOI (a % "
                            "of the baseline) are undefined; give the metric an absolute smallest effect of interest "
                            "(sesoi_abs, in its own units)")
    return sub, notes, None
