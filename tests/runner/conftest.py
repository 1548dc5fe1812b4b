"""Fixtures for the store/runner/safety tests: a seeded file-backed target and a fresh store."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runner_fakes import INITIAL, FileTarget  # noqa: E402

from tunelab.store import Store  # noqa: E402


@pytest.fixture
def target(tmp_path: Path) -> FileTarget:
    t = FileTarget(tmp_path / "machine")
    t.seed(INITIAL)
    t.seed(INITIAL, host="client")
    return t


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "data" / "fake-study.sqlite", study="fake-study", design_hash="hash-1",
                   design_text="name: fake-study\n", target_spec={"type": "file-fake", "options": {}})
    try:
        yield s
    finally:
        s.close()
