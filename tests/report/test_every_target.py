"""Every study can be published: `tunelab report` on a store of every target.

* a screen recorded on the SYNTHETIC simulator (the tour's kind of store: its design names the ``simulator``
  target, which registers itself from :mod:`tunelab.simulator`; a notebook's fresh kernel had not imported it, so
  the design loader failed and hid why) is reported, with the SYNTHETIC banner on every page, the index included;
* a store of ``tunelab validate`` only shows its verdict on the front page: the one ``tunelab.validate`` returned;
* stores whose designs name the lab, local and ssh targets load with their designs, and a lab report carries no
  SYNTHETIC banner;
* a stored design that no longer parses is one ``tunelab: error:`` line naming the real error, not "holds no
  design file".
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from cli_helpers import tunelab_here  # noqa: F401 - the fixture

from report_helpers import DEFAULT_EXAMPLE, copy_store

# the session's report builds (conftest's default_report, refine_report) happen once: on one worker
pytestmark = pytest.mark.xdist_group("default-report")

#: a small OAT screen on the simulator's ``simple`` surface (somaxconn has a peak at 1024)
SIMULATOR_DESIGN = """\
name: simscreen
target: {type: simulator, options: {surface: simple, cv: 0.03}}
load: {generator: dnsperf, profile: overload}
warmup_s: 0
measure_s: 1
metrics:
  - {name: qps, direction: maximize, sesoi_pct: 2}
knobs:
  - {name: net.core.somaxconn, levels: [128, 1024], baseline: 128}
  - {name: net.ipv4.tcp_congestion_control, levels: [cubic, bbr], baseline: cubic}
design: {type: oat, replicates: 3, seed: 3}
"""
BANNER = "tunelab-synthetic"


@pytest.fixture(scope="module")
def simulator_stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """``screen``: the store of :data:`SIMULATOR_DESIGN`; ``validate``: a store of 3 ABBA blocks of
    ``tunelab.validate`` on the simulator, and ``verdict``: the verdict it returned."""
    import tunelab

    folder = tmp_path_factory.mktemp("sim")
    design = folder / "simscreen.yaml"
    design.write_text(SIMULATOR_DESIGN)
    tunelab.run(design, store=folder / "simscreen.sqlite")
    validated = tunelab.validate("simulator", {"net.core.somaxconn": 1024}, surface="simple", metrics=["qps:max:5"],
                                 blocks=3, warmup_s=0.1, measure_s=0.5, store=folder / "validate.sqlite",
                                 write_sysctl=False)
    return {"screen": folder / "simscreen.sqlite", "validate": folder / "validate.sqlite",
            "verdict": validated.verdict}


def pages(out: Path) -> dict[str, BeautifulSoup]:
    return {page.name: BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
            for page in sorted(out.glob("*.html"))}


def test_a_simulator_screen_is_reported_synthetic_on_every_page(simulator_stores, tmp_path: Path,
                                                                 tunelab_here) -> None:
    proc = tunelab_here(["report", str(simulator_stores["screen"]), "--out", "out", "--notebooks", "01",
                         "--n-boot", "100"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = pages(tmp_path / "out")
    assert set(shown) == {"index.html", "01_screen.html"}
    for name, soup in shown.items():
        banner = soup.find(class_=BANNER)
        assert banner is not None and "SYNTHETIC" in banner.get_text(), name
    assert shown["index.html"].find("section", id="verdicts") is not None


def test_a_validate_store_shows_its_verdict_on_the_front_page(simulator_stores, tmp_path: Path, tunelab_here) -> None:
    proc = tunelab_here(["report", str(simulator_stores["validate"]), "--out", "out"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    index = pages(tmp_path / "out")["index.html"]
    section = index.find("section", id="validation")
    assert section is not None, index.get_text()[:2000]
    rows = section.find("tbody").find_all("tr")
    assert len(rows) == 1
    cells = [td.get_text(strip=True) for td in rows[0].find_all("td")]
    assert cells[0] == "validate" and cells[4] == "3"                 # phase, blocks
    assert cells[-1] == simulator_stores["verdict"]                 # what tunelab.validate said
    assert "net.core.somaxconn = 1024" in cells[3]
    assert index.find(class_=BANNER) is not None


def test_a_duet_validate_store_is_reported_in_pairs(tmp_path: Path, tunelab_here) -> None:
    """The lab's duet validation (data/examples/seeds: both sides measured at once, judged per pair) is reported:
    its verdict on the front page and 04_validate's page counting duet pairs, not ABBA blocks."""
    store = copy_store(DEFAULT_EXAMPLE.parent / "seeds" / "001-diiner-overload-validate-duet.sqlite", tmp_path)
    proc = tunelab_here(["report", str(store), "--out", "out"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = pages(tmp_path / "out")
    rows = shown["index.html"].find("section", id="validation").find("tbody").find_all("tr")
    verdicts = {tr.find_all("td")[-1].get_text(strip=True) for tr in rows}
    assert rows and verdicts <= {"improve", "regress", "equivalent", "inconclusive", "untestable"}, verdicts
    text = shown["04_validate.html"].get_text(" ")
    assert "duet pairs" in text and "measurements in" in text, text[:3000]


def _with_target(store: Path, target: str) -> Path:
    """``store`` with its stored design's ``target:`` line replaced by ``target`` (as a store of that target)."""
    db = sqlite3.connect(store)
    try:
        (text,) = db.execute("SELECT design_text FROM study").fetchone()
        lines = [f"target: {target}" if line.startswith("target:") else line for line in text.splitlines()]
        assert lines != text.splitlines(), "the design has no top-level target line"
        db.execute("UPDATE study SET design_text = ?", ("\n".join(lines) + "\n",))
        db.commit()
    finally:
        db.close()
    return store


@pytest.mark.parametrize("target, kind", [
    (None, "lab"),
    ("{type: local}", "local"),
    ("{type: ssh, options: {server: 'root@192.0.2.10:22', known_hosts: ~/.ssh/known_hosts}}", "ssh"),
])
def test_stores_of_the_real_targets_load_with_their_designs(tmp_path: Path, target: str | None, kind: str) -> None:
    from tunelab.report.loading import is_synthetic, load_study, study_inputs

    store = copy_store(DEFAULT_EXAMPLE, tmp_path)
    if target is not None:
        _with_target(store, target)
    study = load_study(store)
    assert study.design is not None and study.design.target.type == kind
    assert not is_synthetic(study)
    inputs = study_inputs(study)
    assert inputs.knobs == study.design.knob_ids and inputs.design is not None and len(inputs.runs) > 0


def test_a_lab_report_has_no_synthetic_banner(default_report: Path) -> None:
    for name, soup in pages(default_report.parent).items():
        assert soup.find(class_=BANNER) is None, name


def test_a_design_that_does_not_parse_is_one_error_line_naming_it(tmp_path: Path, tunelab_here) -> None:
    store = _with_target(copy_store(DEFAULT_EXAMPLE, tmp_path), "{type: nosuch}")
    proc = tunelab_here(["report", str(store), "--out", "out"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("tunelab: error: ") and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "nosuch" in proc.stderr and "holds no design" not in proc.stderr
    assert not (tmp_path / "out").exists()
