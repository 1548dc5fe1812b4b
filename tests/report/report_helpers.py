"""Helpers of the report tests: the real lab recordings in ``data/examples/``.

Example stores are copied to a temporary directory first: opening an SQLite store in WAL mode, even
read-only, creates ``-shm``/``-wal`` files next to it, and the checkout must stay clean.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "data" / "examples"
DEFAULT_EXAMPLE = EXAMPLES / "default.sqlite"
MISSING = ("{path} is absent: tests/report run on real lab recordings the lead copies into data/examples/ "
           "(see tests/report/test_examples.py)")


def example_stores() -> list[Path]:
    """Every example store shipped in data/examples/, sorted by name."""
    return sorted(EXAMPLES.glob("*.sqlite")) if EXAMPLES.is_dir() else []


def phases_of(path: Path) -> set[str]:
    """Phases with at least one ok trial in the store at ``path`` (read without touching its directory)."""
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return {row[0] for row in db.execute("SELECT DISTINCT phase FROM trials WHERE status = 'ok'")}
    finally:
        db.close()


def stores_with(*phases: str) -> list[Path]:
    """Example stores holding ok trials of any of ``phases``."""
    return [p for p in example_stores() if phases_of(p) & set(phases)]


def copy_store(path: Path, directory: Path) -> Path:
    """A consistent copy of the store at ``path`` in ``directory`` (SQLite backup API, rollback journal)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / path.name
    source = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
        copy.execute("PRAGMA journal_mode=DELETE")
    finally:
        copy.close()
        source.close()
    return target


def nb_outputs(path: Path) -> list[dict]:
    """Every output of every code cell of an executed notebook."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    return [output for cell in nb.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]


def store_params(stores: list[Path], what: str) -> list:
    """``pytest.param`` per store (id: its name), or one skipped param saying which example is missing."""
    import pytest

    if not stores:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no example store in {EXAMPLES} {what}"))]
    return [pytest.param(p, id=p.stem) for p in stores]
