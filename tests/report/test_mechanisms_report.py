"""The mechanism section of the report: words, heatmap and per-knob tables when the runs carry kernel
counters (``counter.*`` columns), one line when the store has none.

The default study's recording of 2026-11-24 (tests/data) was made before counters existed; the counter test adds synthetic counter
columns to its runs (the listen queue overflowing at the somaxconn levels that matter, 40 null counters)
and screens them as the dispatcher does (:func:`tunelab.stats.screening.with_mechanisms`).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from bs4 import BeautifulSoup
from report_helpers import copy_store

from tunelab.formatting import level_label
from tunelab.report import figures
from tunelab.report.build import index_html, mechanisms_html
from tunelab.report.loading import load_study, screen_study
from tunelab.report.tables import mechanism_frames
from tunelab.report.wording import NO_COUNTERS_TEXT, mechanism_sentences, summary_markdown
from tunelab.stats.screening import with_mechanisms

SOMAXCONN = "net.core.somaxconn"
#: the default study as recorded before kernel counters existed
WITHOUT_COUNTERS = Path(__file__).resolve().parents[1] / "data" / "default-2026-11-24.sqlite"


@pytest.fixture(scope="module")
def screened(tmp_path_factory: pytest.TempPathFactory):
    study = load_study(copy_store(WITHOUT_COUNTERS, tmp_path_factory.mktemp("stores")))
    inputs, result = screen_study(study, n_boot=200)
    return study, inputs, result


def with_counters(inputs, result):
    """The runs with a ListenOverflows counter that rises at every non-baseline somaxconn level, a
    client retransmission counter that never moves, and 40 null counters; the screen's result with its
    mechanisms."""
    rng = np.random.default_rng(29)
    data = inputs.data.copy()
    off = ~data[SOMAXCONN].isin([inputs.baseline[SOMAXCONN]])
    data["counter.TcpExt.ListenOverflows"] = np.where(off, 12000.0, 0.0) + rng.normal(0.0, 50.0, len(data)).clip(0)
    data["counter.client.Tcp.RetransSegs"] = 0.0
    for i in range(40):
        data[f"counter.Null.N{i}"] = rng.normal(100.0, 10.0, len(data))
    return with_mechanisms(result, data)


def test_a_store_without_counters_shows_one_line(screened) -> None:
    study, inputs, result = screened
    assert result.mechanisms.empty and "mechanisms" not in result.settings
    section = BeautifulSoup(index_html(study, inputs, result, runs=[]), "html.parser").find("section",
                                                                                          id="mechanisms")
    assert section is not None
    assert section.find("p").get_text(" ", strip=True) == NO_COUNTERS_TEXT
    assert section.find("figure") is None and section.find("table") is None
    assert "Mechanisms" not in summary_markdown(result, inputs)


def test_a_store_with_counters_shows_heatmap_tables_and_sentences(screened) -> None:
    study, inputs, result = screened
    counted = with_counters(inputs, result)
    pd_verdicts = counted.verdicts
    matters = pd_verdicts[(pd_verdicts["knob"] == SOMAXCONN) & (pd_verdicts["verdict"] == "matters")]
    assert not matters.empty          # the default study: small somaxconn levels lose queries
    section = BeautifulSoup(index_html(study, inputs, counted, runs=[]), "html.parser").find("section",
                                                                                           id="mechanisms")
    text = section.get_text(" ", strip=True)
    assert "recorded 42 kernel counters" in text and "41 moved" in text
    image = section.find("figure").find("img")
    assert image["src"].startswith("data:image/png;base64,") and "Hedges' g" in image["alt"]
    assert [h.get_text() for h in section.find_all("h3")] == list(mechanism_frames(counted))
    first = section.find("table")
    header = [th.get_text() for th in first.find_all("th")]
    assert header == ["level", "counter", "change per second [95 % CI]", "Hedges' g [95 % CI]", "q (BH)"]
    rows = [[td.get_text() for td in tr.find_all("td")] for tr in first.find_all("tr")[1:]]
    assert rows[0][1] == "TcpExt.ListenOverflows" and re.match(r"\+1\d,\d{3}/s \[", rows[0][2]), rows[0]
    sentences = mechanism_sentences(counted, inputs)
    level = level_label(matters["level"].iloc[0])
    assert any(s.startswith(f"`{SOMAXCONN}` = {level}: qps ") and re.search(
        r"; the listen queue overflowed: TcpExt\.ListenOverflows \+1\d,\d{3}/s", s) for s in sentences), sentences
    assert "**Mechanisms**" in summary_markdown(counted, inputs)


def test_heatmap_shows_only_counters_significant_somewhere(screened) -> None:
    _, inputs, result = screened
    counted = with_counters(inputs, result)
    g, significant = figures.mechanism_matrix(counted.mechanisms, max_counters=30)
    found = counted.mechanisms.loc[counted.mechanisms["significant"].astype(bool), "counter"]
    assert set(g.columns) == {c.removeprefix("counter.") for c in found}
    overflow = significant["TcpExt.ListenOverflows"]
    assert overflow[[r.startswith(f"{SOMAXCONN}=") for r in overflow.index]].all()
    assert not overflow[[not r.startswith(f"{SOMAXCONN}=") for r in overflow.index]].any()   # link.mtu's level


def test_counters_without_a_level_that_matters_say_so(screened) -> None:
    _, inputs, result = screened
    quiet = result.verdicts.assign(verdict="inconclusive")
    from dataclasses import replace

    counted = with_counters(inputs, replace(result, verdicts=quiet))
    assert counted.mechanisms.empty
    section = BeautifulSoup(mechanisms_html(counted), "html.parser")
    assert "No knob level matters, so there is no mechanism to look for." in section.get_text(" ", strip=True)
    assert section.find("figure") is None
