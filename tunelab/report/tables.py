"""The tables of a report as DataFrames for reading, and every cell of a shown table as text.

Each function takes the study or the :class:`~tunelab.stats.ScreenResult` and returns a DataFrame with
the columns a reader sees (levels as text, the CI next to the change); :func:`cell_texts` turns any
DataFrame into the strings the templates show, every number through :mod:`tunelab.formatting`.
The HTML is :func:`tunelab.report.rendering.html_table` (a template).
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tunelab.formatting import fmt_abs_interval, fmt_p_exact, fmt_pct_interval, fmt_sig, is_number, is_p_column
from tunelab.formatting import level_label
from tunelab.formatting import fmt_level
from tunelab.report.figures import knob_rows
from tunelab.report.loading import Study, StudyInputs
from tunelab.report.labels import column_kind
from tunelab.report.wording import MODEL_TEST_SHORT, MODEL_TEST_TEXT, present, short_test_name
from tunelab.stats import ScreenResult, compact_letters, to_matrix
from tunelab.stats.mechanisms import change_text, counter_name, top_mechanisms
from tunelab.model import Direction
from tunelab.formatting import fmt_count, fmt_effect_size


def cell_texts(frame: pd.DataFrame, digits: int = 4) -> list[list[str]]:
    """Every cell of ``frame`` as shown, by the kind of its column (:func:`tunelab.report.labels.column_kind`):
    p-values (kind ``p``, or a name :func:`tunelab.formatting.is_p_column` knows) with 3 significant digits, an
    underflowed one as ``< 1e-300`` (:func:`tunelab.formatting.fmt_p_exact`); counts (kind ``count``, or
    integers) whole with thousands separators (:func:`tunelab.formatting.fmt_count`: ``10,250``, never
    ``1.025e+04``); other numbers with ``digits`` significant digits and rounding noise next to the column's
    largest value as ``0`` (:func:`tunelab.formatting.fmt_sig`); NaN/None as ``-``; levels (tuples) as text;
    long text in full.

    >>> cell_texts(pd.DataFrame({"p_adj": [0.0004, 0.2], "estimate": [68.85, -1.421e-14], "n": [3, 10]}))
    [['0.0004', '68.85', '3'], ['0.2', '0', '10']]
    >>> cell_texts(pd.DataFrame({"level": [(1, 2), None], "p": [0.0, float("nan")], "mean": [100123.4, 0.5]}))
    [['1 2', '< 1e-300', '100,123'], ['-', '-', '0.5']]
    >>> cell_texts(pd.DataFrame({"blocks_needed": [10250.0, None], "tost_p": [8.06e-06, 0.4013], "x": [12345, 7]}))
    [['10,250', '8.06e-06', '12,345'], ['-', '0.401', '7']]
    """
    scales = {column: _scale(frame[column]) for column in frame.columns}
    return [[_cell(str(column), value, digits, scales[column]) for column, value in zip(frame.columns, row)]
            for row in frame.itertuples(index=False)]


def _scale(column: pd.Series) -> float | None:
    numbers = [abs(float(v)) for v in column if is_number(v)]
    return max(numbers) if numbers else None


def _cell(column: str, value: Any, digits: int, scale: float | None) -> str:
    if isinstance(value, (tuple, list)):
        return level_label(value)
    if isinstance(value, (str, bool, np.bool_)):
        return str(value)
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, numbers.Real) and math.isnan(value)):
        return "-"
    kind = column_kind(column)
    if kind == "level" and isinstance(value, numbers.Real):
        return f"{100 * float(value):.4g} %"                 # a confidence level: 0.99167 -> 99.17 %
    if kind == "text" and isinstance(value, numbers.Integral):
        return str(int(value))                                # an id (a seed, a trial): no separators
    if kind == "count" or isinstance(value, numbers.Integral):
        return fmt_count(value) if isinstance(value, numbers.Real) else str(value)
    if isinstance(value, numbers.Real):
        return fmt_p_exact(value) if kind == "p" or is_p_column(column) else fmt_sig(value, digits, scale)
    return str(value)


def _verdict_change(row: Mapping[str, Any], absolute: bool) -> str:
    if absolute and math.isfinite(float(row.get("effect_abs", math.nan))):
        text = fmt_abs_interval(row["effect_abs"], row.get("effect_abs_ci_low"), row.get("effect_abs_ci_high"))
    else:
        text = fmt_pct_interval(row["effect_pct"], row["effect_ci_low"], row["effect_ci_high"])
    interaction = ":" in str(row["knob"]) and not present(row.get("level"))
    return f"effects differ by {text}" if interaction and text != "n/a" else text


def verdict_frame(verdicts: pd.DataFrame, metrics: Sequence[Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """The verdict table for reading: levels as text, rounded numbers, the CI next to the change.

    The change is in % (in the metric's units for the ``metrics`` with an absolute smallest effect,
    ``sesoi_abs``); an interaction row (knob ``'a:b'``) shows how much the effect of a differs
    between the levels of b. An ``only when`` column appears when some knob matters only when
    another knob is at some level, and a ``trade-off`` column when a metric moved beside another that
    is not measured on its survivors (``throughput_mbps +394.0 %, at retransmits +4,330``).
    """
    absolute = {m["name"] for m in metrics or () if m.get("sesoi_abs") is not None}
    records = verdicts.to_dict("records")
    out = pd.DataFrame({
        "knob": verdicts["knob"],
        "metric": verdicts["metric"],
        "verdict": [f"{v} ({g})" if present(g) else v for v, g in
                    zip(verdicts["verdict"], verdicts.get("guard", pd.Series([None] * len(verdicts))))],
        "level": verdicts["level"].map(lambda v: "-" if not present(v) else level_label(v)),
        "change vs baseline": [_verdict_change(r, r["metric"] in absolute) for r in records],
        "p_adj": verdicts["p_adj"].map(fmt_p_exact),
        "test": verdicts["test"].map(lambda t: "-" if t is None or pd.isna(t) else short_test_name(t)),
        "equivalent (TOST)": verdicts["equivalent"].map(lambda v: "yes" if bool(v) else "no"),
    })
    if "ci_level" in verdicts.columns:   # the level of the interval beside the change: the verdict's (issue 37)
        out.insert(out.columns.get_loc("change vs baseline") + 1, "ci_level",
                   [fmt_level(v) if is_number(v) else "-" for v in verdicts["ci_level"]])
    if "only_when" in verdicts.columns and verdicts["only_when"].map(present).any():
        out["only when"] = verdicts["only_when"].map(lambda v: str(v) if present(v) else "-").to_numpy()
    if "trade_off" in verdicts.columns and verdicts["trade_off"].map(present).any():
        # another metric's change beside this one's (iperf3's retransmits beside its goodput): not a guard
        out["trade-off"] = verdicts["trade_off"].map(lambda v: str(v) if present(v) else "-").to_numpy()
    return out.reset_index(drop=True)


#: the column of a shown table whose notes (a string or a list of them) are shown under its row, not as a column
NOTE_COLUMN = "note"


def row_notes(verdicts: pd.DataFrame, notes: Sequence[str] = ()) -> list[list[str]]:
    """Per verdict row, what explains it, shown under the row (:data:`NOTE_COLUMN`): its post-hoc note (a
    level the omnibus test flags but the post-hoc test does not separate) and each of ``notes`` (the
    screen's ``settings['notes']``) that starts with the row's ``knob × metric`` (or with ``knob × `` when
    it names no metric of the table).

    >>> v = pd.DataFrame({"knob": ["a", "a"], "metric": ["qps", "lat"], "posthoc_note": ["Games-Howell: no", None]})
    >>> row_notes(v, ["a × lat: 3 runs left out", "b × qps: untested", "load profiles x, y"])
    [['Games-Howell: no'], ['a × lat: 3 runs left out']]
    """
    metrics = set(map(str, verdicts["metric"]))
    out = []
    for row in verdicts.to_dict("records"):
        own = [str(row["posthoc_note"])] if present(row.get("posthoc_note")) else []
        prefix = f"{row['knob']} × "
        own += [note for note in notes if note.startswith(f"{prefix}{row['metric']}")
                or (note.startswith(prefix) and note[len(prefix):].split(":")[0].split(" ")[0] not in metrics)]
        out.append(own)
    return out


def general_notes(verdicts: pd.DataFrame, notes: Sequence[str] = ()) -> list[str]:
    """The ``notes`` that belong to no row of ``verdicts`` (:func:`row_notes`), shown under the table.

    >>> general_notes(pd.DataFrame({"knob": ["a"], "metric": ["qps"]}), ["a × qps: x", "load profiles x, y"])
    ['load profiles x, y']
    """
    placed = {note for own in row_notes(verdicts.assign(posthoc_note=None), notes) for note in own}
    return [note for note in notes if note not in placed]


def abba_frame(table: pd.DataFrame) -> pd.DataFrame:
    """A confirmation's or validation's table for reading: one row per profile × metric with the verdict, the
    change and its interval, the means, the SESOI, TOST p and the blocks (used, and needed when inconclusive).
    The interval's level (``ci_level``, else a look's ``1 - alpha_nominal``, else 95 %) is in the change's
    header when every row has the same one (``change (99.17 % CI)``), else in a ``CI level`` column. The raw
    table's other columns (the bootstrap interval, the comparison's name) stay in the DataFrame."""
    levels = _interval_levels(table)
    single = levels.nunique() <= 1
    change = f"change ({fmt_level(levels.iloc[0]) if len(levels) else '95 %'} CI)" if single else "change [CI]"
    frame = pd.DataFrame({          # the verdict third, as in the screen's table (tables.css colours that column)
        "profile": table["profile"], "metric": table["metric"], "verdict": table["verdict"],
        change: [fmt_pct_interval(e, lo, hi) for e, lo, hi in zip(table["pct_change"], table["ci_low"],
                                                                     table["ci_high"])],
        "SESOI": [f"±{s:g} %" for s in table["sesoi_pct"]], "tost_p": table["tost_p"].astype(float),
        "blocks": table["blocks"],
        "blocks needed": [int(n) if n is not None and not pd.isna(n) else None for n in table["blocks_needed"]],
        "role": table["role"] if "role" in table else "objective",
    })
    if not single:
        frame.insert(4, "ci_level", levels.to_numpy())     # a fraction; shown in % (labels: kind level)
    for name in ("candidate_mean", "baseline_mean"):
        if name in table:
            frame.insert(4 + (not single), name, table[name].to_numpy())
    return frame.reset_index(drop=True)


def _interval_levels(table: pd.DataFrame) -> pd.Series:
    """Each row's interval level: its ``ci_level``, else ``1 - alpha_nominal`` of its look, else 0.95.

    >>> list(_interval_levels(pd.DataFrame({"alpha_nominal": [0.0083, None]})).round(4))
    [0.9917, 0.95]
    """
    if "ci_level" in table:
        return table["ci_level"].astype(float).fillna(0.95).reset_index(drop=True)
    nominal = table["alpha_nominal"].astype(float) if "alpha_nominal" in table else pd.Series([0.05] * len(table))
    return (1 - nominal.fillna(0.05)).reset_index(drop=True)


def model_terms_frame(model_terms: pd.DataFrame) -> pd.DataFrame:
    """:attr:`ScreenResult.model_terms` for reading: one row per metric × term with its test statistic,
    degrees of freedom, p and family-adjusted p (block terms are not judged: ``-``), partial η² and aliases."""
    return pd.DataFrame({
        "metric": model_terms["metric"], "term": model_terms["term"], "kind": model_terms["kind"],
        "df": [f"{fmt_sig(a)}, {fmt_sig(b, 3)}" for a, b in zip(model_terms["df1"], model_terms["df2"])],
        "statistic": model_terms["statistic"].astype(float),
        "p": model_terms["p"].astype(float), "p_adj": model_terms["p_adj"].astype(float),
        "partial η²": model_terms["partial_eta2"].astype(float),
        "test": model_terms["test"].map(lambda t: MODEL_TEST_SHORT.get(t, t)),
        "aliases": model_terms["aliases"].map(lambda a: a if present(a) else "-"),
    }).reset_index(drop=True)


def rounds_frame(result: ScreenResult) -> pd.DataFrame:
    """The looks of a sequential screen for the report, one row per round (empty otherwise)."""
    rounds = getattr(result, "rounds", None)
    if rounds is None or rounds.empty:
        return pd.DataFrame()
    frame = rounds.rename(columns={"runs": "runs so far", "replicates": "replicates per undecided level",
                                   "information_fraction": "information", "alpha_spent": "alpha spent",
                                   "alpha_nominal": "alpha of this look", "decided": "final verdicts",
                                   "inconclusive": "still inconclusive"})
    return frame


def between_testbeds_frame(result: ScreenResult) -> pd.DataFrame:
    """The between-testbed spread for the report, one row per metric × testbed (empty with one testbed)."""
    spread = getattr(result, "testbeds", None)
    if spread is None or spread.empty:
        return pd.DataFrame()
    return spread.rename(columns={"n": "runs", "sd": "SD", "baseline_n": "baseline runs",
                                  "baseline_mean": "baseline mean", "offset_pct": "offset %",
                                  "statistic": "testbed F", "spread_pct": "spread ± %"})


def phase_table(study: Study) -> pd.DataFrame:
    """Trials per phase (columns) and status (rows), zeros filled in."""
    counts = study.phase_counts()
    if counts.empty:
        return pd.DataFrame()
    return counts.pivot(index="status", columns="phase", values="trials").fillna(0).astype(int)


def assumptions_table(assumptions: pd.DataFrame) -> pd.DataFrame:
    """Assumption tests wide: one row per knob × metric, p-value per test (Shapiro–Wilk, Levene, Brown–Forsythe)."""
    wide = assumptions.pivot_table(index=["knob", "metric"], columns="test", values="p", sort=False)
    wide.columns.name = None
    return wide.add_prefix("p ").reset_index()


def chosen_tests(omnibus: pd.DataFrame) -> pd.DataFrame:
    """The recommended omnibus test per knob × metric and why it was chosen."""
    chosen = omnibus[omnibus["recommended"].astype(bool)]
    return chosen[["knob", "metric", "test", "statistic", "df1", "df2", "p", "effect_size", "effect_size_name",
                   "reason"]].reset_index(drop=True)


def letters_by_level(posthoc: pd.DataFrame, knob: str, metric: str, method: str, means: Mapping[Any, float],
                     alpha: float, maximize: bool = True) -> dict[Any, str]:
    """Compact letters of one knob × metric post-hoc (levels sorted best mean first get 'a')."""
    rows = posthoc[(posthoc["knob"] == knob) & (posthoc["metric"] == metric) & (posthoc["method"] == method)]
    groups = list(dict.fromkeys([*rows["group1"], *rows["group2"]]))
    order = sorted(groups, key=lambda g: means.get(g, math.nan), reverse=maximize)
    table = compact_letters(rows, alpha=alpha, order=order)
    return dict(zip(table["group"], table["letters"]))


#: the screen's tests of a knob read over its numeric range (no levels, so no post-hoc pairs)
RANGE_TESTS = ("range_regression", "morris")

#: the post-hoc method the report shows for each omnibus test (keys: the verdict table's ``test``)
POSTHOC_METHOD_OF_TEST = {"anova+tukey": "tukey_hsd", "welch+games_howell": "games_howell", "kruskal+dunn": "dunn",
                          "duet+paired_t": "duet_paired_t", **{test: "model_dunnett" for test in MODEL_TEST_TEXT}}


def significant_pairs(verdicts: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(knob, metric, post-hoc method) of every knob × metric whose adjusted omnibus p is below alpha.

    Knobs judged by a model (factorial designs, tests in :data:`MODEL_TEST_TEXT`) have the model's
    contrasts against the baseline (``model_dunnett``); interaction rows (``'a:b'``) have no levels of
    their own and are left out, and so are knobs read over a numeric range (Latin hypercube, Morris:
    tests in :data:`RANGE_TESTS`), which have no groups to compare pairwise."""
    chosen = verdicts[verdicts["significant"].astype(bool) & ~verdicts["test"].isin(RANGE_TESTS)]
    return [(r.knob, r.metric, POSTHOC_METHOD_OF_TEST.get(r.test, "tukey_hsd")) for r in chosen.itertuples(index=False)
            if not (":" in str(r.knob) and not present(r.level))]


