"""The one presentation layer of tables (tunelab.report.presentation): numbers read as a person writes them,
every shown column has a reader's label, notes sit under the row they explain, and tables fit 1400 px.

Expected strings are worked out by hand from the numbers, not by calling the formatter under test.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from report_helpers import copy_store, DEFAULT_EXAMPLE
from tunelab.formatting import fmt_count, fmt_effect_size, fmt_p_exact, fmt_sig, fmt_signed_sig
from tunelab.report.labels import LABELS, column_label, unlabelled

# the session's report builds (conftest's default_report, refine_report) happen once: on one worker
pytestmark = pytest.mark.xdist_group("default-report")

EXAMPLES = DEFAULT_EXAMPLE.parent


@pytest.mark.parametrize(("value", "expected"), [
    (10250.0, "10,250"), (1.025e4, "10,250"), (1025, "1025"), (3, "3"), (1_000_000, "1,000,000"), (2.5, "2.5"),
    (None, "-"), (float("nan"), "-")])
def test_a_count_is_a_whole_number_with_thousands_separators(value: object, expected: str) -> None:
    assert fmt_count(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (10250.0, "10,250"), (9999.5, "10,000"), (10389.7, "10,390"), (0.40128, "0.4013"), (1.339950, "1.34"),
    (135.033146, "135"), (-95.162238, "-95.16")])
def test_a_table_number_has_four_significant_digits_and_never_an_exponent_above_one(value: float,
                                                                                    expected: str) -> None:
    assert fmt_sig(value) == expected


@pytest.mark.parametrize(("value", "expected"), [(0.0, "< 1e-300"), (1e-320, "< 1e-300"), (8.0567e-06, "8.06e-06"),
                                                 (0.999659, "1"), (0.04567, "0.0457")])
def test_a_p_value_in_a_table(value: float, expected: str) -> None:
    assert fmt_p_exact(value) == expected


def test_hedges_g_of_a_zero_width_interval_is_undefined_never_a_huge_number() -> None:
    # a counter that never moved: both groups constant, the pooled SD 0, g = 74300 "exactly"
    assert fmt_effect_size(74321.3, 74321.3, 74321.3) == "undefined (no spread)"
    assert fmt_effect_size(0.8534, 0.312, 1.4049) == "+0.853 [+0.312, +1.4]"
    assert fmt_effect_size(-2.5) == "-2.5"
    assert fmt_signed_sig(74321.3) == "+74,321" and "e+" not in fmt_signed_sig(1.5e12)


def test_labels_read_as_words_with_units() -> None:
    assert column_label("tost_p") == "TOST p"
    assert column_label("p_adj") == "p (adjusted)"
    assert column_label("sesoi_pct") == "SESOI (%)"
    assert column_label("ci_level") == "CI level"        # the interval's level beside a verdict
    assert column_label("net.core.somaxconn") == "net.core.somaxconn"   # a knob id is its own label
    snake = [name for name in LABELS if "_" in LABELS.get(name).header()]
    assert not snake, f"labels with raw snake_case: {snake}"


@pytest.fixture(scope="module")
def screened(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The example studies screened as 01_screen screens them, and the ABBA comparison 04_validate judges."""
    from tunelab.report.loading import load_study, screen_study

    out = {}
    for name in ("default", "abort-on-overflow"):
        store = copy_store(EXAMPLES / f"{name}.sqlite", tmp_path_factory.mktemp(name))
        study = load_study(store)
        out[name] = (study, *screen_study(study, n_boot=200))
    store = copy_store(EXAMPLES / "iperf-bottleneck.sqlite", tmp_path_factory.mktemp("iperf"))
    out["iperf-bottleneck"] = load_study(store)
    return out


