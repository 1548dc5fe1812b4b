"""The words of a report: the plain-words summary, the methods section and the model's description, as
Markdown derived from the study's store and the :class:`~tunelab.stats.ScreenResult`, never typed in by hand.

Numbers are formatted by :mod:`tunelab.formatting`, HTML comes from the templates
(:mod:`tunelab.report.rendering`), and the DataFrames shown as tables from :mod:`tunelab.report.tables`.
Text from a store is Markdown here; :func:`tunelab.report.rendering.markdown_to_html` escapes any raw
HTML in it.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

import pandas as pd

from tunelab.formatting import fmt_abs, fmt_ci, fmt_number, fmt_p, fmt_pct, fmt_sig
from tunelab.model import AnalysisKind, DesignType, Phase, Verdict
from tunelab.formatting import level_label
from tunelab.formatting import fmt_level
from tunelab.report.loading import (Study, StudyInputs, foreign_load, machine, pinning_text, planned_runs,
                                    repeated_trials, software_versions, trial_provenance)
from tunelab.runner.outcomes import FOREIGN_LOAD_WARN
from tunelab.stats import ScreenResult
from tunelab.stats.blocking import spread_phrase
from tunelab.stats.mechanisms import change_text, counter_name, top_mechanisms
from tunelab.stats.linear_model import MIN_RESIDUAL_DF, NORMALITY_ALPHA as MODEL_NORMALITY_ALPHA, TermKind
from tunelab.stats.linear_model import VARIANCE_ALPHA as MODEL_VARIANCE_ALPHA

ROUTE_SHORT = {"anova+tukey": "ANOVA + Tukey", "welch+games_howell": "Welch + Games–Howell",
               "kruskal+dunn": "Kruskal–Wallis + Dunn", "duet+paired_t": "duet: paired t vs concurrent baseline"}


#: the model route's tests (:data:`tunelab.stats.linear_model.TESTS`) in a sentence
MODEL_TEST_TEXT = {"ols_type2": "type II F tests of the model", "ols_type3": "type III F tests of the model",
                   "hc3_wald": "HC3 Wald tests of the model (heteroscedasticity-robust)",
                   "freedman_lane": "Freedman–Lane permutation tests of the model",
                   "lenth": "Lenth's pseudo standard error (unreplicated design)"}


#: the same, short (verdict table and summary)
MODEL_TEST_SHORT = {"ols_type2": "model F test", "ols_type3": "model F test (type III)", "hc3_wald": "model HC3 Wald",
                    "freedman_lane": "model permutation test", "lenth": "Lenth PSE"}


POSTHOC_TEXT = {"tukey_hsd": "Tukey HSD", "games_howell": "Games–Howell", "dunn": "Dunn",
                "model_dunnett": "Dunnett (the model's contrasts against the baseline)",
                "duet_paired_t": "duet: paired t on each level's log ratios against its concurrent baseline"}

#: what a post-hoc table's ``estimate`` column means, per method (default: a difference of means)
POSTHOC_ESTIMATE_TEXT = {"dunn": "`estimate` is the difference of mean ranks, group2 − group1; ",
                         "duet_paired_t": "`estimate` is the % change of group2 against its concurrent group1 runs "
                                          "(crossover fit) with its 95 % interval; "}
DEFAULT_ESTIMATE_TEXT = "`estimate` is mean(group2) − mean(group1) with its simultaneous 95 % interval; "


def posthoc_estimate_text(method: str) -> str:
    """What the ``estimate`` column of ``method``'s post-hoc table means (a sentence for the notebook)."""
    return POSTHOC_ESTIMATE_TEXT.get(method, DEFAULT_ESTIMATE_TEXT)


CORRECTION_TEXT = {"holm": "Holm's step-down method (family-wise error rate)",
                   "bonferroni": "the Bonferroni method (family-wise error rate)",
                   "fdr_bh": "the Benjamini–Hochberg method (false discovery rate)",
                   "none": "no correction"}


DESIGN_TEXT = {DesignType.OAT: "one-at-a-time (OAT)", DesignType.FULL_FACTORIAL: "full factorial",
               DesignType.FRACTIONAL_FACTORIAL: "fractional factorial", DesignType.PLACKETT_BURMAN: "Plackett–Burman",
               DesignType.LATIN_HYPERCUBE: "Latin hypercube"}


VERDICT_ORDER = {"matters": 0, "not comparable": 1, "inconclusive": 2, "no effect (equivalent)": 3, "untestable": 4}


def present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and str(value) != ""


def short_test_name(test: Any) -> str:
    return ROUTE_SHORT.get(test, MODEL_TEST_SHORT.get(test, str(test)))


def _and(knobs: Sequence[str]) -> str:
    quoted = [f"`{k}`" for k in knobs]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _verb(effect: float) -> str:
    return "raises" if effect > 0 else "lowers" if effect < 0 else "leaves unchanged"


def sesoi_text(metric: Mapping[str, Any]) -> str:
    """A metric's smallest effect of interest as text: ``±5 %``, or ``±10 (absolute)`` in the metric's units
    when it has ``sesoi_abs`` (then ``sesoi_pct`` may be missing).

    >>> sesoi_text({"name": "qps", "sesoi_pct": 5.0}), sesoi_text({"name": "lost", "sesoi_abs": 10.0})
    ('±5 %', '±10 (absolute)')
    """
    if metric.get("sesoi_abs") is not None:
        return f"±{float(metric['sesoi_abs']):g} (absolute)"
    if metric.get("sesoi_pct") is not None:
        return f"±{float(metric['sesoi_pct']):g} %"
    return "± n/a"


def condition_text(only_when: str) -> str:
    """``'a=16 or a=128'`` (a verdict's ``only_when``) as ``'`a` = 16 or `a` = 128'``.

    >>> condition_text("net.core.somaxconn=16")
    '`net.core.somaxconn` = 16'
    """
    parts = []
    for piece in str(only_when).split(" or "):
        knob, sep, level = piece.partition("=")
        parts.append(f"`{knob.strip()}` = {level.strip()}" if sep else piece)
    return " or ".join(parts)


