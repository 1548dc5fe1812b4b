"""Repository-wide pytest setup: docstring examples (``--doctest-modules`` over ``tunelab/``) run
from the repository root, where their relative paths (``designs/default.yaml``) point."""
from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem

ROOT = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def _doctests_run_from_the_repository_root(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if isinstance(request.node, DoctestItem):
        monkeypatch.chdir(ROOT)
