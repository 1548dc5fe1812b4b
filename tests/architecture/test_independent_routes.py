"""The screen's routes are independent: no ``tunelab/stats/*_route.py`` imports another route.

A route (:data:`tunelab.stats.look.ROUTES`) reads the checked runs and returns its parts; what two
routes share lives in a module named for it (:func:`tunelab.stats.screen_data.metric_runs`,
:func:`tunelab.stats.model_screen.model_part_tables`), so a route can change or go without
touching another. Read with :mod:`ast`: imports inside functions count too.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

STATS = Path(__file__).resolve().parents[2] / "tunelab" / "stats"
ROUTES = sorted(STATS.glob("*_route.py"))


def routes_imported(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every route module (``tunelab.stats.*_route``) that the file at ``path`` imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, m) for m in modules if m.split(".")[:2] == ["tunelab", "stats"]
                  and len(m.split(".")) == 3 and m.endswith("_route")]
    return found


def test_the_routes_are_found() -> None:
    assert {"oat_route", "model_route", "range_route", "duet_route"} <= {path.stem for path in ROUTES}


@pytest.mark.parametrize("path", ROUTES, ids=lambda path: path.stem)
def test_no_route_imports_another_route(path: Path) -> None:
    others = [f"line {line}: {module}" for line, module in routes_imported(path)
              if module != f"tunelab.stats.{path.stem}"]
    assert not others, (f"tunelab/stats/{path.name} imports another route ({'; '.join(others)}); move what they "
                        "share into a module named for it (e.g. tunelab/stats/screen_data.py)")


def test_the_rule_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "x_route.py"
    module.write_text("def f():\n    from tunelab.stats import model_route\n    from tunelab.stats.oat_route import oat_route\n")
    assert routes_imported(module) == [(2, "tunelab.stats.model_route"), (3, "tunelab.stats.oat_route")]
