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

import base64
import io
import math
import warnings
from html import escape
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import scikit_posthocs as sp
import seaborn as sns
from IPython.display import Image, display
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from tunelab.errors import DataError
from tunelab.stats import sorted_levels

#: colours: the baseline, other levels, a candidate / winner, and the SESOI band
BASELINE_COLOR = "#e66101"
LEVEL_COLOR = "#b2abd2"
CANDIDATE_COLOR = "#5e3c99"
BAND_COLOR = "#d9f0d3"
_STYLE = "whitegrid"


def level_label(value: Any) -> str:
    """A knob level as text: tuples space-separated (sysctl form), floats without a trailing ``.0``.

    >>> level_label((32768, 60999)), level_label(4096), level_label(True), level_label(2.0)
    ('32768 60999', '4096', 'True', '2')
    """
    if isinstance(value, (tuple, list)):
        return " ".join(level_label(v) for v in value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, np.generic):
        return str(value.item())
    return str(value)


def _grid(n: int, ncols: int = 3, width: float = 4.2, height: float = 3.6) -> tuple[Figure, list[Any]]:
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
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
              design: str = "factorial") -> pd.DataFrame:
    """The runs that inform ``knob`` as :func:`tunelab.stats.screen` analyses them: for a one-at-a-time
    design (``design='oat'``) the runs with every other knob at its baseline, otherwise all runs."""
    if design != "oat":
        return data
    keep = np.ones(len(data), dtype=bool)
    for other in knobs:
        if other != knob:
            keep &= np.array([v == baseline[other] for v in data[other].tolist()], dtype=bool)
    return data[keep]


def levels_figure(data: pd.DataFrame, knobs: Sequence[str], metric: str, baseline: Mapping[str, Any],
                  letters: Mapping[str, Mapping[Any, str]] | None = None, design: str = "factorial",
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
    return fig


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
                  title: str | None = None) -> Figure:
    """A forest plot: one row per ``label`` with the ``estimate`` and its interval; a line at 0 and,
    with ``sesoi_pct``, the band ±SESOI (changes inside it are too small to matter)."""
    _require(frame, [label, estimate, low, high])
    rows = frame.reset_index(drop=True)
    fig, ax = _single(7.5, 1.0 + 0.42 * max(len(rows), 1))
    y = np.arange(len(rows))[::-1]
    est = rows[estimate].to_numpy(float)
    lo, hi = rows[low].to_numpy(float), rows[high].to_numpy(float)
    ratio = bool(np.nanmax(np.abs(np.r_[est, lo, hi, 0.0])) > 100)
    to_x = _log_ratio if ratio else (lambda v: np.asarray(v, dtype=float))
    if sesoi_pct:
        ax.axvspan(*to_x([-sesoi_pct, sesoi_pct]), color=BAND_COLOR, zorder=0, label=f"±{sesoi_pct:g} % (SESOI)")
    ax.axvline(0, color="0.3", lw=1)
    clear = (lo > 0) | (hi < 0)
    for yi, e, a, b, c in zip(y, to_x(est), to_x(lo), to_x(hi), clear):
        color = CANDIDATE_COLOR if c else "0.45"
        ax.plot([a, b], [yi, yi], color=color, lw=2, solid_capstyle="butt")
        ax.plot([e], [yi], "o", color=color, ms=6)
    ax.set_yticks(y, rows[label].astype(str).tolist())
    if ratio:
        _pct_ticks(ax, np.r_[est, lo, hi])
        xlabel += " — log-ratio scale"
    ax.set_xlabel(xlabel)
    if sesoi_pct:
        ax.legend(loc="best", fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


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
    best = values.cummax() if direction == "maximize" else values.cummin()
    base = history["is_baseline"].astype(bool)
    ax.scatter(history["measurement"], values, s=16, color=LEVEL_COLOR, edgecolor="0.3", lw=0.4, label="measurement")
    ax.plot(history["measurement"], best, color=CANDIDATE_COLOR, label="best so far")
    ax.scatter(history.loc[base, "measurement"], values[base], s=30, color=BASELINE_COLOR, label="baseline", zorder=3)
    ax.set_xlabel("measurement")
    ax.set_ylabel(metric)
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


def abba_figure(measurements: pd.DataFrame, metric: str) -> Figure:
    """Confirmation blocks: per ABBA block the mean of the baseline (A) and the candidate (B), joined."""
    _require(measurements, ["block", "arm", metric])
    means = measurements.groupby(["block", "arm"])[metric].mean().unstack("arm")
    fig, ax = _single(5.5, 3.8)
    for _, row in means.iterrows():
        ax.plot([0, 1], [row.get("A"), row.get("B")], "-", color="0.6", lw=1)
    ax.scatter(np.zeros(len(means)), means.get("A"), color=BASELINE_COLOR, s=40, zorder=3)
    ax.scatter(np.ones(len(means)), means.get("B"), color=CANDIDATE_COLOR, s=40, zorder=3)
    ax.set_xticks([0, 1], ["A: baseline", "B: candidate"])
    ax.set_xlim(-0.4, 1.4)
    ax.set_ylabel(f"{metric} (block mean)")
    ax.set_title(f"{len(means)} ABBA blocks; lines join a block", fontsize=10)
    ax.legend(handles=[Patch(color=BASELINE_COLOR, label="baseline"), Patch(color=CANDIDATE_COLOR, label="candidate")],
              fontsize=8, loc="best")
    return fig


def show(fig: Figure, dpi: int = 100) -> None:
    """Display ``fig`` in a notebook as an embedded PNG (independent of the matplotlib backend)."""
    display(Image(data=to_png(fig, dpi), format="png"))


def to_png(fig: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def to_img_tag(fig: Figure, alt: str, dpi: int = 100) -> str:
    """An ``<img>`` element with the figure embedded as a base64 PNG (self-contained HTML)."""
    data = base64.b64encode(to_png(fig, dpi)).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}" style="max-width:100%"/>'
