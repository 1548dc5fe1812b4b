"""Figures of a report: pure functions, tidy DataFrame in, :class:`matplotlib.figure.Figure` out.

Every function builds a new ``Figure`` object (no pyplot state, so nothing is shown twice in a
notebook and nothing leaks between calls) with seaborn drawing on its axes. Levels are shown as
text (:func:`level_label`): triplets like ``(32768, 60999)`` become ``32768 60999`` as in sysctl.

Examples
--------
>>> import pandas as pd
>>> data = pd.DataFrame({"k": [1, 1, 2, 2], "qps": [10.0, 11.0, 5.0, 6.0]})
>>> fig = levels_figure(data, ["k"], "qps", {"k": 1})
>>> len(fig.axes)
1
"""
from __future__ import annotations

import io
import math
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import scikit_posthocs as sp
import seaborn as sns
from IPython.display import Image, display
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.model import AnalysisKind, Direction
from tunelab.formatting import fmt_level, fmt_plain, level_label
from tunelab.stats import sorted_levels
from tunelab.stats.model_screen import profile_effects

#: colours: the baseline, other levels, a candidate / winner, and the SESOI band
BASELINE_COLOR = "#e66101"
LEVEL_COLOR = "#b2abd2"
CANDIDATE_COLOR = "#5e3c99"
BAND_COLOR = "#d9f0d3"
_STYLE = "whitegrid"


#: the widest figure, inches: at 100 dpi it fits the report's 1120 px column unscaled, so no text shrinks
MAX_WIDTH_IN = 11.0


def _grid(n: int, ncols: int = 3, width: float = 4.2, height: float = 3.6) -> tuple[Figure, list[Any]]:
    """A figure of ``n`` panels, ``ncols`` a row, growing by rows; never wider than :data:`MAX_WIDTH_IN`."""
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    width = min(width, MAX_WIDTH_IN / ncols)
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    with sns.axes_style(_STYLE):
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for extra in axes[n:]:
        fig.delaxes(extra)
    return fig, axes[:n]


def _single(width: float, height: float) -> tuple[Figure, Any]:
    """A new figure with one styled axes."""
    fig = Figure(figsize=(width, height), layout="constrained")
    with sns.axes_style(_STYLE):
        ax = fig.add_subplot()
    return fig, ax


def _require(data: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in data.columns]
    if missing:
        raise DataError(f"figure needs column(s) {', '.join(missing)}; the data has {', '.join(map(str, data.columns))}")


def _labelled(data: pd.DataFrame, knob: str, metric: str) -> tuple[pd.DataFrame, list[str]]:
    """``data`` with the knob as text labels (in natural level order) and the order of the labels."""
    order = [level_label(v) for v in sorted_levels(data[knob].dropna())]
    frame = pd.DataFrame({"level": data[knob].map(level_label), metric: data[metric].astype(float)})
    return frame.dropna(subset=[metric]), order


def knob_rows(data: pd.DataFrame, knob: str, knobs: Sequence[str], baseline: Mapping[str, Any],
              design: AnalysisKind = AnalysisKind.FACTORIAL) -> pd.DataFrame:
    """The runs that inform ``knob`` as :func:`tunelab.stats.screen` analyses them: for a one-at-a-time
    design (``design='oat'``) the runs with every other knob at its baseline, otherwise all runs."""
    if design != AnalysisKind.OAT:
        return data
    keep = np.ones(len(data), dtype=bool)
    for other in knobs:
        if other != knob:
            keep &= np.array([v == baseline[other] for v in data[other].tolist()], dtype=bool)
    return data[keep]


def levels_figure(data: pd.DataFrame, knobs: Sequence[str], metric: str, baseline: Mapping[str, Any],
                  letters: Mapping[str, Mapping[Any, str]] | None = None, design: AnalysisKind = AnalysisKind.FACTORIAL,
                  ncols: int = 3, title: str | None = None) -> Figure:
    """One panel per knob: box plot of ``metric`` per level with every run as a dot; the baseline
    level in orange with a dashed line at its mean.

    Parameters
    ----------
    data : DataFrame
        Runs (the tidy screen frame).
    knobs : list of str
        Knob columns, one panel each.
    metric : str
        The metric column (y axis).
    baseline : dict
        Knob -> baseline level (marked).
    letters : dict, optional
        Knob -> {level: compact letters} written above each box (levels sharing a letter do
        not differ significantly).
    design : {'oat', 'factorial'}
        ``'oat'``: each panel shows only the runs with the other knobs at their baselines
        (:func:`knob_rows`); otherwise every run in every panel.
    """
    _require(data, [*knobs, metric])
    fig, axes = _grid(len(knobs), ncols)
    for ax, knob in zip(axes, knobs):
        frame, order = _labelled(knob_rows(data, knob, knobs, baseline, design), knob, metric)
        base = level_label(baseline.get(knob)) if knob in baseline else None
        palette = {lvl: (BASELINE_COLOR if lvl == base else LEVEL_COLOR) for lvl in order}
        with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib 3.11's deprecated `vert`
            warnings.filterwarnings("ignore", message=".*vert: bool was deprecated", category=DeprecationWarning)
            sns.boxplot(data=frame, x="level", y=metric, order=order, hue="level", palette=palette, legend=False,
                        showfliers=False, width=0.6, ax=ax)
        sns.stripplot(data=frame, x="level", y=metric, order=order, color="0.15", size=4, jitter=0.15, ax=ax)
        if base in order:
            ax.axhline(frame.loc[frame["level"] == base, metric].mean(), color=BASELINE_COLOR, ls="--", lw=1)
        ax.set_xticks(range(len(order)), [f"{lvl}\n(baseline)" if lvl == base else lvl for lvl in order])
        ax.set_xlabel(knob)
        ax.set_ylabel(metric)
        marks = (letters or {}).get(knob)
        if marks:
            top = frame[metric].max()
            span = (top - frame[metric].min()) or abs(top) or 1.0
            for i, lvl in enumerate(order):
                text = next((v for k, v in marks.items() if level_label(k) == lvl), "")
                ax.text(i, top + 0.06 * span, text, ha="center", va="bottom", fontweight="bold")
            ax.set_ylim(top=top + 0.2 * span)
    if title:
        fig.suptitle(title)
    _levels_legend(fig, bool(letters))
    return fig


def _levels_legend(fig: Figure, letters: bool) -> None:
    """The legend of :func:`levels_figure`: the baseline's colour and its mean's line, the other levels, the runs."""
    from matplotlib.lines import Line2D

    handles = [Patch(color=BASELINE_COLOR, label="baseline level"), Patch(color=LEVEL_COLOR, label="other level"),
               Line2D([], [], color=BASELINE_COLOR, ls="--", lw=1, label="baseline mean"),
               Line2D([], [], color="0.15", marker="o", ls="", ms=4, label="one run")]
    title = "box: quartiles" + ("; levels sharing a letter do not differ" if letters else "")
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8, title=title, title_fontsize=8)


def interaction_figure(data: pd.DataFrame, knobs: Sequence[str], metric: str, ncols: int = 3) -> Figure:
    """Interaction plots for factorial designs: for each pair of knobs, the mean of ``metric`` (95 % CI)
    per level of the first, one line per level of the second. Parallel lines: no interaction."""
    _require(data, [*knobs, metric])
    pairs = [(a, b) for i, a in enumerate(knobs) for b in knobs[i + 1:]]
    if not pairs:
        raise DataError("an interaction plot needs at least two knobs")
    fig, axes = _grid(len(pairs), ncols, width=4.6)
    for ax, (a, b) in zip(axes, pairs):
        frame = pd.DataFrame({a: data[a].map(level_label), b: data[b].map(level_label),
                              metric: data[metric].astype(float)}).dropna()
        order = [level_label(v) for v in sorted_levels(data[a].dropna())]
        hue_order = [level_label(v) for v in sorted_levels(data[b].dropna())]
        sns.pointplot(data=frame, x=a, y=metric, hue=b, order=order, hue_order=hue_order, errorbar=("ci", 95),
                      dodge=0.15, palette="viridis", ax=ax, seed=0)
        ax.set_title(f"{a} × {b}", fontsize=10)
        ax.legend(title=b, fontsize=8, title_fontsize=8)
    return fig


