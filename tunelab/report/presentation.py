"""One presentation layer for every table a notebook, a report or a rich result (``_repr_html_``) shows.

In the manner of pandas' Styler, a DataFrame is turned into what a reader sees, and only then rendered
(by :func:`tunelab.report.rendering.html_table`, through ``table.html.j2``):

* headers: each column's reader label with its unit (:mod:`tunelab.report.labels`), the column's own name
  kept as the header's tooltip, so a reader finds it in the DataFrame;
* cells: one format per kind of number (:func:`tunelab.report.tables.cell_texts`, through
  :mod:`tunelab.formatting`);
* columns that hold nothing (every cell empty) are left out; the rest wrap (``tables.css``) so a table fits
  a 1400 px page;
* rows classed and coloured by their verdict, and a legend of the verdicts the table shows;
* notes under the row they explain (the column :data:`tunelab.report.tables.NOTE_COLUMN`), not behind a key.

pandas' Styler itself is not used for the HTML: it writes a ``<style>`` block with per-render ids, which
the notebook pages' sanitiser strips and which would make every page differ between builds.

>>> view = present(pd.DataFrame({"metric": ["qps"], "verdict": ["improve"], "tost_p": [8.06e-06],
...                              "unused": [None], "note": [["about 6 blocks would decide"]]}), verdicts="verdict")
>>> [h.text for h in view.headers], view.rows[0].cells, view.rows[0].notes, view.rows[0].css
(['metric', 'verdict', 'TOST p'], ['qps', 'improve', '8.06e-06'], ['about 6 blocks would decide'], 'verdict-improve')
>>> [entry.verdict for entry in view.legend]
['improve']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

from tunelab.report.labels import column_label
from tunelab.report.tables import NOTE_COLUMN, cell_texts

#: the verdict -> the CSS class of its row in the verdict table
VERDICT_CSS = {"matters": "matters", "no effect (equivalent)": "equivalent", "untestable": "untestable",
               "not comparable": "untestable"}
#: the row class -> the verdict cell's inline style in a notebook output (the colours of tables.css)
VERDICT_STYLE = {"verdict-matters": "color:#8b1a00;font-weight:bold", "verdict-equivalent": "color:#1a6b1a",
                 "verdict-inconclusive": "color:#7a6000", "verdict-untestable": "color:#555;font-style:italic",
                 "verdict-improve": "color:#1a6b1a;font-weight:bold",
                 "verdict-regress": "color:#8b1a00;font-weight:bold"}
#: what each verdict means, for the legend under a table (keyed by the verdict's text)
VERDICT_MEANING = {
    "matters": "adjusted p below alpha and a change of at least the SESOI",
    "no effect (equivalent)": "every level within ±SESOI of the baseline (TOST)",
    "inconclusive": "neither shown: more replicates or blocks would decide",
    "untestable": "too few usable runs to test",
    "not comparable": "a guard metric degraded at that level, so this metric is not compared",
    "improve": "better than the baseline by more than the SESOI",
    "regress": "worse than the baseline by more than the SESOI",
    "equivalent": "within ±SESOI of the baseline (TOST)",
}


def verdict_class(verdict: Any) -> str:
    """The CSS class of a verdict's row: ``'matters (guard ...)'`` -> ``'verdict-matters'``.

    >>> verdict_class("matters"), verdict_class("no effect (equivalent)"), verdict_class("improve")
    ('verdict-matters', 'verdict-equivalent', 'verdict-improve')
    """
    text = verdict_text(verdict)      # an ABBA verdict (improve, regress, ...) is its own class
    return f"verdict-{VERDICT_CSS.get(text) or (text if f'verdict-{text}' in VERDICT_STYLE else 'inconclusive')}"


def verdict_text(verdict: Any) -> str:
    """A verdict without what qualifies it: ``'not comparable (guard: qps -99 %)'`` -> ``'not comparable'``.

    >>> verdict_text("not comparable (guard: qps -99 %)"), verdict_text("matters")
    ('not comparable', 'matters')
    """
    return str(verdict).split(" (guard")[0]


def verdict_styles(classes: Sequence[str], columns: Sequence[Any], column: str) -> list[list[str | None]]:
    """Per row, the inline style of each cell: the verdict's colour (:data:`VERDICT_STYLE`) in ``column``.

    >>> verdict_styles(["verdict-matters"], ["knob", "verdict"], "verdict")
    [[None, 'color:#8b1a00;font-weight:bold']]
    """
    return [[VERDICT_STYLE.get(css) if name == column else None for name in columns] for css in classes]


@dataclass(frozen=True)
class Header:
    """A column's header: the reader's ``text`` and the DataFrame's column ``name`` (its tooltip)."""

    text: str
    name: str


