"""The screen's model route: verdicts of factorial, fractional and Plackett–Burman designs from one model.

:func:`model_parts` fits :func:`tunelab.stats.linear_model.fit_model` once per metric on all usable
runs and turns it into the screen's parts: one per main effect and one per estimated two-factor
interaction, each with its p-value (adjusted later with the whole family), its effects against
the baseline and its equivalence tests, plus the model's own tables (terms, contrasts, means,
residuals, standardised effects). :func:`model_verdict` states the verdict once the family's
adjusted p-values are known.

Effects are ratios on the log scale (``effect_pct = 100 (exp(b) - 1)``) and differences on the
linear scale (``effect_abs``; ``effect_pct`` relative to the baseline's marginal mean when that
is positive). A metric with ``sesoi_abs`` is judged on differences.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.formatting import fmt_abs_interval, fmt_pct_interval
from tunelab.model import Direction, PartKind, Verdict
from tunelab.stats.linear_model import ModelFit, TermKind, fit_model
from tunelab.stats.numerics import first_best
from tunelab.stats.screen_common import (ASSUMPTION_COLUMNS, EFFECT_COLUMNS, EQUIVALENCE_COLUMNS, OMNIBUS_COLUMNS,
                                         POSTHOC_TABLE_COLUMNS, direction_of)
from tunelab.stats.verdict_level import choose_level, level_comparisons, level_entries, posthoc_note

#: permutations of the Freedman–Lane test: its smallest p is 1 / (N + 1), which must survive a Holm
#: adjustment over a family of a hundred knob × metric tests
N_PERMUTATIONS = 9999
MODEL_TERM_COLUMNS = ["metric", "term", "kind", "df1", "df2", "statistic", "p", "p_adj", "partial_eta2", "test",
                      "scale", "aliases"]
MODEL_CONTRAST_COLUMNS = ["metric", "knob", "level", "baseline", "at", "scale", "estimate", "se", "df", "p", "p_adj",
                          "ci_low", "ci_high", "effect_pct", "effect_ci_low", "effect_ci_high"]
MODEL_EMMEANS_COLUMNS = ["metric", "knob", "level", "by", "by_level", "scale", "mean", "ci_low", "ci_high"]
MODEL_RESIDUAL_COLUMNS = ["metric", "row", "fitted", "residual", "studentized", "leverage"]
MODEL_EFFECT_COLUMNS = ["metric", "term", "estimate", "se", "t", "p"]


def metric_scale(metric: Mapping[str, Any], values: pd.Series) -> str:
    """``'log'`` or ``'linear'``: the metric's own choice, else log when every value is positive
    and no ``sesoi_abs`` is given (ratio-scale metrics: rates, latencies, throughputs)."""
    scale = metric.get("scale", "auto")
    if scale != "auto":
        return scale
    if metric.get("sesoi_abs") is not None:
        return "linear"
    return "log" if len(values) and bool((values > 0).all()) else "linear"


def to_metric_scale(estimate: float, scale: str, base_mean: float) -> float:
    """A contrast on the model's scale as a % change: ``100 (exp(b) - 1)`` on the log scale,
    ``100 b / base_mean`` on the linear scale (NaN when the baseline mean is not positive)."""
    if scale == "log":
        return 100.0 * math.expm1(estimate)
    return 100.0 * estimate / base_mean if base_mean > 0 else math.nan


def _bounds(metric: Mapping[str, Any], scale: str, base_mean: float) -> tuple[float, float]:
    """The equivalence bounds on the model's scale."""
    if metric.get("sesoi_abs") is not None:
        return -float(metric["sesoi_abs"]), float(metric["sesoi_abs"])
    share = metric["sesoi_pct"] / 100.0
    if scale == "log":
        return math.log(max(1.0 - share, 1e-12)), math.log1p(share)
    return -share * base_mean, share * base_mean


def tost_p_values(estimate: float, se: float, df: float, low: float, high: float, alpha: float) -> tuple[float, float]:
    if not se > 0:
        return (0.0 if estimate > low else 1.0), (0.0 if estimate < high else 1.0)
    return float(ss.t.sf((estimate - low) / se, df)), float(ss.t.cdf((estimate - high) / se, df))


