"""The report's tune section from a tune result's JSON: every stage's budget and spend, every knob and why, the
gain (or why none); values escaped."""
from __future__ import annotations

import json
from pathlib import Path

import tunelab
from tunelab.report.tune_section import tune_section_html


def test_the_section_shows_the_budget_per_stage_the_knobs_and_the_gain(tmp_path: Path) -> None:
    result = tunelab.tune(target="simulator", surface="simple", budget=60, store=tmp_path / "s.sqlite").to_json()
    html = str(tune_section_html(result))
    for stage in ("calibrate", "screen", "refine", "confirm"):
        assert f"<td>{stage}</td><td>{result['split'][stage]}</td><td>{result['spent'][stage]}</td>" in html
    for knob in result["knobs"]:
        assert f"<td>{knob['knob']}</td><td>{'kept' if knob['kept'] else 'dropped'}</td>" in html
    assert f"{result['verdict']}: " in html and "95 % CI" in html


def test_a_stopped_run_says_why_and_text_is_escaped() -> None:
    result = {"settings": {"budget": 60}, "spent_total": 28, "spent": {"calibrate": 4, "screen": 24},
              "split": {"calibrate": 4, "screen": 24, "refine": 20, "confirm": 12, "design": "oat"},
              "knobs": [{"knob": "<k>", "kept": False, "why": "no effect"}], "kept": [],
              "stopped": "the screen found nothing; tune stops & keeps 32"}
    html = str(tune_section_html(result))
    assert "&lt;k&gt;" in html and "tune stops &amp; keeps 32" in html and "<td>refine</td><td>20</td><td>0</td>" in html


def test_a_tune_store_is_reported_from_what_it_stored(tmp_path: Path) -> None:
    """`tunelab report` on a tune store: the front page's tune section reads the outcome the store kept (every
    knob's call and why, the spend per stage, the confirmed gain), not the command's --json; the screen notebooks
    are skipped with the reason (tune judged its own screen) and refine's notebook sees only refine's search."""
    from bs4 import BeautifulSoup

    from tunelab.optimize.tune import OUTCOME_ID
    from tunelab.report.build import applicable, index_html
    from tunelab.report.loading import load_study

    path = tmp_path / "wide.sqlite"
    # a split that leaves refine 12 measurements for 27 knobs: the screen drops the smaller estimated changes
    result = tunelab.tune(target="simulator", surface="wide27", allow_host_global=True, budget=100, store=path,
                          split="screen=70,refine=10,confirm=20")
    study = load_study(path)
    assert study.tune == json.loads(json.dumps(result.to_json()))
    assert OUTCOME_ID not in set(study.searches["search_id"]) and len(study.searches) == 1
    assert "tune judged its own screen" in applicable(study, "01_screen")
    assert applicable(study, "03_refine") is None and applicable(study, "04_validate") is None
    section = BeautifulSoup(index_html(study, None, None, []), "html.parser").find("section", id="tune")
    rows = {tr.find_all("td")[0].get_text(): [td.get_text() for td in tr.find_all("td")[1:]]
            for tr in section.find_all("table")[1].find("tbody").find_all("tr")}
    assert set(rows) == {c.knob for c in result.calls} and len(rows) == 27
    for call in result.calls:
        assert rows[call.knob] == ["kept" if call.kept else "dropped", call.why]
    dropped = [c for c in result.calls if not c.kept]
    assert dropped and all("dropped, a smaller estimated change" in c.why for c in dropped)
    text = section.get_text(" ")
    assert f"{sum(result.spent.values())} of 100 measurements spent" in text
    assert f"{result.verdict}: " in text and "95 % CI" in text