def _metric_rows(table: pd.DataFrame, metric: str, what: str) -> pd.DataFrame:
    """The rows of a tidy model table for ``metric``; DataError naming the metrics present when none."""
    _require(table, ["metric"])
    rows = table[table["metric"] == metric]
    if rows.empty:
        present = ", ".join(map(str, dict.fromkeys(table["metric"]))) or "none (a one-at-a-time design has no model)"
        raise DataError(f"no {what} for metric {metric!r}; metrics present: {present}")
    return rows


def _is_log(rows: pd.DataFrame) -> bool:
    """True when the rows come from a model on the log scale (``scale`` column) and every value is positive."""
    return ("scale" in rows.columns and bool((rows["scale"] == "log").all())
            and bool((rows[["mean", "ci_low", "ci_high"]].to_numpy(float) > 0).all()))


def _plain_number(value: float, _: Any = None) -> str:
    """A tick label without scientific notation (:func:`tunelab.formatting.fmt_plain`)."""
    return fmt_plain(value)


def _log_y(ax: Any, low: float, high: float) -> None:
    """A logarithmic y axis labelled with plain numbers: evenly spaced round numbers within a decade, 1-2-5
    ticks within two, powers of ten beyond."""
    ax.set_yscale("log")
    ratio = high / low if low > 0 else math.inf
    if ratio <= 10:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
    else:
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0,) if ratio > 100 else (1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(_plain_number))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _means_axes(ax: Any, log: bool, metric: str, low: float = 1.0, high: float = 10.0) -> None:
    if log:
        _log_y(ax, low, high)
    ax.set_ylabel(f"{metric} (model mean, 95 % CI)" + (" — log axis" if log else ""))


def main_effects_figure(emmeans: pd.DataFrame, metric: str, baseline: Mapping[str, Any] | None = None,
                        ncols: int = 3) -> Figure:
    """Main-effects plot of the model (R FrF2's ``MEPlot``): one panel per knob, the estimated marginal
    mean of ``metric`` per level (averaged over the other knobs) with its 95 % CI, on a common y axis.

    Parameters
    ----------
    emmeans : DataFrame
        :attr:`ScreenResult.emmeans`: ``[metric, knob, level, by, by_level, scale, mean, ci_low,
        ci_high]``; the rows with ``by`` missing are the marginal means.
    metric : str
        The metric to draw.
    baseline : dict, optional
        Knob -> baseline level: drawn in orange and labelled.
    ncols : int
        Panels per row.

    Notes
    -----
    Means are in the metric's units (geometric means when the model is on the log scale, then the
    y axis is logarithmic, so equal ratios look equally large).
    """
    _require(emmeans, ["metric", "knob", "level", "by", "mean", "ci_low", "ci_high"])
    rows = _metric_rows(emmeans, metric, "estimated marginal means")
    rows = rows[rows["by"].isna()]
    if rows.empty:
        raise DataError(f"no marginal means (rows with `by` missing) for metric {metric!r}")
    knobs = list(dict.fromkeys(rows["knob"]))
    log = _is_log(rows)
    fig, axes = _grid(len(knobs), ncols, width=4.0, height=3.4)
    low, high = float(rows["ci_low"].min()), float(rows["ci_high"].max())
    for ax, knob in zip(axes, knobs):
        sub = rows[rows["knob"] == knob]
        order = sorted_levels(sub["level"])
        sub = sub.set_index(sub["level"].map(level_label)).loc[[level_label(v) for v in order]]
        x = np.arange(len(sub))
        base = level_label(baseline[knob]) if baseline and knob in baseline else None
        ax.plot(x, sub["mean"], "-", color="0.6", lw=1, zorder=1)
        for xi, (label, row) in zip(x, sub.iterrows()):
            color = BASELINE_COLOR if label == base else CANDIDATE_COLOR
            ax.errorbar([xi], [row["mean"]], yerr=[[row["mean"] - row["ci_low"]], [row["ci_high"] - row["mean"]]],
                        fmt="o", color=color, ms=6, capsize=4, lw=1.5, zorder=2)
        ax.set_xticks(x, [f"{lvl}\n(baseline)" if lvl == base else lvl for lvl in sub.index])
        ax.set_xlim(-0.5, len(sub) - 0.5)
        ax.set_xlabel(knob)
        _means_axes(ax, log, metric, low, high)
        ax.set_ylim(*_padded(low, high, log))
    for ax in axes[1:]:
        ax.set_ylabel("")
    return fig


def _padded(low: float, high: float, log: bool) -> tuple[float, float]:
    """Axis limits a little outside ``[low, high]`` (multiplicatively on a log axis)."""
    if log:
        span = math.log(high / low) or 1.0
        return low * math.exp(-0.08 * span), high * math.exp(0.08 * span)
    span = (high - low) or abs(high) or 1.0
    return low - 0.08 * span, high + 0.08 * span


def interaction_plot(emmeans: pd.DataFrame, metric: str, baseline: Mapping[str, Any] | None = None,
                     aliases: Mapping[str, str] | None = None, ncols: int = 2) -> Figure:
    """Interaction plots of the model (R FrF2's ``IAPlot``): one panel per estimated interaction
    ``a:b``, the estimated mean of ``metric`` in each cell (95 % CI as error bars) per level of ``a``,
    one line per level of ``b``. Parallel lines: the effect of ``a`` does not depend on ``b``.

    Parameters
    ----------
    emmeans : DataFrame
        :attr:`ScreenResult.emmeans`; the rows with ``by`` set are the cells of each interaction
        (``knob`` = a, ``by`` = b, ``by_level`` = the level of b).
    metric : str
        The metric to draw.
    baseline : dict, optional
        Knob -> baseline level, marked on the x axis.
    aliases : dict, optional
        Interaction ``'a:b'`` -> the effects it is aliased with (``aliases`` of
        :attr:`ScreenResult.model_terms`), named in the panel's title.
    ncols : int
        Panels per row.

    Raises
    ------
    DataError
        The model of ``metric`` estimated no interaction (main effects only, e.g. a
        Plackett–Burman design, or interactions aliased with main effects).

    Notes
    -----
    On the log scale the y axis is logarithmic: parallel lines then mean equal *ratios*, which
    is what "no interaction" means in a model of log(metric).

    Examples
    --------
    >>> import pandas as pd
    >>> cells = pd.DataFrame({"metric": "qps", "knob": "a", "level": [1, 1, 2, 2], "by": "b",
    ...                       "by_level": [0, 1, 0, 1], "scale": "log", "mean": [10.0, 11, 20, 40],
    ...                       "ci_low": [9.0, 10, 18, 36], "ci_high": [11.0, 12, 22, 44]})
    >>> fig = interaction_plot(cells, "qps")
    >>> fig.axes[0].get_title(), fig.axes[0].get_yscale()
    ('a × b', 'log')
    """
    _require(emmeans, ["metric", "knob", "level", "by", "by_level", "mean", "ci_low", "ci_high"])
    rows = _metric_rows(emmeans, metric, "estimated marginal means")
    rows = rows[rows["by"].notna()]
    if rows.empty:
        raise DataError(f"the model of {metric!r} estimated no interaction (main effects only), so there is no "
                        "interaction plot; main_effects_figure shows its means")
    pairs = list(dict.fromkeys(zip(rows["knob"], rows["by"])))
    log = _is_log(rows)
    fig, axes = _grid(len(pairs), ncols, width=5.0, height=3.8)
    for ax, (a, b) in zip(axes, pairs):
        cells = rows[(rows["knob"] == a) & (rows["by"] == b)]
        order = [level_label(v) for v in sorted_levels(cells["level"])]
        hue_levels = sorted_levels(cells["by_level"])
        colors = sns.color_palette("viridis", len(hue_levels))
        offsets = np.linspace(-0.08, 0.08, len(hue_levels)) if len(hue_levels) > 1 else [0.0]
        for color, offset, hue in zip(colors, offsets, hue_levels):
            line = cells[[v == hue for v in cells["by_level"]]]
            line = line.set_index(line["level"].map(level_label)).reindex(order)
            x = np.arange(len(order)) + offset
            mean = line["mean"].to_numpy(float)
            yerr = np.vstack([mean - line["ci_low"].to_numpy(float), line["ci_high"].to_numpy(float) - mean])
            hue_text = level_label(hue) + (" (baseline)" if baseline and b in baseline and hue == baseline[b] else "")
            ax.errorbar(x, mean, yerr=yerr, fmt="o-", color=color, ms=5, capsize=3, lw=1.5, label=hue_text)
        base = level_label(baseline[a]) if baseline and a in baseline else None
        ax.set_xticks(range(len(order)), [f"{lvl}\n(baseline)" if lvl == base else lvl for lvl in order])
        ax.set_xlim(-0.5, len(order) - 0.5)
        ax.set_xlabel(a)
        _means_axes(ax, log, metric, float(cells["ci_low"].min()), float(cells["ci_high"].max()))
        aliased = (aliases or {}).get(f"{a}:{b}")
        ax.set_title(f"{a} × {b}" + (f"\n(aliased with {aliased})" if aliased else ""), fontsize=10)
        ax.legend(title=b, fontsize=8, title_fontsize=8)
    return fig


