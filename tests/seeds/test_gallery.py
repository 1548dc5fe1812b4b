"""The gallery of seed studies: provenance read from a store, the HTML as a reader sees it (headless
Chromium), the real gallery from the recorded stores, and the command's one-line errors."""
from __future__ import annotations

import io
import json
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd
import pytest

from browser_helpers import chromium_run  # tests/ is on sys.path (tests/conftest.py)

from tunelab.seeds import SEED_STUDIES, Claim, FigureImage, Measured, SeedStudy, StudyPage, Table
from tunelab.seeds.gallery import provenance_text, store_provenance, write_gallery
from tunelab.store import Store

# the session's gallery build (conftest's real_gallery) happens once: on one worker
pytestmark = pytest.mark.xdist_group("seed-gallery")

ROOT = Path(__file__).resolve().parents[2]



class Seen(HTMLParser):
    """What a reader meets in a rendered page: links, images (src, alt), claim rows (cells as text), scripts."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.images: list[dict[str, str]] = []
        self.rows: list[dict] = []
        self.scripts = 0
        self.text: list[str] = []
        self._row: dict | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "a" and "href" in a:
            self.links.append(a["href"])
        elif tag == "img":
            self.images.append({"src": a.get("src", ""), "alt": a.get("alt", "")})
        elif tag == "script":
            self.scripts += 1
        elif tag == "tr" and "claim-row" in a.get("class", "").split():
            self._row = {"study": a.get("data-study", ""), "cells": {}}
            self.rows.append(self._row)
        elif tag == "td" and self._row is not None:
            self._cell = []
            self._row["cells"][a.get("class", "").split()[0] if a.get("class") else str(len(self._row["cells"]))] \
                = self._cell

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def cell(self, row: dict, name: str) -> str:
        return " ".join("".join(row["cells"].get(name, [])).split())


HOSTILE = "<script>alert('x')</script> & <b>bold</b>"


# ---- provenance ---------------------------------------------------------------------------------------


def _record(run_key: str, phase: str, status: str, start: str, end: str, load_s: float | None,
            foreign: float | None) -> dict:
    return {"run_key": run_key, "phase": phase, "status": status, "reason": None if status == "ok" else "load failed",
            "config": json.dumps({"k": 1}), "plan": json.dumps({"run_id": 0}), "knobs_read": json.dumps({"k": 1}),
            "metrics": json.dumps({"qps": 1.0}), "series": None,
            "timings": json.dumps({"load": load_s}) if load_s else None, "foreign_cpu_s": foreign,
            "provenance": None, "started_at": start, "ended_at": end}


def test_store_provenance_against_hand_computed_values(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store.open(path, study="prov", design_hash="h", design_text="") as store:
        store.begin_run({"kernel": "6.18.0-test", "nproc": 2, "cpu_model": "Test CPU"})
        # busy share = foreign CPU-s / (2 CPUs x load s): 1/(2x2) = 25 %, 3/(2x2) = 75 %, 0.4/(2x4) = 5 %
        store.add_trial_record(_record("screen:0", "screen", "ok", "2026-01-02T10:00:00+00:00",
                                       "2026-01-02T10:00:03+00:00", 2.0, 1.0))
        store.add_trial_record(_record("screen:1", "screen", "ok", "2026-01-02T10:00:03+00:00",
                                       "2026-01-02T10:00:06+00:00", 2.0, 3.0))
        store.add_trial_record(_record("screen:2", "screen", "failed", "2026-01-02T10:00:06+00:00",
                                       "2026-01-02T10:00:07+00:00", None, None))
        store.add_trial_record(_record("validate:0", "validate", "ok", "2026-01-02T10:01:00+00:00",
                                       "2026-01-02T10:01:05+00:00", 4.0, 0.4))
    prov = store_provenance(path)
    assert prov["store"] == "s.sqlite" and prov["study"] == "prov"
    assert prov["trials"] == 4 and prov["ok"] == 3 and prov["failed"] == 1
    assert prov["by_phase"] == {"screen": {"ok": 2, "failed": 1}, "validate": {"ok": 1}}
    assert prov["lab_minutes"] == pytest.approx((3 + 3 + 1 + 5) / 60, abs=0.01)
    assert pd.Timestamp(prov["first"]) == pd.Timestamp("2026-01-02T10:00:00Z")
    assert pd.Timestamp(prov["last"]) == pd.Timestamp("2026-01-02T10:01:05Z")
    assert (prov["kernel"], prov["nproc"], prov["cpu_model"]) == ("6.18.0-test", 2, "Test CPU")
    assert prov["busy_pct"] == pytest.approx(25.0) and prov["busy_max_pct"] == pytest.approx(75.0)
    assert prov["busy_trials"] == 3
    text = provenance_text(prov)
    assert "4 trials" in text and "median 25 %" in text and "max 75 %" in text and "Linux 6.18.0-test (2 CPUs)" in text


def test_lab_minutes_count_the_two_trials_of_a_duet_pair_once(tmp_path: Path) -> None:
    path = tmp_path / "duet.sqlite"

    def pair_side(key: str, side: int, start: str, end: str) -> dict:
        return {**_record(key, "validate", "ok", start, end, 2.0, None),
                "provenance": json.dumps({"duet": {"pair": key[-1], "side": side}})}

    with Store.open(path, study="duet", design_hash="h", design_text="") as store:
        # pair 0: 10:00:00-10:00:10 beside 10:00:01-10:00:11 (11 s of wall clock); pair 1: 10:00:20-10:00:30
        # beside 10:00:20-10:00:29 (10 s); then one sequential trial of 5 s: 26 s in all, not 10+10+10+9+5 = 44
        for key, side, start, end in (("p0", 0, "00:00", "00:10"), ("p0", 1, "00:01", "00:11"),
                                      ("p1", 0, "00:20", "00:30"), ("p1", 1, "00:20", "00:29")):
            store.add_trial_record(pair_side(f"validate:{key}:s{side}", side, f"2026-01-02T10:{start}+00:00",
                                             f"2026-01-02T10:{end}+00:00"))
        store.add_trial_record(_record("screen:0", "screen", "ok", "2026-01-02T10:01:00+00:00",
                                       "2026-01-02T10:01:05+00:00", 2.0, 0.4))
    prov = store_provenance(path)
    assert prov["duet_trials"] == 4 and prov["trials"] == 5
    assert prov["lab_minutes"] == pytest.approx(26 / 60, abs=0.005)


# ---- write_gallery as a reader sees it ----------------------------------------------------------------


def _png(seed: int) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2, 3], [seed, seed + 2, seed + 1, seed + 3], marker="o", linewidth=3)
    ax.set_title(f"figure {seed}")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    return buffer.getvalue()


def _study(key: str, design: Path, claim_text: str) -> SeedStudy:
    def never(*_: object) -> None:
        raise AssertionError("write_gallery must not record or read stores")

    return SeedStudy(key=key, slug=f"synthetic-{key}", title=f"Synthetic paper {key}", paper=f"{key}_paper.txt",
                     claim=Claim(text=claim_text, numbers=f"numbers of {key}: -98 %", where="slide 3"),
                     designs=(design,), minutes=1.0, record=never, page=never)


def _page(key: str, effect: str) -> StudyPage:
    frame = pd.DataFrame({"knob": ["a<b>", "c"], "effect_pct": [1.23456, -2.0]})
    return StudyPage(
        measured=Measured(effect=effect, verdict=f"verdict {key}", agreement="partly", why=f"because {key}"),
        figures=[FigureImage(_png(1), alt=f"alt one {key}", caption="first"),
                 FigureImage(_png(2), alt=f"alt two {key}", caption="second")],
        tables=[Table("a table <i>", frame)], notes=[f"note {key}"],
        provenance=[{"store": f"{key}.sqlite", "trials": 8, "by_phase": {"screen": {"ok": 8}}, "lab_minutes": 1.5,
                     "first": "2026-01-02T10:00:00+00:00", "last": "2026-01-02T10:02:00+00:00", "kernel": "6.18",
                     "nproc": 2, "busy_pct": 12.0, "busy_max_pct": 30.0}])


def _png_ok(path: Path) -> None:
    from PIL import Image

    assert path.is_file(), f"{path} is missing"
    image = Image.open(path)
    image.load()
    grey = image.convert("L")
    low, high = grey.getextrema()
    assert high - low > 100, f"{path.name} is (nearly) uniform"
    assert sum(1 for n in grey.resize((64, 64)).histogram() if n) > 5, f"{path.name} has almost no distinct pixels"


def _check_page(html_path: Path, chromium: str | None = None) -> Seen:
    """``html_path`` as rendered by ``chromium`` (else as written: the pages have no JavaScript, so the DOM is
    the file; Chromium takes ~2.5 s a page); every link resolves to a file, every image is a real PNG with alt."""
    seen = Seen(chromium_run(chromium, html_path.as_uri(), "--dump-dom") if chromium else html_path.read_text())
    for href in seen.links:
        parsed = urlparse(href)
        assert not parsed.scheme and not parsed.netloc and not href.startswith("/"), f"{href} is not relative"
        target = (html_path.parent / unquote(parsed.path)).resolve()
        assert target.is_file(), f"{html_path.name}: link {href} leads nowhere"
    for image in seen.images:
        assert image["alt"].strip(), f"{html_path.name}: an image without alt text"
        assert not urlparse(image["src"]).scheme, image["src"][:60]
        _png_ok(html_path.parent / unquote(image["src"]))
    assert seen.scripts == 0, f"{html_path.name} has a script element"
    return seen


@pytest.mark.browser
def test_write_gallery_in_chromium(tmp_path: Path, chromium: str) -> None:
    design = tmp_path / "000_synthetic.yaml"
    design.write_text("# a design\nname: synthetic\n")
    studies = [_study("000", design, f"knob helps {HOSTILE}"), _study("001", design, "another claim")]
    pages = [_page("000", "qps +8 % [+2, +14] %"), _page("001", "lost -90 % [-95, -80] %")]
    report = tmp_path / "gallery" / "001-synthetic-001" / "report" / "s" / "index.html"
    report.parent.mkdir(parents=True)
    report.write_text("<html><body>report</body></html>")
    index = write_gallery(list(zip(studies, pages)), tmp_path / "gallery", reports={"001-synthetic-001": [report]})

    seen = _check_page(index, chromium)
    assert [row["study"] for row in seen.rows] == ["000", "001"]
    for row, study, page in zip(seen.rows, studies, pages):
        assert study.title in seen.cell(row, "paper")
        assert " ".join(study.claim.text.split()) in seen.cell(row, "claim")
        assert study.claim.numbers in seen.cell(row, "claim")
        assert seen.cell(row, "effect") == page.measured.effect
        assert seen.cell(row, "verdict") == page.measured.verdict
        assert seen.cell(row, "agreement") == "partly"
        assert "median 12 %" in seen.cell(row, "provenance")
    assert {f"{s.name}/index.html" for s in studies} <= set(seen.links)
    raw = index.read_text()
    assert "&lt;script&gt;" in raw and "<script>" not in raw    # the claim's html is text, not markup

    for study in studies:   # the first study page rendered by Chromium, the second as written
        page_seen = _check_page(tmp_path / "gallery" / study.name / "index.html",
                                chromium if study is studies[0] else None)
        assert len(page_seen.images) == 2 and {i["alt"] for i in page_seen.images} == {
            f"alt one {study.key}", f"alt two {study.key}"}
        assert len(page_seen.rows) == 1 and page_seen.rows[0]["study"] == study.key
        text = "".join(page_seen.text)
        assert design.name in page_seen.links and "a table <i>" in text and "a<b>" in text and f"note {study.key}" in text
        assert "busy share" in text
        assert ("report/s/index.html" in page_seen.links) == (study is studies[1])


# ---- the real gallery from the recorded stores (the real_gallery fixture: conftest.py) ----------------------


@pytest.mark.browser
def test_real_gallery_from_recorded_stores(real_gallery: tuple[Path, str], chromium: str) -> None:
    out, printed = real_gallery
    assert printed.strip().endswith(str(out / "index.html"))
    seen = _check_page(out / "index.html", chromium)
    assert sorted(row["study"] for row in seen.rows) == ["000", "001", "002", "003", "004"]
    for row in seen.rows:
        study = SEED_STUDIES.get(row["study"])
        assert study.title in seen.cell(row, "paper") and seen.cell(row, "effect") and seen.cell(row, "verdict")
        assert seen.cell(row, "agreement") in ("agrees", "partly", "differs", "not testable")
        page_seen = _check_page(out / study.name / "index.html", chromium if row is seen.rows[0] else None)
        assert page_seen.images, f"{study.name} shows no figure"
        assert {Path(d).name for d in study.designs} <= set(page_seen.links), f"{study.name} does not link its design"
        text = " ".join("".join(page_seen.text).split())
        assert "busy share: other processes used a median" in text, f"{study.name} does not show the busy share"
    # acceptance: 001 shows the interaction on lost with its p-value and the simple effects
    diiner = " ".join(" ".join(_check_page(out / SEED_STUDIES.get("001").name / "index.html", None).text).split())
    assert "interaction p = " in diiner and "net.core.somaxconn:net.ipv4.tcp_abort_on_overflow" in diiner
    assert "Simple effects: abort_on_overflow=1 against 0 on lost at each somaxconn" in diiner
    assert "net.core.somaxconn=128" in diiner and "net.core.somaxconn=4096" in diiner


def test_the_recorded_fio_study_has_no_failed_trial(recorded_stores: Path) -> None:
    provenance = store_provenance(recorded_stores / f"{SEED_STUDIES.get('002').name}.sqlite")
    assert provenance["failed"] == 0 and provenance["ok"] >= 80, provenance["by_phase"]


# ---- the command's errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["tunelab", "python -m tunelab.seeds"])
def test_unknown_study_is_one_line(entry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = _main(entry, ["--quick", "--only", "999", "--stores", str(tmp_path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "999" in err and all(key in err for key in SEED_STUDIES.names()), err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("entry", ["tunelab", "python -m tunelab.seeds"])
def test_missing_stores_directory_is_one_line(entry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-stores"
    status = _main(entry, ["--quick", "--stores", str(missing), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert str(missing) in err and "--record" in err and "Traceback" not in err


def test_missing_store_names_the_record_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = SEED_STUDIES.names()[0]
    status = _main("tunelab", ["--quick", "--only", key, "--stores", str(tmp_path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert f"--record --only {key}" in err


def _main(entry: str, args: list[str]) -> int:
    if entry == "tunelab":
        from tunelab.cli import main

        return main(["gallery", *args])
    from tunelab.seeds.__main__ import main as seeds_main

    return seeds_main(args)


# ---- the layout at a 1400 px window, as a reader sees it --------------------------------------------------


@pytest.mark.browser
def test_real_gallery_fits_a_1400_px_window(real_gallery: tuple[Path, str], chromium: str) -> None:
    """At a 1400 px wide window nothing is cut off or scrolls sideways: the index's claims table with its
    "Recorded" column and every seed page (figures, the data tables) stay within the window."""
    from browser_helpers import layout_at

    gallery, _ = real_gallery
    index = gallery / "index.html"
    pages = [index, *sorted(gallery.glob("*/index.html"))]
    assert len(pages) == 1 + len(SEED_STUDIES.names())
    for page in pages:
        layout = layout_at(chromium, page, width=1400)
        where = page.relative_to(gallery.parent)
        assert layout["innerWidth"] == 1400
        assert layout["scrollWidth"] <= layout["innerWidth"], f"{where} scrolls sideways: {layout['overflowing'][:5]}"
        assert not layout["overflowing"], f"{where}: elements beyond the window: {layout['overflowing'][:5]}"
        assert not layout["scrolled"], f"{where}: a table needs scrolling sideways: {layout['scrolled'][:5]}"
        if page == index:
            assert 0 < layout["headers"]["Recorded"] <= layout["innerWidth"], layout["headers"]
