"""The report's tune section from a tune result's JSON: every stage's budget and spend, every knob and why, the
gain (or why none); values escaped."""
from __future__ import annotations

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
