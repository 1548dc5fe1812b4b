"""docs/ARCHITECTURE.md stays true: every file, module, function, class and contract it names exists.

What it names is read from the text: each span in backticks outside code blocks, the ``from tunelab... import``
lines of its code blocks, and its ``## Contract N`` headings (and every "Contract N" that tunelab's docstrings
cite). A span is checked by its shape:

- a path (``tunelab/runner/``, ``cli/run.py``, ``loading.py``): the file or folder exists, from the repository, from
  ``tunelab/``, or from the package its table row is about;
- a dotted name rooted in tunelab (``study_run.run_study_of``, ``tunelab.display.VIEWS``, ``Store.tidy``): it
  imports and has the attribute;
- a class or constant name (``BoundKnob``, ``RUN_DIR``): tunelab defines it at the top level of a module;
- a bare lower-case name (``probe_design``, ``duet_pair``): tunelab's source uses it, as a name or a key.
"""
from __future__ import annotations

import ast
import importlib
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tunelab"
DOC = ROOT / "docs" / "ARCHITECTURE.md"
#: names in backticks that are not tunelab's (Python, the standard library, placeholders)
NOT_OURS = {"None", "threading.Barrier", "_underscore"}

FENCE = re.compile(r"```.*?```", re.S)
SPAN = re.compile(r"`([^`\n]+)`")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
CAPITALISED = re.compile(r"[A-Z][A-Za-z0-9_]*")
CONTRACT = re.compile(r"^## Contract (\d+): .*$", re.M)


def _spans() -> list[tuple[str, str | None]]:
    """Each backticked span outside code blocks, with the package folder its table row is about (None in prose)."""
    found = []
    for line in FENCE.sub("", DOC.read_text()).splitlines():
        cells = line.split("|")
        row = SPAN.findall(cells[1]) if line.startswith("|") and len(cells) > 2 else []
        folder = row[0] if row and row[0].endswith("/") else None
        found += [(span.strip(), folder) for span in SPAN.findall(line)]
    return found


def _call_stripped(span: str) -> str:
    """``screen(data, ...) -> X`` -> ``screen``; ``Store.tidy()`` -> ``Store.tidy``."""
    return span.split("(", 1)[0].strip()


@lru_cache(maxsize=1)
def _top_level_names() -> dict[str, str]:
    """Every class, function and constant defined at the top level of a tunelab module -> that module."""
    names: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.setdefault(node.name, module)
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names.setdefault(name.id, module)
    return names


@lru_cache(maxsize=1)
def _words_in_source() -> frozenset[str]:
    return frozenset(word for path in PACKAGE.rglob("*.py") for word in IDENTIFIER.findall(path.read_text()))


def _units() -> set[str]:
    return {path.stem if path.is_file() else path.name for path in PACKAGE.iterdir()
            if path.suffix == ".py" or (path / "__init__.py").is_file()}


def _resolve(dotted: str) -> bool:
    """Whether ``dotted`` (``tunelab.x.y``, ``x.y`` for a tunelab module ``x``, ``Class.attr``) exists."""
    parts = dotted.split(".")
    if parts[0] in _top_level_names() and parts[0] not in _units():        # Store.tidy, Target.counter_sources
        parts = [*_top_level_names()[parts[0]].split("."), *parts]
    elif parts[0] != "tunelab":
        parts = ["tunelab", *parts]
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def _is_path(span: str) -> bool:
    first = span.split("/", 1)[0]
    return " " not in span and "<" not in span and not span.startswith("/") and not first.isupper() and \
        (span.endswith((".py", ".md")) or ("/" in span and not first.endswith("_DIR")))


def _path_exists(span: str, folder: str | None) -> bool:
    bases = [ROOT, PACKAGE] + ([ROOT / folder] if folder else [])
    return any(list(base.glob(span)) if "*" in span else (base / span).exists() for base in bases)


def _problem(span: str, folder: str | None) -> str | None:
    name = _call_stripped(span)
    if span in NOT_OURS or name in NOT_OURS:
        return None
    if _is_path(span):
        return None if _path_exists(span, folder) else f"`{span}`: no such file or folder"
    if DOTTED.fullmatch(name):
        rooted = name.split(".")[0] in {"tunelab", *_units()} | _top_level_names().keys()
        return None if not rooted or _resolve(name) else f"`{span}`: {name} does not exist"
    if CAPITALISED.fullmatch(name):
        return None if name in _top_level_names() else f"`{span}`: tunelab defines no {name}"
    if IDENTIFIER.fullmatch(name) and span == name:
        return None if name in _words_in_source() else f"`{span}`: tunelab's source never uses {name}"
    return None


def test_every_file_module_and_name_in_backticks_exists() -> None:
    problems = sorted({problem for span, folder in _spans() if (problem := _problem(span, folder))})
    assert not problems, "docs/ARCHITECTURE.md names what does not exist:\n" + "\n".join(problems)


def test_the_code_blocks_import_what_exists() -> None:
    imports = re.findall(r"^from (tunelab[\w.]*) import ([\w, ]+)", "\n".join(FENCE.findall(DOC.read_text())), re.M)
    assert imports, "no `from tunelab... import` line found in the code blocks: update this test"
    missing = [f"{module}.{name.strip()}" for module, names in imports for name in names.split(",")
               if not hasattr(importlib.import_module(module), name.strip())]
    assert not missing, f"docs/ARCHITECTURE.md's code blocks import what does not exist: {missing}"


def test_the_contracts_are_numbered_in_order() -> None:
    numbers = [int(n) for n in CONTRACT.findall(DOC.read_text())]
    assert numbers == list(range(1, len(numbers) + 1)), f"contracts out of order or missing: {numbers}"


def test_every_contract_tunelab_cites_exists() -> None:
    contracts = {int(n) for n in CONTRACT.findall(DOC.read_text())}
    cited = [(path.relative_to(ROOT), int(n)) for path in sorted(PACKAGE.rglob("*.py"))
             for n in re.findall(r"\bContract (\d+)", path.read_text())]
    assert cited, "tunelab cites no contract: update this test"
    unknown = [f"{path} cites Contract {n}" for path, n in cited if n not in contracts]
    assert not unknown, "docs/ARCHITECTURE.md does not define:\n" + "\n".join(unknown)
