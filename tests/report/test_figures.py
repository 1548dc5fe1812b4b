"""Figure functions: pure (DataFrame in, Figure out), with the expected axes and artists on small frames."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from tunelab.errors import DataError
from tunelab.report import figures, rendering
from tunelab.model import AnalysisKind


@pytest.fixture
def runs() -> pd.DataFrame:
    """A tiny 2 x 2 factorial layout with a triplet-like tuple knob (shape only; values are arbitrary)."""
    rng = np.random.default_rng(0)
    cells = [(a, b) for a in (1, 2) for b in ((1, 2), (3, 4)) for _ in range(3)]
    frame = pd.DataFrame({"a": [a for a, _ in cells], "b": [b for _, b in cells],
                          "y": 10.0 + np.arange(len(cells)) + rng.normal(size=len(cells)),
                          "is_baseline": [a == 1 and b == (1, 2) for a, b in cells]})
    frame["started_at"] = pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(np.arange(len(frame)), unit="min")
    return frame


def test_level_label() -> None:
    assert figures.level_label((32768, 60999)) == "32768 60999"
    assert figures.level_label(np.int64(16)) == "16"
    assert figures.level_label(4.0) == "4"


def test_levels_figure_one_axes_per_knob_and_baseline_marked(runs: pd.DataFrame) -> None:
    fig = figures.levels_figure(runs, ["a", "b"], "y", {"a": 1, "b": (1, 2)}, letters={"a": {1: "a", 2: "b"}})
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    first = fig.axes[0]
    assert [t.get_text() for t in first.get_xticklabels()] == ["1\n(baseline)", "2"]
    assert {t.get_text() for t in first.texts} == {"a", "b"}          # compact letters
    assert any(line.get_linestyle() == "--" for line in first.lines)  # baseline mean
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["1 2\n(baseline)", "3 4"]
    assert len(figures.to_png(fig)) > 5000


def test_levels_figure_oat_panels_use_only_their_runs(runs: pd.DataFrame) -> None:
    rows = figures.knob_rows(runs, "a", ["a", "b"], {"a": 1, "b": (1, 2)}, AnalysisKind.OAT)
    assert len(rows) == 6 and set(rows["b"]) == {(1, 2)}
    assert len(figures.knob_rows(runs, "a", ["a", "b"], {"a": 1, "b": (1, 2)}, AnalysisKind.FACTORIAL)) == len(runs)


def test_interaction_figure_one_axes_per_pair(runs: pd.DataFrame) -> None:
    fig = figures.interaction_figure(runs.assign(c=[0, 1] * 6), ["a", "b", "c"], "y")
    assert len(fig.axes) == 3
    assert all(ax.get_legend() is not None for ax in fig.axes)
    with pytest.raises(DataError, match="two knobs"):
        figures.interaction_figure(runs, ["a"], "y")


def test_pvalue_heatmap_uses_sign_plot() -> None:
    levels = [16, 128, 4096]
    matrix = pd.DataFrame([[1.0, 0.0004, 0.03], [0.0004, 1.0, 0.5], [0.03, 0.5, 1.0]], index=levels, columns=levels)
    fig = figures.pvalue_heatmap(matrix, title="k")
    assert len(fig.axes) == 2  # heatmap + sign_plot's colour bar
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert labels == ["p < 0.001", "p < 0.01", "p < 0.05", "NS"]
    with pytest.raises(DataError, match="square"):
        figures.pvalue_heatmap(matrix.iloc[:2])


def test_forest_figures() -> None:
    effects = pd.DataFrame({"knob": ["k", "k", "j"], "metric": ["y", "y", "y"], "level": [1, 2, (1, 2)],
                            "pct_change": [-50.0, 3.0, 1.0], "ci_low": [-60.0, -1.0, -2.0],
                            "ci_high": [-40.0, 7.0, 4.0]})
    fig = figures.effects_forest(effects, "y", sesoi_pct=5)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["k = 1", "k = 2", "j = 1 2"]  # top to bottom
    assert len(ax.patches) == 1          # the SESOI band
    assert len(ax.lines) == 1 + 2 * 3    # zero line + interval and point per row
    big = figures.effects_forest(effects.assign(ci_high=[-40.0, 900.0, 4.0]), "y")
    assert "log-ratio" in big.axes[0].get_xlabel()
    with pytest.raises(DataError, match="no effects"):
        figures.effects_forest(effects, "z")


def _data_points_px(fig: Figure) -> np.ndarray:
    """Display coordinates (pixels) of every plotted data point: each data line's vertices (so the points
    and both ends of every interval) and each scatter's points (a zero line drawn in axes coordinates is
    not data)."""
    points = [ax.transData.transform(np.column_stack(line.get_data()).astype(float))
              for ax in fig.axes for line in ax.lines if line.get_transform() is ax.transData]
    points += [ax.transData.transform(np.asarray(c.get_offsets(), dtype=float))
               for ax in fig.axes for c in ax.collections if c.get_offset_transform() is ax.transData]
    return np.vstack(points)


def _assert_legend_clear(fig: Figure) -> None:
    fig.canvas.draw()                  # the constrained layout places the legend while drawing
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    assert len(legends) == 1
    box = legends[0].get_window_extent()
    points = _data_points_px(fig)
    inside = (points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1)
    assert not inside.any(), f"the legend {box} covers the data points {points[inside].tolist()}"
    assert box.x1 <= fig.bbox.x1 and box.y0 >= fig.bbox.y0, "the legend is cut off by the figure's edge"


#: confirmations as the refine page plots them: one row per metric, % change of the candidate with its CI
CONFIRMATIONS = {
    "one metric": {"qps (±5 %)": (0.4, -1.5, 2.3)},
    "two metrics": {"qps (±5 %)": (3.1, -0.4, 6.8), "latency_mean_ms (±5 %)": (-2.0, -4.0, 0.1)},
    "wide spread": {"qps (±5 %)": (11.0, 4.0, 18.0), "latency_mean_ms (±5 %)": (-12.0, -20.0, -4.0),
                    "lost (±5 %)": (0.4, -1.0, 1.9)},
    "right edge": {"qps (±5 %)": (14.0, 9.0, 19.0), "latency_mean_ms (±5 %)": (13.0, 8.0, 18.0)},
}


@pytest.mark.parametrize("case", CONFIRMATIONS)
def test_forest_legend_covers_no_point(case: str) -> None:
    """The refine page's confirmation plot (one row per metric, the SESOI band in the legend): as a reader
    sees the drawn figure, the legend's box holds none of the points or interval ends."""
    rows = CONFIRMATIONS[case]
    frame = pd.DataFrame({"label": list(rows), "pct_change": [v[0] for v in rows.values()],
                          "ci_low": [v[1] for v in rows.values()], "ci_high": [v[2] for v in rows.values()]})
    fig = figures.forest_figure(frame, "label", sesoi_pct=5.0, xlabel="% change, candidate vs baseline (95 % CI)",
                                title="confirmation: 6 ABBA blocks")
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[-1] == "±5 % (SESOI)"                  # and what each colour means (issue 37: a legend for the colours)
    clear = [lo > 0 or hi < 0 for _, lo, hi in rows.values()]
    assert texts[:-1] == ["significant (excludes 0)"] * any(clear) + ["not significant"] * (not all(clear))
    _assert_legend_clear(fig)


