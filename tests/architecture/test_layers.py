"""The import layers of docs/ARCHITECTURE.md, enforced: imports only point down, never into
another package's private names, and the statistics stay pure.

Read from the source with :mod:`ast` (imports inside functions count too), so the test cannot
be fooled by import order and needs nothing installed.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tunelab"

#: bottom to top; a module may import from its own layer and the layers below it
LAYERS: list[set[str]] = [
    {"errors", "model", "registry", "paths", "version", "formatting", "signals", "display", "progress"},
    {"knobs", "loads", "targets", "counters"},
    {"designs", "store", "testbeds"},
    {"journal", "leases", "runner", "cluster", "constraints", "labs", "duet", "preflight", "run_owner", "recovery"},
    {"stats"},
    {"study_data"},
    {"optimize", "rounds", "calibration", "study_run", "study_result", "probe_run"},
    {"simulator"},
    {"report"},
    {"api", "__init__"},
    {"seeds"},
    {"cli", "__main__"},
]
#: packages with a stricter rule than their layer: what they may import at all
ONLY: dict[str, set[str]] = {
    "model": {"errors"},
    "errors": set(),
    "formatting": set(),
    "stats": {"stats", "model", "errors", "registry", "formatting", "display"},
}
LAYER_OF = {name: index for index, names in enumerate(LAYERS) for name in names}


def _unit(module: str) -> str:
    """``tunelab.targets.lab`` -> ``targets``; ``tunelab.runner`` -> ``runner``; ``tunelab`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1] if len(parts) > 2 else parts
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, imported module, imported names)`` of every tunelab import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == "tunelab":
            found.append((node.lineno, node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tunelab":
                    found.append((node.lineno, alias.name, []))
    return found


def _violations() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = _module_name(path)
        unit = _unit(importer)
        where = path.relative_to(PACKAGE.parent)
        if unit not in LAYER_OF:
            problems.append(f"{where}: module {unit!r} is in no layer of tests/architecture/test_layers.py")
            continue
        for line, module, names in _imports(path):
            target = _unit(module) if module != "tunelab" else "__init__"
            if module == "tunelab" and names:
                # `from tunelab import x`: x is a subpackage/module unless it is an API name of the root
                target = names[0] if names[0] in LAYER_OF else "__init__"
            if target not in LAYER_OF:
                problems.append(f"{where}:{line}: imports {module}, which is in no layer")
                continue
            if unit in ONLY and target not in ONLY[unit] and target != unit:
                problems.append(f"{where}:{line}: {unit} may import only {sorted(ONLY[unit])}, not {module}")
            elif LAYER_OF[target] > LAYER_OF[unit]:
                problems.append(f"{where}:{line}: {unit} (layer {LAYER_OF[unit]}) imports {module} "
                                f"(layer {LAYER_OF[target]}): imports must point down")
            if target != unit:
                private = [p for p in module.split(".")[1:] if p.startswith("_") and not p.startswith("__")]
                private += [n for n in names if n.startswith("_") and not n.startswith("__")]
                if private:
                    problems.append(f"{where}:{line}: {unit} imports private name(s) {private} of {module}")
    return problems


def test_imports_point_down_and_never_into_private_names() -> None:
    problems = _violations()
    assert not problems, f"{len(problems)} import(s) break the layers:\n" + "\n".join(problems)


MODULES = sorted(path.stem if path.is_file() else path.name for path in PACKAGE.iterdir()
                 if (path.suffix == ".py" and not path.stem.startswith("__")) or (path / "__init__.py").is_file())


@pytest.mark.parametrize("unit", MODULES)
def test_every_module_is_in_a_layer_and_in_the_architecture_table(unit: str) -> None:
    assert unit in LAYER_OF, f"tunelab/{unit} is in no layer of tests/architecture/test_layers.py"
    text = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    assert f"`tunelab/{unit}" in text, f"docs/ARCHITECTURE.md does not mention tunelab/{unit}"
