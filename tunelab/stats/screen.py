"""The screening analysis: which knobs matter for which metric, and by how much?

:func:`screen` runs, for every knob × metric, the assumption checks, the three omnibus tests
(ANOVA, Welch, Kruskal–Wallis) with their post-hocs (Tukey, Games–Howell, Dunn), the percent
change of every level against the baseline with a bootstrap CI, and TOST equivalence tests; it
picks the test whose assumptions hold, adjusts the chosen omnibus p-values for the whole family
of knob × metric tests, and states a verdict per knob × metric.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.errors import DataError
from tunelab.model import DEFAULT_SESOI_PCT, METRIC_SCALES, USABLE_STATUSES, Metric, Verdict, json_value
from tunelab.stats._validate import Groups, check_input, encode, level_matches, sorted_levels
from tunelab.stats.assumptions import _homoscedasticity_rows, _normality_row, _sd_ratio
from tunelab.stats.blocking import (TESTBED, TESTBED_COLUMNS, _stratified_dunn_table, _stratified_kruskal_values,
                                    between_testbed_spread, fit_blocked, lsmeans_effects, lsmeans_equivalence,
                                    present_testbeds, spread_note)
from tunelab.stats.effects import _pct_change_table, _sample, check_bootstrap
from tunelab.stats.equivalence import _tost_row
from tunelab.stats.guards import GUARD_COLUMNS, apply_guards, check_guards, guard_table
from tunelab.stats.linear_model import MIN_RESIDUAL_DF
from tunelab.stats.model_screen import (MODEL_CONTRAST_COLUMNS, MODEL_EFFECT_COLUMNS, MODEL_EMMEANS_COLUMNS,
                                        MODEL_RESIDUAL_COLUMNS, MODEL_TERM_COLUMNS, model_parts, model_verdict)
from tunelab.stats.multiplicity import METHODS, adjust
from tunelab.stats.range_screen import MORRIS_COLUMNS, RESPONSE_COLUMNS, range_parts, range_verdict
from tunelab.stats.omnibus import _anova_values, _kruskal_values, _welch_values
from tunelab.stats.posthoc import POSTHOC_COLUMNS, _dunn_table, _games_howell_table, _lsmeans_table, _tukey_table

#: Shapiro–Wilk p below this means "clearly non-normal" -> Kruskal–Wallis + Dunn
NORMALITY_ALPHA = 0.01
#: Brown–Forsythe p below this means "unequal variances" -> Welch + Games–Howell
VARIANCE_ALPHA = 0.05
#: equal variances are assumed (ANOVA + Tukey) only if, besides Brown–Forsythe p >= VARIANCE_ALPHA,
#: the largest group SD is at most this multiple of the smallest; a non-significant pre-test alone
#: is no evidence of equal variances with 3-5 replicates (see docs/stats-notes.md, "Route choice")
SD_RATIO_MAX = 1.5

VERDICT_COLUMNS = ["knob", "metric", "test", "reason", "p", "p_adj", "significant", "best_level", "effect_pct",
                   "effect_ci_low", "effect_ci_high", "eta2", "direction", "relevant", "equivalent", "verdict",
                   "effect_abs", "effect_abs_ci_low", "effect_abs_ci_high", "scale", "only_when", "guard"]
ASSUMPTION_COLUMNS = ["knob", "metric", "test", "statistic", "df1", "df2", "p", "n"]
OMNIBUS_COLUMNS = ["knob", "metric", "test", "source", "statistic", "df1", "df2", "p", "effect_size",
                   "effect_size_name", "recommended", "reason"]
POSTHOC_TABLE_COLUMNS = ["knob", "metric", "method", *POSTHOC_COLUMNS, "recommended"]
EFFECT_COLUMNS = ["knob", "metric", "level", "baseline", "mean", "baseline_mean", "pct_change", "ci_low", "ci_high"]
EQUIVALENCE_COLUMNS = ["knob", "metric", "level", "baseline", "pct_change", "lower_bound", "upper_bound",
                       "p_lower", "p_upper", "p", "equivalent", "sesoi_pct"]
SCHEMA_VERSION = 2
#: design types read as space-filling (range) designs: regression or elementary effects, not levels
RANGE_DESIGNS = ("latin_hypercube", "morris")
#: below this many runs in some level of an OAT comparison the assumption checks say nothing, so the
#: screen uses the pooled-error model (log scale for ratio metrics) instead of choosing a route
MIN_RUNS_FOR_CHECKS = 3


#: the looks of a sequential screen (:attr:`ScreenResult.rounds`, see :mod:`tunelab.stats.sequential`)
ROUND_COLUMNS = ["round", "runs", "replicates", "information_fraction", "alpha_spent", "alpha_nominal", "decided",
                 "inconclusive"]


@dataclass(frozen=True)
class ScreenResult:
    """Everything :func:`screen` computed; each table is a tidy DataFrame.

    Attributes
    ----------
    design : str
        ``'oat'`` (every run varies at most one knob from the baseline) or ``'factorial'``.
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
        route); columns in :data:`VERDICT_COLUMNS`, see :func:`screen`.
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
        One row per look of a sequential study (:func:`tunelab.stats.sequential.sequential_screen`),
        columns :data:`ROUND_COLUMNS`; empty, and not in ``tables`` (so not in the JSON), for a plain screen.
    testbeds : DataFrame
        The between-testbed spread per metric × testbed of a study run on several testbeds
        (:func:`tunelab.stats.blocking.between_testbed_spread`, columns
        :data:`tunelab.stats.blocking.TESTBED_COLUMNS`); empty with one testbed or none.
    """

    design: str
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
    tables: tuple[str, ...] = field(default=("verdicts", "assumptions", "omnibus", "posthoc", "effects",
                                             "equivalence", "model_terms", "contrasts", "emmeans", "residuals",
                                             "standardized_effects", "response", "morris", "guards", "testbeds"),
                                    repr=False)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict following ``tunelab/stats/screen.schema.json`` (see docs/screen-json-schema.md).

        NaN becomes ``null``, numpy scalars become Python numbers, tuple levels become lists.
        """
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "design": self.design,
                               "settings": json_value(self.settings)}
        for name in self.tables:
            frame: pd.DataFrame = getattr(self, name)
            out[name] = [json_value(row) for row in frame.to_dict(orient="records")]
        return out


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that :meth:`ScreenResult.to_json` output follows."""
    text = resources.files("tunelab.stats").joinpath("screen.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def _normalise_metrics(metrics: Sequence[Metric | dict[str, Any]], data: pd.DataFrame) -> list[dict[str, Any]]:
    """Each metric as a checked ``{name, direction, sesoi_pct}`` dict (the form ``settings`` and the JSON keep)."""
    if isinstance(metrics, (dict, Metric)) or not metrics:
        raise DataError("metrics must be a non-empty list of Metric or {name, direction, sesoi_pct} dicts, "
                        f"got {metrics!r}")
    out = []
    for spec in metrics:
        if isinstance(spec, Metric):
            spec = spec.to_json()
        if not isinstance(spec, dict) or "name" not in spec:
            raise DataError(f"each metric must be a dict with a 'name', got {spec!r}")
        name = spec["name"]
        direction = spec.get("direction", "maximize")
        if direction not in ("maximize", "minimize"):
            raise DataError(f"metric {name!r}: direction must be 'maximize' or 'minimize', got {direction!r}")
        sesoi, sesoi_abs, scale = spec.get("sesoi_pct"), spec.get("sesoi_abs"), spec.get("scale", "auto")
        if sesoi_abs is not None and sesoi is not None:
            raise DataError(f"metric {name!r}: give sesoi_pct (a % of the baseline) or sesoi_abs (a difference in "
                            "the metric's units), not both")
        if sesoi is None and sesoi_abs is not None:
            sesoi = DEFAULT_SESOI_PCT
        if not isinstance(sesoi, (int, float)) or isinstance(sesoi, bool) or not sesoi > 0:
            raise DataError(f"metric {name!r}: sesoi_pct must be a positive number (smallest effect of interest, "
                            f"in %), got {sesoi!r}")
        if sesoi_abs is not None and (not isinstance(sesoi_abs, (int, float)) or isinstance(sesoi_abs, bool)
                                      or not math.isfinite(sesoi_abs) or not sesoi_abs > 0):
            raise DataError(f"metric {name!r}: sesoi_abs must be a positive number in the metric's units, "
                            f"got {sesoi_abs!r}")
        if scale not in METRIC_SCALES or (scale == "log" and sesoi_abs is not None):
            raise DataError(f"metric {name!r}: scale must be one of {', '.join(METRIC_SCALES)} (log not with "
                            f"sesoi_abs), got {scale!r}")
        if name not in data.columns:
            raise DataError(f"unknown metric column {name!r}; the data has: {', '.join(map(str, data.columns))}")
        item = {"name": name, "direction": direction, "sesoi_pct": float(sesoi)}
        if sesoi_abs is not None:
            item["sesoi_abs"] = float(sesoi_abs)
        if scale != "auto":
            item["scale"] = scale
        out.append(item)
    names = [m["name"] for m in out]
    if len(set(names)) != len(names):
        raise DataError(f"metrics are listed twice: {names}")
    return out


def _check_knobs(data: pd.DataFrame, knobs: list[str], baseline: dict[str, Any], need_runs: bool = True) -> None:
    if isinstance(knobs, str) or not knobs:
        raise DataError(f"knobs must be a non-empty list of knob column names, got {knobs!r}")
    for knob in knobs:
        if knob not in data.columns:
            raise DataError(f"unknown knob column {knob!r}; the data has: {', '.join(map(str, data.columns))}")
        if knob not in baseline:
            raise DataError(f"no baseline level for knob {knob!r}; pass baseline={{{knob!r}: <level>}}")
        levels = sorted_levels(data[knob].dropna())
        if need_runs and not level_matches(data[knob], baseline[knob]).any():
            raise DataError(f"baseline {baseline[knob]!r} of knob {knob!r} never occurs in the data; "
                            f"its levels are {levels}")


def design_kind(data: pd.DataFrame, knobs: list[str], baseline: dict[str, Any]) -> str:
    """``'oat'`` when every run has at most one knob away from its baseline, else ``'factorial'``."""
    off = np.zeros(len(data), dtype=int)
    for knob in knobs:
        off += ~level_matches(data[knob], baseline[knob])
    return "oat" if (off <= 1).all() else "factorial"


def recommend(shapiro_p: float, brown_forsythe_p: float, sd_ratio: float = float("nan")) -> tuple[str, str]:
    """Pick the omnibus + post-hoc route from the assumption tests; return ``(route, reason)``.

    Clearly non-normal errors (Shapiro–Wilk p < 0.01 on the group-standardised residuals) ->
    ``'kruskal+dunn'``; otherwise ``'anova+tukey'`` only when the variances are shown similar
    (Brown–Forsythe p >= 0.05 *and* largest/smallest group SD <= :data:`SD_RATIO_MAX`), else
    ``'welch+games_howell'``; a constant level among varying ones (``sd_ratio`` inf) also goes to
    ``'kruskal+dunn'``, as Welch's weights are undefined there. Normality is checked first because Welch's test also assumes
    normal errors. Welch is the default because a pre-test that fails to reject is not evidence
    of equal variances: with 5 replicates and one level 3x noisier, choosing ANOVA whenever
    Brown–Forsythe p >= 0.05 gave a family-wise error rate of 0.16 over 10 null knobs; this rule
    keeps it at alpha (tests/stats/test_simulation_screen.py).
    """
    if not math.isnan(shapiro_p) and shapiro_p < NORMALITY_ALPHA:
        return "kruskal+dunn", (f"errors clearly non-normal (Shapiro–Wilk p={shapiro_p:.3g} < {NORMALITY_ALPHA}): "
                                "rank-based Kruskal–Wallis + Dunn")
    normal = "not computable" if math.isnan(shapiro_p) else f"p={shapiro_p:.3g} >= {NORMALITY_ALPHA}"
    if math.isinf(sd_ratio):
        return "kruskal+dunn", ("a level's runs all have the same value (no variation): Welch's weights are "
                                "undefined and the variances are clearly unequal: rank-based Kruskal–Wallis + Dunn")
    if math.isnan(shapiro_p) or math.isnan(brown_forsythe_p):
        return "anova+tukey", "assumption tests not computable (no within-group variation): ANOVA + Tukey"
    if brown_forsythe_p < VARIANCE_ALPHA:
        return "welch+games_howell", (f"errors normal enough (Shapiro–Wilk {normal}) but variances unequal "
                                      f"(Brown–Forsythe p={brown_forsythe_p:.3g} < {VARIANCE_ALPHA}): "
                                      "Welch ANOVA + Games–Howell")
    if not sd_ratio <= SD_RATIO_MAX:   # also when sd_ratio is NaN (not given) or inf
        ratio = "not given" if math.isnan(sd_ratio) else f"{sd_ratio:.2f}"
        return "welch+games_howell", (f"errors normal enough (Shapiro–Wilk {normal}); equal variances not shown "
                                      f"(Brown–Forsythe p={brown_forsythe_p:.3g}, but SD ratio {ratio} > "
                                      f"{SD_RATIO_MAX}): Welch ANOVA + Games–Howell")
    return "anova+tukey", (f"errors normal enough (Shapiro–Wilk {normal}) and variances similar "
                           f"(Brown–Forsythe p={brown_forsythe_p:.3g} >= {VARIANCE_ALPHA}, SD ratio "
                           f"{sd_ratio:.2f} <= {SD_RATIO_MAX}): ANOVA + Tukey HSD")


def _analyse(sub: pd.DataFrame, knob: str, metric: dict[str, Any], base: Any, alpha: float, correction: str,
             n_boot: int, seed: int, boot_cache: dict | None = None) -> dict[str, Any]:
    """All tables for one knob × metric on the rows ``sub`` (no NaN in the metric).

    The input is checked and grouped once; every test then runs on the grouped values through
    the same helpers as the public functions (``normality`` is ``check_input`` + ``Groups.of`` +
    ``_normality_row``, and so on), so the numbers equal those of the public functions. The
    tables lack the ``knob`` and ``metric`` columns, which :func:`screen` adds once for all parts.
    ``boot_cache`` lets knobs that share the baseline runs (OAT) share its bootstrap resamples.
    """
    name = metric["name"]
    groups = Groups.of(check_input(sub, name, knob), name, knob)
    levels, samples = groups.levels, groups.samples
    norm = [_normality_row(groups, name), _normality_row(groups, name, standardize=True)]
    homo = _homoscedasticity_rows(samples)
    shapiro_p = float(norm[1]["p"])
    bf_p = float(next(row["p"] for row in homo if row["test"] == "brown_forsythe"))
    route, reason = recommend(shapiro_p, bf_p, _sd_ratio(samples))

    assumptions = pd.DataFrame([{**row, "df1": np.nan, "df2": np.nan} for row in norm]
                               + [{**row, "n": len(sub)} for row in homo], columns=ASSUMPTION_COLUMNS[2:])

    aov, wel, kw = _anova_values(samples), _welch_values(groups), _kruskal_values(samples)
    omnibus = _omnibus_rows(knob, route, reason, (aov["F"], aov["df_b"], aov["df_w"], aov["p"], aov["eta2"], "eta2"),
                            (wel["F"], wel["df1"], wel["df2"], wel["p"]), kw)

    dunn_adjust = correction if correction != "none" else "holm"
    tables = [_tukey_table(levels, samples, alpha), _games_howell_table(levels, samples, alpha),
              _dunn_table(groups, dunn_adjust)]
    posthoc = pd.concat(tables, ignore_index=True)
    sizes = [len(table) for table in tables]
    posthoc.insert(0, "method", np.repeat(np.array(["tukey_hsd", "games_howell", "dunn"], dtype=object), sizes))
    posthoc["recommended"] = np.repeat([route == "anova+tukey", route == "welch+games_howell",
                                        route == "kruskal+dunn"], sizes)

    effects = _pct_change_table(levels, samples, knob, name, base, n_boot, seed, 0.95, cache=boot_cache)
    base_values = _sample(levels, samples, knob, base, "baseline")
    equivalence = pd.DataFrame([
        {**_tost_row(_sample(levels, samples, knob, level, "level"), base_values, level, base, metric["sesoi_pct"],
                     alpha, knob, name), "sesoi_pct": metric["sesoi_pct"]}
        for level in effects["level"].tolist()], columns=EQUIVALENCE_COLUMNS[2:])

    p = {"anova+tukey": aov["p"], "welch+games_howell": wel["p"], "kruskal+dunn": kw["p"]}[route]
    return {"assumptions": assumptions, "omnibus": omnibus, "posthoc": posthoc, "effects": effects,
            "equivalence": equivalence, "route": route, "reason": reason, "p": float(p), "eta2": float(aov["eta2"])}


def _regrouped(groups: Groups, y: np.ndarray) -> Groups:
    """``groups`` with other values ``y`` (in the same row order)."""
    return Groups(groups.levels, groups.codes, y, [y[groups.codes == i] for i in range(len(groups.levels))])


#: how each route reads a knob's runs when the testbed is a block (appended to the route's reason)
_BLOCKED_ROUTES = {
    "anova+tukey": "F test of the knob in the additive model {metric} ~ knob + testbed, Tukey on its "
                   "least-squares means",
    "welch+games_howell": "HC3 Wald test of the knob in the additive model {metric} ~ knob + testbed, pairs of its "
                          "least-squares means with HC3 errors (studentized range)",
    "kruskal+dunn": "Kruskal–Wallis and Dunn stratified by testbed (van Elteren: ranks within each testbed)",
}


def _analyse_blocked(sub: pd.DataFrame, knob: str, metric: dict[str, Any], base: Any, alpha: float,
                     correction: str, n_boot: int, seed: int) -> dict[str, Any]:
    """:func:`_analyse` with the testbed as an additive block (``sub`` has a ``testbed`` column
    with two or more testbeds): the same tables, methods and test names.

    The assumption checks read the runs with each testbed's offset in ``metric ~ C(knob) +
    C(testbed)`` removed (their deviations from the level means are the model's residuals); ANOVA
    and Welch become the model's F and HC3 Wald tests of the knob, Tukey and Games–Howell the pairs
    of its least-squares means (model and HC3 errors), Kruskal–Wallis and Dunn are stratified by
    testbed (van Elteren); effects compare least-squares means (residual bootstrap intervals) and
    TOST their difference with its HC3 error (docs/stats-notes.md, "Testbeds as blocks").
    """
    name = metric["name"]
    groups = Groups.of(check_input(sub, name, knob), name, knob)
    levels = groups.levels
    testbeds = sorted_levels(sub[TESTBED])
    blocks = encode(sub[TESTBED], testbeds)
    fit = fit_blocked(groups.y, groups.codes, blocks, len(levels), len(testbeds))
    aligned = _regrouped(groups, fit.aligned)
    norm = [_normality_row(aligned, name), _normality_row(aligned, name, standardize=True)]
    homo = _homoscedasticity_rows(aligned.samples)
    bf_p = float(next(row["p"] for row in homo if row["test"] == "brown_forsythe"))
    route, reason = recommend(float(norm[1]["p"]), bf_p, _sd_ratio(aligned.samples))
    reason = (f"{reason}; testbed as a block ({len(testbeds)} testbeds, checks on the runs with each testbed's "
              f"offset removed): {_BLOCKED_ROUTES[route].format(metric=name)}")
    assumptions = pd.DataFrame([{**row, "df1": np.nan, "df2": np.nan} for row in norm]
                               + [{**row, "n": len(sub)} for row in homo], columns=ASSUMPTION_COLUMNS[2:])
    aov, hc3 = fit.knob, fit.knob_hc3
    kw = _stratified_kruskal_values(groups.y, groups.codes, blocks, len(levels))
    omnibus = _omnibus_rows(knob, route, reason, (aov["F"], aov["df1"], aov["df2"], aov["p"], aov["partial_eta2"],
                                                  "partial_eta2"), (hc3["F"], hc3["df1"], hc3["df2"], hc3["p"]), kw)
    tables = [_lsmeans_table(levels, fit.lsmeans, fit.cov, fit.df_resid, alpha),
              _lsmeans_table(levels, fit.lsmeans, fit.cov_hc3, fit.df_resid, alpha),
              _stratified_dunn_table(levels, groups.y, groups.codes, blocks,
                                     correction if correction != "none" else "holm")]
    posthoc = pd.concat(tables, ignore_index=True)
    sizes = [len(table) for table in tables]
    posthoc.insert(0, "method", np.repeat(np.array(["tukey_hsd", "games_howell", "dunn"], dtype=object), sizes))
    posthoc["recommended"] = np.repeat([route == "anova+tukey", route == "welch+games_howell",
                                        route == "kruskal+dunn"], sizes)
    effects = lsmeans_effects(fit, levels, base, n_boot, seed)
    equivalence = lsmeans_equivalence(fit, levels, base, metric["sesoi_pct"], alpha)[EQUIVALENCE_COLUMNS[2:]]
    p = {"anova+tukey": aov["p"], "welch+games_howell": hc3["p"], "kruskal+dunn": kw["p"]}[route]
    return {"assumptions": assumptions, "omnibus": omnibus, "posthoc": posthoc, "effects": effects,
            "equivalence": equivalence, "route": route, "reason": reason, "p": float(p),
            "eta2": float(aov["partial_eta2"])}


def _omnibus_rows(knob: str, route: str, reason: str, anova: tuple[Any, ...], welch: tuple[Any, ...],
                  kruskal: Mapping[str, float]) -> pd.DataFrame:
    """The three omnibus rows of a knob: ANOVA ``(F, df1, df2, p, effect size, its name)``, Welch (or
    its blocked HC3 twin) ``(F, df1, df2, p)`` and Kruskal–Wallis; ``route`` marks the recommended one."""
    def row(test: str, values: tuple[Any, ...], size: Any, size_name: str | None, chosen: str) -> dict[str, Any]:
        statistic, df1, df2, p = values
        return {"test": test, "source": knob, "statistic": statistic, "df1": df1, "df2": df2, "p": p,
                "effect_size": size, "effect_size_name": size_name, "recommended": route == chosen, "reason": reason}

    return pd.DataFrame([row("anova", anova[:4], anova[4], anova[5], "anova+tukey"),
                         row("welch_anova", welch, np.nan, None, "welch+games_howell"),
                         row("kruskal", (kruskal["H"], kruskal["df"], np.nan, kruskal["p"]), kruskal["epsilon2"],
                             "epsilon2", "kruskal+dunn")], columns=OMNIBUS_COLUMNS[2:])


def _rows_per_knob(data: pd.DataFrame, knobs: list[str], baseline: dict[str, Any], kind: str) -> dict[str, np.ndarray]:
    """Per knob, the rows that compare its levels: all rows, or in an OAT design those whose
    other knobs sit at their baselines (one pass per knob: O(knobs x rows))."""
    if kind != "oat":
        return {knob: np.ones(len(data), dtype=bool) for knob in knobs}
    off = {knob: ~level_matches(data[knob], baseline[knob]) for knob in knobs}
    n_off = np.sum(list(off.values()), axis=0) if knobs else np.zeros(len(data), dtype=int)
    return {knob: (n_off - off[knob]) == 0 for knob in knobs}


def _failure_summary(failed: pd.DataFrame, knob: str, level: Any) -> str:
    at_level = failed[level_matches(failed[knob], level)] if len(failed) else failed
    if not len(at_level):
        return ""
    reasons = at_level["reason"].dropna().astype(str) if "reason" in at_level.columns else pd.Series(dtype=str)
    common = f": {reasons.mode().iloc[0]!r}" if len(reasons) else ""
    return f", {len(at_level)} failed{common}"


def _testable_levels(sub: pd.DataFrame, knob: str, base: Any, failed: pd.DataFrame, notes: list[str],
                     spec: dict[str, Any]) -> tuple[pd.DataFrame, str | None]:
    """Drop levels with fewer than two usable runs (noting why); say why the knob cannot be
    tested when the baseline or every other level is gone, else return ``(rows, None)``.

    A level whose runs all failed (e.g. the load generator could not run at that setting) is
    itself a finding: the reason names the failures so the verdict table shows them.
    """
    metric = spec["name"]
    levels = sorted_levels(pd.concat([sub[knob], failed[knob]]) if len(failed) else sub[knob])
    counts = {i: int(level_matches(sub[knob], level).sum()) for i, level in enumerate(levels)}
    thin = [i for i, n in counts.items() if n < 2]
    described = {i: f"level {levels[i]!r}: {counts[i]} usable run(s){_failure_summary(failed, knob, levels[i])}"
                 for i in thin}
    base_index = next((i for i, level in enumerate(levels) if level_matches(pd.Series([level]), base)[0]), None)
    if base_index is None or base_index in thin:
        return sub, (described.get(base_index) or f"baseline level {base!r} has no usable run") + \
            " (the baseline is needed for every comparison)"
    if len(levels) - len(thin) < 2:
        return sub, "; ".join(described[i] for i in thin) or f"only the baseline level {base!r} was run"
    for i in thin:
        notes.append(f"{knob} × {metric}: {described[i]}; level left out (a level needs at least two runs)")
        sub = sub[~level_matches(sub[knob], levels[i])]
    base_mean = float(sub.loc[level_matches(sub[knob], base), metric].mean())
    if base_mean == 0 and spec.get("sesoi_abs") is None:
        return sub, (f"the baseline level {base!r} has mean 0 for {metric!r}, so % changes and the SESOI (a % of the "
                     "baseline) are undefined; give the metric an absolute smallest effect of interest (sesoi_abs, "
                     "in its own units)")
    return sub, None


def _untestable_verdict(knob: str, metric: str, problem: str) -> dict[str, Any]:
    return {"knob": knob, "metric": metric, "test": None, "reason": problem, "p": math.nan, "p_adj": math.nan,
            "significant": False, "best_level": None, "effect_pct": math.nan, "effect_ci_low": math.nan,
            "effect_ci_high": math.nan, "eta2": math.nan, "direction": "none", "relevant": False,
            "equivalent": False, "verdict": Verdict.UNTESTABLE.value, "effect_abs": math.nan,
            "effect_abs_ci_low": math.nan, "effect_abs_ci_high": math.nan, "scale": None, "only_when": None}


def _effect_level(effects: pd.DataFrame, direction: str, sesoi_pct: float) -> dict[str, Any]:
    """The level the verdict reports: the best level if it beats the baseline by the SESOI,
    otherwise the level that differs most from the baseline (either way). A dict of that row's
    values (a row Series would turn integer levels into floats when every column is numeric)."""
    gain = effects["pct_change"] if direction == "maximize" else -effects["pct_change"]
    label = gain.idxmax() if (gain >= sesoi_pct).any() else effects["pct_change"].abs().idxmax()
    return {column: effects[column].tolist()[effects.index.get_loc(label)] for column in effects.columns}


def _verdict(part: dict[str, Any], metric: dict[str, Any], p_adj: float, alpha: float) -> dict[str, Any]:
    best = _effect_level(part["effects"], metric["direction"], metric["sesoi_pct"])
    significant = bool(p_adj < alpha) if not math.isnan(p_adj) else False
    effect = float(best["pct_change"])
    gain = effect if metric["direction"] == "maximize" else -effect
    direction = "none" if not significant or gain == 0 else ("better" if gain > 0 else "worse")
    relevant = significant and abs(effect) >= metric["sesoi_pct"]
    equivalent = bool(part["equivalence"]["equivalent"].all())
    if relevant:
        verdict = Verdict.MATTERS
    elif equivalent:
        verdict = Verdict.EQUIVALENT
    else:
        verdict = Verdict.INCONCLUSIVE
    return {"test": part["route"], "reason": part["reason"], "p": part["p"], "p_adj": p_adj,
            "significant": significant, "best_level": best["level"], "effect_pct": effect,
            "effect_ci_low": float(best["ci_low"]), "effect_ci_high": float(best["ci_high"]), "eta2": part["eta2"],
            "direction": direction, "relevant": relevant, "equivalent": equivalent, "verdict": verdict.value,
            "effect_abs": float(best["mean"]) - float(best["baseline_mean"]), "effect_abs_ci_low": math.nan,
            "effect_abs_ci_high": math.nan, "scale": "linear", "only_when": None}


def screen(
    data: pd.DataFrame,
    metrics: Sequence[Metric | dict[str, Any]],
    knobs: list[str],
    baseline: dict[str, Any],
    alpha: float = 0.05,
    correction: str = "holm",
    n_boot: int = 1000,
    seed: int = 0,
    design: Mapping[str, Any] | None = None,
    guards: Mapping[str, Any] | None = None,
) -> ScreenResult:
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
    design : dict, optional
        What the screen knows of the design beyond the runs (:func:`tunelab.tidy.design_info`):
        ``type``, ``interactions``, ranges, profiles, guards; with ``sequential``
        (``{max_replicates, spending}``) and a ``round`` column the study's looks are replayed by
        :func:`tunelab.stats.sequential.sequential_screen`.
    guards : dict, optional
        ``{"guards": [{name, direction, sesoi_pct | sesoi_abs}], "conditional_on": {metric: [guard]}}``
        (:func:`tunelab.tidy.design_info` builds it from the design and its load); None takes
        ``design["guards"]``. A screened metric conditional on a guard that degrades beyond its SESOI
        at the reported level becomes ``'not comparable'`` with the ``guard`` text (see
        :mod:`tunelab.stats.guards`); the ``guards`` table holds every guard's change per level.

    Returns
    -------
    ScreenResult
        ``verdicts`` has one row per knob × metric with columns
        ``[knob, metric, test, reason, p, p_adj, significant, best_level, effect_pct,
        effect_ci_low, effect_ci_high, eta2, direction, relevant, equivalent, verdict]``:

        * ``test``: recommended route (see :func:`recommend`), ``reason`` says why;
          ``p`` its omnibus p, ``p_adj`` adjusted with ``correction``; ``significant = p_adj < alpha``.
        * ``best_level``: the best level if it beats the baseline by at least ``sesoi_pct``, else
          the level that differs most from the baseline; ``effect_pct`` its percent change
          against the baseline with bootstrap CI.
        * ``eta2``: share of variance explained by the knob (one-way ANOVA, descriptive).
        * ``direction``: ``'better'``/``'worse'`` (the sign of ``effect_pct`` in the metric's
          direction) when significant, else ``'none'``.
        * ``relevant = significant and |effect_pct| >= sesoi_pct``.
        * ``equivalent``: every level passes TOST against the baseline with ±``sesoi_pct``
          (intersection–union test: no multiplicity adjustment needed).
        * ``verdict``: ``'matters'`` if relevant, else ``'no effect (equivalent)'`` if equivalent,
          else ``'inconclusive'`` (more replicates needed); ``'untestable'`` (``test`` null,
          ``reason`` naming the levels and their failed runs) when the baseline or every other
          level has fewer than two usable runs, e.g. because the load failed at that setting.
          Untestable rows do not enter the multiplicity adjustment.

    Notes
    -----
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
    """
    if not 0 < alpha < 1:
        raise DataError(f"alpha must be between 0 and 1, got {alpha!r}; 0.05 is the usual choice")
    sequential = dict(design or {}).get("sequential")
    if sequential and isinstance(data, pd.DataFrame) and "round" in data.columns:
        from tunelab.stats.sequential import sequential_screen   # it calls this function for every look

        return sequential_screen(data, metrics, knobs, baseline, alpha=alpha, correction=correction, n_boot=n_boot,
                                 seed=seed, guards=guards, **sequential,
                                 design={k: v for k, v in design.items() if k != "sequential"})
    check_bootstrap(n_boot, seed)
    if correction not in METHODS:
        raise DataError(f"unknown correction {correction!r}; choose one of {', '.join(METHODS)}")
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    metrics = _normalise_metrics(metrics, data)
    knobs = list(knobs) if not isinstance(knobs, str) else knobs
    design = dict(design or {})
    guard_specs, dependents = check_guards(guards if guards is not None else design.get("guards"), metrics)
    _check_knobs(data, knobs, baseline, need_runs=design.get("type") not in RANGE_DESIGNS)
    failed = data.iloc[0:0]
    if "status" in data.columns:
        usable = data["status"].isin(USABLE_STATUSES)
        data, failed = data[usable], data[~usable]
    kind = design_kind(data, knobs, baseline)
    if design.get("type") in RANGE_DESIGNS or (not design and kind == "factorial" and _looks_like_ranges(data, knobs)):
        kind = "range"
    notes: list[str] = []
    profiles = profile_levels(data, knobs, design)
    if profiles:
        data = _with_profiles(data, kind, profiles, notes)
    testbeds = present_testbeds(data, knobs)
    spread = pd.DataFrame(columns=TESTBED_COLUMNS)
    if testbeds:
        data = _with_testbeds(data, notes)
        spread = between_testbed_spread(data, metrics, [*knobs, *([PROFILE] if profiles else [])], baseline)
        notes.append(spread_note(spread, testbeds))
        if kind == "range":
            notes.append(f"the Latin hypercube / Morris route has no block term: the runs of the {len(testbeds)} "
                         "testbeds are pooled, so a testbed offset adds to the noise (see the testbeds table)")
    parts: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    untestable: list[dict[str, Any]] = []
    tables: dict[str, list[pd.DataFrame]] = {}
    if kind == "oat":
        _oat_parts(data, failed, metrics, knobs, baseline, alpha, correction, n_boot, seed, notes, parts, untestable,
                   tables=tables, profiles=profiles, testbeds=testbeds)
    else:
        _model_route(data, failed, metrics, knobs, baseline, alpha, seed, design, kind, notes, parts, untestable,
                     tables, profiles=profiles, testbeds=testbeds)

    p_adj = adjust([part["p"] for _, _, part in parts], method=correction)
    significant_terms = {(metric["name"], knob) for (knob, metric, part), q in zip(parts, p_adj)
                         if part.get("kind") == "interaction" and q < alpha}
    rows = []
    for (knob, metric, part), q in zip(parts, p_adj):
        if part.get("kind") in ("range", "morris"):
            rows.append({"knob": knob, "metric": metric["name"], **range_verdict(part, metric, float(q), alpha)})
        elif "kind" in part:
            terms = {term for name, term in significant_terms if name == metric["name"]}
            rows.append({"knob": knob, "metric": metric["name"],
                         **model_verdict(part, knob, metric, float(q), alpha, terms)})
        else:
            rows.append({"knob": knob, "metric": metric["name"], **_verdict(part, metric, float(q), alpha)})
    verdicts = pd.DataFrame(rows + untestable, columns=VERDICT_COLUMNS)
    # levels keep their type: pandas would turn [128, 16, None] (an interaction row) into floats
    verdicts["best_level"] = pd.Series([row.get("best_level") for row in rows + untestable], dtype=object)
    if "model_terms" in tables:
        adjusted = {(metric["name"], knob): float(q) for (knob, metric, _), q in zip(parts, p_adj)}
        for frame in tables["model_terms"]:
            frame["p_adj"] = [adjusted.get((m, t), math.nan) for m, t in zip(frame["metric"], frame["term"])]

    def gather(name: str, columns: list[str], extra: list[pd.DataFrame] | None = None) -> pd.DataFrame:
        frames = [part[name] for _, _, part in parts if len(part[name])]
        if frames:   # one concat, then the knob and metric of every part's rows in one go
            sizes = [len(part[name]) for _, _, part in parts if len(part[name])]
            keyed = pd.concat(frames, ignore_index=True)
            for column, values in (("metric", [m["name"] for _, m, part in parts if len(part[name])]),
                                   ("knob", [k for k, _, part in parts if len(part[name])])):
                keyed.insert(0, column, np.repeat(np.array(values, dtype=object), sizes))
            frames = [keyed]
        frames += [f for f in (extra or []) if len(f)]
        return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)

    guard_rows = guard_table(data, knobs, baseline, guard_specs, kind, alpha, notes)
    verdicts = apply_guards(verdicts, guard_rows, dependents, guard_specs, notes)
    settings = {"alpha": alpha, "correction": correction, "n_boot": n_boot, "seed": seed, "metrics": metrics,
                "knobs": knobs, "baseline": dict(baseline), "n_runs": len(data),
                "normality_alpha": NORMALITY_ALPHA, "variance_alpha": VARIANCE_ALPHA, "sd_ratio_max": SD_RATIO_MAX,
                "design_type": design.get("type"), "notes": notes,
                "guards": {"guards": guard_specs, "conditional_on": {m: list(g) for m, g in dependents.items()}}}
    if profiles:
        settings["profiles"] = profiles
    if testbeds:
        settings["testbeds"] = testbeds
        extra_tables = {"testbeds": spread}
    else:
        extra_tables = {}
    extra = {name: pd.concat(frames, ignore_index=True) for name, frames in tables.items() if frames}
    return ScreenResult(
        design=kind, settings=settings,
        assumptions=gather("assumptions", ASSUMPTION_COLUMNS),
        omnibus=gather("omnibus", OMNIBUS_COLUMNS),
        posthoc=gather("posthoc", POSTHOC_TABLE_COLUMNS),
        effects=gather("effects", EFFECT_COLUMNS),
        equivalence=gather("equivalence", EQUIVALENCE_COLUMNS),
        verdicts=verdicts, guards=guard_rows, **extra_tables, **extra,
    )