def _effect_rows(standardized_effects: pd.DataFrame, metric: str) -> pd.DataFrame:
    _require(standardized_effects, ["metric", "term", "t", "p"])
    rows = _metric_rows(standardized_effects, metric, "standardised effects").dropna(subset=["t"])
    if rows.empty:
        raise DataError(f"no finite standardised effect for metric {metric!r}")
    return rows.assign(abs_t=rows["t"].abs().astype(float))


def critical_t(alpha: float, df: float | None) -> float:
    """Two-sided critical value of |t| at ``alpha`` (Student's t with ``df``; the normal without).

    >>> round(critical_t(0.05, None), 2), round(critical_t(0.05, 15), 2)
    (1.96, 2.13)
    """
    if df is None or not math.isfinite(float(df)) or not float(df) > 0:
        return float(ss.norm.ppf(1 - alpha / 2))
    return float(ss.t.ppf(1 - alpha / 2, float(df)))


def half_normal_figure(standardized_effects: pd.DataFrame, metric: str, alpha: float = 0.05,
                       df: float | None = None) -> Figure:
    """Half-normal plot (Daniel plot) of the standardised one-degree-of-freedom effects of ``metric``:
    |t| of each term against the half-normal quantile of its rank. Terms without an effect follow the
    diagonal (|t| of pure noise is roughly half-normal); terms well above it stand out and are
    labelled when their p is below ``alpha``.

    Parameters
    ----------
    standardized_effects : DataFrame
        :attr:`ScreenResult.standardized_effects`: ``[metric, term, estimate, se, t, p]``.
    metric : str
        The metric to draw.
    alpha : float
        Terms with ``p < alpha`` are labelled and drawn in colour.
    df : float, optional
        Residual degrees of freedom of the model (``df2`` of :attr:`ScreenResult.model_terms`):
        the dashed line is the critical |t| (the normal's without).
    """
    rows = _effect_rows(standardized_effects, metric).sort_values("abs_t", kind="stable")
    m = len(rows)
    quantiles = ss.halfnorm.ppf((np.arange(1, m + 1) - 0.5) / m)
    significant = (rows["p"] < alpha).to_numpy()
    fig, ax = _single(6.4, 4.6)
    top = max(float(rows["abs_t"].max()), float(quantiles.max()), critical_t(alpha, df)) * 1.08
    ax.plot([0, top], [0, top], color="0.6", lw=1, ls=":", label="no effect (|t| ~ half-normal)")
    ax.axhline(critical_t(alpha, df), color="0.3", ls="--", lw=1, label=f"critical |t| (two-sided {alpha:g})")
    ax.scatter(quantiles[~significant], rows["abs_t"].to_numpy()[~significant], s=30, color=LEVEL_COLOR,
               edgecolor="0.3", lw=0.5, label="term", zorder=3)
    ax.scatter(quantiles[significant], rows["abs_t"].to_numpy()[significant], s=40, color=CANDIDATE_COLOR,
               edgecolor="k", lw=0.5, label=f"p < {alpha:g}", zorder=4)
    for q, (_, row), sig in zip(quantiles, rows.iterrows(), significant):
        if sig:
            ax.annotate(f"{row['term']} ({'+' if row['t'] > 0 else '−'})", (q, row["abs_t"]),
                        xytext=(-6, 0), textcoords="offset points", ha="right", va="center", fontsize=8)
    ax.set_xlim(0, max(float(quantiles.max()) * 1.1, 0.5))
    ax.set_ylim(0, top)
    ax.set_xlabel("half-normal quantile")
    ax.set_ylabel("|t| of the effect (high − low level)")
    ax.set_title(f"Half-normal plot of the effects on {metric} ({m} one-df terms)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def effects_pareto_figure(standardized_effects: pd.DataFrame, metric: str, alpha: float = 0.05,
                          df: float | None = None) -> Figure:
    """Pareto chart of the standardised effects of ``metric``: one bar of |t| per one-degree-of-freedom
    term, largest first, with the critical |t| at ``alpha`` as a dashed line; bars of terms with
    ``p < alpha`` in colour, the signed t written next to each bar.

    Parameters
    ----------
    standardized_effects : DataFrame
        :attr:`ScreenResult.standardized_effects`.
    metric : str
        The metric to draw.
    alpha : float
        Significance level of the critical line and of the colouring.
    df : float, optional
        Residual degrees of freedom of the model (the normal's critical value without).
    """
    rows = _effect_rows(standardized_effects, metric).sort_values("abs_t", ascending=True, kind="stable")
    fig, ax = _single(7.5, max(2.2, 1.2 + 0.42 * len(rows)))
    y = np.arange(len(rows))
    colors = [CANDIDATE_COLOR if p < alpha else LEVEL_COLOR for p in rows["p"]]
    ax.barh(y, rows["abs_t"], color=colors, edgecolor="0.3", lw=0.5, height=0.6)
    crit = critical_t(alpha, df)
    ax.axvline(crit, color="0.3", ls="--", lw=1, label=f"critical |t| = {crit:.2f} (two-sided {alpha:g})")
    for yi, (_, row) in zip(y, rows.iterrows()):
        ax.text(row["abs_t"], yi, f"  t = {row['t']:+.2f}".replace("-", "−"), va="center", fontsize=8)
    ax.set_yticks(y, rows["term"].astype(str).tolist())
    ax.set_xlim(0, max(float(rows["abs_t"].max()), crit) * 1.3)
    ax.set_xlabel("|t| of the effect (high − low level)")
    ax.set_title(f"Standardised effects on {metric}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def residuals_figure(residuals: pd.DataFrame, metric: str, scale: str | None = None,
                     label_above: float = 3.0) -> Figure:
    """Residual diagnostics of the model of ``metric``: residuals against fitted values (a funnel means
    uneven variance, a curve a missing term) and a normal Q–Q plot of the studentised residuals
    (``scipy.stats.probplot``; points off the line mean non-normal errors). Runs whose studentised
    residual exceeds ``label_above`` in size are labelled with their ``row``.

    Parameters
    ----------
    residuals : DataFrame
        :attr:`ScreenResult.residuals`: ``[metric, row, fitted, residual, studentized, leverage]``
        on the model's scale.
    metric : str
        The metric to draw.
    scale : {'log', 'linear'}, optional
        The model's scale (``scale`` of :attr:`ScreenResult.model_terms`), for the axis labels.
    label_above : float
        |studentised residual| above which a run is labelled.
    """
    _require(residuals, ["metric", "row", "fitted", "residual", "studentized"])
    rows = _metric_rows(residuals, metric, "residuals").dropna(subset=["fitted", "residual"])
    if rows.empty:
        raise DataError(f"the model of {metric!r} has no residuals (a saturated design judged by Lenth's method)")
    where = f"log({metric})" if scale == "log" else metric
    fig, (left, right) = _grid(2, 2, width=4.8, height=3.8)
    sns.scatterplot(data=rows, x="fitted", y="residual", color=CANDIDATE_COLOR, edgecolor="0.3", s=30, ax=left)
    left.axhline(0, color="0.3", lw=1)
    left.set_xlabel(f"fitted {where}")
    left.set_ylabel(f"residual ({where})")
    left.set_title("Residuals vs fitted", fontsize=10)
    stud = rows.dropna(subset=["studentized"])
    if len(stud) >= 3:
        (theoretical, ordered), (slope, intercept, r) = ss.probplot(stud["studentized"].to_numpy(float), dist="norm")
        right.scatter(theoretical, ordered, s=30, color=CANDIDATE_COLOR, edgecolor="0.3", lw=0.5, zorder=3)
        right.plot(theoretical, intercept + slope * theoretical, color="0.3", lw=1, label=f"fit, r = {r:.3f}")
        right.plot(theoretical, theoretical, color="0.6", lw=1, ls=":", label="standard normal")
        order = np.argsort(stud["studentized"].to_numpy(float), kind="stable")
        for q, (_, row) in zip(theoretical, stud.iloc[order].iterrows()):
            if abs(row["studentized"]) > label_above:
                right.annotate(f"row {row['row']}", (q, row["studentized"]), xytext=(4, 0),
                               textcoords="offset points", fontsize=8, va="center")
        right.legend(fontsize=8, loc="upper left")
    right.set_xlabel("normal quantile")
    right.set_ylabel("studentised residual")
    right.set_title("Normal Q–Q of the studentised residuals", fontsize=10)
    return fig