#: post-hoc methods that compare each level with the baseline only (no compact letters)
BASELINE_ONLY_METHODS = ("model_dunnett", "duet_paired_t")


def posthoc_detail(result: ScreenResult, inputs: StudyInputs, knob: str, metric: str, method: str) -> dict[str, Any]:
    """Everything notebook 02 shows for one knob × metric: the post-hoc ``table`` of ``method`` (levels as
    text), the square ``matrix`` of adjusted p-values, compact ``letters`` per level (best mean first)
    and the ``rows`` the test used. The model's contrasts (``model_dunnett``) compare each level with the
    baseline only, so they have no compact letters (``letters`` is empty); so do a duet's paired tests."""
    rows = knob_rows(inputs.runs, knob, inputs.knobs, inputs.baseline, result.design)
    values = rows[knob].tolist()
    means = {lvl: float(rows.loc[[v == lvl for v in values], metric].mean()) for lvl in dict.fromkeys(values)}
    direction = next((m["direction"] for m in inputs.metrics if m["name"] == metric), "maximize")
    long = result.posthoc[(result.posthoc["knob"] == knob) & (result.posthoc["metric"] == metric)
                          & (result.posthoc["method"] == method)]
    letters = {} if method in BASELINE_ONLY_METHODS else letters_by_level(
        result.posthoc, knob, metric, method, means, inputs.alpha, maximize=direction == Direction.MAXIMIZE)
    table = long.drop(columns=["knob", "metric", "method", "recommended"]).assign(
        group1=long["group1"].map(level_label), group2=long["group2"].map(level_label)).reset_index(drop=True)
    return {"table": table, "matrix": to_matrix(long, "p_adj"), "letters": letters, "rows": rows, "means": means}


