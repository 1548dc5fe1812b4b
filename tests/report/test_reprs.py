"""The results a notebook user sees show as short HTML summaries (``_repr_html_``) and draw their first
figure (``plot()``); their text reprs are a few lines.

One small study on the SYNTHETIC simulator (surface ``simple``, noise CV 3 %, tunelab/simulator/surfaces.py):
somaxconn 1024 against the baseline 128 raises qps by 1 / (1 - 0.135) - 1 = +15.6 %, three times the 5 %
SESOI, so the screen says ``matters``; bbr against cubic is +3 %. The simulator's noise is seeded per
measurement, so the results are the same on every run. Each HTML summary is parsed and checked against
the result's own tables (headers, one row per verdict, the verdict classes and colours, the numbers).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import pytest

import tunelab
from tunelab.display import VIEWS, Displayed
from tunelab.errors import DataError, TunelabError
from tunelab.formatting import fmt_pct_interval, level_label
from tunelab.report.labels import column_label
from tunelab.report.presentation import shown_columns
from tunelab.report.reprs import MAX_ROWS, abba_frame
from tunelab.report.rendering import VERDICT_STYLE
from tunelab.report.tables import verdict_frame
from repr_helpers import Page
from simulator_helpers import CONGESTION_KNOB, simulator_design  # tests/ is on sys.path

SOMAXCONN = "net.core.somaxconn"
DESIGN = simulator_design("reprs", cv=0.03, sesoi_pct=5, replicates="5",
                          knobs=("{name: net.core.somaxconn, levels: [128, 1024], baseline: 128}", CONGESTION_KNOB))


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """plan, run, screen, refine (with its confirmation) and validate of the small simulator study."""
    base = tmp_path_factory.mktemp("reprs")
    design = base / "reprs.yaml"
    design.write_text(DESIGN)
    store = base / "reprs.sqlite"
    out = {"plan": tunelab.plan(design), "run": tunelab.run(design, store=store, progress=False)}
    out["screen"] = tunelab.screen(store, n_boot=200)
    out["refine"] = tunelab.refine(design, knobs="screened", store=store, budget=16, confirm_blocks=4)
    out["validate"] = tunelab.validate("simulator", out["refine"].result.winner, surface="simple", blocks=4,
                                       store=base / "validate.sqlite", write_sysctl=base / "sysctl.d")
    return out


def test_screen_summary_is_the_verdict_table(study: dict[str, Any]) -> None:
    result = study["screen"]
    page = Page(result._repr_html_())
    expected = verdict_frame(result.verdicts, result.settings["metrics"])
    assert len(page.tables) == 1 and page.tables[0]["class"] == "tunelab-verdicts"
    assert page.tables[0]["headers"] == [column_label(c) for c in expected.columns]   # reader labels: p (adjusted)
    assert len(page.tables[0]["rows"]) == len(result.verdicts)            # one row per knob × metric
    assert page.column(0, "knob") == list(result.verdicts["knob"])
    assert page.column(0, "verdict") == list(expected["verdict"])
    assert page.column(0, "change vs baseline") == [
        fmt_pct_interval(r.effect_pct, r.effect_ci_low, r.effect_ci_high) for r in result.verdicts.itertuples()]
    verdict_at = page.tables[0]["headers"].index("verdict")
    for row, verdict in zip(page.tables[0]["rows"], result.verdicts["verdict"]):
        css = {"matters": "verdict-matters", "inconclusive": "verdict-inconclusive",
               "no effect (equivalent)": "verdict-equivalent"}[verdict]
        assert row["class"] == css
        assert row["cells"][verdict_at]["style"] == VERDICT_STYLE[css]      # coloured inline: no stylesheet
    matters = result.verdicts[(result.verdicts["knob"] == SOMAXCONN) & (result.verdicts["metric"] == "qps")]
    assert list(matters["verdict"]) == ["matters"] and level_label(matters["level"].iloc[0]) == "1024"
    assert "result.verdicts" in page.codes and "result.plot(metric=...)" in page.codes


def test_a_long_verdict_table_is_cut_with_the_rows_that_matter_first(study: dict[str, Any]) -> None:
    result = study["screen"]
    quiet = result.verdicts[result.verdicts["verdict"] != "matters"]
    verdicts = pd.concat([quiet] * (MAX_ROWS + 1) + [result.verdicts[result.verdicts["verdict"] == "matters"]],
                         ignore_index=True)
    page = Page(dataclasses.replace(result, verdicts=verdicts)._repr_html_())
    rows = page.tables[0]["rows"]
    assert len(rows) == MAX_ROWS
    n_matters = int((verdicts["verdict"] == "matters").sum())
    assert [row["class"] for row in rows[:n_matters]] == ["verdict-matters"] * n_matters
    assert f"the first {MAX_ROWS} of {len(verdicts)} rows" in "".join(page.text)


def test_markup_in_a_result_is_shown_as_text(study: dict[str, Any]) -> None:
    result = study["screen"]
    verdicts = result.verdicts.assign(knob="<script>alert(1)</script>")
    html = dataclasses.replace(result, verdicts=verdicts)._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_plan_summary_lists_each_knob(study: dict[str, Any]) -> None:
    result = study["plan"]
    page = Page(result._repr_html_())
    assert page.column(0, "knob") == [k["id"] for k in result.summary["knobs"]]
    assert page.column(0, "levels") == ["128, 1024", "cubic, bbr"]
    assert page.column(0, "baseline") == ["128", "cubic"]
    assert f"{result.summary['runs']} runs" in "".join(page.text) and "result.plan" in page.codes


def test_run_summary_counts_the_trials(study: dict[str, Any]) -> None:
    result = study["run"]
    text = "".join(Page(result._repr_html_()).text)
    assert f"{result.planned} planned" in text and f"{result.ok} ok" in text and str(result.store_path) in text
    assert result.ok == result.planned > 0


def test_refine_summary_shows_the_winner_and_its_confirmation(study: dict[str, Any]) -> None:
    result = study["refine"]
    page = Page(result._repr_html_())
    winner, table = result.result.winner, result.confirmation.table
    assert page.tables[0]["headers"] == ["knob", "baseline", "winner"]
    assert page.column(0, "knob") == list(winner) and page.column(0, "winner") == [level_label(v) for v in winner.values()]
    assert page.column(1, "metric") == list(table["metric"])
    assert page.column(1, "change (95 % CI)") == list(abba_frame(table)["change (95 % CI)"])
    assert page.verdict[0] == f"verdict-{result.confirmation.verdict}"
    assert page.verdict[2] == result.confirmation.verdict.upper()
    assert f"{len(result.result.batches)} batches" in "".join(page.text)


def test_validate_summary_shows_verdict_ci_and_blocks(study: dict[str, Any]) -> None:
    result = study["validate"]
    page = Page(result._repr_html_())
    table = result.confirmation.table
    row = table.iloc[0]
    assert page.tables[0]["headers"] == [column_label(c) for c in shown_columns(abba_frame(table)).columns]
    assert "TOST p" in page.tables[0]["headers"] and "tost_p" not in page.tables[0]["headers"]
    assert page.column(0, "change (95 % CI)")[0] == fmt_pct_interval(row["pct_change"], row["ci_low"], row["ci_high"])
    assert page.column(0, "verdict") == list(table["verdict"])
    assert page.column(0, "blocks") == [str(n) for n in table["blocks"]] == ["4"]
    needed = row["blocks_needed"]
    if pd.isna(needed):   # a column with nothing in it is left out
        assert "blocks needed" not in page.tables[0]["headers"]
    else:
        assert page.column(0, "blocks needed") == [str(int(needed))]
    assert page.verdict[2] == result.verdict.upper()
    assert page.column(1, "candidate") == [level_label(v) for v in result.confirmation.candidate.values()]
    files = str(result.sysctl.paths["conf"]) if result.sysctl is not None else result.sysctl_note
    assert files in "".join(page.text)


@pytest.mark.parametrize("name", ["plan", "run", "screen", "refine", "validate"])
def test_text_and_html_reprs_are_short(study: dict[str, Any], name: str) -> None:
    result = study[name]
    text = repr(result)
    assert text.startswith(type(result).__name__) and len(text.splitlines()) <= 5 and len(text) <= 800, text
    assert len(result._repr_html_()) <= 8_000


@pytest.mark.parametrize("part", ["refine.result", "refine.confirmation", "validate.confirmation"])
def test_the_parts_of_a_result_have_short_reprs_too(study: dict[str, Any], part: str) -> None:
    name, attribute = part.split(".")
    inner = getattr(study[name], attribute)
    text = repr(inner)
    assert text.startswith(type(inner).__name__) and len(text.splitlines()) <= 3 and len(text) <= 500, text


def test_plot_draws_the_first_figure(study: dict[str, Any]) -> None:
    screen = study["screen"]
    qps = screen.effects[screen.effects["metric"] == "qps"]
    labels = [t.get_text() for t in screen.plot().axes[0].get_yticklabels()]
    assert labels == [f"{k} = {level_label(v)}" for k, v in zip(qps["knob"], qps["level"])]
    assert screen.plot(metric="qps").axes[0].get_title() == "Effect of each level on qps"
    assert study["refine"].plot().axes[0].get_xlabel() == "measurements"
    labels = [t.get_text() for t in study["validate"].plot().axes[0].get_yticklabels()]
    assert labels == ["block 1", "block 2", "block 3", "block 4", "gain over 4 blocks (95 % CI)"]
    with pytest.raises(DataError, match="the screen has no metric 'nope'; its metrics: qps"):
        screen.plot(metric="nope")
    with pytest.raises(TunelabError, match="PlanResult has no figure"):
        study["plan"].plot()


def test_every_api_result_has_a_view() -> None:
    from tunelab.api import PlanResult, RefineRun, ValidateRun
    from tunelab.study_result import StudyRun
    from tunelab.stats import ScreenResult

    for cls in (PlanResult, StudyRun, ScreenResult, RefineRun, ValidateRun):
        assert issubclass(cls, Displayed) and cls.__name__ in VIEWS


def test_every_plot_takes_an_axes_and_a_metric(study: dict[str, Any]) -> None:
    """issue 37: ``plot(ax=..., metric=...)`` draws into the caller's axes for the screen, refine and validate."""
    from matplotlib.figure import Figure

    objective = study["refine"].result.objectives[0]
    name = getattr(objective, "name", str(objective))
    for result, metric in ((study["screen"], "qps"), (study["refine"], name), (study["validate"], "qps")):
        fig = Figure()
        ax = fig.add_subplot()
        assert result.plot(metric=metric, ax=ax) is fig and ax.has_data()
    with pytest.raises(DataError, match="first objective"):
        study["refine"].plot(metric="not-an-objective")