def _shown_frames(screened: dict) -> list[tuple[str, pd.DataFrame]]:
    """Every table 01_screen and 04_validate show, and the summaries' tables, built as they build them."""
    from tunelab.report import refinement, tables
    from tunelab.report.loading import overview, repeated_trials
    from tunelab.report.reprs import configs_frame

    frames = []
    for name in ("default", "abort-on-overflow"):
        study, inputs, result = screened[name]
        guards = result.guards
        frames += [("verdicts", tables.verdict_frame(result.verdicts, inputs.metrics)),
                   ("guards", guards[["knob", "level", "guard", "text", "ci_low", "ci_high", "sesoi", "units", "n",
                                      "baseline_n", "tripped"]] if guards is not None and len(guards) else None),
                   ("rounds", tables.rounds_frame(result)), ("testbeds", tables.between_testbeds_frame(result)),
                   ("model terms", tables.model_terms_frame(result.model_terms) if len(result.model_terms) else None),
                   ("overview", overview(inputs.runs, inputs.knobs, inputs.metric["name"])),
                   ("repeated", repeated_trials(study)), ("assumptions", tables.assumptions_table(result.assumptions)),
                   ("chosen tests", tables.chosen_tests(result.omnibus)),
                   ("omnibus", result.omnibus.drop(columns=["reason"])),
                   *tables.mechanism_frames(result).items()]
    study = screened["iperf-bottleneck"]
    for comparison in refinement.abba_comparisons(study):
        goals = refinement.comparison_goals(study, list(comparison.measurements.columns), None, None,
                                            stored=comparison.goals)
        frames.append(("abba", tables.abba_frame(refinement.judge(comparison, goals, 0.05))))
        frames.append(("configs", configs_frame(comparison.baseline, comparison.candidate, "candidate")))
    return [(name, frame) for name, frame in frames if frame is not None and not frame.empty]


def test_every_column_a_table_shows_has_a_label(screened: dict) -> None:
    knobs = {k for name in ("default", "abort-on-overflow") for k in screened[name][1].knobs}
    frames = _shown_frames(screened)
    assert len(frames) >= 15
    missing = {name: unlabelled(frame.columns, own_labels=knobs) for name, frame in frames}
    assert not {name: cols for name, cols in missing.items() if cols}, missing


def test_the_validate_table_reads_in_words_and_one_format_per_kind(screened: dict) -> None:
    """04_validate's table: was 15 raw snake_case columns mixing 8.06e-06 with 0.4013."""
    from tunelab.report.presentation import present

    frame = next(frame for name, frame in _shown_frames(screened) if name == "abba")
    view = present(frame, verdicts="verdict")
    headers = [h.text for h in view.headers]
    assert not [h for h in headers if "_" in h], headers
    assert len(headers) <= 10, headers
    cells = {h: [row.cells[i] for row in view.rows] for i, h in enumerate(headers)}
    # the change keeps its CI beside it in % (one decimal tells the three apart): 0.401282 [0.123823, 0.679509]
    assert cells["change (95 % CI)"][0] == "+0.4 % [+0.1 %, +0.7 %]"
    assert cells["TOST p"] == ["8.06e-06", "1", "1"]          # 8.0567e-06, 0.999659, 0.999995 with 3 digits
    assert cells["baseline mean"] == ["190.4", "1.34", "14,250"]   # 190.370274, 1.339950, 14250.375
    assert [e.verdict for e in view.legend] == ["equivalent", "regress", "improve"]


