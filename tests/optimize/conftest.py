"""Fixtures for the refinement tests: SYNTHETIC surfaces and throw-away stores."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tunelab.optimize.engines.optuna_engine import missing_extra
from tunelab.store import Store
from tunelab.simulator import get_surface


def engine_params(names: list[str]) -> list:
    """``names`` for ``parametrize``; an engine whose optional extra is missing (gp without torch) is skipped
    with the reason (the pip command that installs it)."""
    return [pytest.param(name, marks=pytest.mark.skipif(missing_extra(name) is not None,
                                                          reason=str(missing_extra(name))))
            for name in names]


@pytest.fixture
def simple_surface():
    return get_surface("simple", cv=0.03)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "refine.sqlite"


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    s = Store.open(store_path, study="optimize-test", design_hash="h", design_text="test")
    try:
        yield s
    finally:
        s.close()
