"""The examples in the knob modules' docstrings run as written."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["tunelab.knobs", "tunelab.knobs.base", "tunelab.knobs.catalogue"]


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    result = doctest.testmod(importlib.import_module(module_name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
