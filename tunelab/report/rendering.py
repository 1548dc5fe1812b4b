"""HTML of the reports and the gallery, rendered from Jinja2 templates, autoescaped.

The templates are package data in ``tunelab/report/templates/`` (loaded with
:class:`jinja2.PackageLoader`): ``page.html.j2`` (the frame of every page), ``report_index.html.j2``,
``gallery_index.html.j2`` and ``gallery_study.html.j2``, ``table.html.j2``, ``figure.html.j2``,
``image.html.j2``, the nbconvert template of the notebook pages ``notebook_page.html.j2``, and the CSS.
Every value a template shows is escaped unless it is HTML made here (:class:`markupsafe.Markup`):
store contents may come from anyone, so ``<script>`` in a study shows as text.

Markdown (the summary, the methods section) is rendered by :func:`markdown_to_html` (mistune, raw HTML
escaped, ``javascript:`` links neutralised).
"""
from __future__ import annotations

import base64
import functools
from importlib import resources
from typing import Any, Iterable, Mapping, Sequence

import jinja2
import mistune
import pandas as pd
from IPython.display import HTML
from markupsafe import Markup

from tunelab.report.presentation import Header, Row, TableView, present
# the verdict colours and classes live in the presentation layer; re-exported for the callers that import them here
from tunelab.report.presentation import VERDICT_CSS, VERDICT_STYLE, verdict_class, verdict_styles  # noqa: F401
from tunelab.report.tables import NOTE_COLUMN, general_notes, row_notes, verdict_frame


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The Jinja2 environment of tunelab's templates (package data), autoescaping every value."""
    return jinja2.Environment(loader=jinja2.PackageLoader("tunelab.report", "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render(template: str, **context: Any) -> Markup:
    """``template`` rendered with ``context`` (values escaped unless :class:`~markupsafe.Markup`).

    >>> str(render("figure.html.j2", image=Markup("<img alt='x'>"), caption="<b>a</b> & b"))
    "<figure><img alt='x'><figcaption>&lt;b&gt;a&lt;/b&gt; &amp; b</figcaption></figure>"
    """
    return Markup(environment().get_template(template).render(**context))


def template_source(name: str) -> str:
    """The text of the template or CSS file ``name`` (e.g. for nbconvert's own Jinja2 environment)."""
    return (resources.files("tunelab.report") / "templates" / name).read_text(encoding="utf-8")


#: CSS of the tables (``tables.css``); the notebook pages carry it in their head (outputs hold no
#: ``<style>``, so the HTML sanitiser of the notebook pages leaves them intact)
TABLE_CSS = template_source("tables.css")


def table_html(columns: Iterable[Any], rows: Iterable[Sequence[str]], table_class: str = "tunelab-table",
               row_classes: Iterable[str | None] | None = None,
               cell_styles: Iterable[Sequence[str | None] | None] | None = None) -> Markup:
    """A table of text cells already formatted (``table.html.j2``), each row with an optional CSS class and
    optional inline styles per cell (a notebook output carries its colours itself: it has no stylesheet).
    A DataFrame goes through :func:`html_table` instead (labels, formats, legend, notes)."""
    rows = list(rows)
    classes = list(row_classes) if row_classes is not None else [None] * len(rows)
    styles = list(cell_styles) if cell_styles is not None else [None] * len(rows)
    view = TableView([Header(str(c), str(c)) for c in columns],
                     [Row(list(cells), css, style) for cells, css, style in zip(rows, classes, styles)], table_class)
    return render_view(view)


def render_view(view: TableView) -> Markup:
    """A :class:`tunelab.report.presentation.TableView` as HTML (``table.html.j2``)."""
    return render("table.html.j2", view=view)


def html_table(frame: pd.DataFrame, digits: int = 4, verdicts: str | None = None, notes: Sequence[str] = ()) -> str:
    """A DataFrame as a reader sees it (:func:`tunelab.report.presentation.present`): reader labels, one format
    per kind of number (``digits`` significant digits, p-values with 3, an underflowed one as ``< 1e-300``,
    counts whole, NaN as ``-``), empty columns left out; with ``verdicts`` (a column) rows coloured by it and a
    legend; a row's notes (column ``note``) under it, ``notes`` under the table.

    >>> print(html_table(pd.DataFrame({"knob": ["<b>"], "p": [0.0004]})))
    <div class="tunelab-table-wrap"><table class="tunelab-table"><thead><tr><th>knob</th><th>p</th></tr></thead><tbody><tr><td>&lt;b&gt;</td><td>0.0004</td></tr></tbody></table></div>
    """
    return str(render_view(present(frame, verdicts, digits, notes)))


def verdicts_html(verdicts: pd.DataFrame, metrics: Sequence[Mapping[str, Any]] | None = None,
                  styled: bool = False, notes: Sequence[str] = ()) -> str:
    """The verdict table as an HTML ``<table class="tunelab-verdicts">``, one row per knob × metric
    (see :func:`tunelab.report.tables.verdict_frame`), each row classed by its verdict, with a legend of
    the verdicts; under each row its post-hoc note and the ``notes`` (the screen's ``settings['notes']``)
    about it, the other notes under the table. ``styled`` is kept for callers; a notebook output's
    verdict cells are always coloured inline (:data:`VERDICT_STYLE`), the report's pages by tables.css."""
    frame = verdict_frame(verdicts, metrics).assign(**{NOTE_COLUMN: row_notes(verdicts, list(notes))})
    return html_table(frame, verdicts="verdict", notes=general_notes(verdicts, list(notes)))


def image_html(png: bytes, alt: str) -> Markup:
    """An ``<img>`` with ``png`` embedded (base64; the page stays self-contained) and its alt text."""
    return render("image.html.j2", alt=alt, png_base64=base64.b64encode(png).decode("ascii"))


def figure_html(png: bytes, alt: str, caption: str) -> Markup:
    """A ``<figure>`` with the embedded PNG and its caption."""
    return render("figure.html.j2", image=image_html(png, alt), caption=caption)


def markdown_to_html(text: str) -> str:
    """Markdown -> HTML with mistune (the renderer nbconvert uses), raw HTML escaped: text from a store
    (a failure reason, a study description) can never add markup or script to a report.

    >>> markdown_to_html("**x** <script>alert(1)</script> [a](javascript:alert(1))")
    '<p><strong>x</strong> &lt;script&gt;alert(1)&lt;/script&gt; <a href="#harmful-link">a</a></p>\\n'
    """
    return str(_markdown()(text))


@functools.lru_cache(maxsize=1)
def _markdown() -> Any:
    return mistune.create_markdown(escape=True, plugins=["strikethrough", "table"])


def markdown_html(text: str) -> Any:
    """Markdown built from store text, for ``display()`` in a notebook: an ``IPython.display.HTML``
    of :func:`markdown_to_html` (raw HTML escaped). Use it instead of ``IPython.display.Markdown``,
    whose renderer lets raw HTML through."""
    return HTML(markdown_to_html(text))


def to_img_tag(fig: Any, alt: str, dpi: int = 100) -> str:
    """An ``<img>`` element with a matplotlib figure embedded as a base64 PNG (``image.html.j2``)."""
    from tunelab.report.figures import to_png   # deferred: matplotlib only when a figure is drawn

    return str(image_html(to_png(fig, dpi), alt))


def mechanisms_section_html(intro_markdown: str, figure: Markup | None, tables: Mapping[str, pd.DataFrame]) -> Markup:
    """The report's mechanism section (``mechanisms.html.j2``): the words, the heatmap (a ``<figure>``
    or None) and one short table per knob (:func:`tunelab.report.tables.mechanism_frames`)."""
    return render("mechanisms.html.j2", intro_html=Markup(markdown_to_html(intro_markdown)), figure=figure,
                  tables=[{"knob": knob, "html": Markup(html_table(frame))} for knob, frame in tables.items()])
