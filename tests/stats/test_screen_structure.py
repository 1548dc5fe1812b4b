"""The screen's shape (issue 25, item 2), read from the source with :mod:`ast`.

A dispatcher over routes: the analysis kind is an enum never compared as a bare string, the
dispatcher and each look are short, no stats function is long, the stats modules import no
private names of one another and form no import cycle, and ``tunelab.stats.screen`` is the
function (no module of that name hides it).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tunelab.stats
from tunelab.model import AnalysisKind, DesignType

PACKAGE = Path(__file__).resolve().parents[2] / "tunelab"
STATS = PACKAGE / "stats"
#: the words of the analysis kinds and design types: never on one side of a comparison in tunelab/
KIND_WORDS = {kind.value for kind in AnalysisKind} | {kind.value for kind in DesignType}


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _stats_imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(stats module, imported names)`` of every ``from tunelab.stats.X import ...`` in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tunelab.stats."):
            out.append((node.module.split(".")[2], [alias.name for alias in node.names]))
    return out


def test_the_kind_is_never_compared_as_a_string() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                for side in sides:
                    values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                    if any(isinstance(v, ast.Constant) and v.value in KIND_WORDS for v in values):
                        found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not found, f"analysis kinds or design types compared as strings: {found}"


@pytest.mark.parametrize(("module", "function"), [("screening", "screen"), ("look", "screen_look")])
def test_the_dispatcher_and_a_look_are_under_60_lines(module: str, function: str) -> None:
    lengths = dict(_functions(STATS / f"{module}.py"))
    assert lengths[function] < 60


def test_stats_modules_import_no_private_names_of_each_other() -> None:
    private = [f"{path.name}: {module}.{name}" for path in sorted(STATS.glob("*.py"))
               for module, names in _stats_imports(path) for name in names
               if name.startswith("_") and module != "_shared"]
    assert not private, f"private names imported across stats modules: {private}"


def test_looks_in_rounds_do_not_import_the_dispatcher() -> None:
    # the whole package's graph has no cycle (tests/architecture/test_no_cycles.py); here, the direction
    graph = {path.stem: {module for module, _ in _stats_imports(path)} for path in STATS.glob("*.py")}
    assert "screening" not in graph["rounds"] and "rounds" in graph["screening"]


def test_screen_is_the_function_and_no_module_hides_it() -> None:
    assert callable(tunelab.stats.screen) and tunelab.stats.screen.__module__ == "tunelab.stats.screening"
    assert not (STATS / "screen.py").exists()


def test_a_route_per_kind() -> None:
    from tunelab.stats.look import ROUTES

    assert set(ROUTES) == set(AnalysisKind)