@dataclass(frozen=True)
class Row:
    """A shown row: its cell texts, its CSS class and inline cell styles (verdict rows), its notes."""

    cells: list[str]
    css: str | None = None
    styles: list[str | None] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LegendEntry:
    """One verdict of a table's legend: its text, CSS class, inline colour and meaning."""

    verdict: str
    css: str
    style: str
    meaning: str


@dataclass(frozen=True)
class TableView:
    """A table as a reader sees it, ready for ``table.html.j2`` (the role of Styler's translated context)."""

    headers: list[Header]
    rows: list[Row]
    table_class: str = "tunelab-table"
    legend: list[LegendEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def present(frame: pd.DataFrame, verdicts: str | None = None, digits: int = 4,
            notes: Sequence[str] = ()) -> TableView:
    """``frame`` as a reader sees it (:class:`TableView`): labelled headers, formatted cells, empty columns
    left out, rows coloured by the ``verdicts`` column (with a legend), each row's notes (its
    :data:`~tunelab.report.tables.NOTE_COLUMN`) under it and ``notes`` about the whole table under the table."""
    row_notes = [_note_list(v) for v in frame[NOTE_COLUMN]] if NOTE_COLUMN in frame else [[] for _ in range(len(frame))]
    shown = shown_columns(frame.drop(columns=[NOTE_COLUMN], errors="ignore"), keep=verdicts)
    classes = [verdict_class(v) for v in shown[verdicts]] if verdicts else [None] * len(shown)
    styles = verdict_styles(classes, list(shown.columns), verdicts) if verdicts else [None] * len(shown)
    rows = [Row(cells, css, style, own) for cells, css, style, own in
            zip(cell_texts(shown, digits), classes, styles, row_notes)]
    return TableView([Header(column_label(c), str(c)) for c in shown.columns], rows,
                     "tunelab-verdicts" if verdicts else "tunelab-table",
                     legend_of(shown[verdicts]) if verdicts else [], list(notes))


def shown_columns(frame: pd.DataFrame, keep: str | None = None) -> pd.DataFrame:
    """``frame`` without its low-value columns: those with no value in any row (``keep`` always stays).

    >>> list(shown_columns(pd.DataFrame({"a": [1, 2], "b": [None, float("nan")], "c": ["-", "x"]})).columns)
    ['a', 'c']
    """
    if frame.empty:
        return frame
    empty = [c for c in frame.columns if c != keep and frame[c].map(_missing).all()]
    return frame.drop(columns=empty)


def _missing(value: Any) -> bool:
    if isinstance(value, (list, tuple, dict)):
        return len(value) == 0
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _note_list(value: Any) -> list[str]:
    """A note cell as a list of notes: a string, a list of them, or nothing."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if str(v)]
    return [] if _missing(value) or not str(value) else [str(value)]


def legend_of(verdicts: pd.Series) -> list[LegendEntry]:
    """The legend of the verdicts in ``verdicts`` (each once, in the order they first appear).

    >>> [(e.verdict, e.css) for e in legend_of(pd.Series(["matters", "inconclusive", "matters"]))]
    [('matters', 'verdict-matters'), ('inconclusive', 'verdict-inconclusive')]
    """
    entries = []
    for verdict in dict.fromkeys(map(verdict_text, verdicts)):
        css = verdict_class(verdict)
        entries.append(LegendEntry(verdict, css, VERDICT_STYLE.get(css, ""), VERDICT_MEANING.get(verdict, "")))
    return entries


__all__ = ["Header", "LegendEntry", "Row", "TableView", "VERDICT_CSS", "VERDICT_MEANING", "VERDICT_STYLE",
           "legend_of", "present", "shown_columns", "verdict_class", "verdict_styles", "verdict_text"]