def configs_text(config: Mapping[str, Any], keys: Sequence[str] | None = None) -> str:
    """``{'a': 1, 'b': (1, 2)}`` -> ``'a = 1, b = 1 2'``."""
    keys = list(keys) if keys is not None else list(config)
    return ", ".join(f"{k} = {level_label(config[k])}" for k in keys if k in config)


def _simple_effects_text(reason: str, metric: str) -> str:
    """The simple effects an interaction row's ``reason`` ends with (groups ``'<metric> at b=..: a=.. …'``),
    without the model's route that precedes them; the whole reason when they are not found.

    >>> _simple_effects_text("F tests; qps at b=0: a=1 +5 %; at b=1: a=1 -3 %; qps at a=0: b=1 +1 %", "qps")
    'at b=0: a=1 +5 %; at b=1: a=1 -3 %; and at a=0: b=1 +1 %'
    """
    marker = f"{metric} at "
    pieces = str(reason).split("; ")
    first = next((i for i, piece in enumerate(pieces) if piece.startswith(marker)), None)
    if first is None:
        return str(reason)
    return "; ".join(("and " if i > first else "") + piece[len(metric) + 1:] if piece.startswith(marker) else piece
                     for i, piece in enumerate(pieces) if i >= first)


def _change_text(row: Any, absolute: bool, signed: bool = True) -> str:
    """The verdict row's change with its CI at the verdict's level (``ci_level``, 95 % without it): in the
    metric's units when ``absolute``, else in %."""
    level = float(getattr(row, "ci_level", 0.95))
    level = level if math.isfinite(level) else 0.95
    if absolute and math.isfinite(float(getattr(row, "effect_abs", math.nan))):
        low, high = getattr(row, "effect_abs_ci_low", math.nan), getattr(row, "effect_abs_ci_high", math.nan)
        ci = (f" [{fmt_level(level)} CI {fmt_abs(low)} to {fmt_abs(high)}]"
              if math.isfinite(float(low)) and math.isfinite(float(high)) else "")
        return f"{fmt_abs(row.effect_abs, signed)}{ci}"
    effect = float(row.effect_pct)
    return f"{fmt_pct(effect, signed=signed)} {fmt_ci(row.effect_ci_low, row.effect_ci_high, effect, level)}"


def _interaction_sentence(row: Any, band: str, absolute: bool, aliases: str = "") -> str:
    """An interaction row (knob ``'a:b'``) in words: does the effect of a depend on b, and how (and which
    effects the design cannot tell it apart from)."""
    a, _, b = str(row.knob).partition(":")
    simple = _simple_effects_text(row.reason, row.metric)
    if aliases:
        simple += (f" (aliased with {_and([t.strip() for t in aliases.split(' = ')])}: the design cannot tell "
                   "them apart)")
    test = short_test_name(row.test)
    size = _change_text(row, absolute)
    if row.verdict == Verdict.MATTERS:
        where = f"; it matters only when {condition_text(row.only_when)}" if present(row.only_when) else ""
        return (f"The effect of `{a}` on {row.metric} **depends on** `{b}` (interaction, {fmt_p(row.p_adj)}, {test}; "
                f"the effects differ by up to {size}): {simple}{where}.")
    if row.verdict == Verdict.EQUIVALENT:
        return (f"The effect of `{a}` on {row.metric} does **not depend on** `{b}` beyond {band} (the interaction "
                f"is within the smallest effect of interest, {fmt_p(row.p_adj)}): {simple}.")
    if row.verdict == Verdict.UNTESTABLE or not present(row.test):
        return f"Whether the effect of `{a}` on {row.metric} depends on `{b}` could **not be tested**: {row.reason}."
    return (f"Whether the effect of `{a}` on {row.metric} depends on `{b}` is **inconclusive** (interaction "
            f"{fmt_p(row.p_adj)}, {test}; the effects differ by up to {size}): {simple}.")


