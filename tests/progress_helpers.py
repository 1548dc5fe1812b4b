"""Reading the piped progress lines of :class:`tunelab.progress.StudyProgress` and what the store holds at that
moment, shared by tests/runner/test_study_progress.py and tests/optimize/test_verb_progress.py."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

#: ``study: round 2, 30/54 trials, 28 ok, 1 flagged, 1 failed, 0 busy repeats, elapsed 01:10, ETA 00:56``
LINE = re.compile(r"^(?P<desc>[^:]+): (?P<label>[^,]+), (?P<done>\d+)/(?P<total>\d+) trials, "
                  r"(?P<counts>.*), elapsed \d\d:\d\d, ETA (\d\d:\d\d|unknown)$")


def store_counts(path: Path) -> dict[str, int]:
    """Status -> trials the store holds now (a reader of its own, as another process would read it)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return dict(db.execute("SELECT status, count(*) FROM trials GROUP BY status").fetchall())


def parsed(line: str) -> dict:
    """A progress line as ``label``, ``done``, ``total`` and ``counts`` (name -> number: ok, flagged, ...)."""
    match = LINE.match(line)
    assert match, line
    counts = dict((name, int(value)) for value, name in
                  (part.split(" ", 1) for part in match["counts"].split(", ")))
    return {"label": match["label"], "done": int(match["done"]), "total": int(match["total"]), "counts": counts}
