"""Fixtures of the report tests: copies of the real lab recordings in ``data/examples/`` and a report built once.

Example stores are copied to a temporary directory first: opening an SQLite store in WAL mode, even
read-only, creates ``-shm``/``-wal`` files next to it, and the checkout must stay clean.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_helpers import DEFAULT_EXAMPLE, MISSING, copy_store  # noqa: E402


@pytest.fixture(scope="session")
def default_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of data/examples/default.sqlite (the default OAT study recorded in the lab)."""
    if not DEFAULT_EXAMPLE.is_file():
        pytest.skip(MISSING.format(path=DEFAULT_EXAMPLE))
    return copy_store(DEFAULT_EXAMPLE, tmp_path_factory.mktemp("stores"))


@pytest.fixture(scope="session")
def default_report(default_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The full report of the default example study (index.html path), built once per session with
    ``tunelab report`` (which calls :func:`tunelab.report.build_report`)."""
    import os

    from tunelab.cli import main

    base = tmp_path_factory.mktemp("report")
    before = os.getcwd()
    os.chdir(base)   # a relative --out, as users type it: notebooks run in parallel threads and must
    try:             # not move the process's working directory under each other (papermill's cwd did)
        assert main(["report", str(default_store), "--out", "default"]) == 0
        assert os.getcwd() == str(base), "building the report changed the working directory"
    finally:
        os.chdir(before)
    return base / "default" / "index.html"


@pytest.fixture(scope="session")
def refine_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report (index.html path) of an example store holding refine and confirm/validate trials,
    so the browser sees 03_refine and 04_validate too."""
    from report_helpers import stores_with

    from tunelab.cli import main

    stores = [p for p in stores_with("refine") if p in stores_with("confirm", "validate")]
    if not stores:
        pytest.fail("no example store holds refine and confirm/validate trials (see test_examples.py)")
    store = copy_store(stores[0], tmp_path_factory.mktemp("stores"))
    out = tmp_path_factory.mktemp("report") / store.stem
    assert main(["report", str(store), "--out", str(out), "--notebooks", "03", "--notebooks", "04"]) == 0
    return out / "index.html"