def test_notes_sit_under_the_row_they_explain(screened: dict) -> None:
    from tunelab.report.rendering import verdicts_html

    _, inputs, result = screened["default"]
    verdicts = result.verdicts.copy()
    verdicts.loc[2, "posthoc_note"] = "Games–Howell does not separate 1024 from the baseline (p_adj 0.109)"
    knob, metric = verdicts.loc[5, "knob"], verdicts.loc[5, "metric"]
    notes = [f"{knob} × {metric}: 3 run(s) without a value left out", "load profiles a, b: a factor of every model"]
    html = verdicts_html(verdicts, inputs.metrics, notes=notes)
    rows = re.findall(r"<tr( class=\"[^\"]*\")?>(.*?)</tr>", html.split("<tbody>")[1], re.S)
    texts = [(css, [cell for cell in re.split(r"<[^>]+>", body) if cell]) for css, body in rows]
    under = {tuple(texts[i - 1][1][:2]): " ".join(texts[i][1]) for i, (css, _) in enumerate(texts)
             if "tunelab-note" in css}
    noted = {(k, m) for k, m, n in zip(verdicts["knob"], verdicts["metric"], verdicts["posthoc_note"])
             if isinstance(n, str) and n} | {(knob, metric)}
    assert set(under) == noted and len(texts) == len(verdicts) + len(noted), texts
    assert "Games–Howell does not separate 1024" in under[(verdicts.loc[2, "knob"], verdicts.loc[2, "metric"])]
    assert "3 run(s) without a value left out" in under[(knob, metric)]
    after = html.split("</table>")[1]
    assert "load profiles a, b" in after and "3 run(s)" not in after    # a note about no row: under the table
    assert 'class="tunelab-legend"' in after and "matters</span>: adjusted p below alpha" in after


# ---- what a reader sees at 1400 px ------------------------------------------------------------------


def _no_clipped_tables(chromium: str, page: Path) -> dict:
    from browser_helpers import clipped_tables, tables_at

    layout = tables_at(chromium, page, width=1400)
    assert layout["tables"], f"{page.name} has no tables"
    clipped = clipped_tables(layout)
    assert not clipped, f"{page.name}: tables wider than their box at 1400 px: {clipped[:3]}"
    return layout


@pytest.mark.browser
@pytest.mark.parametrize("page", ["index.html", "01_screen.html"])
def test_report_tables_fit_1400_px_without_scrolling(page: str, default_report: Path, chromium: str) -> None:
    layout = _no_clipped_tables(chromium, default_report.parent / page)
    verdicts = [t for t in layout["tables"] if "tunelab-verdicts" in t["cls"]]
    assert verdicts and "p (adjusted)" in verdicts[0]["headers"] and "p_adj" not in verdicts[0]["headers"]


@pytest.mark.browser
def test_the_validate_page_tables_fit_1400_px_and_read_in_words(refine_report: Path, chromium: str) -> None:
    layout = _no_clipped_tables(chromium, refine_report.parent / "04_validate.html")
    abba = [t for t in layout["tables"] if "tunelab-verdicts" in t["cls"]]
    assert abba, layout["tables"]
    for table in abba:
        assert "TOST p" in table["headers"] and not [h for h in table["headers"] if "_" in h], table["headers"]


def test_the_level_of_the_interval_beside_a_verdict_is_named(screened: dict) -> None:
    """A look's verdict uses its nominal alpha (0.0083): its interval is a 99.17 % one, and the table says so."""
    from tunelab.report import refinement
    from tunelab.report.presentation import present
    from tunelab.report.tables import abba_frame

    study = screened["iperf-bottleneck"]
    comparison = refinement.abba_comparisons(study)[0]
    goals = refinement.comparison_goals(study, list(comparison.measurements.columns), None, None,
                                        stored=comparison.goals)
    table = refinement.judge(comparison, goals, 0.05).assign(ci_level=1 - 0.0083)
    headers = [h.text for h in present(abba_frame(table), verdicts="verdict").headers]
    assert "change (99.17 % CI)" in headers and "CI level" not in headers      # one level: named in the header
    # a validation read back look by look names alpha_nominal instead: the deciding look's level, 95 % without one
    looks = table.drop(columns=["ci_level"]).assign(alpha_nominal=[0.0083] + [float("nan")] * (len(table) - 1))
    view = present(abba_frame(looks), verdicts="verdict")
    headers = [h.text for h in view.headers]
    at = headers.index("CI level")
    assert headers[at - 1] == "change [CI]"
    assert [row.cells[at] for row in view.rows] == ["99.17 %"] + ["95 %"] * (len(table) - 1)