def mechanism_frames(result: ScreenResult, top: int | None = 5) -> dict[str, pd.DataFrame]:
    """Knob -> its short mechanism table for the report: per level that matters the ``top`` counters that
    moved (by q; ``None``: every significant one), with the change per second and its 95 % interval,
    Hedges' g with its interval, and q. Empty without counters or mechanisms."""
    table = getattr(result, "mechanisms", None)
    if table is None or table.empty:
        return {}
    shown = top_mechanisms(table, top)
    frames = {}
    for knob, rows in shown.groupby("knob", sort=False):
        frames[str(knob)] = pd.DataFrame({
            "level": [f"{level_label(lv)} (vs {level_label(b)})" for lv, b in zip(rows["level"], rows["baseline"])],
            "counter": [counter_name(c) for c in rows["counter"]],
            "change per second [95 % CI]": [change_text(d, lo, hi) for d, lo, hi in
                                            zip(rows["difference"], rows["ci_low"], rows["ci_high"])],
            "Hedges' g [95 % CI]": [fmt_effect_size(g, lo, hi) for g, lo, hi in
                                    zip(rows["hedges_g"], rows["g_ci_low"], rows["g_ci_high"])],
            "q (BH)": [fmt_p_exact(q) for q in rows["q"]]})
    return frames