#: the tidy column naming each run's load profile (plan column ``profile``); a factor, never a knob
PROFILE = "profile"


def profile_levels(data: pd.DataFrame, knobs: Sequence[str], design: Mapping[str, Any] | None = None) -> list[Any]:
    """The load profiles of a profile-crossed study, reference first; empty unless the data's
    ``profile`` column holds two or more profiles (and is not one of ``knobs``).

    The order is the design's (``design['profiles']``, from :func:`tunelab.tidy.design_info`),
    then any other profile in sorted order; the first profile is the reference level of the
    profile factor (its contrasts and the interaction contrasts are against it).

    >>> profile_levels(pd.DataFrame({"profile": ["overload", "low", "low"]}), ["k"], {"profiles": ["low", "overload"]})
    ['low', 'overload']
    >>> profile_levels(pd.DataFrame({"profile": ["low", "low"]}), ["k"])
    []
    """
    if PROFILE in knobs or PROFILE not in data.columns:
        return []
    present = sorted_levels(data[PROFILE].dropna())
    if len(present) < 2:
        return []
    listed = [p for p in (design or {}).get("profiles") or () if p in present]
    return listed + [p for p in present if p not in listed]


def _with_profiles(data: pd.DataFrame, kind: str, profiles: list[Any], notes: list[str]) -> pd.DataFrame:
    """The usable runs that name a profile (noting the others); the settings note says the profiles."""
    if kind == "range":
        raise DataError(f"the data holds {len(profiles)} load profiles ({', '.join(map(str, profiles))}), but a "
                        "Latin hypercube or Morris screen has no load factor; screen each profile's runs on their own")
    missing = int(data[PROFILE].isna().sum())
    if missing:
        notes.append(f"{missing} run(s) without a load profile left out (the other runs name one)")
        data = data[data[PROFILE].notna()]
    notes.append(f"load profiles {', '.join(map(str, profiles))}: the profile is a factor of every knob's model, not a "
                 f"knob; each knob's effect is estimated at every profile (contrasts at '{PROFILE}=...') and its "
                 f"knob × {PROFILE} interaction is tested (verdict rows 'knob:{PROFILE}'); the reference profile is "
                 f"{profiles[0]}")
    return data