def _level_mean(fit: ModelFit, knob: str, level: Any, scale: str) -> float:
    """The marginal mean of ``knob = level`` in the metric's units (a geometric mean on the log scale)."""
    rows = fit.emmeans[(fit.emmeans["knob"] == knob) & fit.emmeans["by"].isna()]
    mean = float(rows.loc[[lv == level for lv in rows["level"]], "mean"].iloc[0])
    return math.exp(mean) if scale == "log" else mean


def _knob_part(fit: ModelFit, knob: str, metric: Mapping[str, Any], scale: str, alpha: float) -> dict[str, Any]:
    """A main effect's part: p, effects and equivalence of each level against the baseline."""
    term = fit.terms[fit.terms["term"] == knob].iloc[0]
    contrasts = fit.contrasts[(fit.contrasts["knob"] == knob) & (fit.contrasts["at"] == "")]
    base_level = contrasts["baseline"].iloc[0]
    base_mean = _level_mean(fit, knob, base_level, scale)
    if scale == "linear" and abs(base_mean) <= 1e-9 * float(fit.emmeans["mean"].abs().max()):
        base_mean = 0.0          # a baseline mean of 0 up to rounding: no % change exists
    if metric.get("sesoi_abs") is None and scale == "linear" and not base_mean > 0:
        raise DataError(f"the baseline {base_level!r} of {knob!r} has a mean of {base_mean:.3g} for {metric['name']!r}, "
                        "so a % change is undefined; give the metric an absolute smallest effect (sesoi_abs)")
    low, high = _bounds(metric, scale, base_mean)
    effects, equivalence = [], []
    for row in contrasts.itertuples():
        level_mean = _level_mean(fit, knob, row.level, scale)
        effects.append({"level": row.level, "baseline": base_level, "mean": level_mean, "baseline_mean": base_mean,
                        "pct_change": to_metric_scale(row.estimate, scale, base_mean),
                        "ci_low": to_metric_scale(row.adj_ci_low, scale, base_mean),
                        "ci_high": to_metric_scale(row.adj_ci_high, scale, base_mean),
                        "estimate": row.estimate, "est_low": row.adj_ci_low, "est_high": row.adj_ci_high})
        p_lower, p_upper = tost_p_values(row.estimate, row.se, row.df, low, high, alpha)
        equivalence.append({"level": row.level, "baseline": base_level,
                            "pct_change": to_metric_scale(row.estimate, scale, base_mean), "lower_bound": low,
                            "upper_bound": high, "p_lower": p_lower, "p_upper": p_upper, "p": max(p_lower, p_upper),
                            "equivalent": bool(max(p_lower, p_upper) < alpha),
                            "sesoi_pct": metric["sesoi_pct"]})
    posthoc = pd.DataFrame({"group1": contrasts["baseline"], "group2": contrasts["level"],
                            "estimate": contrasts["estimate"], "ci_low": contrasts["adj_ci_low"],
                            "ci_high": contrasts["adj_ci_high"], "statistic": contrasts["t"], "p": contrasts["p"],
                            "p_adj": contrasts["p_adj"], "method": "model_dunnett", "recommended": True})
    return {"kind": PartKind.MAIN, "p": float(term["p"]), "route": fit.test, "reason": fit.reason,
            "eta2": float(term["partial_eta2"]), "effects": pd.DataFrame(effects), "equivalence": pd.DataFrame(equivalence),
            "posthoc": posthoc, "scale": scale, "base_mean": base_mean, "fit": fit}


def _interaction_part(fit: ModelFit, term: pd.Series, parts: Mapping[str, dict[str, Any]], scale: str,
                      alpha: float) -> dict[str, Any]:
    a, b = term["term"].split(":")
    return {"kind": PartKind.INTERACTION, "p": float(term["p"]), "route": fit.test, "reason": fit.reason, "alpha": alpha,
            "eta2": float(term["partial_eta2"]), "factors": (a, b), "scale": scale, "fit": fit,
            "base_mean": parts[a]["base_mean"] if a in parts else math.nan, "effects": pd.DataFrame(),
            "equivalence": pd.DataFrame(), "posthoc": pd.DataFrame()}


