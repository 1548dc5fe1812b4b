"""Kinds are enums, never strings: no tunelab code compares a value with a string literal that is the
value of one of tunelab's enums (``kind == "oat"``, ``measurement in ("duet", ...)``, ``verdict != "matters"``).

Compare with the member instead (``kind is AnalysisKind.OAT``, ``measurement is Measurement.DUET``,
``verdict == Verdict.MATTERS``): a typo is then an AttributeError, and renaming a value renames every use.

Read from the source with :mod:`ast`: the enums are every class under tunelab/ that derives (directly or
through another tunelab class) from :class:`enum.Enum`, and their values are the string literals their
members are assigned, so a new enum is covered the day it lands.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tunelab"

#: literals that equal an enum's value but mean something else where they are compared (file, literal): reason
NOT_ENUMS: dict[tuple[str, str], str] = {
    ("tunelab/store/schema.py", "ok"): "SQLite's answer to PRAGMA integrity_check",
    ("tunelab/store/searches.py", "running"): "a search's state in the searches table, not a trial's status",
    ("tunelab/loads/dnsperf.py", "tcp"): "dnsperf's -m mode option (the load's setting)",
    ("tunelab/optimize/workflow.py", "inconclusive"): "a word of the --knobs option (screened+inconclusive)",
    ("tunelab/report/wording.py", "note"): "part of a column name (notes, guard_note)",
    ("tunelab/designs/schema.py", "block"): "the knob family block (block devices), not a model term",
    ("tunelab/optimize/export.py", "block"): "the knob family block (block devices), not a model term",
    ("tunelab/optimize/confirm.py", "block"): "the ABBA measurements' block column",
    ("tunelab/report/figures.py", "block"): "the ABBA measurements' block column",
    ("tunelab/stats/model_route.py", "block"): "the runs' block column (a design's blocks)",
}


def _trees() -> dict[str, ast.Module]:
    return {str(path.relative_to(PACKAGE.parent)): ast.parse(path.read_text(), filename=str(path))
            for path in sorted(PACKAGE.rglob("*.py"))}


def _base_name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def enum_values(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Each string value of a tunelab enum member -> the enums that have it."""
    classes = [node for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    enums, grown = {"Enum"}, True
    while grown:
        grown = False
        for cls in classes:
            if cls.name not in enums and any(_base_name(base) in enums for base in cls.bases):
                enums.add(cls.name)
                grown = True
    values: dict[str, set[str]] = {}
    for cls in (c for c in classes if c.name in enums):
        for statement in cls.body:
            if (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
                    and isinstance(statement.value.value, str) and not statement.targets[0].id.startswith("_")):
                values.setdefault(statement.value.value, set()).add(cls.name)
    return values


def _literals(node: ast.expr, op: ast.cmpop) -> list[str]:
    """The string literals of one side of a comparison (the elements of a tuple, list or set after ``in``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def string_compared_enums(trees: dict[str, ast.Module], values: dict[str, set[str]] | None = None) -> list[str]:
    """``path:line: comparison  ['literal' is a value of Enum]`` for every offending comparison (``values``: the
    enums' values, by default those the trees define)."""
    values = enum_values(trees) if values is None else values
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                for literal in _literals(left, op) + _literals(right, op):
                    if literal in values and (path, literal) not in NOT_ENUMS:
                        found.append(f"{path}:{node.lineno}: {ast.unparse(node)[:100]}  "
                                     f"[{literal!r} is a value of {', '.join(sorted(values[literal]))}]")
                left = right
    return sorted(found)


def test_the_rule_sees_the_enums() -> None:
    """The test reads the enums it guards (it would pass vacuously if it found none)."""
    values = enum_values(_trees())
    assert {"oat", "duet", "sequential", "main", "ok", "matters"} <= set(values)


def test_no_enum_value_is_compared_with_a_string_literal() -> None:
    found = string_compared_enums(_trees())
    assert found == [], (f"{len(found)} comparison(s) of a tunelab enum's value with a string literal; compare "
                         "with the enum member instead:\n" + "\n".join(found))


def test_the_rule_catches_a_string_compare() -> None:
    """A planted comparison of each form is found; the same code with the member is not."""
    planted = ast.parse('if kind == "oat" or "morris" != m or x in ("factorial", "y"):\n    pass\n'
                        'if kind is AnalysisKind.OAT:\n    pass\n')
    found = string_compared_enums({**_trees(), "tunelab/planted.py": planted})
    assert [line.split(":")[0:2] for line in found if line.startswith("tunelab/planted.py")] == \
        [["tunelab/planted.py", "1"]] * 3


def _compared_literals(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in (n for n in ast.walk(tree) if isinstance(n, ast.Compare)):
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            found.update(_literals(left, op) + _literals(right, op))
            left = right
    return found


def test_the_exceptions_are_still_needed() -> None:
    """Every entry of NOT_ENUMS still names a comparison that exists (none outlives its code)."""
    trees = _trees()
    values = enum_values(trees)
    unused = [f"{path} {literal!r}" for path, literal in NOT_ENUMS
              if path not in trees or literal not in values or literal not in _compared_literals(trees[path])]
    assert unused == [], "remove these NOT_ENUMS entries: " + ", ".join(unused)


def test_kinds_never_equal_their_text_nor_each_other() -> None:
    """At run time too: a kind compared with its text, or with the same text of another kind, is unequal;
    its text is read back only by ``parse`` (one ParseError line for anything else)."""
    from tunelab.model import AnalysisKind, DesignType, MeasurementKind, ParseError, PartKind

    kinds = [*AnalysisKind, *DesignType, *MeasurementKind, *PartKind]
    assert all(kind != kind.value and str(kind) == kind.value for kind in kinds)
    assert AnalysisKind.OAT != DesignType.OAT and AnalysisKind.RANGE != PartKind.RANGE
    assert {kind: kind.value for kind in kinds}.get("oat") is None          # text is no key of a kind's table
    assert all(type(kind).parse(kind.value) is kind and type(kind).parse(kind) is kind for kind in kinds)
    with pytest.raises(ParseError, match="MeasurementKind 'ABBA' must be one of sequential, duet"):
        MeasurementKind.parse("ABBA")


def _notebook_trees() -> dict[str, ast.Module]:
    """The code cells of notebooks/*.ipynb, each notebook as one module (IPython magics left out)."""
    import nbformat

    trees = {}
    for path in sorted((PACKAGE.parent / "notebooks").glob("*.ipynb")):
        cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        code = "\n".join(line for cell in cells for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))
        trees[str(path.relative_to(PACKAGE.parent))] = ast.parse(code, filename=str(path))
    return trees


def test_no_notebook_compares_a_plain_kind_with_its_text() -> None:
    """The notebooks run tunelab's results through papermill: a plain kind (AnalysisKind, DesignType, ...) compared
    with its text there is always unequal, and no test of tunelab/ would see it."""
    from enum import Enum

    import tunelab.model as model

    plain = {member.value for obj in vars(model).values() if isinstance(obj, type) and issubclass(obj, Enum)
             and not issubclass(obj, str) for member in obj}
    assert {"oat", "range", "duet"} <= plain
    values = {value: enums for value, enums in enum_values(_trees()).items() if value in plain}
    found = string_compared_enums(_notebook_trees(), values)
    assert found == [], "\n".join(found)