def response_curves_figure(response: pd.DataFrame, metric: str, baseline: Mapping[str, Any] | None = None,
                           band: tuple[float, float] | None = None, x_scale: Mapping[str, str] | None = None,
                           ylabel: str | None = None, columns: Sequence[str] = ("estimate", "ci_low", "ci_high"),
                           ncols: int = 3) -> Figure:
    """Response curves of a range design: one panel per knob, the model's estimate for ``metric`` over
    the knob's range with its confidence band.

    Parameters
    ----------
    response : DataFrame
        ``[metric, knob, x, estimate, ci_low, ci_high]`` (further columns are ignored), many ``x``
        per knob.
    metric : str
        The metric to draw.
    baseline : dict, optional
        Knob -> baseline value: a dashed vertical line.
    band : (low, high), optional
        A horizontal band behind the curves, with a line at 0: e.g. ``(-sesoi, sesoi)`` when the
        estimate is the change from the baseline (changes inside it are too small to matter).
    x_scale : dict, optional
        Knob -> ``'log'`` for a logarithmic x axis (ranges given with ``scale: log``).
    ylabel : str, optional
        Default ``'<metric> (estimate, 95 % CI)'``.
    columns : (estimate, low, high)
        The columns to draw, e.g. ``('effect_pct', 'effect_ci_low', 'effect_ci_high')``.
    ncols : int
        Panels per row.

    Examples
    --------
    >>> import pandas as pd
    >>> curve = pd.DataFrame({"metric": "qps", "knob": "k", "x": [1.0, 2, 3], "estimate": [0.0, 1, 4],
    ...                       "ci_low": [-1.0, 0, 2], "ci_high": [1.0, 2, 6]})
    >>> response_curves_figure(curve, "qps", baseline={"k": 1}).axes[0].get_xlabel()
    'k'
    """
    value, low, high = columns
    _require(response, ["metric", "knob", "x", value, low, high])
    rows = _metric_rows(response, metric, "response curves")
    knobs = list(dict.fromkeys(rows["knob"]))
    fig, axes = _grid(len(knobs), ncols, width=4.2, height=3.4)
    for ax, knob in zip(axes, knobs):
        curve = rows[rows["knob"] == knob].sort_values("x")
        x = curve["x"].to_numpy(float)
        if band is not None:
            ax.axhspan(*band, color=BAND_COLOR, zorder=0, label="±SESOI")
            ax.axhline(0, color="0.3", lw=1)
        ax.fill_between(x, curve[low].to_numpy(float), curve[high].to_numpy(float), color=LEVEL_COLOR,
                        alpha=0.45, lw=0, label="95 % CI")
        ax.plot(x, curve[value].to_numpy(float), color=CANDIDATE_COLOR, lw=2, label="estimate")
        if baseline and baseline.get(knob) is not None:
            ax.axvline(float(baseline[knob]), color=BASELINE_COLOR, ls="--", lw=1, label="baseline")
        if (x_scale or {}).get(knob) == "log" and (x > 0).all():
            ax.set_xscale("log")
        ax.set_xlabel(knob)
        ax.set_ylabel(ylabel or f"{metric} (estimate, 95 % CI)")
    axes[0].legend(fontsize=8, loc="best")
    return fig


def pvalue_heatmap(matrix: pd.DataFrame, title: str | None = None) -> Figure:
    """Post-hoc p-value heatmap (``scikit_posthocs.sign_plot``) of a square group × group matrix of
    adjusted p-values (:func:`tunelab.stats.to_matrix`); cells: p < 0.001 / 0.01 / 0.05 / NS."""
    if matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise DataError(f"a p-value heatmap needs a square matrix of at least 2 groups, got shape {matrix.shape}")
    labelled = matrix.astype(float).copy()
    labelled.index = [level_label(v) for v in matrix.index]
    labelled.columns = [level_label(v) for v in matrix.columns]
    n = len(labelled)
    fig = Figure(figsize=(1.2 + 0.9 * n, 0.8 + 0.8 * n))
    ax = fig.add_axes((0.22, 0.2, 0.62, 0.7))
    sp.sign_plot(labelled, ax=ax, linewidths=0.5, linecolor="0.8", square=True, cbar_ax_bbox=(0.88, 0.35, 0.04, 0.3))
    ax.tick_params(axis="x", rotation=0)
    ax.tick_params(axis="y", rotation=0)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def forest_figure(frame: pd.DataFrame, label: str, estimate: str = "pct_change", low: str = "ci_low",
                  high: str = "ci_high", sesoi_pct: float | None = None, xlabel: str = "% change vs baseline",
                  title: str | None = None, significant: str | None = None, ax: Any = None,
                  legend: Mapping[str, str] | None = None) -> Figure:
    """A forest plot: one row per ``label`` with the ``estimate`` and its interval; a line at 0 and,
    with ``sesoi_pct``, the band ±SESOI (changes inside it are too small to matter).

    A row is drawn in the "significant" colour when its ``significant`` column is True (the verdict's
    own test), or, without that column, when its interval excludes 0. ``frame`` may also carry
    ``other_low``/``other_high``, an interval that does not decide, drawn thin and pale behind.
    ``legend`` names the entries (keys ``significant``, ``other``, ``interval``, ``unadjusted``).
    The figure's height grows with the rows; ``ax`` draws into an existing axes (its figure is returned).
    """
    _require(frame, [label, estimate, low, high])
    rows = frame.reset_index(drop=True)
    words = {"significant": "significant (excludes 0)", "other": "not significant", **(legend or {})}
    fig, ax = _single(7.5, forest_height(len(rows))) if ax is None else (ax.figure, ax)
    y = np.arange(len(rows))[::-1]
    est = rows[estimate].to_numpy(float)
    lo, hi = rows[low].to_numpy(float), rows[high].to_numpy(float)
    pale = ("other_low" in rows and "other_high" in rows)
    spread = np.r_[est, lo, hi, 0.0, *((rows["other_low"], rows["other_high"]) if pale else ())]
    ratio = bool(np.nanmax(np.abs(spread.astype(float))) > 100)
    to_x = _log_ratio if ratio else (lambda v: np.asarray(v, dtype=float))
    if sesoi_pct:
        ax.axvspan(*to_x([-sesoi_pct, sesoi_pct]), color=BAND_COLOR, zorder=0, label=f"±{sesoi_pct:g} % (SESOI)")
    ax.axvline(0, color="0.3", lw=1)
    if pale:
        for yi, a, b in zip(y, to_x(rows["other_low"]), to_x(rows["other_high"])):
            ax.plot([a, b], [yi + 0.18, yi + 0.18], color=LEVEL_COLOR, lw=1.2, zorder=1)
    clear = rows[significant].astype(bool).to_numpy() if significant else (lo > 0) | (hi < 0)
    for yi, e, a, b, c in zip(y, to_x(est), to_x(lo), to_x(hi), clear):
        color = CANDIDATE_COLOR if c else NOT_SIGNIFICANT_COLOR
        ax.plot([a, b], [yi, yi], color=color, lw=2, solid_capstyle="butt", zorder=2)
        ax.plot([e], [yi], "o", color=color, ms=6, zorder=3)
    ax.set_yticks(y, rows[label].astype(str).tolist())
    if ratio:
        _pct_ticks(ax, spread[np.isfinite(spread)])
        xlabel += " — log-ratio scale"
    ax.set_xlabel(xlabel)
    _forest_legend(ax, words, bool(clear.any()), bool((~clear).any()), pale)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