def model_parts(data: pd.DataFrame, metric: Mapping[str, Any], knobs: list[str], baseline: Mapping[str, Any],
                alpha: float, seed: int, block: str | None = None,
                interactions: Any = "auto", robust: str = "auto") -> tuple[list[tuple[str, dict[str, Any]]], dict[str, pd.DataFrame]]:
    """Fit the metric's model; return its parts ``[(knob or 'a:b', part)]`` and its tables.

    Raises :class:`DataError` (the caller marks the metric's knobs untestable) when the model
    cannot be fitted or a % change is undefined.
    """
    name = metric["name"]
    values = pd.to_numeric(data[name], errors="coerce").dropna()
    scale = metric_scale(metric, values)
    fit = fit_model(data, name, knobs, baseline=baseline, interactions=interactions, block=block,
                    log=scale == "log", robust=robust, alpha=alpha, seed=seed, n_perm=N_PERMUTATIONS)
    parts: dict[str, dict[str, Any]] = {}
    for knob in knobs:
        parts[knob] = _knob_part(fit, knob, metric, scale, alpha)
    out = [(knob, parts[knob]) for knob in knobs]
    for term in fit.terms[fit.terms["kind"] == TermKind.INTERACTION.value].itertuples(index=False):
        out.append((term.term, _interaction_part(fit, pd.Series(term._asdict()), parts, scale, alpha)))
    return out, model_tables(fit, metric, scale, parts)


