"""What a reader sees: the report rendered by headless Chromium (Debian ``chromium``)."""
from __future__ import annotations

import base64
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from browser_helpers import chromium_run  # tests/ is on sys.path (tests/conftest.py)

# the session's report builds (conftest's default_report, refine_report) happen once: on one worker
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("default-report")]


class Dom(HTMLParser):
    """The parts of a DOM the checks need: tables (as text rows), images, classes, text per section."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[dict] = []
        self.images: list[str] = []
        self.classes: set[str] = set()
        self.mimes: set[str] = set()
        self.sections: dict[str, list[str]] = {}
        self._open: list[tuple[str, str | None]] = []
        self._table: dict | None = None
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.classes.update((a.get("class") or "").split())
        if a.get("data-mime-type"):
            self.mimes.add(a["data-mime-type"])
        if tag == "img":
            self.images.append(a.get("src") or "")
        if tag == "table":
            self._table = {"class": a.get("class") or "", "rows": []}
            self.tables.append(self._table)
        if tag == "tr" and self._table is not None:
            self._table["rows"].append([])
        if tag == "section":
            self.sections.setdefault(a.get("id") or "", [])
        if tag not in ("img", "br", "meta", "link", "input", "hr"):
            self._open.append((tag, a.get("id")))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            name, _ = self._open.pop()
            if name == tag:
                break
        if tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._table is not None and self._table["rows"] and data.strip():
            self._table["rows"][-1].append(data.strip())
        for name, ident in self._open:
            if name == "section" and ident in self.sections:
                self.sections[ident].append(data)


def _distinct(image: object) -> int:
    """Number of distinct grey levels of a greyscale PIL image."""
    return sum(1 for count in image.histogram() if count)


def _png_ok(src: str) -> None:
    from PIL import Image

    assert src.startswith("data:image/png;base64,"), src[:80]
    data = base64.b64decode(src.split(",", 1)[1])
    assert len(data) > 5_000, f"image of only {len(data)} bytes"
    image = Image.open(io.BytesIO(data)).convert("L")
    low, high = image.getextrema()
    assert high - low > 100, "image is (nearly) uniform"
    assert _distinct(image.resize((64, 64))) > 5, "image has almost no distinct pixels"


def _no_errors(dom: Dom, name: str) -> None:
    text = "".join(dom.text)
    assert "Traceback" not in text, f"{name} shows a traceback"
    assert not {"output_error", "jp-OutputArea-error"} & dom.classes, f"{name} shows an error output"
    assert "application/vnd.jupyter.stderr" not in dom.mimes, f"{name} shows stderr output"


@pytest.fixture(scope="module")
def index_dom(default_report: Path, chromium: str) -> Dom:
    return Dom(chromium_run(chromium, default_report.as_uri(), "--dump-dom"))


def test_index_verdict_table(index_dom: Dom, default_store: Path) -> None:
    from tunelab.report import load_study

    study = load_study(default_store)
    tables = [t for t in index_dom.tables if "tunelab-verdicts" in t["class"]]
    assert len(tables) == 1
    header, *rows = tables[0]["rows"]
    rows = [r for r in rows if not r[0].startswith("↳")]     # a row's notes: a row of their own under it
    assert header[:3] == ["knob", "metric", "verdict"]
    assert {r[0] for r in rows} == set(study.design.knob_ids)
    legal = ("matters", "no effect (equivalent)", "inconclusive", "untestable", "not comparable (guard: ")
    assert all(r[2].startswith(legal) for r in rows), rows
    # the example study collapsed the answered rate at somaxconn=16: a reader sees why latency is not compared
    latency = next(r for r in rows if r[:2] == ["net.core.somaxconn", "latency_mean_ms"])
    assert latency[2].startswith("not comparable (guard: qps"), latency


def test_index_figures_and_sections(index_dom: Dom) -> None:
    assert len(index_dom.images) >= 2
    for src in index_dom.images:
        _png_ok(src)
    _no_errors(index_dom, "index.html")
    summary = " ".join(index_dom.sections["summary"])
    # each interval names the level its verdict used (the example's Games-Howell rows: 98.75 %, not 95 %)
    assert re.search(r"\[\d+(\.\d+)? % CI ", summary) and "p_adj" in summary, summary
    methods = " ".join(index_dom.sections["methods"])
    assert "one-at-a-time (OAT) design" in methods
    for words in ("Shapiro–Wilk", "Brown–Forsythe", "Holm", "replicates", "warm-up", "dnsperf", "numpy", "scipy",
                  "statsmodels", "pingouin", "Linux kernel"):
        assert words in methods, f"the methods section does not mention {words}"
    assert any(t in methods for t in ("Kruskal–Wallis", "Welch", "ANOVA + Tukey"))
    assert "Sequential replicates" in methods and "alpha-spending" in methods   # the example ran in rounds
    notebooks = " ".join(index_dom.sections["notebooks"])
    assert "01_screen" in notebooks and "02_posthoc" in notebooks
    assert "kernel counters" in " ".join(index_dom.sections["mechanisms"])    # the counters, or a line saying none


def test_default_report_says_why_refine_and_validate_were_skipped(default_report: Path) -> None:
    text = default_report.read_text()
    for name in ("03_refine", "04_validate"):
        assert not (default_report.parent / f"{name}.html").exists()
        assert f"<strong>{name}</strong> skipped" in text


@pytest.mark.parametrize("name", ["01_screen", "02_posthoc", "03_refine", "04_validate"])
def test_notebook_pages(name: str, request: pytest.FixtureRequest, chromium: str) -> None:
    """Each notebook page as a reader sees it: no errors, code hidden, real figures. 01/02 come from
    the default example's report, 03/04 from the example with a refinement and its confirmation."""
    report = request.getfixturevalue("default_report" if name < "03" else "refine_report")
    page = report.parent / f"{name}.html"
    assert page.exists(), f"{page} was not written"
    dom = Dom(chromium_run(chromium, page.as_uri(), "--dump-dom"))
    _no_errors(dom, page.name)
    assert "jp-InputArea-editor" not in dom.classes, "code cells are shown; they are hidden by default"
    assert "load_study(" not in "".join(dom.text)
    assert dom.images, f"{page.name} has no figures"
    for src in dom.images:
        _png_ok(src)
    if name == "01_screen":
        assert any("tunelab-verdicts" in t["class"] for t in dom.tables)


def test_index_screenshot_is_not_blank(default_report: Path, chromium: str, tmp_path: Path) -> None:
    from PIL import Image

    shot = tmp_path / "index.png"
    chromium_run(chromium, default_report.as_uri(), f"--screenshot={shot}", "--window-size=1280,3000")
    image = Image.open(shot).convert("L")
    assert image.size == (1280, 3000)
    low, high = image.getextrema()
    assert high - low > 200 and _distinct(image.resize((128, 300))) > 20


@pytest.mark.parametrize("page", ["index.html", "01_screen.html", "02_posthoc.html"])
def test_report_pages_fit_a_1400_px_window(page: str, default_report: Path, chromium: str) -> None:
    """At a 1400 px wide window no element of the report's pages is beyond the window: figures shrink to
    the page, and a table wider than the page scrolls inside its own box (the only thing allowed to)."""
    from browser_helpers import layout_at

    layout = layout_at(chromium, default_report.parent / page, width=1400)
    assert layout["scrollWidth"] <= layout["innerWidth"] == 1400, layout["overflowing"][:5]
    assert not layout["overflowing"], f"{page}: elements beyond the window: {layout['overflowing'][:5]}"