def test_abba_legend_covers_no_point() -> None:
    """The ABBA plot beside it: block means spread over the whole height on both arms, the legend clear of them."""
    means = {1: (100.0, 50.0), 2: (52.0, 99.0), 3: (75.0, 76.0), 4: (98.0, 51.0)}
    measurements = pd.DataFrame([{"block": block, "arm": arm, "qps": value + offset}
                                 for block, (a, b) in means.items() for arm, value in (("A", a), ("B", b))
                                 for offset in (-0.5, 0.5)])
    _assert_legend_clear(figures.abba_figure(measurements, "qps"))


def test_drift_and_series(runs: pd.DataFrame) -> None:
    fig = figures.drift_figure(runs, "y")
    ax = fig.axes[0]
    assert len(ax.collections) == 1 and len(ax.lines) == 1  # other runs scattered, baseline runs joined
    assert ax.get_xlabel().startswith("minutes")
    series = pd.DataFrame({"t_s": np.arange(1.0, 9.0), "qps": np.r_[1.0, 5.0, np.full(6, 9.0)]})
    fig = figures.series_figure(series, "qps", warmup_s=2)
    assert len(fig.axes[0].patches) == 1  # warm-up shading
    with pytest.raises(DataError, match="t_s"):
        figures.series_figure(series.drop(columns="t_s"), "qps")


def test_search_figures() -> None:
    generations = pd.DataFrame({"generation": [1, 2, 3], "best": [3.0, 4, 5], "mean": [2.0, 3, 4],
                                "worst": [1.0, 2, 3], "baseline": [2.5] * 3})
    assert len(figures.generations_figure(generations, "qps").axes[0].lines) == 4
    history = pd.DataFrame({"measurement": [1, 2, 3], "qps": [1.0, 3.0, 2.0], "is_baseline": [True, False, False]})
    assert len(figures.progress_figure(history, "qps").axes) == 1
    points = pd.DataFrame({"qps": [1.0, 2.0, 3.0], "lat": [1.0, 2.0, 1.5], "front": [True, False, True],
                           "is_baseline": [True, False, False], "is_winner": [False, False, True]})
    ax = figures.pareto_figure(points, "qps", "lat").axes[0]
    assert len(ax.collections) == 3 and len(ax.lines) == 1  # all, baseline, winner; front line
    measurements = pd.DataFrame({"block": [0, 0, 0, 0, 1, 1, 1, 1], "arm": list("ABBA") * 2,
                                 "qps": [1.0, 2, 2, 1, 1, 2, 2, 1]})
    assert len(figures.abba_figure(measurements, "qps").axes[0].lines) == 2  # one line per block


def test_figure_functions_leave_no_pyplot_state(runs: pd.DataFrame) -> None:
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    figures.levels_figure(runs, ["a"], "y", {"a": 1})
    figures.drift_figure(runs, "y")
    assert plt.get_fignums() == before


def test_img_tag_is_self_contained(runs: pd.DataFrame) -> None:
    tag = rendering.to_img_tag(figures.drift_figure(runs, "y"), alt="drift")
    assert tag.startswith('<img alt="drift" src="data:image/png;base64,')
