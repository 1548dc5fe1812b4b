"""Guard metrics: a metric that is conditional on another is not compared where that other collapses.

dnsperf times only the queries that are answered. When ``net.core.somaxconn = 16`` cuts the
answered rate from ~191,000 to ~300 queries per second, the mean latency of the few survivors
reads as "better", which would mislead an operator. A *guard* is a metric that must not degrade
(answered queries ``qps``, the lost share ``lost_pct``, ``retransmits``, ``errors``); a *dependent*
metric is conditional on some guards (latency on ``qps`` and ``lost_pct``).

The rule, per knob and non-baseline level:

* :func:`guard_table` estimates each guard's change against the baseline (one-at-a-time designs:
  the level's runs against the baseline runs; factorial designs: the level's marginal mean against
  the baseline's, over all runs) with a Welch t interval, and marks the level ``tripped`` when the
  guard degrades by at least its smallest effect of interest (SESOI) in its bad direction **and**
  the interval excludes no degradation, so noise alone does not trip it;
* :func:`apply_guards` turns a dependent metric's verdict into ``not comparable`` (with the
  ``guard`` text, e.g. ``guard: qps -99.8 %``) when its reported level (``level``) is tripped,
  or every non-baseline level is, or it claims equivalence over levels of which one is tripped;
  when only other levels are tripped the verdict stays and its reason names them.

Guard specs are metric dicts (``{name, direction, sesoi_pct | sesoi_abs}``) with two optional
extras for the wording: ``unit`` (``'%'`` shows differences as percentage points) and ``words``
(``[what the guard counts, why a dependent is then not comparable]``).

Examples
--------
>>> import pandas as pd
>>> data = pd.DataFrame({"k": [0] * 4 + [1] * 4, "qps": [100, 102, 98, 100, 1, 2, 1, 2.0]})
>>> table = guard_table(data, ["k"], {"k": 0}, [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}])
>>> table[["level", "guard", "tripped", "text"]].to_dict("records")
[{'level': 1, 'guard': 'qps', 'tripped': True, 'text': 'qps -98.5 %'}]
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from tunelab.errors import DataError
from tunelab.formatting import fmt_abs, fmt_pct, is_number, level_label
from tunelab.model import AnalysisKind, Direction, Verdict
from tunelab.stats._validate import level_matches, sorted_levels
from tunelab.stats.screen_common import rows_per_knob

#: columns of the guard table: ``ci_low``/``ci_high``/``sesoi`` are in % of the baseline mean when
#: ``units`` is ``'%'`` and in the guard metric's own units when it is ``'abs'``
GUARD_COLUMNS = ["knob", "level", "guard", "baseline", "n", "baseline_n", "mean", "baseline_mean", "effect_pct",
                 "effect_abs", "ci_low", "ci_high", "sesoi", "units", "tripped", "text"]
#: verdicts a tripped guard can overrule (untestable rows keep their own reason)
GUARDED_VERDICTS = (Verdict.MATTERS.value, Verdict.EQUIVALENT.value, Verdict.INCONCLUSIVE.value)


def check_guards(guards: Mapping[str, Any] | None, metrics: Sequence[Mapping[str, Any]]
                 ) -> tuple[list[dict[str, Any]], dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """The guard specs, the dependents and the trade-offs among ``metrics`` (the screened ones) from ``guards``.

    ``guards`` is ``{"guards": [spec, ...], "conditional_on": {metric: [guard, ...]}, "trade_offs":
    {metric: [other, ...]}}`` (what :func:`tunelab.study_data.design_info` builds from a design and its load;
    ``trade_offs`` is optional); None means no guards. Returns ``(specs of the metrics some screened
    metric depends on or trades off against, {metric: its guards}, {metric: its trade-offs})``; a
    metric is never its own guard. :class:`DataError` for a malformed mapping or a name without a spec.
    """
    if guards is None:
        return [], {}, {}
    if not isinstance(guards, Mapping) or not set(guards) <= {"guards", "conditional_on", "trade_offs"}:
        raise DataError("guards must be a mapping {'guards': [{name, direction, sesoi_pct|sesoi_abs}], "
                        f"'conditional_on': {{metric: [guard, ...]}}, 'trade_offs': {{metric: [other, ...]}}}}, "
                        f"got {guards!r}")
    specs: dict[str, dict[str, Any]] = {}
    for spec in guards.get("guards") or ():
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            raise DataError(f"each guard must be a dict with a 'name', got {spec!r}")
        if spec.get("direction", "maximize") not in (Direction.MAXIMIZE, Direction.MINIMIZE):
            raise DataError(f"guard {spec['name']!r}: direction must be 'maximize' or 'minimize', "
                            f"got {spec.get('direction')!r}")
        sesoi = spec.get("sesoi_abs") if spec.get("sesoi_abs") is not None else spec.get("sesoi_pct", 5.0)
        if isinstance(sesoi, bool) or not isinstance(sesoi, (int, float)) or not sesoi > 0:
            raise DataError(f"guard {spec['name']!r}: its smallest effect of interest must be a positive number, "
                            f"got {sesoi!r}")
        specs[spec["name"]] = dict(spec)
    dependents = _relations(guards.get("conditional_on") or {}, "conditional_on", "conditional on", specs, metrics)
    trade_offs = _relations(guards.get("trade_offs") or {}, "trade_offs", "traded off against", specs, metrics)
    used = dict.fromkeys(name for names in (*dependents.values(), *trade_offs.values()) for name in names)
    return [specs[name] for name in used], dependents, trade_offs


def _relations(relation: Any, key: str, verb: str, specs: Mapping[str, Any],
               metrics: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """``{screened metric: related metrics}`` of one relation of ``guards``, checked."""
    if not isinstance(relation, Mapping):
        raise DataError(f"guards[{key!r}] must map a metric to other metrics, got {relation!r}")
    out: dict[str, tuple[str, ...]] = {}
    for metric in (m["name"] for m in metrics):
        names = relation.get(metric) or ()
        if isinstance(names, str):
            names = (names,)
        for name in names:
            if name not in specs:
                raise DataError(f"metric {metric!r} is {verb} {name!r}, which is not among the guards "
                                f"({', '.join(specs) or 'none'}); name it in guards")
        kept = tuple(name for name in dict.fromkeys(names) if name != metric)
        if kept:
            out[metric] = kept
    return out


def _ratio_ci(x: np.ndarray, base: np.ndarray, confidence: float) -> tuple[float, float]:
    """CI of ``100 (mean(x) / mean(base) - 1)`` in %, computed on the log scale and back-transformed, so
    it lies in (-100 %, +inf): ``log(mean x / mean base) ± t se`` with the delta-method ``se² =
    var(x) / (n_x mean(x)²) + var(base) / (n_b mean(base)²)`` and Welch–Satterthwaite degrees of freedom.
    NaN when a mean is not positive or a group has a single run and the other too few.

    >>> low, high = _ratio_ci(np.array([1.0, 2, 3]), np.array([10.0, 11, 12]), 0.95)
    >>> -100 < low < high < 0
    True
    """
    mx, mb = float(np.mean(x)), float(np.mean(base))
    if not (mx > 0 and mb > 0):
        return math.nan, math.nan
    vx = np.var(x, ddof=1) / (len(x) * mx * mx) if len(x) > 1 else 0.0
    vb = np.var(base, ddof=1) / (len(base) * mb * mb) if len(base) > 1 else 0.0
    centre = math.log(mx / mb)
    if vx + vb == 0:
        return (100.0 * math.expm1(centre),) * 2 if len(x) + len(base) > 2 else (math.nan, math.nan)
    parts = [(v, n) for v, n in ((vx, len(x)), (vb, len(base))) if n > 1]
    df = (vx + vb) ** 2 / sum(v * v / (n - 1) for v, n in parts) if parts else math.nan
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * math.sqrt(vx + vb)
    return 100.0 * math.expm1(centre - half), 100.0 * math.expm1(centre + half)


def _difference_ci(x: np.ndarray, base: np.ndarray, confidence: float) -> tuple[float, float]:
    """CI of ``mean(x) - mean(base)``: Welch's t interval (scipy), the pooled-variance interval when a
    group has a single run, the difference itself when neither group varies; NaN when not computable."""
    diff = float(np.mean(x) - np.mean(base))
    spread = (np.var(x, ddof=1) if len(x) > 1 else 0.0) + (np.var(base, ddof=1) if len(base) > 1 else 0.0)
    if spread == 0 and len(x) + len(base) > 2:
        return diff, diff
    welch = len(x) > 1 and len(base) > 1
    if not welch and len(x) + len(base) < 3:
        return math.nan, math.nan
    interval = sps.ttest_ind(x, base, equal_var=not welch).confidence_interval(confidence)
    return float(interval.low), float(interval.high)


def _effect_row(x: np.ndarray, base: np.ndarray, spec: Mapping[str, Any], confidence: float,
                verdict_effect: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One guard's change at one level: estimates, interval, SESOI, ``tripped`` and its text.

    A % guard's change is the ratio of the means with its interval on the log scale
    (:func:`_ratio_ci`), or, when the guard is a screened metric (``verdict_effect``: its row of the
    screen's ``effects`` table), exactly the verdict table's change and interval; a guard with an
    absolute SESOI uses the difference of the means and Welch's interval, in its units.
    """
    base_mean, mean = float(np.mean(base)), float(np.mean(x))
    diff = mean - base_mean
    pct = 100.0 * diff / abs(base_mean) if base_mean != 0 else math.nan
    absolute = spec.get("sesoi_abs") is not None
    if absolute:
        effect, ci, sesoi, units = diff, _difference_ci(x, base, confidence), float(spec["sesoi_abs"]), "abs"
    elif verdict_effect is not None:
        pct = float(verdict_effect["pct_change"])
        ci = (float(verdict_effect["ci_low"]), float(verdict_effect["ci_high"]))
        effect, sesoi, units = pct, float(spec.get("sesoi_pct", 5.0)), "%"
    else:
        effect, ci, sesoi, units = pct, _ratio_ci(x, base, confidence), float(spec.get("sesoi_pct", 5.0)), "%"
    bad = -1.0 if spec.get("direction", "maximize") == Direction.MAXIMIZE else 1.0
    no_degradation_excluded = (ci[1] < 0) if bad < 0 else (ci[0] > 0)
    tripped = bool(math.isfinite(effect) and bad * effect >= sesoi and no_degradation_excluded)
    return {"n": len(x), "baseline_n": len(base), "mean": mean, "baseline_mean": base_mean, "effect_pct": pct,
            "effect_abs": diff, "ci_low": ci[0], "ci_high": ci[1], "sesoi": sesoi, "units": units,
            "tripped": tripped, "text": change_text(spec, pct, diff)}


