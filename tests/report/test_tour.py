"""notebooks/00_tour.ipynb runs end to end with papermill on the SYNTHETIC simulator, and each step shows what
it says it shows: the plan, the run, the verdict table, the figures, the winner, the validation, the sysctl.d file.

The tour is executed once (module fixture), in a fresh working directory, writing into its ``out_dir``.
The simulator's surface ``simple`` makes ``net.core.somaxconn`` matter (128 -> 1024 raises qps by
+15.6 %, eight times the tour's 2 % SESOI), and its noise is seeded per measurement, so the verdicts below
are the same on every run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest

import tunelab
from repr_helpers import Page
from tunelab.report.build import execute_notebook, notebook_dir, render_html

TOUR = notebook_dir() / "00_tour.ipynb"


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The executed tour: its cells by tag, its ``out_dir`` and the working directory it ran in."""
    cwd = tmp_path_factory.mktemp("tour-cwd")
    out_dir = tmp_path_factory.mktemp("tour-out")
    executed = execute_notebook(TOUR, tmp_path_factory.mktemp("tour-nb") / "00_tour.ipynb",
                                {"out_dir": str(out_dir)}, cwd=cwd)
    nb = nbformat.read(str(executed), as_version=4)
    cells = {tag: cell for cell in nb.cells for tag in cell.metadata.get("tags", []) if tag.startswith("step-")}
    return {"nb": nb, "path": executed, "cells": cells, "out": out_dir, "cwd": cwd}


def _html(cell: Any) -> str:
    return "".join(o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {}))


def _stdout(cell: Any) -> str:
    return "".join(o["text"] for o in cell.outputs if o["output_type"] == "stream" and o["name"] == "stdout")


def test_the_tour_ran_without_errors_and_wrote_only_into_its_out_dir(tour: dict[str, Any]) -> None:
    errors = [o for cell in tour["nb"].cells if cell.cell_type == "code" for o in cell.outputs
              if o["output_type"] == "error"]
    assert not errors, errors
    assert set(tour["cells"]) == {"step-design", "step-plan", "step-run", "step-screen", "step-screen-figure",
                                  "step-refine", "step-refine-figure", "step-validate", "step-validate-figure",
                                  "step-export"}
    assert list(tour["cwd"].iterdir()) == []
    assert {p.name for p in tour["out"].iterdir()} >= {"tour.yaml", "tour.sqlite", "validate.sqlite", "sysctl.d"}


def test_each_step_says_what_it_answers(tour: dict[str, Any]) -> None:
    cells = tour["nb"].cells
    assert "parameters" in cells[1].metadata.get("tags", [])
    headings = [c.source.splitlines()[0] for c in cells if c.cell_type == "markdown" and c.source.startswith("## ")]
    assert [h.split(" · ")[0] for h in headings[:8]] == [f"## {n}" for n in range(1, 9)]
    for cell in cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## ") and "·" in cell.source.splitlines()[0]:
            assert "Look at" in cell.source or "look at" in cell.source, cell.source.splitlines()[0]


def test_plan_and_run_show_their_summaries(tour: dict[str, Any]) -> None:
    plan = Page(_html(tour["cells"]["step-plan"]))
    assert plan.column(0, "knob") == ["net.core.somaxconn", "net.ipv4.tcp_congestion_control",
                                      "net.ipv4.tcp_abort_on_overflow"]
    run = "".join(Page(_html(tour["cells"]["step-run"])).text)
    assert "36 planned" in run and "36 ok" in run and "0 failed" in run


def test_the_screen_shows_the_verdict_table_with_somaxconn_mattering(tour: dict[str, Any]) -> None:
    page = Page(_html(tour["cells"]["step-screen"]))
    table = page.tables[0]
    assert table["class"] == "tunelab-verdicts"
    assert table["headers"][:5] == ["knob", "metric", "verdict", "level", "change vs baseline"]
    rows = {(r["cells"][0]["text"], r["cells"][1]["text"]): r for r in table["rows"]
            if r["class"] != "tunelab-note"}                     # a row's notes sit in a row of their own
    assert len(rows) == 6                                      # 3 knobs × 2 metrics
    somaxconn = rows[("net.core.somaxconn", "qps")]
    assert somaxconn["class"] == "verdict-matters" and somaxconn["cells"][2]["text"] == "matters"
    assert "[" in somaxconn["cells"][4]["text"] and "%" in somaxconn["cells"][4]["text"]   # the change with its CI


def test_the_figures_are_images(tour: dict[str, Any]) -> None:
    for tag in ("step-screen-figure", "step-refine-figure", "step-validate-figure"):
        outputs = tour["cells"][tag].outputs
        assert any("image/png" in o.get("data", {}) for o in outputs), tag


def test_refine_and_validate_show_a_verdict_and_its_interval(tour: dict[str, Any]) -> None:
    refine = Page(_html(tour["cells"]["step-refine"]))
    assert refine.tables[0]["headers"] == ["knob", "baseline", "winner"]
    assert "net.core.somaxconn" in refine.column(0, "knob")
    validate = Page(_html(tour["cells"]["step-validate"]))
    assert validate.verdict is not None and validate.verdict[2] in {"IMPROVE", "EQUIVALENT", "REGRESS", "INCONCLUSIVE"}
    change = validate.column(0, "change (95 % CI)")[0]
    assert change.count("%") == 3 and "[" in change               # estimate [low, high]
    assert validate.column(0, "metric") == ["qps"] and validate.column(0, "blocks") == ["6"]


