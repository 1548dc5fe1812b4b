"""Headless Chromium (Debian ``chromium``) for the tests that check what a reader sees: the reports
(tests/report/test_browser.py) and the seed gallery (tests/seeds/test_gallery.py)."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from typing import Any
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def find_chromium() -> str | None:
    """The Chromium binary, or None when it is not installed."""
    return shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def chromium_run(binary: str, url: str, *extra: str) -> str:
    """Run headless Chromium on ``url`` with ``extra`` flags (e.g. ``--dump-dom``) in a throwaway profile;
    returns its stdout (the DOM with ``--dump-dom``)."""
    with tempfile.TemporaryDirectory(prefix="tunelab-chromium-") as profile:
        done = subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *extra, url], capture_output=True,
                              text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


#: measures every figure (``<img>``) once the page has loaded (:func:`_probe`): its natural and its shown size, px
_FIGURE_PROBE = """
  var out = [];
  document.querySelectorAll("img").forEach(function (img) {
    var box = img.getBoundingClientRect();
    out.push({alt: img.alt || "", natural: [img.naturalWidth, img.naturalHeight], shown: [box.width, box.height]});
  });
"""


def figures_at(binary: str, page: Path, width: int = 1400, height: int = 900) -> list[dict]:
    """Every figure of ``page`` in a ``width`` px wide window, as Chromium lays it out: ``alt``, ``natural``
    (the PNG's own width and height, px) and ``shown`` (its box on the page, CSS px). A figure shown at its
    natural size keeps the point sizes it was drawn with (a 9 pt label at 100 dpi is 12.5 px); one squeezed
    into a narrower box shrinks its text by the same factor."""
    return _probe(binary, page, "figure", _FIGURE_PROBE, width, height)


#: measures the page once loaded and writes the result into the DOM (read back from ``--dump-dom``)
_LAYOUT_PROBE = """
  var width = window.innerWidth, out = {scrollWidth: document.documentElement.scrollWidth, innerWidth: width,
                                        overflowing: [], headers: {}};
  function inScrollBox(el) {
    for (var up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      if (["auto", "scroll"].indexOf(getComputedStyle(up).overflowX) >= 0) return true;
    }
    return false;
  }
  out.scrolled = [];
  document.querySelectorAll("body *").forEach(function (el) {
    var box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 0.5) {
      var name = el.tagName.toLowerCase() + (el.className ? "." + el.className : "") + " right=" + Math.round(box.right);
      (inScrollBox(el) ? out.scrolled : out.overflowing).push(name);
    }
  });
  document.querySelectorAll("th").forEach(function (th) {
    out.headers[th.textContent.trim()] = th.getBoundingClientRect().right;
  });
"""


def layout_at(binary: str, page: Path, width: int = 1400, height: int = 900) -> dict:
    """How ``page`` lays out in a ``width`` px wide window, as Chromium measures it: ``scrollWidth`` and
    ``innerWidth`` of the document, ``overflowing`` (every element whose right edge is beyond the window),
    ``scrolled`` (those of them inside a box that scrolls sideways on its own: a wide table) and ``headers`` (each table header's text -> its right edge, px).

    The page is measured through a copy next to it (same relative links) with a script that reports the
    layout once the page has loaded; the page itself is not changed."""
    return _probe(binary, page, "layout", _LAYOUT_PROBE, width, height)


#: each table's own width against the width of the box it sits in (its wrapper, else its parent)
_TABLE_PROBE = """
  var out = {innerWidth: window.innerWidth, tables: []};
  document.querySelectorAll("table").forEach(function (table) {
    var box = table.closest("div.tunelab-table-wrap") || table.parentElement;
    out.tables.push({cls: table.className, scrollWidth: table.scrollWidth, boxWidth: box.clientWidth,
                     boxScrollWidth: box.scrollWidth, right: table.getBoundingClientRect().right,
                     headers: Array.prototype.map.call(table.querySelectorAll("th"),
                                                       function (th) { return th.textContent.trim(); })});
  });
"""


def tables_at(binary: str, page: Path, width: int = 1400, height: int = 900) -> dict:
    """Every table of ``page`` in a ``width`` px wide window, as Chromium measures it: ``tables``, each with
    its class, ``scrollWidth`` (its full width), ``boxWidth`` and ``boxScrollWidth`` (the box it sits in: its
    ``tunelab-table-wrap`` or parent; a table that fits has ``scrollWidth <= boxWidth`` and its box does not
    scroll), its right edge and its headers; and the window's ``innerWidth``."""
    return _probe(binary, page, "table", _TABLE_PROBE, width, height)


def _probe(binary: str, page: Path, name: str, body: str, width: int, height: int) -> Any:
    """Run the JavaScript ``body`` (which fills a variable ``out``) once ``page`` has loaded, on a copy of it beside
    it (same relative links) in a ``width`` x ``height`` window; ``out`` as JSON, read back from the DOM (a
    ``<pre id="tunelab-NAME-probe">`` the probe appends). The page itself is unchanged."""
    script = ('<script>\nwindow.addEventListener("load", function () {\n' + body
              + f'  var pre = document.createElement("pre");\n  pre.id = "tunelab-{name}-probe";\n'
              + '  pre.textContent = JSON.stringify(out);\n  document.body.appendChild(pre);\n});\n</script>')
    page = Path(page).resolve()
    probe = page.with_name(f".{name}-probe-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    try:
        dom = chromium_run(binary, probe.as_uri(), "--dump-dom", f"--window-size={width},{height}",
                           "--virtual-time-budget=5000")
    finally:
        probe.unlink()
    found = re.search(rf'<pre id="tunelab-{name}-probe">(.*?)</pre>', dom, re.S)
    assert found, f"the {name} probe did not run (no load event?)"
    return json.loads(html.unescape(found.group(1)))


def clipped_tables(layout: dict) -> list[dict]:
    """The tables of :func:`tables_at`'s ``layout`` wider than their box, or whose box scrolls sideways."""
    return [t for t in layout["tables"]
            if t["scrollWidth"] > t["boxWidth"] + 1 or t["boxScrollWidth"] > t["boxWidth"] + 1
            or t["right"] > layout["innerWidth"] + 0.5]