def _with_testbeds(data: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """The usable runs that name a testbed (noting the others)."""
    missing = int(data[TESTBED].isna().sum())
    if missing:
        notes.append(f"{missing} run(s) without a testbed left out (the other runs name one)")
        data = data[data[TESTBED].notna()]
    return data


def _oat_parts(data: pd.DataFrame, failed: pd.DataFrame, metrics: list[dict[str, Any]], knobs: list[str],
               baseline: dict[str, Any], alpha: float, correction: str, n_boot: int, seed: int, notes: list[str],
               parts: list, untestable: list, tables: dict[str, list[pd.DataFrame]] | None = None,
               profiles: Sequence[Any] = (), testbeds: Sequence[Any] = ()) -> None:
    """One-at-a-time designs: each knob on the baseline runs plus its own runs.

    With load ``profiles`` (a profile-crossed design) each knob's runs and the baseline runs of
    every profile are modelled as knob × profile (:func:`_profile_oat_part`); its model tables go
    to ``tables``. With ``testbeds`` the testbed is an additive block of every knob's analysis
    (:func:`_analyse_blocked`, or the model's block term) when the knob's usable runs span two or more.
    """
    boot_cache: dict = {}   # baseline bootstrap resamples, shared by knobs with the same baseline runs
    tables = {} if tables is None else tables
    rows_of, failed_rows_of = _rows_per_knob(data, knobs, baseline, "oat"), _rows_per_knob(failed, knobs, baseline, "oat")
    by_profile = [PROFILE] if profiles else []
    by_testbed = [TESTBED] if testbeds else []
    for knob in knobs:
        # only the columns the analysis reads (copying every knob column per knob is slow)
        subset = data.loc[rows_of[knob], list(dict.fromkeys([knob, *by_profile, *by_testbed,
                                                             *(m["name"] for m in metrics)]))]
        failed_here = failed[failed_rows_of[knob]]
        for metric in metrics:
            sub = subset[[knob, *by_profile, *by_testbed, metric["name"]]]
            if sub[metric["name"]].isna().any():
                sub = sub.dropna(subset=[metric["name"]])
            if len(sub) < len(subset):
                notes.append(f"{knob} × {metric['name']}: {len(subset) - len(sub)} run(s) without a value left out")
            if testbeds:
                sub = _without_lone_testbeds(sub, knob, metric["name"], notes)
            sub, problem = _testable_levels(sub, knob, baseline[knob], failed_here, notes, metric)
            if problem:
                untestable.append(_untestable_verdict(knob, metric["name"], problem))
                notes.append(f"{knob} × {metric['name']} not tested: {problem}")
                continue
            block = None
            if testbeds:
                sub, block = _testbed_block(sub, knob, metric["name"], notes)
            if profiles and sub[PROFILE].nunique() > 1:
                try:
                    found, model_tables = _profile_oat_part(sub, knob, metric, baseline[knob], profiles, alpha, seed,
                                                            block)
                except DataError as exc:
                    problem = f"the model of {knob} × {PROFILE} cannot be fitted: {exc}"
                    untestable.append(_untestable_verdict(knob, metric["name"], problem))
                    notes.append(f"{knob} × {metric['name']} not tested: {problem}")
                    continue
                parts.extend((label, metric, part) for label, part in found)
                for key, frame in model_tables.items():
                    tables.setdefault(key, []).append(frame)
                continue
            if profiles:
                notes.append(f"{knob} × {metric['name']}: usable runs at one load profile only "
                             f"({sub[PROFILE].iloc[0]}), analysed without the profile factor")
                sub = sub.drop(columns=PROFILE)
            smallest = int(sub.groupby(knob, sort=False).size().min())
            try:
                if metric.get("sesoi_abs") is not None or smallest < MIN_RUNS_FOR_CHECKS:
                    for label, part in _pooled_oat_part(sub, knob, metric, baseline[knob], alpha, seed, smallest,
                                                        block):
                        parts.append((label, metric, part))
                    continue
                if block:
                    part = _analyse_blocked(sub, knob, metric, baseline[knob], alpha, correction, n_boot, seed)
                else:
                    part = _analyse(sub, knob, metric, baseline[knob], alpha, correction, n_boot, seed, boot_cache)
            except DataError as exc:
                if block is None:
                    raise DataError(f"knob {knob!r}, metric {metric['name']!r}: {exc}") from exc
                problem = f"{knob} with the {TESTBED} as a block cannot be analysed: {exc}"
                untestable.append(_untestable_verdict(knob, metric["name"], problem))
                notes.append(f"{knob} × {metric['name']} not tested: {problem}")
                continue
            parts.append((knob, metric, part))


def _without_lone_testbeds(sub: pd.DataFrame, knob: str, metric: str, notes: list[str]) -> pd.DataFrame:
    """``sub`` without the runs of testbeds that have a single run of this knob × metric, when two
    or more testbeds have more: a lone run only measures its testbed's offset (and has leverage 1)."""
    counts = sub[TESTBED].value_counts()
    lone = counts[counts < 2]
    if not len(lone) or len(counts) - len(lone) < 2:
        return sub
    names = sorted_levels(list(lone.index))
    notes.append(f"{knob} × {metric}: the single run on testbed(s) {', '.join(map(str, names))} left out (a testbed's "
                 "only run measures its own offset, nothing of the knob)")
    return sub[~sub[TESTBED].isin(names)]


def _testbed_block(sub: pd.DataFrame, knob: str, metric: str, notes: list[str]) -> tuple[pd.DataFrame, str | None]:
    """``(sub, 'testbed')`` when the knob's usable runs span two or more testbeds, else the runs
    without the testbed column and ``None`` (noted: the knob is analysed as on one testbed)."""
    present = sorted_levels(sub[TESTBED])
    if len(present) > 1:
        return sub, TESTBED
    notes.append(f"{knob} × {metric}: usable runs on one testbed only ({present[0]}), analysed without the testbed "
                 "block")
    return sub.drop(columns=TESTBED), None


def _pooled_oat_part(sub: pd.DataFrame, knob: str, metric: dict[str, Any], base: Any, alpha: float,
                     seed: int, smallest: int, block: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """An OAT knob through the one-way model: its runs at some level are fewer than
    :data:`MIN_RUNS_FOR_CHECKS` (``smallest``), or the metric has an absolute SESOI. ``block``
    (the testbed column) enters the model as an additive block."""
    tiny = smallest < MIN_RUNS_FOR_CHECKS
    found, _ = model_parts(sub, metric, [knob], {knob: base}, alpha, seed, block=block,
                           robust="none" if tiny else "auto")
    for label, part in found:
        _model_part_tables(part, label)
        if tiny:
            scale = "the log scale" if part["scale"] == "log" else "the linear scale"
            part["reason"] = (f"{smallest} run(s) at some level: too few to check normality or compare variances, so "
                              f"a one-way model on {scale} with the error pooled over the levels "
                              f"({'the same CV' if part['scale'] == 'log' else 'the same variance'} at every level)")
        if block:
            part["reason"] += f"; the {block} is an additive block of the model ({sub[block].nunique()} testbeds)"
    return found


#: the model tables an OAT knob × profile fit keeps (its residuals repeat the shared baseline runs)
_PROFILE_OAT_TABLES = ("model_terms", "contrasts", "emmeans", "standardized_effects")


def _profile_oat_part(sub: pd.DataFrame, knob: str, metric: dict[str, Any], base: Any, profiles: Sequence[Any],
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
        _model_part_tables(part, label)
        if block:
            part["reason"] += f"; the {block} is an additive block of the model ({sub[block].nunique()} testbeds)"
    terms = {knob, f"{knob}:{PROFILE}"}
    out = {}
    for key in _PROFILE_OAT_TABLES:
        frame = model_tables[key]
        column = "knob" if "knob" in frame.columns else "term"
        out[key] = frame[frame[column].isin(terms)].reset_index(drop=True)
    return kept, out


def _profile_interactions(sub: pd.DataFrame, knobs: list[str], setting: Any, block: str | None) -> Any:
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


def _model_route(data: pd.DataFrame, failed: pd.DataFrame, metrics: list[dict[str, Any]], knobs: list[str],
                 baseline: dict[str, Any], alpha: float, seed: int, design: dict[str, Any], kind: str,
                 notes: list[str], parts: list, untestable: list, tables: dict[str, list[pd.DataFrame]],
                 profiles: Sequence[Any] = (), testbeds: Sequence[Any] = ()) -> None:
    """Factorial, fractional and Plackett–Burman designs: one model per metric on all usable runs.

    With load ``profiles`` the profile joins the model's factors (reference: the first profile),
    with its interaction with every knob (:func:`_profile_interactions`); it gets no verdict row.
    With ``testbeds`` the testbed is the model's additive block, or, when the design's own blocks
    vary too, one block per design block × testbed (:func:`_model_block`).
    """
    design_block = "block" if "block" in data.columns and data["block"].nunique(dropna=True) > 1 else None
    for metric in metrics:
        name = metric["name"]
        sub = data.dropna(subset=[name])
        if len(sub) < len(data):
            notes.append(f"{name}: {len(data) - len(sub)} run(s) without a value left out")
        sub, block = _model_block(sub, design_block, bool(testbeds) and kind != "range")
        active = [k for k in knobs if sub[k].nunique() > 1]
        for knob in (k for k in knobs if k not in active):
            problem = (f"only one level of {knob} has usable runs of {name}"
                       f"{_failure_summary(failed, knob, baseline[knob]) if len(failed) else ''}")
            untestable.append(_untestable_verdict(knob, name, problem))
        if not active:
            continue
        try:
            if kind == "range":
                found, model_tables = range_parts(sub, metric, active, baseline, design, alpha, seed)
            elif profiles and sub[PROFILE].nunique() > 1:
                found, model_tables = model_parts(
                    sub, metric, [*active, PROFILE],
                    {**baseline, PROFILE: next(p for p in profiles if (sub[PROFILE] == p).any())}, alpha, seed,
                    block=block, interactions=_profile_interactions(sub, active, design.get("interactions", "auto"),
                                                                    block))
                found = [(label, part) for label, part in found if label != PROFILE]
            else:
                found, model_tables = model_parts(sub, metric, active, baseline, alpha, seed, block=block,
                                                  interactions=design.get("interactions", "auto"))
        except DataError as exc:
            for knob in active:
                untestable.append(_untestable_verdict(knob, name, f"the model of {name} cannot be fitted: {exc}"))
            notes.append(f"model of {name} not fitted: {exc}")
            continue
        for key, frame in model_tables.items():
            tables.setdefault(key, []).append(frame)
        for knob, part in found:
            parts.append((knob, metric, part))
        if kind == "range":
            continue
        for knob, part in found:
            _model_part_tables(part, knob)
        notes.extend(f"{name}: {note}" for note in found[0][1]["fit"].notes)
        terms = model_tables["model_terms"]
        aliased = terms[(terms["kind"] == "main") & (terms["aliases"] != "")]
        if len(aliased):
            pairs = "; ".join(f"{t} = {a}" for t, a in zip(aliased["term"], aliased["aliases"]))
            notes.append(f"{name}: main effects are aliased with two-factor interactions (resolution III): {pairs}; "
                         "a main effect's estimate includes its aliases")


#: the model route's block column when the design's blocks and the testbeds both vary: one block per pair
BLOCK_BY_TESTBED = f"block|{TESTBED}"


def _model_block(sub: pd.DataFrame, design_block: str | None, testbeds: bool) -> tuple[pd.DataFrame, str | None]:
    """The model's block column: the design's ``block``, the ``testbed``, or both combined into one
    label per pair (``'2|lab1'`` in column :data:`BLOCK_BY_TESTBED`) when both vary in ``sub``.

    >>> runs = pd.DataFrame({"block": [1, 2, 1, 2], "testbed": ["a", "a", "b", "b"]})
    >>> frame, block = _model_block(runs, "block", True)
    >>> block, frame[block].tolist()
    ('block|testbed', ['1|a', '2|a', '1|b', '2|b'])
    """
    if not testbeds or sub[TESTBED].nunique() < 2:
        return sub, design_block
    if design_block is None or sub[design_block].nunique() < 2:
        return sub, TESTBED
    label = sub[design_block].astype(str) + "|" + sub[TESTBED].astype(str)
    return sub.assign(**{BLOCK_BY_TESTBED: label}), BLOCK_BY_TESTBED


def _looks_like_ranges(data: pd.DataFrame, knobs: list[str]) -> bool:
    """A space-filling design without its design file: some numeric knob takes at least 5 values and
    most configurations have a value of it of their own (so levels cannot be compared)."""
    configs = len(data[knobs].astype(str).drop_duplicates())
    for knob in knobs:
        values = data[knob]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            distinct = values.nunique()
            if distinct >= 5 and distinct > configs / 2:
                return True
    return False


def _model_part_tables(part: dict[str, Any], knob: str) -> None:
    """The per-part tables the screen gathers (assumptions, omnibus) in the shared columns."""
    fit = part["fit"]
    term = fit.terms[fit.terms["term"] == knob].iloc[0]
    part["omnibus"] = pd.DataFrame([{"test": fit.test, "source": knob, "statistic": term["statistic"],
                                     "df1": term["df1"], "df2": term["df2"], "p": term["p"],
                                     "effect_size": term["partial_eta2"], "effect_size_name": "partial_eta2",
                                     "recommended": True, "reason": fit.reason}], columns=OMNIBUS_COLUMNS[2:])
    checks = fit.assumptions
    n = float(len(fit.residuals))
    part["assumptions"] = pd.DataFrame([
        {"test": "model_shapiro_wilk", "statistic": math.nan, "df1": math.nan, "df2": math.nan,
         "p": checks.get("shapiro_p", math.nan), "n": n},
        {"test": "model_brown_forsythe", "statistic": math.nan, "df1": math.nan, "df2": math.nan,
         "p": checks.get("variance_p", math.nan), "n": n}], columns=ASSUMPTION_COLUMNS[2:])
    if part["kind"] == "main":
        part["model_effects"] = part["effects"]
        part["effects"] = part["effects"][EFFECT_COLUMNS[2:]]
        part["equivalence"] = part["equivalence"][EQUIVALENCE_COLUMNS[2:]]
        part["posthoc"] = part["posthoc"][POSTHOC_TABLE_COLUMNS[2:]]