def _interacting(verdicts: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
    """(metric, knob) -> the knobs it has a significant interaction with (verdict rows ``'a:b'``)."""
    out: dict[tuple[str, str], list[str]] = {}
    rows = verdicts[verdicts["knob"].astype(str).str.contains(":", regex=False)
                    & verdicts["significant"].fillna(False).astype(bool)]
    for knob, metric in zip(rows["knob"].astype(str), rows["metric"]):
        a, _, b = knob.partition(":")
        out.setdefault((metric, a), []).append(b)
        out.setdefault((metric, b), []).append(a)
    return out


def summary_sentences(result: ScreenResult, inputs: StudyInputs) -> list[str]:
    """One plain-words sentence (Markdown) per knob × metric of the screen, and per estimated interaction
    × metric of a factorial design, most important first.

    Example: ``net.core.somaxconn`` = 16 lowers qps by 99.0 % [95 % CI -99.1 % to -98.9 %]
    against the baseline 4096, p_adj < 0.001 (Kruskal–Wallis + Dunn): **matters** (worse).

    A knob whose effect is clear only at some levels of a knob it interacts with **matters only
    when** that knob is at those levels (the verdict's ``only_when``); an interaction ``a:b`` reads
    "the effect of a on the metric depends on b", followed by the effect of a at each level of b.
    Metrics with an absolute smallest effect (``sesoi_abs``) are described by differences in their
    own units.
    """
    specs = {m["name"]: m for m in inputs.metrics}
    verdicts = result.verdicts.assign(_order=result.verdicts["verdict"].map(VERDICT_ORDER).fillna(5))
    partners = _interacting(result.verdicts)
    terms = result.model_terms
    aliases = {(m, t): str(a) for m, t, a in zip(terms["metric"], terms["term"], terms["aliases"]) if present(a)}
    lines = []
    for row in verdicts.sort_values(["_order"], kind="stable").itertuples(index=False):
        spec = specs.get(row.metric, {})
        band = sesoi_text(spec)
        absolute = spec.get("sesoi_abs") is not None
        if ":" in str(row.knob) and not present(row.level):
            lines.append(_interaction_sentence(row, band, absolute, aliases.get((row.metric, row.knob), "")))
            continue
        base = level_label(inputs.baseline.get(row.knob))
        level = level_label(row.level)
        test = short_test_name(row.test)
        only_when = getattr(row, "only_when", None)
        effect = float(row.effect_abs) if absolute and math.isfinite(float(getattr(row, "effect_abs", math.nan))) \
            else float(row.effect_pct)
        if row.verdict == Verdict.MATTERS:
            verdict = (f"**matters only when {condition_text(only_when)}**" if present(only_when) else "**matters**")
            lines.append(f"`{row.knob}` = {level} {_verb(effect)} {row.metric} by {_change_text(row, absolute, False)} "
                         f"against the baseline {base}, {fmt_p(row.p_adj)} ({test}): {verdict} ({row.direction}).")
        elif row.verdict == Verdict.EQUIVALENT:
            lines.append(f"`{row.knob}` has **no effect** on {row.metric} that matters: every level is within {band} "
                         f"of the baseline {base} (TOST equivalence); the largest change, at {level}, is "
                         f"{_change_text(row, absolute)}, {fmt_p(row.p_adj)}.")
        elif row.verdict == Verdict.NOT_COMPARABLE:
            # the reason starts with the guard's plain-words sentence (tunelab.stats.guards.guard_sentence)
            head, _, detail = str(row.reason).split("; ")[0].partition(": ")
            where = head.partition(f" at {row.knob}=")[2] or level
            lines.append(f"`{row.knob}` = {where}: {row.metric} **cannot be compared** with the baseline {base}: "
                         f"{detail}.")
        elif row.verdict == Verdict.UNTESTABLE or row.test is None or pd.isna(row.test):
            lines.append(f"`{row.knob}` × {row.metric} could **not be tested**: {row.reason}.")
        else:
            others = partners.get((row.metric, row.knob), [])
            clear = f" Its effect is clear only when {condition_text(only_when)}." if present(only_when) else ""
            why = (f"no clear change averaged over the other knobs, but its effect depends on {_and(others)} (see "
                   "the interaction)"
                   if others else f"neither a change of at least {band} nor equivalence is shown; more replicates "
                   "would decide")
            lines.append(f"`{row.knob}` = {level} changes {row.metric} by {_change_text(row, absolute)} "
                         f"against the baseline {base}, {fmt_p(row.p_adj)} ({test}): **inconclusive** — {why}.{clear}")
    return lines


def summary_markdown(result: ScreenResult, inputs: StudyInputs) -> str:
    """The results summary as a Markdown bullet list, with a one-line headline."""
    verdicts = result.verdicts
    matters = verdicts[verdicts["verdict"] == Verdict.MATTERS]
    interacting = matters[matters["knob"].astype(str).str.contains(":", regex=False)
                          & ~matters["knob"].isin(inputs.knobs)]
    knobs = [k for k in dict.fromkeys(matters["knob"]) if k not in set(interacting["knob"])]
    head = (f"{len(knobs)} of {len(inputs.knobs)} knobs change at least one metric by more than its smallest "
            f"effect of interest: {', '.join(f'`{k}`' for k in knobs)}." if knobs else
            f"None of the {len(inputs.knobs)} knobs changes a metric by more than its smallest effect of interest.")
    if len(interacting):
        pairs = [f"`{a}` depends on `{b}` ({m})" for (a, _, b), m in
                 zip(interacting["knob"].astype(str).str.partition(":").itertuples(index=False, name=None),
                     interacting["metric"])]
        head += " The effect of " + "; of ".join(pairs) + "."
    guarded = verdicts[verdicts["verdict"] == Verdict.NOT_COMPARABLE]
    if len(guarded):
        head += (f" {len(guarded)} verdict(s) are **not comparable**: a guard metric (answered queries, losses, "
                 "errors or retransmissions) degraded beyond its smallest effect of interest, so the metric there "
                 "was measured on what was left.")
    summary = head + "\n\n" + "\n".join(f"- {line}" for line in summary_sentences(result, inputs))
    mechanisms = mechanism_sentences(result, inputs)
    if mechanisms:
        counted = result.settings["mechanisms"]
        summary += (f"\n\n**Mechanisms** (kernel counters that changed with each level that matters, "
                    f"Benjamini–Hochberg false discovery rate {fmt_number(100 * counted['fdr'], 0)} % over "
                    f"{counted['tests']} tests of {counted['moving']} counters that moved):\n\n"
                    + "\n".join(f"- {line}" for line in mechanisms))
    return summary


#: well-known kernel counters in plain words: (when it rises, when it falls); the others keep their names
COUNTER_WORDS = {
    "TcpExt.ListenOverflows": ("the listen queue overflowed", "the listen queue overflowed less"),
    "TcpExt.ListenDrops": ("the listen queue overflowed", "the listen queue overflowed less"),
    "TcpExt.TCPAbortOnOverflow": ("connections were reset on a full listen queue",
                                  "fewer connections were reset on a full listen queue"),
    "Tcp.RetransSegs": ("more TCP segments were retransmitted", "fewer TCP segments were retransmitted"),
    "TcpExt.TCPBacklogDrop": ("the socket backlog dropped packets", "the socket backlog dropped fewer packets"),
    "Udp.RcvbufErrors": ("UDP receive buffer overflowed", "UDP receive buffer overflowed less"),
    "Udp6.RcvbufErrors": ("UDP receive buffer overflowed", "UDP receive buffer overflowed less"),
    "Udp.InErrors": ("UDP datagrams were dropped on receive", "fewer UDP datagrams were dropped on receive"),
    "proc.cpu_s": ("the server used more CPU time", "the server used less CPU time"),
}


def counter_words(column: str, difference: float) -> str | None:
    """The plain words of a counter's change (:data:`COUNTER_WORDS`, ``' on the client'`` for a client
    counter), or None for a counter without words.

    >>> counter_words("counter.TcpExt.ListenDrops", 3.0), counter_words("counter.client.Tcp.RetransSegs", -1.0)
    ('the listen queue overflowed', 'fewer TCP segments were retransmitted on the client')
    """
    name = counter_name(column)
    client = name.startswith("client.")
    words = COUNTER_WORDS.get(name.removeprefix("client."))
    if words is None:
        return None
    return (words[0] if difference > 0 else words[1]) + (" on the client" if client else "")


def _metric_changes(result: ScreenResult, inputs: StudyInputs, knob: str, level: Any) -> str:
    """``'qps -99.5 %, latency_mean_ms +31.0 %'``: the metrics for which ``knob = level`` matters (the row's
    decisive ``level``, or another of its significant ``levels``)."""
    specs = {m["name"]: m for m in inputs.metrics}
    rows = result.verdicts[(result.verdicts["knob"] == knob) & (result.verdicts["verdict"] == Verdict.MATTERS)]
    parts = []
    for row in rows.to_dict(orient="records"):
        entries = [row] if row["level"] == level else \
            [e for e in row.get("levels") or [] if isinstance(e, dict) and e.get("level") == level]
        for entry in entries[:1]:
            absolute = specs.get(row["metric"], {}).get("sesoi_abs") is not None
            change = fmt_abs(entry["effect_abs"]) if absolute else fmt_pct(entry["effect_pct"])
            parts.append(f"{row['metric']} {change}")
    return ", ".join(parts)


def mechanism_sentences(result: ScreenResult, inputs: StudyInputs, top: int = 3) -> list[str]:
    """One sentence per knob level that matters in a study with counters: the metrics it changes and the
    ``top`` counters that moved with it (by q), grouped under their plain words.

    Example: ``net.core.somaxconn`` = 16: qps -99.5 %; the listen queue overflowed: TcpExt.ListenOverflows
    +1.06e+04/s [+9.42e+03, +1.19e+04].
    """
    table = getattr(result, "mechanisms", None)
    if table is None or table.empty:
        return []
    shown = top_mechanisms(table, top)
    lines = []
    for (knob, key), rows in table.groupby(["knob", table["level"].map(repr)], sort=False):
        level = rows["level"].iloc[0]
        picked = shown[(shown["knob"] == knob) & (shown["level"].map(repr) == key)]
        head = f"`{knob}` = {level_label(level)}: {_metric_changes(result, inputs, knob, level)}"
        if picked.empty:
            lines.append(f"{head}; no kernel counter changed beyond the false discovery rate.")
            continue
        groups: dict[str, list[str]] = {}
        for row in picked.itertuples(index=False):
            words = counter_words(row.counter, row.difference) or ""
            groups.setdefault(words, []).append(f"{counter_name(row.counter)} "
                                                f"{change_text(row.difference, row.ci_low, row.ci_high)}")
        said = "; ".join(f"{words}: {', '.join(changes)}" if words else ", ".join(changes)
                         for words, changes in groups.items())
        more = int(rows["significant"].astype(bool).sum()) - len(picked)
        lines.append(f"{head}; {said}" + (f" (and {more} more counters)" if more > 0 else "") + ".")
    return lines


def _metric_notes(result: ScreenResult, metric: str) -> list[str]:
    """The screen's notes about the model of ``metric`` (they start with ``'<metric>: '``)."""
    prefix = f"{metric}: "
    return [n[len(prefix):] for n in result.settings.get("notes", []) if str(n).startswith(prefix)]


def _reason_core(reason: str) -> str:
    """A model route's reason without its trailing ``': <the tests>'`` (the text names the tests itself).

    >>> _reason_core("residuals normal enough (Shapiro–Wilk p=0.8): type II F tests")
    'residuals normal enough (Shapiro–Wilk p=0.8)'
    """
    head, sep, tail = str(reason).rpartition(": ")
    return head if sep and "test" in tail else str(reason)


def model_lines(result: ScreenResult, inputs: StudyInputs | None = None) -> list[str]:
    """One Markdown line per metric describing its model: scale, formula, runs and residual degrees of
    freedom, the tests and why they were chosen, aliased effects and the model's notes. Empty for
    one-at-a-time designs (no model of the whole design)."""
    terms_all = result.model_terms
    if result.design == AnalysisKind.OAT:
        return []
    lines = []
    metrics = list(dict.fromkeys(terms_all["metric"]))
    for metric in metrics:
        terms = terms_all[terms_all["metric"] == metric]
        scale, test = str(terms["scale"].iloc[0]), str(terms["test"].iloc[0])
        lhs = f"log({metric})" if scale == "log" else metric
        formula = f"{lhs} ~ " + " + ".join(terms["term"].astype(str))
        judged = terms[terms["kind"] != TermKind.BLOCK.value]
        df_res = float(judged["df2"].iloc[0]) if len(judged) else math.nan
        runs = int(inputs.runs[metric].notna().sum()) if inputs is not None and metric in inputs.runs else None
        omnibus = result.omnibus[(result.omnibus["metric"] == metric) & result.omnibus["recommended"].astype(bool)]
        reason = str(omnibus["reason"].iloc[0]) if len(omnibus) else ""
        scale_text = ("log scale: effects are ratios, means geometric" if scale == "log" else
                      "linear scale: effects are differences in the metric's units")
        size = (f"{runs} runs, " if runs is not None else "") + (
            f"{df_res:g} residual degrees of freedom" if test != "lenth" else f"Lenth's {fmt_sig(df_res, 3)} pseudo df")
        line = (f"**{metric}** ({scale_text}): `{formula}` — {size}; tests: {MODEL_TEST_TEXT.get(test, test)}"
                + (f", chosen because: {_reason_core(reason)}" if reason else "") + ".")
        aliased = [f"`{t}` = `{a}`" for t, a in zip(terms["term"], terms["aliases"]) if present(a)]
        if aliased:
            line += (" Aliased (the design cannot tell them apart; the estimate is their sum): "
                     + "; ".join(aliased) + ".")
        notes = [n for n in _metric_notes(result, metric) if not (aliased and n.startswith("aliases of the design"))]
        if notes:
            line += " Notes: " + "; ".join(notes) + "."
        lines.append(line)
    for metric in dict.fromkeys(result.verdicts["metric"]):
        if metric not in metrics:
            rows = result.verdicts[result.verdicts["metric"] == metric]
            lines.append(f"**{metric}**: no model — {rows['reason'].iloc[0]}.")
    return lines


def model_markdown(result: ScreenResult, inputs: StudyInputs | None = None) -> str:
    """What the model route did, in words (Markdown): the model, its scale, the tests and aliases per
    metric (:func:`model_lines`); a one-sentence note for one-at-a-time designs."""
    if result.design == AnalysisKind.OAT:
        return ("One-at-a-time design: every run varies at most one knob, so there is no model of the whole "
                "design; each knob is tested on the baseline runs plus its own runs (see *Omnibus tests*).")
    if result.design == AnalysisKind.RANGE:
        intro = ("A range (space-filling) design: one regression per metric of all usable runs on every knob's value "
                 "over its range; each knob's response curve shows the predicted metric across that range.")
    else:
        intro = ("One linear model per metric of all usable runs: the main effect of every knob (sum-to-zero "
                 "coding, as R's `contr.sum`), each two-factor interaction the design can estimate cleanly, and an "
                 "additive block term when the runs were blocked. Each term is tested once; each level is compared "
                 "with the baseline level through the model's estimated marginal means.")
    lines = model_lines(result, inputs)
    return intro + ("\n\n" + "\n".join(f"- {line}" for line in lines) if lines else "")


def _knob_lines(study: Study, inputs: StudyInputs) -> list[str]:
    lines = []
    specs = {k.id: k for k in study.design.knobs} if study.design is not None else {}
    for knob in inputs.knobs:
        spec = specs.get(knob)
        levels = ", ".join(level_label(v) for v in spec.levels) if spec else "?"
        extra = "; the server restarts to apply it" if spec is not None and spec.requires_restart else ""
        lines.append(f"  - `{knob}`: levels {levels} (baseline {level_label(inputs.baseline.get(knob))}){extra}")
    return lines


def _route_lines(result: ScreenResult) -> list[str]:
    """One line per knob × metric: the test chosen and the library's reason for it."""
    lines = []
    for row in result.verdicts.itertuples(index=False):
        route = "not tested" if row.test is None or pd.isna(row.test) else short_test_name(row.test)
        lines.append(f"  - `{row.knob}` × {row.metric}: {route} — {row.reason}")
    return lines


def _model_tests_text(result: ScreenResult, inputs: StudyInputs) -> list[str]:
    """The methods' paragraphs on tests, multiplicity and effect sizes for the model route."""
    settings = result.settings
    n_tests = int(result.verdicts["p"].notna().sum())
    correction = CORRECTION_TEXT.get(inputs.correction, inputs.correction)
    return [
        "**Tests chosen and why.** The screen read the design through one linear model per metric of all usable "
        "runs (not one test per knob): main effects of every knob with sum-to-zero coding, the two-factor "
        "interactions the design can estimate (not aliased with other terms, not partially aliased with the "
        f"main effects, and leaving at least {MIN_RESIDUAL_DF} residual degrees of freedom), and an additive block "
        "term when the runs were blocked. Metrics whose values are all positive and whose smallest effect is a % "
        "are modelled on the log scale (effects are ratios); metrics with an absolute smallest effect on their "
        "own scale. The residuals decide the tests: type II F tests (type III for unbalanced data) when they are "
        f"normal enough (Shapiro–Wilk p ≥ {MODEL_NORMALITY_ALPHA:g}) and of even variance (Breusch–Pagan p ≥ "
        f"{MODEL_VARIANCE_ALPHA:g}); HC3 Wald tests when the variance changes with the knobs; a Freedman–Lane "
        "permutation test when they are clearly non-normal; Lenth's pseudo standard error when an unreplicated "
        "two-level design leaves no residual degrees of freedom. Chosen here:",
        *(f"  - {line}" for line in model_lines(result, inputs)),
        "",
        f"**Multiplicity.** The p-values of all {n_tests} main effects and interactions (every metric; block terms "
        f"are not judged) were adjusted with {correction}; alpha = {inputs.alpha:g}. The contrasts of each level "
        "against the baseline level, and the simple effects within the levels of an interacting knob, carry "
        "Dunnett-adjusted p-values and intervals (the maximum |t| over one knob's contrasts, from the multivariate "
        "t with the model's correlations).",
        "",
        "**Effect sizes and equivalence.** The change of each level is its estimated marginal mean (averaged over "
        "the levels of the other knobs; a geometric mean on the log scale) against the baseline level's, as a % "
        "change (on the linear scale also as a difference in the metric's units), with a 95 % Dunnett-adjusted "
        f"interval from the model (seed {settings.get('seed')}). Smallest effects of interest (SESOI): "
        + ", ".join(f"{m['name']} {sesoi_text(m)}" for m in inputs.metrics) + ". A knob *matters* for a metric "
        "when its adjusted p is below alpha and its largest change is at least the SESOI; it *matters only when* "
        "another knob is at some level when it takes part in a significant interaction and its effect is clear "
        "at some levels of that knob but not at others. It has *no effect* when every level is equivalent to "
        "the baseline within ±SESOI (two one-sided tests on the model's contrasts, TOST) and it takes part in no "
        "significant interaction; otherwise the result is *inconclusive*. An interaction *matters* when its "
        "adjusted p is below alpha and the effects of a knob at two levels of the other differ by at least the "
        "SESOI.",
        "",
    ]


def _range_tests_text(result: ScreenResult) -> list[str]:
    """The methods' paragraph on tests for range (space-filling) designs."""
    return ["**Tests chosen and why.** The design varies the knobs over ranges (space-filling), so the screen reads "
            "it with one regression of each metric on every knob's value over its range (response curves), not by "
            "levels. Chosen here, with the reason:", *_route_lines(result), ""]


def _order_text(design: Any) -> str:
    """How the plan ordered the runs (see :func:`tunelab.designs.make_plan`)."""
    every = design.options.get("baseline_every", 2 if design.design_type == DesignType.OAT else None)
    if every:
        return (f"Within each replicate the varied runs ran in random order (seed {design.seed}), with a baseline "
                f"run first and after every {every} varied runs, so drift shows in the baseline.")
    return f"The run order was randomised within each of the {design.blocks} block(s) (seed {design.seed})."


def _foreign_load_text(study: Study, host: Mapping[str, Any], trial_s: float) -> str:
    share = foreign_load(study.tidy.get("screen", pd.DataFrame()), host.get("nproc") or 1, trial_s)
    if share.empty:
        return ""
    busy = int((share > FOREIGN_LOAD_WARN).sum())
    cpu_s = study.tidy["screen"]["foreign_cpu_s"].dropna()
    text = (f"Other processes used a median of {fmt_sig(cpu_s.median(), 2)} CPU-seconds during a {trial_s:g} s "
            "trial on "
            f"{host.get('nproc') or 1} CPU(s) (largest {fmt_sig(cpu_s.max(), 2)})")
    if busy:
        text += (f"; in {busy} of {len(share)} trials more than {100 * FOREIGN_LOAD_WARN:.0f} %, the main source "
                 "of noise and drift in lab measurements (see the drift plot): rerun on a quiet machine for "
                 "tighter intervals")
    return text + ". "


def noise_markdown(study: Study) -> str:
    """The **Noise** paragraph: CPU pinning, the A/A calibration's noise CV and what it means for the
    design's replicates, and the busy trials measured again; empty when there is nothing to say."""
    from tunelab.calibration import CALIBRATE, assess_noise   # deferred: imports the statistics

    parts = []
    pinned = pinning_text(study)
    if pinned:
        parts.append(f"Server and load generator CPUs: {pinned}.")
    calibrate = study.tidy.get(CALIBRATE, pd.DataFrame())
    if not calibrate.empty and study.design is not None:
        noise = assess_noise(calibrate, study.design)
        if noise.usable >= 2:
            parts.append(f"{noise.usable} A/A trials of the baseline ran before the study (phase `calibrate`): noise "
                         f"{noise.cv_text()}.")
            needed = [f"{row.metric} ±{row.sesoi_pct:g} %: {int(row.needed)}" for row in noise.table.itertuples()
                      if math.isfinite(row.needed)]
            if needed:
                parts.append("Replicates per level to detect a change of the SESOI and to show a null one within it "
                             f"(80 % power each, alpha {study.design.analysis.alpha:g}): {', '.join(needed)}; the "
                             f"design has {noise.replicates}.")
            if noise.warnings:
                parts.append("**At this noise the design's replicates cannot resolve every SESOI**: inconclusive "
                             "verdicts are expected there.")
    repeats = repeated_trials(study)
    if not repeats.empty:
        parts.append(f"{len(repeats)} attempt(s) during which other processes were busy were set aside and measured "
                     "again (listed in the data overview); only the final attempts enter the statistics.")
    return ("**Noise.** " + " ".join(parts)) if parts else ""


def rounds_markdown(result: ScreenResult, design: Any) -> str:
    """The **Sequential replicates** paragraph: the rule, the looks and how the alpha was spent; empty
    for a study with a fixed number of replicates."""
    rounds = getattr(result, "rounds", None)
    spec = getattr(design, "rounds", None)
    if spec is None or rounds is None or rounds.empty:
        return ""
    spending = result.settings.get("sequential", {}).get("spending", spec.spending or "default")
    looks = "; ".join(
        f"round {int(r['round'])}: {int(r['runs'])} runs, {int(r['replicates'])} per undecided level, "
        f"tested at alpha {fmt_sig(r['alpha_nominal'])}, {int(r['decided'])} verdict(s) final"
        for r in rounds.to_dict("records"))
    return (f"**Sequential replicates.** The study ran in rounds: {spec.min} replicates of every level, then "
            f"{spec.step} more of each level whose knob was still inconclusive (with fresh baseline runs), up to "
            f"{spec.max}. Every round is a look at all the data so far, tested at the part of alpha = "
            f"{result.settings.get('alpha', 0.05):g} that the {spending} alpha-spending function releases at that "
            "look's information fraction (replicates / max), so the looks together keep the family-wise error rate "
            "at alpha; a verdict that became final at a look is kept from that look. Looks: " + looks + ".")


def between_testbeds_markdown(result: ScreenResult) -> str:
    """The **Testbeds** paragraph of a study run on several testbeds: how the screen blocked on the
    testbed and each metric's between-testbed spread; empty for a study on one testbed."""
    spread = getattr(result, "testbeds", None)
    if spread is None or spread.empty:
        return ""
    names = list(dict.fromkeys(spread["testbed"].tolist()))
    lines = []
    for metric, rows in spread.groupby("metric", sort=False):
        first = rows.iloc[0]
        lines.append(f"{metric}: {spread_phrase(rows)}, testbed F = {fmt_sig(first['statistic'], 3)}, "
                     f"{fmt_p(first['p'], 'p')}, partial eta² {fmt_number(first['partial_eta2'], 2)}")
    return (f"**Testbeds.** The runs were spread over {len(names)} testbeds ({', '.join(map(level_label, names))}), "
            "and the testbed was a blocking factor of the screen: an additive block term in every ANOVA-type "
            "model (the knob's F test, Tukey and Games–Howell pairs and % changes on the testbed-adjusted "
            "least-squares means), ranks within each testbed on the rank route (van Elteren's stratified "
            "Kruskal–Wallis and Dunn), and an additive block of the factorial model. Between-testbed spread "
            "(each testbed's offset with the configurations held equal, in % of the metric's mean): "
            + "; ".join(lines) + ".")


def methods_markdown(study: Study, inputs: StudyInputs, result: ScreenResult, n_boot: int | None = None) -> str:
    """The methods section (Markdown): design, runs, load, tests chosen and why, multiplicity
    correction, effect sizes and equivalence, software versions, kernel and CPU."""
    design = study.design
    if result.design == AnalysisKind.FACTORIAL:
        tests = _model_tests_text(result, inputs)
    elif result.design == AnalysisKind.RANGE:
        tests = _range_tests_text(result)
    else:
        tests = _oat_tests_text(result, inputs, n_boot)
    lines = [
        _design_paragraph(study, inputs, result), *_knob_lines(study, inputs), "",
        _load_paragraph(study, inputs), "",
        *tests,
        _machine_paragraph(study), "",
        *[f"{text}\n" for text in (noise_markdown(study), rounds_markdown(result, design),
                                     between_testbeds_markdown(result)) if text],
        _software_paragraph(study),
    ]
    return "\n".join(lines)


def runs_text(study: Study, result: ScreenResult) -> str:
    """How many screen runs were planned and run: ``'27 runs planned'``, or for a sequential design, whose
    first round only is planned ahead, ``'27 runs planned in round 1, 54 run in 4 rounds'``; empty when
    the plan cannot be made again."""
    planned = planned_runs(study)
    if planned is None:
        return ""
    rounds = getattr(result, "rounds", None)
    if getattr(study.design, "rounds", None) is None or rounds is None or rounds.empty:
        return f"{planned} runs planned"
    screen = study.trials[study.trials["phase"] == Phase.SCREEN]
    ran = len(screen) - int((repeated_trials(study)["phase"] == Phase.SCREEN).sum())
    looks = len(rounds)
    return f"{planned} runs planned in round 1, {ran} run in {looks} round{'s' if looks != 1 else ''}"


def _design_paragraph(study: Study, inputs: StudyInputs, result: ScreenResult) -> str:
    """**Design.**: the design, its replicates, blocks and seed, the runs planned and run, and what was usable."""
    design = study.design
    counts = study.trials[study.trials["phase"] == Phase.SCREEN]["status"].value_counts()
    usable = int(counts.get("ok", 0)) + (int(counts.get("flagged", 0)) if study.include_flagged else 0)
    repeated = int((repeated_trials(study)["phase"] == Phase.SCREEN).sum())
    flagged = (f" ({int(counts.get('flagged', 0))} flagged by the runner and "
               f"{'included' if study.include_flagged else 'left out'})" if counts.get("flagged", 0) else "")
    runs = runs_text(study, result)
    return (f"**Design.** Study `{study.name}`: a {DESIGN_TEXT.get(design.design_type, design.design_type)} design "
            f"(`{design.design_type}`) of {len(inputs.knobs)} knobs with {design.replicates} replicates in "
            f"{design.blocks} block(s), seed {design.seed}" + (f", {runs}" if runs else "") + ". "
            f"{usable} runs were usable{flagged}, {int(counts.get('failed', 0))} failed and "
            f"{int(counts.get('interrupted', 0)) - repeated} were interrupted"
            + (f" ({repeated} busy attempt(s) set aside and measured again)" if repeated else "")
            + "; only usable runs enter the statistics. "
            f"{_order_text(design)} Knobs:")


def _load_paragraph(study: Study, inputs: StudyInputs) -> str:
    """**Load and measurement.**: the load generator and profile(s), the target, warm-up and measured seconds."""
    design = study.design
    load_settings = trial_provenance(study).get("load_settings") or dict(design.load.settings)
    load_text = ", ".join(f"{k}={v}" for k, v in load_settings.items() if not str(v).startswith("/"))
    if getattr(design.load, "crossed", False):
        head = (f"**Load and measurement.** Load generator `{design.load.generator}`; every configuration ran under "
                f"each of the profiles {', '.join(f'`{p}`' for p in design.load.profiles)} (shuffled together; the "
                "profile is a factor of the analysis, not a knob)")
    else:
        head = (f"**Load and measurement.** Load generator `{design.load.generator}`, profile `{design.load.profile}`"
                + (f" ({load_text})" if load_text else ""))
    return (head + f", on the `{design.target.type}` target. Each trial: knobs written and read back, "
            f"{design.warmup_s:g} s warm-up (discarded), {design.measure_s:g} s measured; the trial's value is the "
            "mean over the measured seconds. Metrics: "
            + ", ".join(f"{m['name']} ({m['direction']})" for m in inputs.metrics) + ".")


def _oat_tests_text(result: ScreenResult, inputs: StudyInputs, n_boot: int | None) -> list[str]:
    """The methods' paragraphs on tests, multiplicity and effect sizes for one-at-a-time designs."""
    settings = result.settings
    n_tests = int(result.verdicts["p"].notna().sum())
    pairwise = CORRECTION_TEXT.get(inputs.correction if inputs.correction != "none" else "holm").split(" (")[0]
    return [
        "**Tests chosen and why.** The screen treated the design as one-at-a-time: each knob is analysed on the "
        "baseline runs plus the runs that vary only that knob. For every knob × metric, the errors were tested for "
        "normality (Shapiro–Wilk; clearly non-normal at "
        f"p < {settings.get('normality_alpha', 0.01):g}) and the variances for equality (Brown–Forsythe at "
        f"{settings.get('variance_alpha', 0.05):g}"
        + (f", and a largest-to-smallest group SD ratio of at most {settings['sd_ratio_max']:g}"
           if settings.get("sd_ratio_max") else "")
        + "). Clearly non-normal errors lead to the rank-based Kruskal–Wallis test with Dunn's post-hoc test; "
        "otherwise one-way ANOVA with Tukey's HSD when the variances are similar, else Welch's ANOVA with the "
        "Games–Howell test. Chosen here, with the reason:",
        *_route_lines(result),
        "",
        f"**Multiplicity.** The chosen omnibus p-values of all {n_tests} knob × metric tests were adjusted with "
        f"{CORRECTION_TEXT.get(inputs.correction, inputs.correction)}; alpha = {inputs.alpha:g}. Pairwise "
        "post-hoc p-values are adjusted within each knob (Tukey and Games–Howell by the studentized range, Dunn "
        f"by {pairwise}).",
        "",
        "**Effect sizes and equivalence.** The change of each level is the percent change of its mean against the "
        "baseline level's mean. Its interval is at the level of the verdict (`1 - alpha`; a sequential look's "
        "nominal alpha: the table's CI level): the simultaneous interval of the post-hoc test that decides (Tukey "
        "HSD or Games–Howell) as % of the baseline mean, so it excludes 0 exactly when that test separates the "
        "level; where Dunn's test decides, a percentile bootstrap interval at that level "
        f"({n_boot or settings.get('n_boot')} resamples, seed {settings.get('seed')}), also shown, unadjusted, "
        "in the effects table. Smallest effects of interest (SESOI): {sesoi}. A knob "
        "*matters* for a metric when its adjusted p is below alpha and its largest change is at least the SESOI; "
        "it has *no effect* when every level is equivalent to the baseline within ±SESOI (two one-sided tests, "
        "TOST); otherwise the result is *inconclusive*.",
        "",
    ]


def _machine_paragraph(study: Study) -> str:
    """**Machine.**: other processes' CPU use during the trials, kernel, CPU and the load tools."""
    design = study.design
    host = machine(study)
    tools = ", ".join(f"{k} {v}" for k, v in (host.get("tools") or {}).items())
    return ("**Machine.** " + _foreign_load_text(study, host, design.warmup_s + design.measure_s)
            + (f"Linux kernel {host.get('kernel', '?')} on {host.get('machine', '?')}, CPU "
               f"{host.get('cpu_model', '?')} ({host.get('nproc', '?')} CPUs)" if host else
               "no target description recorded")
            + (f"; tools: {tools}" if tools else "") + ".")


def _software_paragraph(study: Study) -> str:
    """**Software.**: the versions of Python and the libraries, and the tunelab that recorded the trials."""
    return ("**Software.** " + ", ".join(f"{k} {v}" for k, v in software_versions().items())
            + f". Trials recorded by tunelab {study.tunelab_version or '?'}"
            + (f" at git commit {study.git_sha[:12]}" if study.git_sha else "") + ".")




def result_notes(result: ScreenResult, knob: str, metric: str) -> list[str]:
    """Every sentence the screen result carries about ``knob`` × ``metric`` (e.g. why its post-hoc test and
    its verdict disagree), read generically so that it works whatever the screen names them: the text of any
    verdict column whose name holds ``note`` on that row, and the ``settings["notes"]`` that name both the
    knob and the metric (strings) or carry them as ``knob``/``metric`` keys (mappings with ``text``).

    >>> from types import SimpleNamespace
    >>> verdicts = pd.DataFrame({"knob": ["mtu", "mtu"], "metric": ["qps", "lost"],
    ...                          "posthoc_note": ["Tukey's p 0.052 is simultaneous over 3 pairs.", None]})
    >>> result = SimpleNamespace(verdicts=verdicts, settings={"notes": [
    ...     "`mtu` × qps: the forest plot's interval is not adjusted.", "`mtu` × achieved_qps: other", "qps: model"]})
    >>> result_notes(result, "mtu", "qps")
    ["Tukey's p 0.052 is simultaneous over 3 pairs.", "`mtu` × qps: the forest plot's interval is not adjusted."]
    """
    verdicts = result.verdicts
    rows = verdicts[(verdicts["knob"] == knob) & (verdicts["metric"] == metric)]
    notes = [text for column in verdicts.columns if "note" in str(column).lower()
             for value in rows[column] for text in _texts(value)]
    for note in (result.settings or {}).get("notes") or ():
        if isinstance(note, Mapping):
            if (note.get("knob"), note.get("metric")) in ((knob, metric), (knob, None), (None, metric)):
                notes += _texts(note.get("text") or note.get("note") or note.get("message"))
        elif _names(str(note), knob) and _names(str(note), metric):
            notes.append(str(note).strip())
    return list(dict.fromkeys(notes))


def _texts(value: Any) -> list[str]:
    """The non-empty strings in a note cell (a string, a list of them, or nothing)."""
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _texts(item)]
    return []