def change_text(spec: Mapping[str, Any], effect_pct: float, effect_abs: float, digits: int = 3) -> str:
    """A guard's change in a few characters: ``qps -99.8 %``, ``lost_pct +0.71 pt``, ``retransmits +4,330``.

    A % change as :func:`tunelab.formatting.fmt_pct` writes it (never ``-0.0 %``); a guard with an
    absolute SESOI (or no % change) in its units with ``digits`` significant digits.

    >>> change_text({"name": "lost_pct", "sesoi_abs": 0.1, "unit": "%"}, float("nan"), 0.71)
    'lost_pct +0.71 pt'
    >>> change_text({"name": "retransmits", "sesoi_abs": 100}, float("nan"), 4330.4, digits=4)
    'retransmits +4,330'
    """
    name = spec["name"]
    if spec.get("sesoi_abs") is None and is_number(effect_pct):
        return f"{name} {fmt_pct(effect_pct)}"
    unit = spec.get("unit") or ""
    suffix = " pt" if unit == "%" else "" if unit in ("", "count") else f" {unit}"
    return f"{name} {float(effect_abs) + 0.0:+,.{digits}g}{suffix}"     # + 0.0 turns -0.0 into 0.0


def guard_notes(data: pd.DataFrame, guards: Sequence[Mapping[str, Any]], kind: AnalysisKind) -> list[str]:
    """A line for each guard that :func:`guard_table` cannot check: none in a range design, or one not measured."""
    if guards and kind == AnalysisKind.RANGE:
        return ["guards are not checked in range designs (each configuration has levels of its own)"]
    return [f"guard {spec['name']} was not measured; metrics conditional on it are compared without it"
            for spec in guards if spec["name"] not in data.columns or data[spec["name"]].isna().all()]


