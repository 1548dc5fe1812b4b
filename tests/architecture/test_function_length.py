"""Functions stay small: none in tunelab/ is longer than 80 lines (docstring included), and none in the
runner (tunelab/runner/, the path of every trial) comes within 10 lines of that cap."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tunelab"
MAX_LINES = 80
#: packages held to a tighter limit: what every trial runs through stays well clear of the cap
TIGHTER = {"runner": MAX_LINES - 10}


def _longer_than(limit: int, paths: list[Path]) -> list[str]:
    long = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({length} lines)")
    return long


def test_no_function_is_longer_than_80_lines() -> None:
    long = _longer_than(MAX_LINES, sorted(PACKAGE.rglob("*.py")))
    assert long == [], "split these functions:\n" + "\n".join(long)


@pytest.mark.parametrize("package", sorted(TIGHTER))
def test_no_runner_function_comes_within_10_lines_of_the_cap(package: str) -> None:
    paths = sorted((PACKAGE / package).rglob("*.py"))
    assert paths, f"tunelab/{package}/ holds no modules: update TIGHTER"
    long = _longer_than(TIGHTER[package], paths)
    assert long == [], f"split these functions (limit {TIGHTER[package]} lines in tunelab/{package}/):\n" + "\n".join(long)
