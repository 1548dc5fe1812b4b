"""Reading a result's HTML summary back in tests (:mod:`tunelab.report.reprs`), with :mod:`html.parser`."""
from __future__ import annotations

from html.parser import HTMLParser
from typing import Any


class Page(HTMLParser):
    """The parts of a summary the tests read: tables (header texts; rows with class, cells with style),
    the verdict next to the title, paragraphs and ``<code>`` texts."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: list[dict[str, Any]] = []
        self.verdict: tuple[str | None, str | None, str] | None = None
        self.codes: list[str] = []
        self.text: list[str] = []
        self._cell: dict[str, Any] | None = None
        self._in: list[str] = []
        self._attrs: dict[str, str | None] = {}
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in.append(tag)
        self._attrs = dict(attrs)
        if tag == "table":
            self.tables.append({"class": self._attrs.get("class"), "headers": [], "rows": []})
        elif tag == "tr" and self._in[-2:-1] == ["tbody"]:
            self.tables[-1]["rows"].append({"class": self._attrs.get("class"), "cells": []})
        elif tag in ("td", "th"):
            self._cell = {"text": "", "style": self._attrs.get("style")}
        elif tag == "strong" and self._attrs.get("class"):
            self.verdict = (self._attrs.get("class"), self._attrs.get("style"), "")

    def handle_endtag(self, tag: str) -> None:
        self._in.pop()
        if tag == "th" and self._cell is not None:
            self.tables[-1]["headers"].append(self._cell["text"])
            self._cell = None
        elif tag == "td" and self._cell is not None:
            self.tables[-1]["rows"][-1]["cells"].append(self._cell)
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell["text"] += data
        elif self._in and self._in[-1] == "code":
            self.codes.append(data)
        elif self._in and self._in[-1] == "strong" and self.verdict is not None and not self.verdict[2]:
            self.verdict = (self.verdict[0], self.verdict[1], data)

    def column(self, table: int, name: str) -> list[str]:
        index = self.tables[table]["headers"].index(name)
        return [row["cells"][index]["text"] for row in self.tables[table]["rows"]]