def guard_table(data: pd.DataFrame, knobs: Sequence[str], baseline: Mapping[str, Any],
                guards: Sequence[Mapping[str, Any]], kind: AnalysisKind = AnalysisKind.OAT,
                alpha: float = 0.05, effects: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each guard's change at each non-baseline level of each knob, and whether it trips.

    Parameters
    ----------
    data : DataFrame
        Usable runs (one column per knob and metric).
    knobs, baseline
        Knob columns and their baseline levels.
    guards : list of dict
        Guard specs ``{name, direction, sesoi_pct | sesoi_abs[, unit]}``.
    kind : AnalysisKind
        ``OAT``: a knob's levels are compared on the runs whose other knobs sit at their
        baselines; ``FACTORIAL``: on all runs (marginal means); ``RANGE``: no levels to compare,
        the table is empty (:func:`guard_notes` says so).
    alpha : float
        The intervals are two-sided ``1 - alpha``: of the ratio of means on the log scale (a % SESOI),
        or Welch's t interval of the difference of means (an absolute SESOI).
    effects : DataFrame, optional
        The screen's ``effects`` table: a % guard that is also a screened metric takes its change and
        interval from there, so the guards table and the verdict table show the same numbers.

    Returns
    -------
    DataFrame
        Columns :data:`GUARD_COLUMNS`. ``tripped``: the guard degrades (its bad direction) by at
        least its SESOI and the interval excludes no change. ``effect_pct`` is NaN when the
        baseline mean is 0; a guard with a % SESOI then does not trip.
    """
    rows: list[dict[str, Any]] = []
    if not guards or kind == AnalysisKind.RANGE:
        return pd.DataFrame(rows, columns=GUARD_COLUMNS)
    measured = [spec for spec in guards if spec["name"] in data.columns and not data[spec["name"]].isna().all()]
    rows_of = rows_per_knob(data, list(knobs), dict(baseline), kind)
    shown = {} if effects is None or effects.empty else {
        (k, m, lv): row for k, m, lv, row in zip(effects["knob"], effects["metric"], effects["level"].tolist(),
                                                 effects.to_dict(orient="records"))}
    for knob in knobs:
        rows_here = data[rows_of[knob]]
        at_base = level_matches(rows_here[knob], baseline[knob])
        for level in sorted_levels(rows_here[knob].dropna()):
            if level == baseline[knob]:
                continue
            at_level = level_matches(rows_here[knob], level)
            for spec in measured:
                x = rows_here.loc[at_level, spec["name"]].dropna().to_numpy(dtype=float)
                base = rows_here.loc[at_base, spec["name"]].dropna().to_numpy(dtype=float)
                if len(x) == 0 or len(base) == 0:
                    continue
                rows.append({"knob": knob, "level": level, "guard": spec["name"], "baseline": baseline[knob],
                             **_effect_row(x, base, spec, 1.0 - alpha, shown.get((knob, spec["name"], level)))})
    table = pd.DataFrame(rows, columns=GUARD_COLUMNS)
    # levels keep their type (pandas would turn [128, 16] next to a tuple level into objects anyway)
    table["level"] = pd.Series([row["level"] for row in rows], dtype=object)
    table["baseline"] = pd.Series([row["baseline"] for row in rows], dtype=object)
    return table


def guard_sentence(metric: str, knob: str, level: Any, tripped: pd.DataFrame,
                   specs: Mapping[str, Mapping[str, Any]]) -> str:
    """Why ``metric`` cannot be compared at ``knob = level``, in an operator's words.

    ``tripped`` holds the guard-table rows that tripped there. Example: "latency_mean_ms cannot be
    compared at net.core.somaxconn=16: answered queries per second fell 99.8 % (more than the 5 % the
    guard qps allows), so only the queries still answered were timed".
    """
    clauses, consequences = [], []
    for row in tripped.itertuples(index=False):
        spec = specs.get(row.guard, {"name": row.guard})
        noun, consequence = (list(spec.get("words") or ()) + [None, None])[:2]
        change = row.effect_abs if row.units == "abs" else row.effect_pct
        verb = "fell" if change < 0 else "rose"
        if row.units == "abs":
            unit = spec.get("unit") or ""
            amount = f"{abs(change):.3g}" + (" percentage points" if unit == "%" else
                                            "" if unit in ("", "count") else f" {unit}")
            band = f"{row.sesoi:g}" + (" pt" if unit == "%" else "")
        else:
            amount, band = f"{abs(change):.1f} %", f"{row.sesoi:g} %"
        clauses.append(f"{noun or row.guard} {verb} {amount} (more than the {band} the guard {row.guard} allows)")
        if consequence and consequence not in consequences:
            consequences.append(consequence)
    why = " and ".join(consequences) or f"{metric} there is not measured on the same work as at the baseline"
    return f"{metric} cannot be compared at {knob}={level_label(level)}: {' and '.join(clauses)}, so {why}"


def apply_guards(verdicts: pd.DataFrame, table: pd.DataFrame, dependents: Mapping[str, Sequence[str]],
                 specs: Sequence[Mapping[str, Any]] = ()) -> tuple[pd.DataFrame, list[str]]:
    """The verdicts with the guard rule applied (a copy with a ``guard`` column), and the notes.

    A dependent metric's verdict (matters, equivalent or inconclusive) becomes ``not comparable``,
    its ``direction`` ``'none'``, its ``guard`` the tripped guards' text (``guard: qps -99.8 %``, plus
    ``at LEVEL`` when that is not the reported level) and its ``reason`` starts with
    :func:`guard_sentence`, when one of its guards tripped at the reported level (``level``), at
    every non-baseline level, or, for an equivalence verdict (a claim about every level), at any
    level. Otherwise, when a guard tripped at another level, the verdict stays and its reason (and
    the notes) name the levels where the metric is not comparable. Other rows are unchanged.
    """
    out = verdicts.copy()
    existing = out["guard"].tolist() if "guard" in out.columns else [None] * len(out)
    out["guard"] = pd.Series([g if isinstance(g, str) else None for g in existing], dtype=object, index=out.index)
    notes: list[str] = []
    if table.empty or not dependents:
        return out, notes
    by_name = {spec["name"]: spec for spec in specs}
    for index, row in out.iterrows():
        guards = dependents.get(row["metric"])
        if not guards or row["verdict"] not in GUARDED_VERDICTS:
            continue
        mine = table[(table["knob"] == row["knob"]) & table["guard"].isin(guards)]
        if mine.empty:
            continue
        levels = list(dict.fromkeys(mine["level"].tolist()))
        hit = mine[mine["tripped"].astype(bool)]
        tripped_levels = list(dict.fromkeys(hit["level"].tolist()))
        if not tripped_levels:
            continue
        reported = row["level"]
        overrule = (reported in tripped_levels or len(tripped_levels) == len(levels)
                    or row["verdict"] == Verdict.EQUIVALENT.value)
        if not overrule:
            where = ", ".join(f"{row['knob']}={level_label(level)}" for level in tripped_levels)
            texts = "; ".join(f"{level_label(level)}: " + ", ".join(hit.loc[level_matches(hit["level"], level), "text"])
                              for level in tripped_levels)
            note = (f"{row['metric']} is not comparable at {where} (guard tripped: {texts}); the verdict is about "
                    f"{row['knob']}={level_label(reported)}")
            out.at[index, "reason"] = f"{row['reason']}; {note}" if row["reason"] else note
            notes.append(f"{row['knob']} × {note}")
            continue
        level = reported if reported in tripped_levels else _worst_level(hit)
        here = hit[level_matches(hit["level"], level)]
        text = "guard: " + ", ".join(here["text"])
        out.at[index, "guard"] = text if level == reported else f"{text} at {level_label(level)}"
        out.at[index, "verdict"] = Verdict.NOT_COMPARABLE.value
        out.at[index, "direction"] = "none"
        sentence = guard_sentence(row["metric"], row["knob"], level, here, by_name)
        out.at[index, "reason"] = f"{sentence}; {row['reason']}" if row["reason"] else sentence
    return out, notes


def _worst_level(hit: pd.DataFrame) -> Any:
    """The tripped level whose guard moved furthest, in multiples of its SESOI."""
    size = [abs(a if u == "abs" else p) / s for a, p, u, s in zip(hit["effect_abs"], hit["effect_pct"], hit["units"],
                                                                 hit["sesoi"])]
    return hit["level"].tolist()[int(np.argmax(size))]


def trade_off_texts(verdicts: pd.DataFrame, table: pd.DataFrame, trade_offs: Mapping[str, Sequence[str]],
                    specs: Sequence[Mapping[str, Any]] = ()) -> list[str | None]:
    """Each verdict row's trade-off: its own change at its level and the change of the metrics it
    trades off against there (``throughput_mbps +394.0 %, at retransmits +4,330``), or None.

    A trade-off is a cost shown beside the verdict, never a reason to withhold it: the metric is not
    measured on survivors (its load's schema says so), so the other metric's change does not make it
    incomparable.
    """
    by_name = {spec["name"]: spec for spec in specs}
    out: list[str | None] = []
    for row in verdicts.to_dict(orient="records"):
        others = trade_offs.get(row["metric"]) or ()
        level = row.get("level")
        if not others or level is None or not len(table):
            out.append(None)
            continue
        here = table[(table["knob"] == row["knob"]) & table["guard"].isin(others)]
        here = here[level_matches(here["level"], level)] if len(here) else here
        if not len(here):
            out.append(None)
            continue
        costs = ", ".join(change_text(by_name.get(g, {"name": g}), p, a, digits=4)
                          for g, p, a in zip(here["guard"], here["effect_pct"], here["effect_abs"]))
        own = (f"{row['metric']} {fmt_pct(row['effect_pct'])}" if is_number(row["effect_pct"]) else
               f"{row['metric']} {fmt_abs(row['effect_abs'])}")
        out.append(f"{own}, at {costs}")
    return out
