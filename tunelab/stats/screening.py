"""The screen: which knobs matter for which metric, and by how much? (:func:`screen`)

:func:`screen` is a dispatcher: a study run in rounds (a design with ``rounds`` and a
``round`` column) is replayed look by look (:func:`tunelab.stats.rounds.screen_in_rounds`),
anything else is one look (:func:`tunelab.stats.look.screen_look`), which picks the route of the
runs' :class:`~tunelab.model.AnalysisKind`:

========================  =====================================  ==========================================
kind                      route                                  module
========================  =====================================  ==========================================
``oat``                   each knob on the baseline + its runs   :mod:`tunelab.stats.oat_route`
``factorial``             one model per metric                   :mod:`tunelab.stats.model_route`
``range``                 response model / Morris effects        :mod:`tunelab.stats.range_route`
(rounds)                  looks in rounds                        :mod:`tunelab.stats.rounds`
========================  =====================================  ==========================================

The verdict table
-----------------
``verdicts`` has one row per knob × metric (and per interaction × metric of the model route);
docs/screen-json-schema.md defines every column once (the CLI, JSON, report and notebooks read them
so). In short: ``p_adj`` is the route's omnibus p adjusted over the family; each level has one
comparison with the baseline (the recommended post-hoc pair, or the model's Dunnett contrast);
``level`` is the level whose comparison decides the verdict (:mod:`tunelab.stats.verdict_level`:
the best significant gain of at least the SESOI, else the largest significant change, else the
level that decides the TOST equivalence test) and ``effect_pct`` with its interval are that
comparison's; ``significant`` means that level's comparison is; ``levels`` lists every significant
level; ``direction`` is set for ``matters`` rows only; ``verdict`` is ``matters`` (significant and
at least the SESOI), ``no effect (equivalent)`` (every level within ±SESOI by TOST),
``inconclusive``, ``untestable`` or ``not comparable`` (a guard tripped); ``posthoc_note`` says why
a post-hoc test and the row disagree, ``trade_off`` shows the cost a metric trades off against.

Designs, load profiles, testbeds
--------------------------------
One-at-a-time designs (every run has at most one knob away from its baseline) analyse each
knob on the baseline runs plus that knob's runs. Otherwise (factorial) each knob is analysed
on all runs grouped by its level, and the ``omnibus`` table also holds a type II factorial
ANOVA (main effects + 2-way interactions, blocks if a ``block`` column varies) of all runs.

Load profiles: when ``data`` has a ``profile`` column with two or more profiles (a design with
``load.profile: [low, overload]``; ``design['profiles']`` gives their order, the first is the
reference) the profile is a factor of the model that is not a knob: each OAT knob is modelled
as knob × profile on its runs and the baseline runs, a factorial's model adds the profile and its
interaction with every knob. Verdict rows ``KNOB:profile`` test the knob × load interaction,
a knob's row says ``only_when`` (e.g. ``profile=overload``) when its effect holds at some
profiles only, ``contrasts`` holds its effect at each profile (``at == 'profile=NAME'``, see
:func:`tunelab.stats.model_screen.profile_effects`) and ``settings['profiles']`` lists them.

Testbeds: when ``data`` has a ``testbed`` column with two or more testbeds among the usable
runs (a study run on several identical machines), the testbed is a blocking factor
(:mod:`tunelab.stats.blocking`, docs/stats-notes.md "Testbeds as blocks"): each OAT knob's
ANOVA and Welch rows become the F and HC3 Wald tests of the knob in ``metric ~ knob + testbed``
(``eta2`` its partial eta²), Tukey and Games–Howell compare the model's least-squares means,
Kruskal–Wallis and Dunn rank within testbeds (van Elteren), effects and TOST compare
least-squares means; the model route adds the testbed as its block (combined with the design's
own ``block`` into ``'block|testbed'`` labels when both vary). The ``testbeds`` table holds the
between-testbed spread and ``settings['testbeds']`` lists them. With one testbed, or none, the
screen is exactly the screen without the column.

Mechanisms: when ``data`` has kernel counter columns (``counter.<Group>.<Name>``, per second), the
dispatcher adds, after the verdicts, the counters that change with each knob level that matters
(:func:`tunelab.stats.mechanisms.mechanism_table`: pooled t-tests, Benjamini–Hochberg over all
counters and levels) as ``mechanisms`` and ``settings['mechanisms']``. Counters are never metrics:
the verdicts are the same with or without them.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import pandas as pd

from tunelab.model import Metric
from tunelab.stats.look import screen_look
from tunelab.stats.mechanisms import CounterCells, counter_columns, mechanism_settings, mechanism_table
from tunelab.stats.screen_data import check_alpha
from tunelab.stats.screen_result import ScreenResult
from tunelab.stats.rounds import DEFAULT_SPENDING, screen_in_rounds
from tunelab.stats.screen_design import ScreenDesign, as_screen_design


def screen(data: pd.DataFrame, metrics: Sequence[Metric | dict[str, Any]], knobs: list[str], baseline: dict[str, Any],
           alpha: float = 0.05, correction: str = "holm", n_boot: int = 1000, seed: int = 0,
           design: ScreenDesign | Mapping[str, Any] | None = None,
           guards: Mapping[str, Any] | None = None, counters: CounterCells | None = None) -> ScreenResult:
    """Screen knobs: which change which metric, by how much, and is the evidence strong enough?

    Parameters
    ----------
    data : DataFrame
        Tidy runs (``store.tidy()``): one column per knob id and per metric. If a ``status``
        column exists only ``'ok'`` and ``'flagged'`` rows are used; rows without a value of a
        metric are left out of that metric's analysis (and counted in ``settings['notes']``).
    metrics : list of Metric or dict
        :class:`tunelab.model.Metric` or ``{name, direction: 'maximize'|'minimize', sesoi_pct}``;
        ``sesoi_pct`` is the smallest effect of interest in percent of the baseline mean.
    knobs : list of str
        Knob columns.
    baseline : dict
        Knob -> baseline level (must occur in the data).
    alpha : float
        Significance level of every test and of the TOST equivalence tests.
    correction : {'holm', 'bonferroni', 'fdr_bh', 'none'}
        Adjustment of the recommended omnibus p-values over all knob × metric tests (also used
        for Dunn's pairwise p; ``'none'`` falls back to Holm there).
    n_boot, seed : int
        Bootstrap resamples and seed of the percent-change intervals.
    design : ScreenDesign or dict, optional
        What the screen knows of the design beyond the runs (:class:`tunelab.stats.screen_design.ScreenDesign`,
        which :func:`tunelab.study_data.design_info` builds; or its dict form): type, interactions, ranges,
        profiles, guards; with ``looks`` (a dict's ``rounds``: ``{max_replicates, spending}``) and a
        ``round`` column the study's looks are replayed by :func:`tunelab.stats.rounds.screen_in_rounds`.
    guards : dict, optional
        ``{"guards": [{name, direction, sesoi_pct | sesoi_abs}], "conditional_on": {metric: [guard]}}``
        (:func:`tunelab.study_data.design_info` builds it from the design and its load); None takes
        ``design.guards``. A screened metric conditional on a guard that degrades beyond its SESOI
        at the reported level becomes ``'not comparable'`` with the ``guard`` text (see
        :mod:`tunelab.stats.guards`); the ``guards`` table holds every guard's change per level.
    counters : CounterCells, optional
        ``data``'s counters summarised per cell (a large CSV: :func:`tunelab.study_data.read_csv_summarising_counters`).

    Returns
    -------
    ScreenResult
        ``verdicts`` has one row per knob × metric (and per interaction × metric of the model
        route); the module docstring says what each column holds and how the designs, load
        profiles and testbeds are read (docs/screen-json-schema.md defines every column);
        ``mechanisms`` holds the counters that moved with each level that matters (empty without
        counter columns).
    """
    check_alpha(alpha)
    view = as_screen_design(design)
    looks = view.looks if view else None
    if looks and isinstance(data, pd.DataFrame) and "round" in data.columns:
        result = screen_in_rounds(data, metrics, knobs, baseline, alpha=alpha, correction=correction, n_boot=n_boot,
                                  seed=seed, guards=guards, max_replicates=looks.max_replicates,
                                  spending=looks.spending or DEFAULT_SPENDING, design=view)
    else:
        result = screen_look(data, metrics, knobs, baseline, alpha, correction, n_boot, seed, view, guards)
    return with_mechanisms(result, data, counters)


def with_mechanisms(result: ScreenResult, data: pd.DataFrame, counters: CounterCells | None = None) -> ScreenResult:
    """``result`` with its ``mechanisms`` table and ``settings['mechanisms']`` when ``data`` has counter
    columns or ``counters`` summarises them (:mod:`tunelab.stats.mechanisms`); unchanged otherwise."""
    if counters is None and not counter_columns(data):
        return result
    table = mechanism_table(data, result.verdicts, result.settings["knobs"], result.settings["baseline"],
                            result.design, counters=counters)
    return replace(result, mechanisms=table,
                   settings={**result.settings, "mechanisms": mechanism_settings(data, table, counters=counters)})
