"""The report's figures are readable at 1400 px (issue 37, item 3), as headless Chromium lays them out.

A figure drawn at 100 dpi keeps its point sizes only when the page shows it at its natural width;
squeezed into a narrower box (the counter heatmap once shrank to a 150 px strip) its text shrinks by
the same factor. Every figure of the front page and the screen and post-hoc pages must be shown
unscaled, and the counter heatmap (labels drawn at 9 pt: tests/report/test_verdict_figures.py) too.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from browser_helpers import figures_at

# the session's report builds (conftest's default_report, refine_report) happen once: on one worker
pytestmark = pytest.mark.xdist_group("default-report")


@pytest.mark.parametrize("page", ["index.html", "01_screen.html", "02_posthoc.html"])
def test_report_figures_are_shown_at_their_drawn_size(page: str, default_report: Path, chromium: str) -> None:
    shown = figures_at(chromium, default_report.parent / page, width=1400)
    assert shown, f"{page} has no figure"
    for figure in shown:
        natural, box = figure["natural"], figure["shown"]
        assert natural[0] > 0, f"{page}: a figure did not load: {figure['alt'][:80]}"
        assert box[0] >= natural[0] - 0.5, (f"{page}: {figure['alt'][:80]!r} drawn {natural[0]} px wide is shown at "
                                            f"{box[0]:.0f} px: its text shrinks to {box[0] / natural[0]:.0%}")
    if page != "02_posthoc.html":
        heatmaps = [f for f in shown if f["alt"].startswith("heatmap of Hedges' g")]
        assert len(heatmaps) == 1 and heatmaps[0]["shown"][1] > 400   # a tall, readable grid, not a strip