#: the colour of a level the verdict's test does not separate from the baseline
NOT_SIGNIFICANT_COLOR = "0.45"


def forest_height(rows: int) -> float:
    """A forest plot's height in inches: a fixed margin (title, axis, legend below) plus 0.42 inch per row."""
    return 2.0 + 0.42 * max(rows, 1)


def _forest_legend(ax: Any, words: Mapping[str, str], significant: bool, other: bool, pale: bool) -> None:
    """The forest plot's legend outside the axes: what each colour means and which interval decides."""
    from matplotlib.lines import Line2D

    def entry(color: str, label: str) -> Any:
        return Line2D([], [], color=color, lw=2, marker="o", label=label)

    handles = [entry(CANDIDATE_COLOR, words["significant"])] if significant else []
    handles += [entry(NOT_SIGNIFICANT_COLOR, words["other"])] if other else []
    if pale:
        handles.append(Line2D([], [], color=LEVEL_COLOR, lw=1.2, label=words.get("unadjusted", "other interval")))
    own, labels = ax.get_legend_handles_labels()
    ax.figure.legend([*handles, *own], [h.get_label() for h in handles] + labels, loc="outside lower center",
                     ncols=2, fontsize=8, title=words.get("interval"), title_fontsize=8)


def legend_outside(ax: Any, **options: Any) -> Any:
    """The axes' legend as a figure legend right of the plotting area (the constrained layout makes room
    for it), so it never covers a point or an interval, however few rows the plot has."""
    handles, labels = ax.get_legend_handles_labels()
    return ax.figure.legend(handles, labels, loc="outside right upper", fontsize=8, **options)


