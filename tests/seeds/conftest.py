"""Fixtures of the seed-study tests: the recorded stores (copied, consistently) and headless Chromium.

Stores are copied with SQLite's backup API, so a store still being written (WAL) is read as one consistent
snapshot and the checkout is never touched (opening a WAL store, even read-only, creates files next to it).
``TUNELAB_SEED_STORES=data/seeds-dev`` points the real-gallery test at development stores.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the shipped recordings of the five seed studies
RECORDED = ROOT / "data" / "examples" / "seeds"


def copy_store(source: Path, directory: Path) -> Path:
    """A consistent copy of the store ``source`` in ``directory`` (SQLite backup; the source is opened read-only)."""
    target = directory / source.name
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return target


def copy_stores(source: Path, directory: Path) -> Path:
    """Every ``*.sqlite`` store of ``source`` copied into ``directory`` (created); returns ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for store in sorted(source.glob("*.sqlite")):
        copy_store(store, directory)
    return directory




@pytest.fixture(scope="session")
def recorded_stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A consistent copy of the recorded seed stores (``TUNELAB_SEED_STORES`` or data/examples/seeds)."""
    source = Path(os.environ.get("TUNELAB_SEED_STORES") or RECORDED)
    if not source.is_absolute():
        source = ROOT / source
    if not any(source.glob("*.sqlite")):
        pytest.fail(f"{source} holds no recorded seed stores (they ship with the source): record them with "
                    f"`tunelab gallery --record --stores {source}` on a quiet machine")
    return copy_stores(source, tmp_path_factory.mktemp("seed-stores"))


@pytest.fixture(scope="session")
def real_gallery(recorded_stores: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``tunelab gallery --quick`` from the recorded stores, built once for the tests that read it (test_gallery.py,
    test_gallery_committed.py): the gallery's directory and what the command printed."""
    import contextlib
    import io

    from tunelab.cli import main

    out = tmp_path_factory.mktemp("real-gallery") / "gallery"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["gallery", "--quick", "--stores", str(recorded_stores), "--out", str(out)]) == 0
    return out, printed.getvalue()