def _names(text: str, name: str) -> bool:
    """True when ``text`` names ``name`` as a whole word (``qps`` is not named by ``achieved_qps``)."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w\[])", text) is not None


#: the line a report shows for a store recorded without kernel counters
NO_COUNTERS_TEXT = ("This store has no kernel counters, so the report cannot say which kernel events carry an effect: "
                    "record the study with a newer tunelab (it records the listen-queue, retransmission, buffer and "
                    "CPU counters of every trial).")


def mechanisms_markdown(result: ScreenResult) -> str:
    """The words of the mechanism section: how the counters were screened and what was found, or
    :data:`NO_COUNTERS_TEXT` for a study without counters."""
    counted = result.settings.get("mechanisms")
    if counted is None:
        return NO_COUNTERS_TEXT
    table = result.mechanisms
    head = (f"The trials recorded {counted['counters']} kernel counters (events per second of the measured window); "
            f"{counted['moving']} moved in the study (the others kept one value in every run and are left out).")
    if table.empty:
        return head + (" No knob level matters, so there is no mechanism to look for." if counted["moving"]
                       else " No counter moved, so no counter explains a verdict.")
    found = int(table["significant"].astype(bool).sum())
    levels = len(dict.fromkeys(zip(table["knob"], table["level"].map(repr))))
    return (head + f" Each of them was compared with the baseline at each of the {levels} knob level(s) that matter "
            f"(two-sample t-test with the pooled variance, {counted['tests']} tests; one-at-a-time designs against the runs with every knob at "
            "its baseline, others against every run at the knob's baseline), and the p-values of all tests were "
            f"adjusted together by {CORRECTION_TEXT['fdr_bh']} at {fmt_number(100 * counted['fdr'], 0)} %: "
            f"{found} change(s) are significant. Counters never decide a verdict; they show which kernel events "
            "moved with it.")