def _log_ratio(pct: Any) -> np.ndarray:
    """% change -> log of the ratio (``log(1 + pct/100)``): -50 % and +100 % are equally far from 0."""
    values = np.asarray(pct, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log1p(np.maximum(values, -99.999) / 100.0)


_TICKS_PCT = (-99.9, -99, -90, -50, 0, 100, 1000, 10000, 100000)


def _pct_ticks(ax: Any, pct: np.ndarray) -> None:
    finite = pct[np.isfinite(pct)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (-50.0, 100.0)
    ticks = [t for t in _TICKS_PCT if low - 1e-9 <= t <= high + 1e-9 or t == 0]
    lower = [t for t in _TICKS_PCT if t < low]
    upper = [t for t in _TICKS_PCT if t > high]
    ticks = ([lower[-1]] if lower and low < 0 else []) + ticks + ([upper[0]] if upper and high > 0 else [])
    ax.set_xticks(_log_ratio(ticks), [f"{t:+g} %" if t else "0" for t in ticks])


def effects_forest(effects: pd.DataFrame, metric: str, sesoi_pct: float | None = None) -> Figure:
    """Forest plot of :attr:`ScreenResult.effects` for one metric: % change of each knob level against
    its baseline with the bootstrap 95 % CI."""
    _require(effects, ["knob", "metric", "level", "pct_change", "ci_low", "ci_high"])
    rows = effects[effects["metric"] == metric]
    if rows.empty:
        raise DataError(f"no effects for metric {metric!r}; metrics present: {', '.join(effects['metric'].unique())}")
    rows = rows.assign(label=[f"{k} = {level_label(v)}" for k, v in zip(rows["knob"], rows["level"])])
    return forest_figure(rows, "label", sesoi_pct=sesoi_pct, xlabel=f"% change of {metric} vs baseline (95 % CI)",
                         title=f"Effect of each level on {metric}")


def verdict_forest_rows(result: Any, metric: str) -> pd.DataFrame:
    """The rows of :func:`verdict_forest`: one per knob level of ``metric`` with the % change, the interval
    the verdict uses (:func:`tunelab.stats.verdict_level.verdict_intervals`: the deciding post-hoc test's
    adjusted interval at the row's ``ci_level``), the effects table's unadjusted interval, and whether the
    verdict's test separates the level from the baseline (it is among the row's significant ``levels``).

    Columns ``label, knob, level, pct_change, ci_low, ci_high, other_low, other_high, significant, ci_level``;
    a screen without per-level effects (a range design) gives one row per knob from its verdicts.
    """
    from tunelab.stats.verdict_level import verdict_intervals

    verdicts = result.verdicts[result.verdicts["metric"] == metric]
    effects = result.effects[result.effects["metric"] == metric] if len(result.effects) else result.effects
    if not len(effects):
        return pd.DataFrame({"label": [str(k) for k in verdicts["knob"]], "knob": verdicts["knob"].tolist(),
                             "level": verdicts["level"].tolist(), "pct_change": verdicts["effect_pct"].astype(float),
                             "ci_low": verdicts["effect_ci_low"].astype(float),
                             "ci_high": verdicts["effect_ci_high"].astype(float),
                             "significant": verdicts["significant"].astype(bool).tolist(),
                             "ci_level": verdicts.get("ci_level", pd.Series(np.nan, index=verdicts.index)).tolist()})
    posthoc = result.posthoc
    deciding = posthoc[(posthoc["metric"] == metric) & posthoc["recommended"].astype(bool)] if len(posthoc) else posthoc
    parts = []
    for knob, rows in effects.groupby("knob", sort=False):
        rows = rows.reset_index(drop=True)
        own = verdict_intervals(rows, deciding[deciding["knob"] == knob] if len(deciding) else deciding)
        row = verdicts[verdicts["knob"] == knob]
        chosen = [entry["level"] for entry in (row["levels"].iloc[0] if len(row) else []) or []]
        level = row["ci_level"].iloc[0] if len(row) and "ci_level" in row else math.nan
        parts.append(pd.DataFrame({
            "label": [f"{knob} = {level_label(v)}" for v in rows["level"]], "knob": knob,
            "level": pd.Series(rows["level"].tolist(), dtype=object), "pct_change": rows["pct_change"].astype(float),
            "ci_low": own["ci_low"].to_numpy(float), "ci_high": own["ci_high"].to_numpy(float),
            "other_low": rows["ci_low"].astype(float), "other_high": rows["ci_high"].astype(float),
            "significant": [any(v == c for c in chosen) for v in rows["level"]], "ci_level": level}))
    return pd.concat(parts, ignore_index=True)


def verdict_interval_text(result: Any) -> str:
    """What the intervals beside the verdicts are, in words, with their level (the rows' ``ci_level``)."""
    levels = sorted({float(v) for v in result.verdicts.get("ci_level", pd.Series(dtype=float)) if pd.notna(v)})
    level = fmt_level(levels[0]) if len(levels) == 1 else "the level of each row (its CI level)"
    if result.design == AnalysisKind.OAT:
        return (f"{level} interval of the verdict's own test (the simultaneous interval of Tukey HSD or Games–Howell "
                "as % of the baseline mean; a bootstrap CI where Dunn's test decides)")
    return f"{level} CI from the model (Dunnett-adjusted)"


def verdict_forest(result: Any, metric: str, sesoi_pct: float | None = None, ax: Any = None) -> Figure:
    """Forest plot of a :class:`~tunelab.stats.ScreenResult` that agrees with its verdicts: each knob level's
    % change of ``metric`` with **the interval the verdict uses** (thick: the deciding post-hoc test's
    adjusted interval at the row's ``ci_level``), coloured "significant" only when the verdict's test
    separates the level from the baseline; the effects table's unadjusted interval, where it differs, thin
    and pale behind (it does not decide). The legend says which is which; ``ax`` draws into an axes.
    """
    rows = verdict_forest_rows(result, metric)
    if rows.empty:
        raise DataError(f"no effects for metric {metric!r}; metrics present: "
                        f"{', '.join(map(str, dict.fromkeys(result.verdicts['metric']))) or 'none'}")
    levels = sorted({float(v) for v in rows["ci_level"] if pd.notna(v)})
    level = fmt_level(levels[0]) if len(levels) == 1 else "each row's ci_level"
    if "other_low" in rows and np.allclose(rows[["ci_low", "ci_high"]].to_numpy(float),
                                           rows[["other_low", "other_high"]].to_numpy(float), equal_nan=True):
        rows = rows.drop(columns=["other_low", "other_high"])
    words = {"significant": "significant: the verdict's test separates it",
             "other": "not separated by the verdict's test", "unadjusted": "unadjusted interval (effects table; does not decide)",
             "interval": f"interval that decides: the verdict's, {level}, adjusted"}
    return forest_figure(rows, "label", sesoi_pct=sesoi_pct, significant="significant", ax=ax, legend=words,
                         xlabel=f"% change of {metric} vs baseline ({level} interval of the verdict's test)",
                         title=f"Effect of each level on {metric}")


def profile_effects_figure(contrasts: pd.DataFrame, metric: str, sesoi_pct: float | None = None) -> Figure:
    """Forest plot of each knob's effect at each load profile (a profile-crossed study): % change of
    each knob level against its baseline within each profile, with the model's adjusted 95 % CI
    (:func:`tunelab.stats.model_screen.profile_effects`). A knob whose effect depends on the load
    shows a clear effect at one profile and none at another."""
    rows = profile_effects(contrasts)
    rows = rows[rows["metric"] == metric]
    if rows.empty:
        raise DataError(f"no per-profile effects for metric {metric!r}: the study has no load profile factor, or "
                        "the metric's model could not be fitted")
    rows = rows.assign(label=[f"{k} = {level_label(v)} @ {p}" for k, v, p in
                              zip(rows["knob"], rows["level"], rows["profile"])])
    return forest_figure(rows, "label", estimate="effect_pct", low="effect_ci_low", high="effect_ci_high",
                         sesoi_pct=sesoi_pct, xlabel=f"% change of {metric} vs baseline at each profile (95 % CI)",
                         title=f"Effect of each level on {metric}, per load profile")


def drift_figure(data: pd.DataFrame, metric: str, time: str = "started_at") -> Figure:
    """``metric`` of every run against its start time; baseline runs in orange and joined by a line, so
    a drift of the machine over the study shows as a trend in the baseline."""
    _require(data, [metric, time])
    frame = data.sort_values(time)
    is_base = frame["is_baseline"].fillna(False).astype(bool) if "is_baseline" in frame else pd.Series(False, frame.index)
    fig, ax = _single(9, 3.6)
    x = frame[time]
    if time == "started_at":
        x = (x - x.min()).dt.total_seconds() / 60.0
    ax.scatter(x[~is_base], frame.loc[~is_base, metric], s=18, color=LEVEL_COLOR, edgecolor="0.3", lw=0.4,
               label="other runs", zorder=2)
    ax.plot(x[is_base], frame.loc[is_base, metric], "o-", color=BASELINE_COLOR, ms=5, lw=1, label="baseline runs",
            zorder=3)
    ax.set_xlabel("minutes since the first trial started" if time == "started_at" else time)
    ax.set_ylabel(metric)
    ax.legend(fontsize=8, loc="best")
    return fig


def series_figure(series: pd.DataFrame, metric: str, warmup_s: float = 0.0, title: str | None = None) -> Figure:
    """Per-second ``metric`` of one trial; the warm-up (discarded from the trial's value) shaded."""
    _require(series, ["t_s", metric])
    fig, ax = _single(7, 3.2)
    if warmup_s > 0:
        ax.axvspan(0, warmup_s, color="0.88", label=f"warm-up {warmup_s:g} s (discarded)")
    sns.lineplot(data=series, x="t_s", y=metric, marker="o", color=CANDIDATE_COLOR, ax=ax)
    ax.set_xlim(left=0)
    ax.set_xlabel("seconds since the load started")
    ax.set_ylabel(f"{metric} per second")
    if warmup_s > 0:
        ax.legend(fontsize=8, loc="lower right")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def generations_figure(generations: pd.DataFrame, metric: str) -> Figure:
    """Best, mean and worst estimate of ``metric`` in the population per generation, and the baseline."""
    _require(generations, ["generation", "best", "mean", "worst", "baseline"])
    fig, ax = _single(7, 3.6)
    g = generations["generation"]
    ax.fill_between(g, generations["worst"], generations["best"], color=LEVEL_COLOR, alpha=0.35,
                    label="population range")
    ax.plot(g, generations["best"], "o-", color=CANDIDATE_COLOR, label="best")
    ax.plot(g, generations["mean"], "s--", color="0.3", label="mean")
    ax.plot(g, generations["worst"], "v:", color="0.5", label="worst")
    ax.plot(g, generations["baseline"], "-", color=BASELINE_COLOR, lw=2, label="baseline (default)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("generation")
    ax.set_ylabel(f"{metric} (mean of a configuration's measurements)")
    ax.legend(fontsize=8, loc="best")
    return fig


def progress_figure(history: pd.DataFrame, metric: str, direction: str = "maximize") -> Figure:
    """Every search measurement of ``metric`` in order, the running best, and the baseline's measurements."""
    _require(history, ["measurement", metric, "is_baseline"])
    fig, ax = _single(7, 3.6)
    values = history[metric].astype(float)
    best = values.cummax() if direction == Direction.MAXIMIZE else values.cummin()
    base = history["is_baseline"].astype(bool)
    ax.scatter(history["measurement"], values, s=16, color=LEVEL_COLOR, edgecolor="0.3", lw=0.4, label="measurement")
    ax.plot(history["measurement"], best, color=CANDIDATE_COLOR, label="best so far")
    ax.scatter(history.loc[base, "measurement"], values[base], s=30, color=BASELINE_COLOR, label="baseline", zorder=3)
    ax.set_xlabel("measurement")
    ax.set_ylabel(metric)
    ax.legend(fontsize=8, loc="best")
    return fig


def _search_colors(n: int) -> list[Any]:
    """One colour per search: the candidate colour alone, else a viridis ramp (never the baseline's orange)."""
    return [CANDIDATE_COLOR] if n == 1 else list(sns.color_palette("viridis", n))


def convergence_figure(conv: pd.DataFrame, objective: str, ax: Any = None) -> Figure:
    """How each stored search converged: the incumbent's estimate of ``objective`` (its pooled mean,
    ±SE band) after each batch against the measurements spent, one line per search (engine) on the
    same axes; race batches as open markers; the baseline's estimate as a horizontal line.

    Parameters
    ----------
    conv : DataFrame
        :func:`tunelab.report.refinement.convergence`: ``search_id, engine, stage, evaluations,
        incumbent_mean, incumbent_se, baseline_mean``.
    objective : str
        The objective's name (axis label).
    ax : matplotlib Axes, optional
        Draw into this axes (its figure is returned) instead of a new figure.

    Examples
    --------
    >>> import pandas as pd
    >>> conv = pd.DataFrame({"search_id": "s", "engine": "random", "stage": ["search", "race"],
    ...                      "evaluations": [5, 9], "incumbent_mean": [10.0, 11.0], "incumbent_se": [None, 0.5],
    ...                      "baseline_mean": [9.0, 9.0]})
    >>> convergence_figure(conv, "qps").axes[0].get_xlabel()
    'measurements'
    """
    _require(conv, ["search_id", "engine", "stage", "evaluations", "incumbent_mean", "incumbent_se", "baseline_mean"])
    fig, ax = _single(7.5, 4.0) if ax is None else (ax.figure, ax)
    groups = [(s, rows) for s, rows in conv.groupby("search_id", sort=False) if rows["incumbent_mean"].notna().any()]
    if not groups:
        raise DataError(f"no search stored an estimate of {objective!r}: it was not one of their objectives")
    for (search_id, rows), color in zip(groups, _search_colors(len(groups))):
        x = rows["evaluations"].to_numpy(float)
        mean = rows["incumbent_mean"].to_numpy(float)
        se = rows["incumbent_se"].to_numpy(float)
        engine = str(rows["engine"].iloc[0])
        label = engine if engine == search_id else f"{engine} ({search_id})"
        ax.fill_between(x, mean - se, mean + se, color=color, alpha=0.2, lw=0, step="post")
        ax.step(x, mean, where="post", color=color, lw=2, label=label)
        race = (rows["stage"] == "race").to_numpy()
        ax.plot(x[~race], mean[~race], "o", color=color, ms=4)
        ax.plot(x[race], mean[race], "o", mfc="white", mec=color, ms=6, mew=1.5)
    base = conv.groupby("search_id", sort=False)["baseline_mean"].last().dropna()
    if len(base):
        ax.axhline(float(base.mean()), color=BASELINE_COLOR, ls="--", lw=1.5, label="baseline (default)")
    if (conv["stage"] == "race").any():
        ax.plot([], [], "o", mfc="white", mec="0.3", mew=1.5, label="race batch (re-measured)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("measurements")
    ax.set_ylabel(f"{objective}: incumbent estimate (±SE)")
    ax.legend(fontsize=8, loc="best")
    return fig


def racing_figure(rounds: pd.DataFrame, objective: str) -> Figure:
    """The race of each search: per round, every racer's pooled mean of ``objective`` with its 95 %
    interval; survivors filled, eliminated racers as grey crosses, the baseline ringed in orange;
    thin lines follow a racer through the rounds, ``#k`` labels it (the table lists the configurations).

    Parameters
    ----------
    rounds : DataFrame
        :func:`tunelab.report.refinement.race_rounds`: ``search_id, engine, round, racer, mean,
        ci_low, ci_high, survived, is_baseline``.
    objective : str
        The objective's name (axis label).
    """
    _require(rounds, ["search_id", "engine", "round", "racer", "mean", "ci_low", "ci_high", "survived", "is_baseline"])
    if rounds.empty:
        raise DataError("no race rounds to draw: the searches stored no race (library engines do not race)")
    searches = list(rounds.groupby("search_id", sort=False))
    fig, axes = _grid(len(searches), ncols=2, width=6.0, height=4.0)
    for ax, (search_id, rows) in zip(axes, searches):
        racers = sorted(rows["racer"].unique())
        place = rows.groupby("round")["racer"].rank(method="first").to_numpy(float) - 1   # spread within a round
        width = rows.groupby("round")["racer"].transform("size").to_numpy(float) - 1
        x = rows["round"].to_numpy(float) + 0.5 * (np.divide(place, width, out=np.full_like(place, 0.5),
                                                             where=width > 0) - 0.5)
        mean = rows["mean"].to_numpy(float)
        survived = rows["survived"].astype(bool).to_numpy()
        base = rows["is_baseline"].astype(bool).to_numpy()
        for racer in racers:
            own = (rows["racer"] == racer).to_numpy()
            ax.plot(x[own], mean[own], "-", color="0.75", lw=1, zorder=1)
        for xi, yi, racer in zip(x, mean, rows["racer"]):
            ax.annotate(f"#{racer}", (xi, yi), textcoords="offset points", xytext=(5, 3), fontsize=7)
        low, high = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
        ax.errorbar(x, mean, yerr=np.vstack([mean - low, high - mean]), fmt="none", ecolor="0.55", capsize=3, lw=1,
                    zorder=2)
        ax.plot(x[survived], mean[survived], "o", color=CANDIDATE_COLOR, ms=7, zorder=3, label="survived")
        if (~survived).any():
            ax.plot(x[~survived], mean[~survived], "X", color="0.45", ms=8, zorder=3, label="eliminated")
        if base.any():
            ax.plot(x[base], mean[base], "o", mfc="none", mec=BASELINE_COLOR, ms=12, mew=2, zorder=4,
                    label="baseline (default)")
        ax.set_xticks(sorted(rows["round"].unique()))
        ax.set_xlabel("race round")
        ax.set_ylabel(f"{objective}: pooled mean (95 % CI)")
        engine = str(rows["engine"].iloc[0])
        ax.set_title(engine if engine == search_id else f"{engine} ({search_id})", fontsize=10)
        ax.legend(fontsize=8, loc="best")
    return fig


def pareto_figure(points: pd.DataFrame, x: str, y: str) -> Figure:
    """Configurations by their mean ``x`` and ``y``; the Pareto front (column ``front``) joined, the
    baseline (column ``is_baseline``) and the winner (optional column ``is_winner``) marked."""
    _require(points, [x, y, "front", "is_baseline"])
    fig, ax = _single(6.2, 4.4)
    front = points[points["front"].astype(bool)].sort_values(x)
    ax.scatter(points[x], points[y], s=22, color=LEVEL_COLOR, edgecolor="0.3", lw=0.4, label="configuration")
    ax.plot(front[x], front[y], "o-", color=CANDIDATE_COLOR, ms=6, label="Pareto front")
    base = points[points["is_baseline"].astype(bool)]
    ax.scatter(base[x], base[y], marker="*", s=220, color=BASELINE_COLOR, edgecolor="k", zorder=4, label="baseline")
    if "is_winner" in points:
        win = points[points["is_winner"].astype(bool)]
        ax.scatter(win[x], win[y], marker="D", s=70, facecolor="none", edgecolor="k", lw=1.5, zorder=5,
                   label="winner")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(fontsize=8, loc="best")
    return fig


def abba_figure(measurements: pd.DataFrame, metric: str, unit: str = "block") -> Figure:
    """Confirmation blocks: per ABBA block (``unit`` ``block``) or duet pair (``pair``) the mean of the baseline (A)
    and the candidate (B), joined."""
    _require(measurements, [unit, "arm", metric])
    means = measurements.groupby([unit, "arm"])[metric].mean().unstack("arm")
    fig, ax = _single(5.5, 3.8)
    for _, row in means.iterrows():
        ax.plot([0, 1], [row.get("A"), row.get("B")], "-", color="0.6", lw=1)
    ax.scatter(np.zeros(len(means)), means.get("A"), color=BASELINE_COLOR, s=40, zorder=3)
    ax.scatter(np.ones(len(means)), means.get("B"), color=CANDIDATE_COLOR, s=40, zorder=3)
    ax.set_xticks([0, 1], ["A: baseline", "B: candidate"])
    ax.set_xlim(-0.4, 1.4)
    ax.set_ylabel(f"{metric} ({unit} mean)")
    ax.set_title(f"{len(means)} {'ABBA blocks' if unit == 'block' else 'duet pairs'}; lines join a {unit}", fontsize=10)
    fig.legend(handles=[Patch(color=BASELINE_COLOR, label="baseline"), Patch(color=CANDIDATE_COLOR, label="candidate")],
               fontsize=8, loc="outside right upper")
    return fig


def block_ratios(measurements: pd.DataFrame, table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The paired ratio of each ABBA block as a % change (``100 (mean B / mean A - 1)``, the ratio the
    confirmation averages on the log scale), then each profile's gain with its 95 % CI from ``table``:
    columns ``label, pct_change, ci_low, ci_high`` (a block's interval is its own value).

    >>> m = pd.DataFrame({"profile": "p", "block": [0, 0, 0, 0], "arm": list("ABBA"), "qps": [100.0, 110, 112, 100]})
    >>> t = pd.DataFrame({"profile": ["p"], "metric": ["qps"], "pct_change": [11.0], "ci_low": [9.0],
    ...                   "ci_high": [13.0]})
    >>> block_ratios(m, t, "qps").round(6)[["label", "pct_change"]].to_dict("list")
    {'label': ['block 1', 'gain over 1 blocks (95 % CI)'], 'pct_change': [11.0, 11.0]}
    """
    _require(measurements, ["profile", "block", "arm", metric])
    rows = []
    profiles = list(dict.fromkeys(measurements["profile"]))
    for profile in profiles:
        prefix = f"{profile}: " if len(profiles) > 1 else ""
        means = measurements[measurements["profile"] == profile].groupby(["block", "arm"])[metric].mean().unstack("arm")
        for block, row in means.iterrows():
            pct = 100.0 * (row.get("B", np.nan) / row.get("A", np.nan) - 1.0)
            rows.append({"label": f"{prefix}block {int(block) + 1}", "pct_change": pct, "ci_low": pct, "ci_high": pct})
        judged = table[(table["profile"] == profile) & (table["metric"] == metric)]
        for gain in judged.itertuples():
            rows.append({"label": f"{prefix}gain over {len(means)} blocks (95 % CI)", "pct_change": gain.pct_change,
                         "ci_low": gain.ci_low, "ci_high": gain.ci_high})
    return pd.DataFrame(rows, columns=["label", "pct_change", "ci_low", "ci_high"])


def block_ratios_figure(measurements: pd.DataFrame, table: pd.DataFrame, metric: str, ax: Any = None) -> Figure:
    """A forest plot of :func:`block_ratios`: each ABBA block's % change of ``metric`` (candidate B against
    baseline A within the block, so a drift of the machine cancels) and the gain with its 95 % CI, the
    ±SESOI band from ``table``; ``ax`` draws into an existing axes."""
    rows = block_ratios(measurements, table, metric)
    if rows.empty:
        measured = [c for c in measurements.columns if c not in ("profile", "block", "position", "arm", "key")]
        raise DataError(f"no ABBA blocks measured {metric!r}; metrics present: {', '.join(measured)}")
    sesoi = table.loc[table["metric"] == metric, "sesoi_pct"] if "sesoi_pct" in table else pd.Series(dtype=float)
    return forest_figure(rows, "label", sesoi_pct=float(sesoi.iloc[0]) if sesoi.nunique() == 1 else None,
                         xlabel=f"% change of {metric}, candidate vs baseline", title="Paired ratio of each ABBA block",
                         ax=ax)


def morris_figure(morris: pd.DataFrame, metric: str, sesoi: float | None = None) -> Figure:
    """Morris screening plane: each knob's mu* (mean absolute elementary effect, with its bootstrap
    interval) against sigma (spread: non-linearity or interactions); ``sesoi`` draws the smallest
    effect of interest on the mu* axis (on the model's scale, e.g. log(1.05) for 5 %).

    >>> import pandas as pd
    >>> m = pd.DataFrame({"metric": "qps", "knob": ["a", "b"], "mu_star": [0.2, 0.01], "sigma": [0.05, 0.01],
    ...                   "mu_star_conf": [0.03, 0.01]})
    >>> morris_figure(m, "qps", sesoi=0.05).axes[0].get_xlabel()
    'mu* (mean |elementary effect|)'
    """
    _require(morris, ["metric", "knob", "mu_star", "sigma", "mu_star_conf"])
    rows = _metric_rows(morris, metric, "Morris effects")
    fig, ax = _single(5.5, 4.0)
    ax.errorbar(rows["mu_star"], rows["sigma"], xerr=rows["mu_star_conf"], fmt="o", color=CANDIDATE_COLOR, capsize=3)
    for row in rows.itertuples(index=False):
        ax.annotate(str(row.knob), (row.mu_star, row.sigma), textcoords="offset points", xytext=(4, 4), fontsize=8)
    if sesoi:
        ax.axvline(sesoi, color=BASELINE_COLOR, linestyle="--", label="SESOI")
        ax.legend(loc="upper left", fontsize=8)
    ax.set_xlabel("mu* (mean |elementary effect|)")
    ax.set_ylabel("sigma (spread of elementary effects)")
    ax.set_title(f"Morris screening of {metric}")
    return fig


#: the mechanism heatmap's colour scale stops at this |Hedges' g| (larger effects share the end colour)
G_CLIP = 5.0


def mechanism_matrix(mechanisms: pd.DataFrame, max_counters: int = 30) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The knob level × counter matrices of Hedges' g and of significance behind :func:`mechanism_heatmap`:
    only counters significant at some level, at most ``max_counters`` of them (the smallest q first).

    >>> t = pd.DataFrame({"knob": ["s", "s", "t"], "level": [16, 16, 1], "counter": ["counter.A.x", "counter.B.y",
    ...                   "counter.A.x"], "hedges_g": [8.0, 0.2, -3.0], "q": [1e-6, 0.7, 0.01],
    ...                   "significant": [True, False, True]})
    >>> g, significant = mechanism_matrix(t)
    >>> g.to_dict()
    {'A.x': {'s=16': 8.0, 't=1': -3.0}}
    """
    _require(mechanisms, ["knob", "level", "counter", "hedges_g", "q", "significant"])
    hits = mechanisms[mechanisms["significant"].astype(bool)]
    if hits.empty:
        raise DataError("no counter changed significantly at any knob level: there is no mechanism heatmap to draw")
    keep = hits.groupby("counter", sort=False)["q"].min().sort_values(kind="stable").index[:max_counters]
    rows = mechanisms[mechanisms["counter"].isin(keep)]
    label = [f"{k}={level_label(lv)}" for k, lv in zip(rows["knob"], rows["level"])]
    names = [c[len("counter."):] if str(c).startswith("counter.") else str(c) for c in rows["counter"]]
    long = pd.DataFrame({"row": label, "column": names, "g": rows["hedges_g"].astype(float),
                         "significant": rows["significant"].astype(bool)})
    order_rows = list(dict.fromkeys(label))
    order_columns = [n for n in dict.fromkeys(names)]
    g = long.pivot(index="row", columns="column", values="g").reindex(index=order_rows, columns=order_columns)
    significant = long.pivot(index="row", columns="column", values="significant").reindex(
        index=order_rows, columns=order_columns).fillna(False).astype(bool)
    return g, significant


#: the smallest text in a data-sized figure, in points (readable in a report at 100 dpi, 1400 px wide)
READABLE_PT = 9.0


def text_inches(labels: Sequence[str], points: float = READABLE_PT) -> float:
    """About how long the longest of ``labels`` runs at ``points`` (0.6 em per character), in inches."""
    return max((len(str(label)) for label in labels), default=0) * 0.6 * points / 72.0


def heatmap_size(rows: Sequence[str], columns: Sequence[str],
                 cell: tuple[float, float] = (0.75, 0.3)) -> tuple[float, float]:
    """The size in inches of a heatmap with these row and column labels (columns' labels upright at 90°):
    each cell ``cell`` inches, room for the labels at :data:`READABLE_PT` and for a colour bar.

    >>> w, h = heatmap_size(["a"] * 30, ["k=1"] * 4)
    >>> w < 8 and h > 9
    True
    """
    width = 0.6 + text_inches(rows) + cell[0] * len(columns) + 1.6
    height = 0.9 + text_inches(columns) + cell[1] * len(rows)
    return width, height


def mechanism_heatmap(mechanisms: pd.DataFrame, max_counters: int = 30, ax: Any = None) -> Figure:
    """Heatmap of counter × knob level: Hedges' g of each counter's change against the baseline (colour
    clipped at ±:data:`G_CLIP`; the number is the value), ``*`` where the change is significant under the
    table's FDR control; only counters significant at some level, at most ``max_counters``
    (:func:`mechanism_matrix`). Blank: a counter not tested at that level.

    One row per counter, one column per knob level, so the figure grows with both (:func:`heatmap_size`)
    and every label and number stays at :data:`READABLE_PT` points; ``ax`` draws into an existing axes.
    """
    g, significant = mechanism_matrix(mechanisms, max_counters)
    g, significant = g.T, significant.T
    text = np.where(g.isna(), "", g.map(lambda v: f"{v:.1f}" if np.isfinite(v) else "").to_numpy(object)
                    + np.where(significant.to_numpy(), "*", ""))
    if ax is None:
        fig, ax = _single(*heatmap_size(list(g.index), list(g.columns)))
    else:
        fig = ax.figure
    sns.heatmap(g.clip(-G_CLIP, G_CLIP), ax=ax, cmap="RdBu_r", center=0.0, vmin=-G_CLIP, vmax=G_CLIP,
                annot=text, fmt="", annot_kws={"fontsize": READABLE_PT}, linewidths=0.5, linecolor="0.85",
                cbar_kws={"label": f"Hedges' g (clipped at ±{G_CLIP:g}); * significant"})
    ax.set_ylabel("kernel counter", fontsize=READABLE_PT + 1)
    ax.set_xlabel("knob level (vs its baseline)", fontsize=READABLE_PT + 1)
    ax.tick_params(axis="x", rotation=90, labelsize=READABLE_PT)
    ax.tick_params(axis="y", rotation=0, labelsize=READABLE_PT)
    ax.set_title("Counters against the baseline (* significant)", fontsize=READABLE_PT + 1)
    return fig


def show(fig: Figure, dpi: int = 100, alt: str | None = None) -> None:
    """Display ``fig`` in a notebook as an embedded PNG (independent of the matplotlib backend); ``alt``
    is stored in the output's metadata, which the report's HTML template writes as the image's alt text."""
    display(Image(data=to_png(fig, dpi), format="png", alt=alt))


def to_png(fig: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()
