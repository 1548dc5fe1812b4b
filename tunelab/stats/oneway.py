"""One knob's levels compared on its own runs: the one-way analysis of the OAT route.

:func:`analyse_levels` runs, for one knob × metric, the assumption checks, the three omnibus
tests (ANOVA, Welch, Kruskal–Wallis) with their post-hocs (Tukey, Games–Howell, Dunn), the
percent change of every level against the baseline with a bootstrap CI, and TOST equivalence
tests, and picks the test whose assumptions hold (:func:`recommend`);
:func:`analyse_levels_blocked` does the same with the testbed as a block. :func:`oneway_verdict`
states the verdict once the family's adjusted p-value is known.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd

from tunelab.model import Direction, PartKind, Verdict
from tunelab.stats._validate import Groups, check_input, encode, sorted_levels
from tunelab.stats.assumptions import homoscedasticity_rows, normality_row, samples_sd_ratio
from tunelab.stats.blocking import (TESTBED, fit_blocked, lsmeans_effects, lsmeans_equivalence,
                                    stratified_dunn_table, stratified_kruskal_values)
from tunelab.stats.effects import level_sample, pct_change_table
from tunelab.stats.equivalence import tost_row
from tunelab.stats.omnibus import anova_values, kruskal_values, welch_values
from tunelab.stats.posthoc import dunn_table, games_howell_table, lsmeans_table, tukey_table
from tunelab.stats.screen_common import ASSUMPTION_COLUMNS, EQUIVALENCE_COLUMNS, OMNIBUS_COLUMNS, direction_of
from tunelab.stats.verdict_level import choose_level, level_comparisons, level_entries, posthoc_note

#: Shapiro–Wilk p below this means "clearly non-normal" -> Kruskal–Wallis + Dunn
NORMALITY_ALPHA = 0.01


#: Brown–Forsythe p below this means "unequal variances" -> Welch + Games–Howell
VARIANCE_ALPHA = 0.05


#: equal variances are assumed (ANOVA + Tukey) only if, besides Brown–Forsythe p >= VARIANCE_ALPHA,
#: the largest group SD is at most this multiple of the smallest; a non-significant pre-test alone
#: is no evidence of equal variances with 3-5 replicates (see docs/stats-notes.md, "Route choice")
SD_RATIO_MAX = 1.5


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


def analyse_levels(sub: pd.DataFrame, knob: str, metric: dict[str, Any], base: Any, alpha: float, correction: str,
             n_boot: int, seed: int, boot_cache: dict | None = None) -> dict[str, Any]:
    """All tables for one knob × metric on the rows ``sub`` (no NaN in the metric).

    The input is checked and grouped once; every test then runs on the grouped values through
    the same helpers as the public functions (``normality`` is ``check_input`` + ``Groups.of`` +
    ``normality_row``, and so on), so the numbers equal those of the public functions. The
    tables lack the ``knob`` and ``metric`` columns, which the screen adds once for all parts.
    ``boot_cache`` lets knobs that share the baseline runs (OAT) share its bootstrap resamples.
    """
    name = metric["name"]
    groups = Groups.of(check_input(sub, name, knob), name, knob)
    levels, samples, shifted = groups.levels, groups.samples, groups.centred   # shifted once for every test
    norm = [normality_row(groups, name), normality_row(groups, name, standardize=True)]
    homo = homoscedasticity_rows(shifted)
    shapiro_p = float(norm[1]["p"])
    bf_p = float(next(row["p"] for row in homo if row["test"] == "brown_forsythe"))
    route, reason = recommend(shapiro_p, bf_p, samples_sd_ratio(shifted))

    assumptions = pd.DataFrame([{**row, "df1": np.nan, "df2": np.nan} for row in norm]
                               + [{**row, "n": len(sub)} for row in homo], columns=ASSUMPTION_COLUMNS[2:])

    aov, wel, kw = anova_values(shifted), welch_values(groups), kruskal_values(samples)
    omnibus = _omnibus_rows(knob, route, reason, (aov["F"], aov["df_b"], aov["df_w"], aov["p"], aov["eta2"], "eta2"),
                            (wel["F"], wel["df1"], wel["df2"], wel["p"]), kw)

    dunn_adjust = correction if correction != "none" else "holm"
    tables = [tukey_table(levels, shifted, alpha), games_howell_table(levels, shifted, alpha),
              dunn_table(groups, dunn_adjust)]
    posthoc = posthoc_frame(tables, route)

    # the interval at the verdict's level (1 - alpha: a sequential look's nominal alpha), as every interval beside it
    effects = pct_change_table(levels, samples, knob, name, base, n_boot, seed, 1 - alpha, cache=boot_cache)
    base_values = level_sample(levels, samples, knob, base, "baseline")
    equivalence = pd.DataFrame([
        {**tost_row(level_sample(levels, samples, knob, level, "level"), base_values, level, base, metric["sesoi_pct"],
                     alpha, knob, name), "sesoi_pct": metric["sesoi_pct"]}
        for level in effects["level"].tolist()], columns=EQUIVALENCE_COLUMNS[2:])

    p = {"anova+tukey": aov["p"], "welch+games_howell": wel["p"], "kruskal+dunn": kw["p"]}[route]
    return {"assumptions": assumptions, "omnibus": omnibus, "posthoc": posthoc, "effects": effects,
            "equivalence": equivalence, "route": route, "reason": reason, "p": float(p), "eta2": float(aov["eta2"]),
            "kind": PartKind.ONEWAY}


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


def analyse_levels_blocked(sub: pd.DataFrame, knob: str, metric: dict[str, Any], base: Any, alpha: float,
                     correction: str, n_boot: int, seed: int) -> dict[str, Any]:
    """:func:`analyse_levels` with the testbed as an additive block (``sub`` has a ``testbed`` column
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
    norm = [normality_row(aligned, name), normality_row(aligned, name, standardize=True)]
    homo = homoscedasticity_rows(aligned.samples)
    bf_p = float(next(row["p"] for row in homo if row["test"] == "brown_forsythe"))
    route, reason = recommend(float(norm[1]["p"]), bf_p, samples_sd_ratio(aligned.samples))
    reason = (f"{reason}; testbed as a block ({len(testbeds)} testbeds, checks on the runs with each testbed's "
              f"offset removed): {_BLOCKED_ROUTES[route].format(metric=name)}")
    assumptions = pd.DataFrame([{**row, "df1": np.nan, "df2": np.nan} for row in norm]
                               + [{**row, "n": len(sub)} for row in homo], columns=ASSUMPTION_COLUMNS[2:])
    aov, hc3 = fit.knob, fit.knob_hc3
    kw = stratified_kruskal_values(groups.y, groups.codes, blocks, len(levels))
    omnibus = _omnibus_rows(knob, route, reason, (aov["F"], aov["df1"], aov["df2"], aov["p"], aov["partial_eta2"],
                                                  "partial_eta2"), (hc3["F"], hc3["df1"], hc3["df2"], hc3["p"]), kw)
    tables = [lsmeans_table(levels, fit.lsmeans, fit.cov, fit.df_resid, alpha),
              lsmeans_table(levels, fit.lsmeans, fit.cov_hc3, fit.df_resid, alpha),
              stratified_dunn_table(levels, groups.y, groups.codes, blocks,
                                     correction if correction != "none" else "holm")]
    posthoc = posthoc_frame(tables, route)
    effects = lsmeans_effects(fit, levels, base, n_boot, seed, ci=1 - alpha)
    equivalence = lsmeans_equivalence(fit, levels, base, metric["sesoi_pct"], alpha)[EQUIVALENCE_COLUMNS[2:]]
    p = {"anova+tukey": aov["p"], "welch+games_howell": hc3["p"], "kruskal+dunn": kw["p"]}[route]
    return {"assumptions": assumptions, "omnibus": omnibus, "posthoc": posthoc, "effects": effects,
            "equivalence": equivalence, "route": route, "reason": reason, "p": float(p),
            "eta2": float(aov["partial_eta2"]), "kind": PartKind.ONEWAY}


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


def posthoc_frame(tables: list[pd.DataFrame], route: str) -> pd.DataFrame:
    """The Tukey HSD, Games–Howell and Dunn tables (in that order) as one long table with each row's
    ``method`` and whether it is the ``route``'s ``recommended`` test."""
    posthoc = pd.concat(tables, ignore_index=True)
    sizes = [len(table) for table in tables]
    posthoc.insert(0, "method", np.repeat(np.array(["tukey_hsd", "games_howell", "dunn"], dtype=object), sizes))
    posthoc["recommended"] = np.repeat([route == "anova+tukey", route == "welch+games_howell",
                                        route == "kruskal+dunn"], sizes)
    return posthoc


#: the post-hoc test of each route, as the verdict's note names it
POSTHOC_NAMES = {"anova+tukey": "Tukey HSD", "welch+games_howell": "Games–Howell", "kruskal+dunn": "Dunn's test",
                 "duet+paired_t": "the paired t test of each level against its concurrent baselines"}


def oneway_comparisons(part: dict[str, Any]) -> pd.DataFrame:
    """Each non-baseline level's comparison with the baseline (:mod:`tunelab.stats.verdict_level`):
    its % change and bootstrap interval, its difference in the metric's units, the recommended
    post-hoc test's adjusted p for the pair and its TOST p."""
    effects = part["effects"]
    posthoc = part["posthoc"][part["posthoc"]["recommended"].astype(bool)]
    return level_comparisons(effects, posthoc, part["equivalence"]["p"],
                             (effects["mean"] - effects["baseline_mean"]).astype(float))


def oneway_verdict(part: dict[str, Any], metric: dict[str, Any], p_adj: float, alpha: float) -> dict[str, Any]:
    """The verdict row (without knob and metric) of a one-way part, given the family's adjusted p;
    its level and effect come from that level's post-hoc comparison with the baseline."""
    comparisons = oneway_comparisons(part)
    family = bool(p_adj < alpha) if not math.isnan(p_adj) else False
    index, chosen = choose_level(comparisons, family, alpha, metric["direction"], metric["sesoi_pct"])
    level = comparisons["level"].tolist()[index]
    decisive = comparisons.iloc[index]
    significant = bool(chosen)
    effect = float(decisive["effect_pct"])
    relevant = significant and abs(effect) >= metric["sesoi_pct"]
    equivalent = bool(part["equivalence"]["equivalent"].all())
    verdict = Verdict.MATTERS if relevant else Verdict.EQUIVALENT if equivalent else Verdict.INCONCLUSIVE
    gain = effect if metric["direction"] == Direction.MAXIMIZE else -effect
    return {"test": part["route"], "reason": part["reason"], "p": part["p"], "p_adj": p_adj,
            "significant": significant, "level": level, "effect_pct": effect,
            "effect_ci_low": float(decisive["ci_low"]), "effect_ci_high": float(decisive["ci_high"]),
            "eta2": part["eta2"], "direction": direction_of(verdict, gain), "relevant": relevant,
            "equivalent": equivalent, "verdict": verdict.value, "effect_abs": float(decisive["effect_abs"]),
            "effect_abs_ci_low": float(decisive["abs_ci_low"]), "effect_abs_ci_high": float(decisive["abs_ci_high"]),
            "scale": "linear", "only_when": None,
            "levels": level_entries(comparisons, chosen),
            "posthoc_note": posthoc_note(comparisons, family, p_adj, alpha, POSTHOC_NAMES.get(part["route"], "the post-hoc test"))}
