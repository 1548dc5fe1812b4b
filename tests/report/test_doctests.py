"""The examples in the report modules' docstrings run as written."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["tunelab.report.figures", "tunelab.report.wording", "tunelab.report.tables", "tunelab.report.rendering",
           "tunelab.formatting", "tunelab.cli.report"]


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    result = doctest.testmod(importlib.import_module(module_name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
