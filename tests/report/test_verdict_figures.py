"""Figures agree with verdicts (issue 37, item 3), against independent expectations.

The forest plot's colours are read back from the matplotlib artists and compared with pingouin's
Games–Howell on a hand-built case; sizes are read from the figures; 02_posthoc runs with papermill
on a store whose guard tripped, and its best-first order is checked against a list sorted by hand.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest

import tunelab
from figure_helpers import drawn_colours
from tunelab.report import figures
from tunelab.stats import screen

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "tests" / "data" / "default-2026-11-24.sqlite"
METRIC = [{"name": "y", "direction": "maximize", "sesoi_pct": 5}]
BASE = [100.0, 100.6, 99.4, 100.3, 99.7, 100.0]
NOISE = np.array([-1.0, 0.8, -0.6, 1.2, -1.4, 0.0])


def _five_levels() -> pd.DataFrame:
    """b moves +6 % with noise (Welch alone p 0.024, Games–Howell over 10 pairs p_adj 0.11), c +30 %, d and e
    nothing: the tour's case of a level whose unadjusted interval excludes 0 while the verdict's test does not."""
    y = BASE + list(106 + 4 * NOISE) + list(130 + NOISE) + list(100 + 0.5 * NOISE) + list(100.2 + 0.5 * NOISE)
    return pd.DataFrame({"k": [level for level in "abcde" for _ in range(6)], "y": y})


def test_forest_colours_follow_the_verdicts_test() -> None:
    import pingouin

    data = _five_levels()
    result = screen(data, METRIC, ["k"], {"k": "a"}, n_boot=1000)
    fig = figures.verdict_forest(result, "y", 5.0)
    colours = drawn_colours(fig)
    reference = pingouin.pairwise_gameshowell(data, dv="y", between="k").set_index(["A", "B"])["pval"]
    expected = {f"k = {level}": reference[("a", level)] < 0.05 for level in "bcde"}
    assert expected["k = c"] and not expected["k = b"]                      # both colours occur
    assert set(colours) == set(expected)
    for label, separated in expected.items():
        assert colours[label] == (figures.CANDIDATE_COLOR if separated else mcolors.to_hex(
            figures.NOT_SIGNIFICANT_COLOR)), label
    # b's unadjusted bootstrap interval excludes 0, yet b is not drawn "significant"; the legend says which decides
    b = result.effects[result.effects["level"] == "b"].iloc[0]
    assert b["ci_low"] > 0
    legend = fig.legends[0]
    texts = [t.get_text() for t in legend.get_texts()]
    assert "interval that decides" in legend.get_title().get_text() and any("does not decide" in t for t in texts)
    assert any("significant" in t for t in texts)


def test_forest_draws_the_games_howell_interval() -> None:
    """The thick interval of c is Games–Howell's (pingouin's se and df, studentized range at 1 - alpha) as % of the
    baseline mean, not the bootstrap one."""
    import pingouin
    from scipy import stats as ss

    data = _five_levels()
    result = screen(data, METRIC, ["k"], {"k": "a"}, n_boot=400)
    rows = figures.verdict_forest_rows(result, "y").set_index("label")
    ref = pingouin.pairwise_gameshowell(data, dv="y", between="k").set_index(["A", "B"]).loc[("a", "c")]
    means = data.groupby("k")["y"].mean()
    half = ss.studentized_range.ppf(0.95, 5, ref["df"]) / np.sqrt(2) * ref["se"]
    diff = means["c"] - means["a"]
    assert (rows.loc["k = c", "ci_low"], rows.loc["k = c", "ci_high"]) == pytest.approx(
        (100 * (diff - half) / means["a"], 100 * (diff + half) / means["a"]), rel=1e-4)


def test_figures_grow_with_their_rows() -> None:
    two = screen(_five_levels().query("k in ['a', 'c']"), METRIC, ["k"], {"k": "a"}, n_boot=200)
    five = screen(_five_levels(), METRIC, ["k"], {"k": "a"}, n_boot=200)
    small, large = figures.verdict_forest(two, "y"), figures.verdict_forest(five, "y")
    assert large.get_figheight() - small.get_figheight() == pytest.approx(3 * 0.42)


def _mechanisms(levels: int, counters: int) -> pd.DataFrame:
    rows = [{"knob": "net.core.somaxconn", "level": 16 * (i + 1), "counter": f"counter.TcpExt.ListenOverflows{j}",
             "hedges_g": float(j - i), "q": 0.001 * (j + 1), "significant": True}
            for i in range(levels) for j in range(counters)]
    return pd.DataFrame(rows)


def test_the_counter_heatmap_is_sized_from_its_cells_with_readable_labels() -> None:
    """4 levels x 30 counters: one row per counter, taller than 4 x 10, every label and number >= 9 pt, and at
    100 dpi the figure fits a 1120 px report column without being scaled down."""
    small, large = figures.mechanism_heatmap(_mechanisms(4, 10)), figures.mechanism_heatmap(_mechanisms(4, 30))
    assert large.get_figheight() - small.get_figheight() == pytest.approx(20 * 0.3)
    ax = large.axes[0]
    assert len(ax.get_yticklabels()) == 30 and len(ax.get_xticklabels()) == 4
    sizes = [t.get_fontsize() for t in (*ax.get_xticklabels(), *ax.get_yticklabels(), *ax.texts)]
    assert min(sizes) >= 9
    assert large.get_figwidth() * 100 <= 1120
    assert large.axes[-1].get_ylabel().startswith("Hedges' g")        # the colour bar is the legend


def test_plot_takes_an_axes_and_a_metric() -> None:
    from matplotlib.figure import Figure

    result = screen(_five_levels(), METRIC, ["k"], {"k": "a"}, n_boot=200)
    fig = Figure()
    ax = fig.add_subplot()
    assert result.plot(metric="y", ax=ax) is fig
    assert [t.get_text() for t in ax.get_yticklabels()] == ["k = b", "k = c", "k = d", "k = e"]   # top to bottom


def test_posthoc_notebook_honours_guards_and_ranks_best_first(tmp_path: Path) -> None:
    """02_posthoc on the default study: somaxconn x latency is "not comparable" (qps collapses; 01 says so) and
    gets no letters; somaxconn x qps lists its levels by mean qps, highest first, as sorted here by hand."""
    import nbformat
    import papermill

    from tunelab.model import USABLE_STATUSES
    from tunelab.report import notebook_path
    from tunelab.report.build import KERNEL_NAME, venv_kernel

    store = tmp_path / "default.sqlite"
    shutil.copy(DEFAULT, store)
    with venv_kernel():
        papermill.execute_notebook(str(notebook_path("02_posthoc")), str(tmp_path / "out.ipynb"),
                                   parameters={"study": str(store), "n_boot": 200}, kernel_name=KERNEL_NAME,
                                   progress_bar=False, cwd=str(tmp_path))
    nb = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    texts = [str(o.get("data", {}).get("text/html", o.get("data", {}).get("text/markdown", "")))
             for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    page = "\n".join(texts)
    assert "net.core.somaxconn</code> × latency_mean_ms is <strong>not comparable</strong>" in page
    assert "× latency_mean_ms: " not in page.replace("not comparable", "")   # no post-hoc section, so no letters
    letters = [t for t in texts if "Compact letters" in t]
    assert len(letters) == 2                                                    # somaxconn x qps, MTU x qps
    data = tunelab.store.Store(DEFAULT, readonly=True).tidy()
    data = data[data["status"].isin([s.value for s in USABLE_STATUSES])]
    others = {"link.mtu[@link]": 1500, "net.ipv4.tcp_fin_timeout": 60, "net.ipv4.tcp_syncookies": 1}
    rows = data[np.logical_and.reduce([data[k] == v for k, v in others.items()])]
    means = rows.groupby("net.core.somaxconn")["qps"].mean()
    by_hand = [str(level) for level, _ in sorted(means.items(), key=lambda item: -item[1])]
    shown = letters[0]                                                          # the sections follow the pairs
    positions = [shown.index(f" {level}: ") for level in by_hand]
    assert positions == sorted(positions), (by_hand, shown)


def test_the_levels_figure_has_a_legend_and_fits_the_report() -> None:
    """Four knobs in a grid of three columns: two rows, never wider than the report's column (11 in at 100 dpi),
    and a legend that names the baseline's colour."""
    rng = np.random.default_rng(3)
    knobs = ["a", "b", "c", "d"]
    data = pd.DataFrame({knob: rng.integers(0, 3, 36) for knob in knobs}).assign(y=rng.normal(100, 3, 36))
    fig = figures.levels_figure(data, knobs, "y", {knob: 0 for knob in knobs})
    assert fig.get_figwidth() <= figures.MAX_WIDTH_IN and len(fig.axes) == 4
    one_row = figures.levels_figure(data, knobs[:3], "y", {knob: 0 for knob in knobs})
    assert fig.get_figheight() == pytest.approx(2 * one_row.get_figheight())
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "baseline level" in texts and "one run" in texts
