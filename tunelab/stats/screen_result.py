"""The screen's result: :class:`ScreenResult`, its JSON (:meth:`ScreenResult.to_json`) and schema.

Each table is a tidy DataFrame with the columns of :mod:`tunelab.stats.screen_common` and the
routes' modules; ``tunelab/stats/screen.schema.json`` (see docs/screen-json-schema.md) describes the JSON.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import pandas as pd

from tunelab.display import Displayed
from tunelab.formatting import fmt_pct, level_label
from tunelab.model import AnalysisKind, Verdict, json_value
from tunelab.stats.blocking import TESTBED_COLUMNS
from tunelab.stats.guards import GUARD_COLUMNS
from tunelab.stats.mechanisms import MECHANISM_COLUMNS
from tunelab.stats.model_screen import (MODEL_CONTRAST_COLUMNS, MODEL_EFFECT_COLUMNS, MODEL_EMMEANS_COLUMNS,
                                        MODEL_RESIDUAL_COLUMNS, MODEL_TERM_COLUMNS)
from tunelab.stats.range_screen import MORRIS_COLUMNS, RESPONSE_COLUMNS
from tunelab.stats.screen_common import ROUND_COLUMNS

SCHEMA_VERSION = 5


#: knobs named in the text repr's ``matters`` line before it says how many more there are
REPR_MATTERS = 4


@dataclass(frozen=True)
class ScreenResult(Displayed):
    """Everything :func:`tunelab.stats.screen` computed; each table is a tidy DataFrame.

    In a notebook it shows as the verdict table (``_repr_html_``, :mod:`tunelab.report.reprs`) and
    ``plot(metric=..., ax=...)`` draws the forest plot of the effects with the intervals the verdicts use
    (:func:`tunelab.report.figures.verdict_forest`); its text repr is a few lines.

    Attributes
    ----------
    design : AnalysisKind
        ``OAT`` (every run varies at most one knob from the baseline), ``FACTORIAL`` or ``RANGE``
        (a ``str`` enum: the JSON holds ``'oat'``, ``'factorial'`` or ``'range'``).
    settings : dict
        alpha, correction, metrics, knobs, baseline, n_boot, seed, and ``notes`` (list of str).
    assumptions : DataFrame
        ``[knob, metric, test, statistic, df1, df2, p, n]``; tests ``shapiro_wilk``, ``shapiro_wilk_standardized`` (residuals / group SD, used
        for the route), ``levene``,
        ``brown_forsythe``.
    omnibus : DataFrame
        ``[knob, metric, test, source, statistic, df1, df2, p, effect_size, effect_size_name,
        recommended, reason]``; tests ``anova`` (F, eta2), ``welch_anova`` (F), ``kruskal``
        (H, epsilon2) and, for factorial designs, ``anova_factorial`` rows whose ``knob`` and
        ``source`` are the model term (``'a'`` or ``'a:b'``) with partial eta2.
    posthoc : DataFrame
        ``[knob, metric, method, group1, group2, estimate, ci_low, ci_high, statistic, p, p_adj,
        recommended]``; methods ``tukey_hsd``, ``games_howell``, ``dunn``.
    effects : DataFrame
        ``[knob, metric, level, baseline, mean, baseline_mean, pct_change, ci_low, ci_high]``.
    equivalence : DataFrame
        ``[knob, metric, level, baseline, pct_change, lower_bound, upper_bound, p_lower, p_upper,
        p, equivalent, sesoi_pct]`` (TOST of each level against the baseline).
    verdicts : DataFrame
        One row per knob × metric (and per estimated interaction ``'a:b'`` × metric in the model
        route); columns in :data:`tunelab.stats.screen_common.VERDICT_COLUMNS`, see :func:`tunelab.stats.screen`;
        every interval in a row is at its ``ci_level``, ``1 - alpha`` of the look that decided it
        (:mod:`tunelab.stats.verdict_level`).
    model_terms, contrasts, emmeans, residuals, standardized_effects : DataFrame
        The model route's tables (empty for one-at-a-time designs), see
        :mod:`tunelab.stats.model_screen`: the model's tests per term with the family's ``p_adj``,
        level-vs-baseline and simple-effect contrasts, estimated marginal means (metric units),
        residual diagnostics, and standardised effects of one-df terms.
    response, morris : DataFrame
        The range route's tables (Latin hypercube, Morris; see :mod:`tunelab.stats.range_screen`):
        each knob's predicted change against its baseline value over its range, or its Morris
        elementary effects.
    guards : DataFrame
        Each guard metric's change at each non-baseline level (:func:`tunelab.stats.guards.guard_table`,
        columns :data:`tunelab.stats.guards.GUARD_COLUMNS`); empty without guards.
    rounds : DataFrame
        One row per look of a sequential study (:func:`tunelab.stats.rounds.screen_in_rounds`),
        columns :data:`tunelab.stats.screen_common.ROUND_COLUMNS`; empty, and not in ``tables`` (so not in the JSON), for a plain screen.
    testbeds : DataFrame
        The between-testbed spread per metric × testbed of a study run on several testbeds
        (:func:`tunelab.stats.blocking.between_testbed_spread`, columns
        :data:`tunelab.stats.blocking.TESTBED_COLUMNS`); empty with one testbed or none.
    mechanisms : DataFrame
        The kernel counters that change with each knob level that matters, under Benjamini–Hochberg
        FDR control across all counters and levels (:func:`tunelab.stats.mechanisms.mechanism_table`,
        columns :data:`tunelab.stats.mechanisms.MECHANISM_COLUMNS`); empty when the runs have no
        ``counter.*`` columns. Counters never change a verdict.
    """

    design: AnalysisKind
    settings: dict[str, Any]
    assumptions: pd.DataFrame
    omnibus: pd.DataFrame
    posthoc: pd.DataFrame
    effects: pd.DataFrame
    equivalence: pd.DataFrame
    verdicts: pd.DataFrame
    model_terms: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MODEL_TERM_COLUMNS))
    contrasts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MODEL_CONTRAST_COLUMNS))
    emmeans: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MODEL_EMMEANS_COLUMNS))
    residuals: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MODEL_RESIDUAL_COLUMNS))
    standardized_effects: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MODEL_EFFECT_COLUMNS))
    response: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RESPONSE_COLUMNS))
    morris: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MORRIS_COLUMNS))
    guards: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=GUARD_COLUMNS))
    rounds: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ROUND_COLUMNS))
    testbeds: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TESTBED_COLUMNS))
    mechanisms: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MECHANISM_COLUMNS))
    tables: tuple[str, ...] = field(default=("verdicts", "assumptions", "omnibus", "posthoc", "effects",
                                             "equivalence", "model_terms", "contrasts", "emmeans", "residuals",
                                             "standardized_effects", "response", "morris", "guards", "testbeds",
                                             "mechanisms"),
                                    repr=False)

    def __repr__(self) -> str:
        """A few lines: the design, the counts of each verdict, the knobs that matter, where the tables are."""
        verdicts = self.verdicts
        counts = verdicts["verdict"].astype(str).value_counts() if len(verdicts) else pd.Series(dtype=int)
        knobs, metrics = verdicts["knob"].nunique(), verdicts["metric"].nunique()
        settings = self.settings
        head = (f"ScreenResult: {AnalysisKind(self.design).value} screen, {knobs} knob(s) x {metrics} metric(s), "
                f"alpha {settings.get('alpha', 'n/a')} ({settings.get('correction', 'n/a')}): "
                + (", ".join(f"{n} {verdict}" for verdict, n in counts.items()) or "no verdicts"))
        matters = verdicts[verdicts["verdict"].astype(str) == Verdict.MATTERS.value]
        named = [f"{row.knob}{_at(row.level)} ({row.metric} {fmt_pct(row.effect_pct)})"
                 for row in matters.head(REPR_MATTERS).itertuples()]
        more = f" ... and {len(matters) - REPR_MATTERS} more" if len(matters) > REPR_MATTERS else ""
        lines = [head] + ([f"  matters: {'; '.join(named)}{more}"] if named else [])
        return "\n".join(lines + ["  full tables: .verdicts (one row per knob x metric), .effects, .posthoc, "
                                   ".equivalence, ...; .plot() draws the forest plot"])

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict following ``tunelab/stats/screen.schema.json`` (see docs/screen-json-schema.md).

        NaN becomes ``null``, numpy scalars become Python numbers, tuple levels become lists.
        """
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "design": AnalysisKind(self.design).value,
                               "settings": json_value(self.settings)}
        for name in self.tables:
            frame: pd.DataFrame = getattr(self, name)
            out[name] = [json_value(row) for row in frame.to_dict(orient="records")]
        return out


def _at(level: Any) -> str:
    """``'=1024'`` for a verdict's level, ``''`` when it has none (an interaction row).

    >>> _at(1024), _at((4096, 87380, 6291456)), _at(None), _at(float("nan"))
    ('=1024', '=4096 87380 6291456', '', '')
    """
    if level is None or (isinstance(level, float) and level != level):
        return ""
    return f"={level_label(level)}"


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that :meth:`ScreenResult.to_json` output follows."""
    text = resources.files("tunelab.stats").joinpath("screen.schema.json").read_text(encoding="utf-8")
    return json.loads(text)