def test_the_sysctl_file_is_exported(tour: dict[str, Any]) -> None:
    files = sorted((tour["out"] / "sysctl.d").glob("*.conf"))
    assert len(files) == 1
    text = files[0].read_text()
    assert "SYNTHETIC" in text and "net.core.somaxconn = " in text
    assert text.strip() in _stdout(tour["cells"]["step-export"])


def test_the_rendered_tour_keeps_its_tables_and_figures(tour: dict[str, Any], tmp_path: Path) -> None:
    """Through the report's sanitiser (no inline styles there: the row classes carry the verdicts)."""
    page = render_html(tour["path"], tmp_path / "00_tour.html").read_text()
    assert page.count('<table class="tunelab-verdicts">') >= 3           # screen, refine's confirmation, validate
    assert 'class="verdict-matters"' in page and page.count("data:image/png;base64,") >= 3
    assert "&lt;table" not in page and "&lt;div" not in page             # no summary escaped as text


@pytest.mark.browser
def test_the_rendered_tour_fits_a_1400_px_window_with_each_step_visible(tour: dict[str, Any], chromium: str,
                                                                       tmp_path: Path) -> None:
    """Headless Chromium lays the rendered tour out (code shown, as a reader of a tour wants it): nothing is
    beyond a 1400 px window (a wide table scrolls in its own box), and the screenshot is not blank."""
    from PIL import Image

    from browser_helpers import chromium_run, clipped_tables, layout_at, tables_at

    page = render_html(tour["path"], tmp_path / "00_tour.html", show_code=True)
    layout = layout_at(chromium, page, width=1400)
    assert not layout["overflowing"], layout["overflowing"][:5]
    tables = tables_at(chromium, page, width=1400)        # and no table needs its box to scroll sideways
    assert len(tables["tables"]) >= 5 and not clipped_tables(tables), clipped_tables(tables)[:3]
    for header in ("knob", "verdict", "change vs baseline", "change (95 % CI)", "winner", "candidate"):
        assert header in layout["headers"], header
    shot = tmp_path / "tour.png"
    chromium_run(chromium, page.as_uri(), f"--screenshot={shot}", "--window-size=1400,9000")
    low, high = Image.open(shot).convert("L").getextrema()
    assert high - low > 200


def test_the_tour_forest_plot_agrees_with_the_verdicts(tour: dict[str, Any]) -> None:
    """issue 37: the tour's forest plot drew somaxconn=1024 in the "significant" colour while the verdict's
    Games–Howell did not separate it (p_adj 0.109). Now each level's colour, read back from the drawn artists,
    is the verdict's own test on the tour's runs, recomputed with pingouin (Games–Howell or Tukey, as the row
    says), at the row's alpha (1 - its ci_level) and only where the row's family test is significant."""
    import matplotlib.colors as mcolors
    import numpy as np
    import pingouin

    from figure_helpers import drawn_colours
    from tunelab.model import USABLE_STATUSES
    from tunelab.report import figures

    store = tour["out"] / "tour.sqlite"
    result = tunelab.api.screen(store, n_boot=200)
    data = tunelab.store.Store(store, readonly=True).tidy()
    data = data[data["status"].isin([s.value for s in USABLE_STATUSES])]
    baseline = result.settings["baseline"]
    metric = "qps"
    colours = drawn_colours(figures.verdict_forest(result, metric))
    checked = 0
    for row in result.verdicts[result.verdicts["metric"] == metric].itertuples(index=False):
        if row.test not in ("welch+games_howell", "anova+tukey"):
            continue
        rows = data[np.logical_and.reduce([data[k] == v for k, v in baseline.items() if k != row.knob])]
        if "round" in data.columns and "round" in result.verdicts.columns:
            rows = rows[rows["round"] <= row.round]                       # the runs of the look that decided it
        test = pingouin.pairwise_gameshowell if row.test == "welch+games_howell" else pingouin.pairwise_tukey
        pairs = test(rows, dv=metric, between=row.knob)
        alpha = 1 - row.ci_level
        for level in sorted(set(rows[row.knob]) - {baseline[row.knob]}):
            pair = pairs[((pairs["A"] == level) & (pairs["B"] == baseline[row.knob]))
                         | ((pairs["B"] == level) & (pairs["A"] == baseline[row.knob]))]
            p = float(pair["pval" if "pval" in pair else "p-tukey"].iloc[0])
            separated = bool(row.p_adj < alpha) and p < alpha
            expected = figures.CANDIDATE_COLOR if separated else mcolors.to_hex(figures.NOT_SIGNIFICANT_COLOR)
            assert colours[f"{row.knob} = {figures.level_label(level)}"] == expected, (row.knob, level, p)
            checked += 1
    assert checked >= 3


@pytest.mark.browser
def test_the_rendered_tour_figures_are_shown_at_their_drawn_size(tour: dict[str, Any], chromium: str,
                                                                 tmp_path: Path) -> None:
    """issue 37 (acceptance): in the tour rendered at 1400 px no figure is squeezed (its text keeps its size)."""
    from browser_helpers import figures_at

    shown = figures_at(chromium, render_html(tour["path"], tmp_path / "00_tour.html", show_code=True), width=1400)
    assert len(shown) >= 3
    for figure in shown:
        assert figure["shown"][0] >= figure["natural"][0] - 0.5, figure