def model_tables(fit: ModelFit, metric: Mapping[str, Any], scale: str,
                 parts: Mapping[str, dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """The model's own tables with the metric's name and scale (p_adj of the terms is filled later)."""
    name = metric["name"]
    terms = fit.terms.assign(metric=name, scale=scale, p_adj=math.nan)[MODEL_TERM_COLUMNS]
    contrasts = fit.contrasts.assign(metric=name, scale=scale)
    base = {knob: part["base_mean"] for knob, part in parts.items()}
    for column, source in (("effect_pct", "estimate"), ("effect_ci_low", "adj_ci_low"),
                           ("effect_ci_high", "adj_ci_high")):
        contrasts[column] = [to_metric_scale(v, scale, base.get(k, math.nan))
                             for v, k in zip(contrasts[source], contrasts["knob"])]
    contrasts = contrasts.assign(ci_low=contrasts["adj_ci_low"], ci_high=contrasts["adj_ci_high"])
    emmeans = fit.emmeans.assign(metric=name, scale=scale)
    if scale == "log":
        for column in ("mean", "ci_low", "ci_high"):
            emmeans[column] = np.exp(emmeans[column])
    return {"model_terms": terms, "contrasts": contrasts[MODEL_CONTRAST_COLUMNS],
            "emmeans": emmeans[MODEL_EMMEANS_COLUMNS],
            "residuals": fit.residuals.assign(metric=name)[MODEL_RESIDUAL_COLUMNS],
            "standardized_effects": fit.effects.assign(metric=name)[MODEL_EFFECT_COLUMNS]}


# --------------------------------------------------------------------------------------------
# verdicts


def _in_units(scale: str, base_mean: float, absolute: bool) -> bool:
    """Are effects judged in the metric's units (an absolute SESOI, or no % change exists)?"""
    return absolute or (scale == "linear" and not base_mean > 0)


def _size(estimate: float, scale: str, base_mean: float, absolute: bool) -> float:
    """A model-scale contrast in the units of the SESOI (% or the metric's own)."""
    return estimate if _in_units(scale, base_mean, absolute) else to_metric_scale(estimate, scale, base_mean)


def _effect_text(estimate: float, low: float, high: float, scale: str, base_mean: float, absolute: bool) -> str:
    """A simple effect with its interval, in the metric's units or (1 decimal) in %."""
    if _in_units(scale, base_mean, absolute):
        return fmt_abs_interval(estimate, low, high)
    return fmt_pct_interval(*(to_metric_scale(v, scale, base_mean) for v in (estimate, low, high)), decimals=1)


def simple_effects(part: Mapping[str, Any], knob: str, other: str) -> list[dict[str, Any]]:
    """Per level of ``other``: the knob's largest simple effect (adjusted CI), and whether it is clear."""
    contrasts = part["fit"].contrasts
    rows = contrasts[(contrasts["knob"] == knob) & contrasts["at"].str.startswith(f"{other}=")]
    out = []
    for at, group in rows.groupby("at", sort=False):
        label = first_best(group["estimate"].abs())
        best = group.loc[label]
        clear = bool(best["adj_ci_low"] > 0 or best["adj_ci_high"] < 0)
        out.append({"at": at, "level": group["level"].tolist()[group.index.get_loc(label)], "estimate": float(best["estimate"]),
                    "low": float(best["adj_ci_low"]), "high": float(best["adj_ci_high"]), "clear": clear})
    return out


def _describe_simple(knob: str, effects: list[dict[str, Any]], metric: Mapping[str, Any], scale: str,
                     base_mean: float) -> str:
    absolute = metric.get("sesoi_abs") is not None
    pieces = []
    for e in effects:
        text = _effect_text(e["estimate"], e["low"], e["high"], scale, base_mean, absolute)
        pieces.append(f"at {e['at']}: {knob}={e['level']!s} {text}" + ("" if e["clear"] else " (no clear effect)"))
    return f"{metric['name']} " + "; ".join(pieces)


def model_verdict(part: dict[str, Any], label: str, metric: Mapping[str, Any], p_adj: float, alpha: float,
                  significant_terms: set[str]) -> dict[str, Any]:
    """The verdict row (without knob and metric) of a model part, given the family's adjusted p."""
    significant = bool(p_adj < alpha) if not math.isnan(p_adj) else False
    absolute = metric.get("sesoi_abs") is not None
    sesoi = float(metric["sesoi_abs"]) if absolute else float(metric["sesoi_pct"])
    scale, base_mean = part["scale"], part["base_mean"]
    sign = 1.0 if metric["direction"] == Direction.MAXIMIZE else -1.0
    row: dict[str, Any] = {"test": part["route"], "reason": part["reason"], "p": part["p"], "p_adj": p_adj,
                           "significant": significant, "eta2": part["eta2"], "scale": scale, "only_when": None}
    if part["kind"] is PartKind.INTERACTION:
        return {**row, **_interaction_verdict(part, label, metric, significant, sesoi, absolute, sign)}
    effects = part.get("model_effects", part["effects"]).reset_index(drop=True)
    comparisons = model_comparisons(part, effects)
    index, chosen = choose_level(comparisons, significant, alpha, metric["direction"], sesoi, absolute)
    best = effects.loc[index]
    level = effects["level"].tolist()[index]   # a row Series would make 128 a float
    effect = float((effects["estimate"] if absolute else effects["pct_change"]).loc[index])
    row.update({"significant": bool(chosen), "levels": level_entries(comparisons, chosen),
                "posthoc_note": posthoc_note(comparisons, significant, p_adj, alpha, "Dunnett")})
    significant = bool(chosen)
    relevant = significant and abs(effect) >= sesoi
    partners = [t for t in significant_terms if label in t.split(":")]
    equivalent = bool(part["equivalence"]["equivalent"].all()) and not partners
    notes = []
    conditional = None     # the strongest clear simple effect, when the knob matters only within partners' levels
    for term in partners:
        other = next(f for f in term.split(":") if f != label)
        simple = simple_effects(part, label, other)
        clear = [e for e in simple if e["clear"] and abs(_size(e["estimate"], scale, base_mean, absolute)) >= sesoi]
        if clear and len(clear) < len(simple):
            row["only_when"] = " or ".join(e["at"] for e in clear)
            notes.append(f"holds only at {row['only_when']} (interaction with {other})")
        elif clear:
            notes.append(f"its size or direction depends on {other} (interaction): clear at "
                         f"{' and '.join(e['at'] for e in clear)}")
        else:
            notes.append(f"its size depends on {other} (interaction)")
        strongest = max(clear, key=lambda e: abs(e["estimate"]), default=None)
        if strongest and (conditional is None or abs(strongest["estimate"]) > abs(conditional["estimate"])):
            conditional = strongest
    if not relevant and conditional is not None:
        # the average over the partner's levels hides it, but the interaction is significant and the
        # knob's simple effect is clear and at least the SESOI at some level: report that effect
        relevant = True
        effects = pd.DataFrame([{"level": conditional["level"],
                                 "pct_change": to_metric_scale(conditional["estimate"], scale, base_mean),
                                 "ci_low": to_metric_scale(conditional["low"], scale, base_mean),
                                 "ci_high": to_metric_scale(conditional["high"], scale, base_mean),
                                 "estimate": conditional["estimate"], "est_low": conditional["low"],
                                 "est_high": conditional["high"]}])
        best, level = effects.loc[0], conditional["level"]
        notes.append(f"the effect shown is the one at {conditional['at']}; averaged over {conditional['at'].split('=')[0]} "
                     "it is not significant")
    verdict = Verdict.MATTERS if relevant else (Verdict.EQUIVALENT if equivalent else Verdict.INCONCLUSIVE)
    gain_sign = sign * float(best["estimate"])
    row.update({
        "reason": part["reason"] + ("; " + "; ".join(notes) if notes else ""),
        "level": level, "effect_pct": float(best["pct_change"]),
        "effect_ci_low": float(best["ci_low"]), "effect_ci_high": float(best["ci_high"]),
        "effect_abs": float(best["estimate"]) if scale == "linear" else math.nan,
        "effect_abs_ci_low": float(best["est_low"]) if scale == "linear" else math.nan,
        "effect_abs_ci_high": float(best["est_high"]) if scale == "linear" else math.nan,
        "direction": direction_of(verdict, gain_sign),
        "relevant": relevant, "equivalent": equivalent, "verdict": verdict.value})
    return row


def model_comparisons(part: dict[str, Any], effects: pd.DataFrame) -> pd.DataFrame:
    """Each non-baseline level's Dunnett contrast with the baseline (:mod:`tunelab.stats.verdict_level`):
    its % change and interval (back-transformed from the log scale), its difference and interval
    in the metric's units (linear scale only), its adjusted p and its TOST p."""
    if part["scale"] != "linear":
        return level_comparisons(effects, part["posthoc"], part["equivalence"]["p"], [math.nan] * len(effects))
    return level_comparisons(effects, part["posthoc"], part["equivalence"]["p"], effects["estimate"].astype(float),
                             effects["est_low"].astype(float), effects["est_high"].astype(float))


def _interaction_verdict(part: dict[str, Any], label: str, metric: Mapping[str, Any], significant: bool, sesoi: float,
                         absolute: bool, sign: float) -> dict[str, Any]:
    """An interaction row: its largest difference of simple effects, and the simple effects in words."""
    a, b = part["factors"]
    fit, scale, base_mean = part["fit"], part["scale"], part["base_mean"]
    rows = fit.interactions[fit.interactions["term"] == label]
    strongest = rows.loc[rows["estimate"].abs().idxmax()] if len(rows) else None
    effect = _size(float(strongest["estimate"]), scale, base_mean, absolute) if strongest is not None else math.nan
    relevant = significant and abs(effect) >= sesoi
    t_crit = float(ss.t.ppf(1 - part.get("alpha", 0.05), float(rows["df"].iloc[0]))) if len(rows) else math.nan
    within = bool(len(rows)) and all(abs(_size(e + s * t_crit * se, scale, base_mean, absolute)) < sesoi
                                     for e, se in zip(rows["estimate"], rows["se"]) for s in (-1, 1))
    verdict = Verdict.MATTERS if relevant else (Verdict.EQUIVALENT if within else Verdict.INCONCLUSIVE)
    simple = simple_effects(part, a, b)
    clear = [e["at"] for e in simple if e["clear"]]
    only = " or ".join(clear) if relevant and clear and len(clear) < len(simple) else None
    description = "; ".join(_describe_simple(knob, simple_effects(part, knob, other), metric, scale,
                                             base_mean) for knob, other in ((b, a), (a, b)))
    linear = scale == "linear"
    return {"reason": f"{part['reason']}; {description}", "level": None, "levels": [], "posthoc_note": None,
            "effect_pct": to_metric_scale(float(strongest["estimate"]), scale, base_mean) if strongest is not None else math.nan,
            "effect_ci_low": to_metric_scale(float(strongest["ci_low"]), scale, base_mean) if strongest is not None else math.nan,
            "effect_ci_high": to_metric_scale(float(strongest["ci_high"]), scale, base_mean) if strongest is not None else math.nan,
            "effect_abs": float(strongest["estimate"]) if linear and strongest is not None else math.nan,
            "effect_abs_ci_low": float(strongest["ci_low"]) if linear and strongest is not None else math.nan,
            "effect_abs_ci_high": float(strongest["ci_high"]) if linear and strongest is not None else math.nan,
            "direction": direction_of(verdict, sign * float(strongest["estimate"]) if strongest is not None else 0.0),
            "relevant": relevant, "equivalent": verdict == Verdict.EQUIVALENT, "verdict": verdict.value,
            "only_when": only}


#: columns of :func:`profile_effects`
PROFILE_EFFECT_COLUMNS = ["metric", "knob", "level", "baseline", "profile", "scale", "estimate", "effect_pct",
                          "effect_ci_low", "effect_ci_high", "p_adj"]


def profile_effects(contrasts: pd.DataFrame, factor: str = "profile") -> pd.DataFrame:
    """Each knob's effect at each load profile: the model's simple effects at ``factor=NAME``.

    ``contrasts`` is :attr:`ScreenResult.contrasts` of a profile-crossed study; one row per metric ×
    knob × level × profile with the % change against the knob's baseline at that profile and its
    Dunnett-adjusted interval (``p_adj`` adjusts over the knob's levels at that profile). Empty
    when the study has no profile factor.

    >>> contrasts = pd.DataFrame({"metric": ["qps"] * 3, "knob": ["a", "a", "a"], "level": [1, 1, 1],
    ...                           "baseline": [0, 0, 0], "at": ["", "profile=low", "profile=overload"],
    ...                           "scale": ["log"] * 3, "estimate": [0.1, 0.0, 0.2], "p_adj": [0.01, 0.9, 0.001],
    ...                           "effect_pct": [10.5, 0.0, 22.1], "effect_ci_low": [5.0, -3.0, 15.0],
    ...                           "effect_ci_high": [16.0, 3.0, 30.0]})
    >>> profile_effects(contrasts)[["knob", "profile", "effect_pct"]].to_dict("records")
    [{'knob': 'a', 'profile': 'low', 'effect_pct': 0.0}, {'knob': 'a', 'profile': 'overload', 'effect_pct': 22.1}]
    """
    prefix = f"{factor}="
    if contrasts.empty:
        return pd.DataFrame(columns=PROFILE_EFFECT_COLUMNS)
    at = contrasts["at"].astype(str)
    rows = contrasts[at.str.startswith(prefix) & (contrasts["knob"] != factor)]
    return rows.assign(profile=rows["at"].astype(str).str[len(prefix):])[PROFILE_EFFECT_COLUMNS].reset_index(drop=True)


def model_part_tables(part: dict[str, Any], knob: str) -> None:
    """Add to a model part (fresh from :func:`~tunelab.stats.model_screen.model_parts`) the per-part
    tables the screen gathers (assumptions, omnibus) in the shared columns."""
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
    if part["kind"] is PartKind.MAIN:
        part["model_effects"] = part["effects"]
        part["effects"] = part["effects"][EFFECT_COLUMNS[2:]]
        part["equivalence"] = part["equivalence"][EQUIVALENCE_COLUMNS[2:]]
        part["posthoc"] = part["posthoc"][POSTHOC_TABLE_COLUMNS[2:]]
