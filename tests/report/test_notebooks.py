"""Every notebook executes with papermill on the example data without any error or warning output."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from report_helpers import (DEFAULT_EXAMPLE, copy_store, example_stores, nb_outputs, phases_of, store_params,
                            stores_with)


def _clean(path: Path) -> None:
    for output in nb_outputs(path):
        assert output["output_type"] != "error", f"{path.name}: {output.get('ename')}: {output.get('evalue')}"
        assert not (output["output_type"] == "stream" and output["name"] == "stderr"), \
            f"{path.name} wrote to stderr: {output['text'][:500]}"


def test_default_report(default_report: Path) -> None:
    out = default_report.parent
    phases = phases_of(DEFAULT_EXAMPLE)
    expected = {"01_screen", "02_posthoc"} | ({"03_refine"} if "refine" in phases else set()) \
        | ({"04_validate"} if phases & {"confirm", "validate"} else set())
    executed = {p.stem for p in out.glob("*.ipynb")}
    assert executed == expected
    for name in executed:
        _clean(out / f"{name}.ipynb")
        assert (out / f"{name}.html").stat().st_size > 20_000
    screen = json.loads((out / "screen.json").read_text())
    assert screen["verdicts"], "screen.json has no verdicts"
    index = default_report.read_text()
    for name in {"03_refine", "04_validate"} - executed:
        assert f"<strong>{name}</strong> skipped: no " in index


def test_parameters_were_injected(default_report: Path, default_store: Path) -> None:
    import nbformat

    nb = nbformat.read(str(default_report.parent / "01_screen.ipynb"), as_version=4)
    assert nb.metadata.papermill.parameters["study"] == str(default_store.resolve())
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1


OTHER_SCREENS = [p for p in stores_with("screen") if p.name != DEFAULT_EXAMPLE.name]


@pytest.mark.parametrize("store", store_params(OTHER_SCREENS, "holds screen trials besides default.sqlite"))
def test_screen_notebook_on_other_examples(store: Path, tmp_path: Path) -> None:
    """01 on every other example study (e.g. the factorial one: interaction plots, factorial ANOVA)."""
    from tunelab.report import build_report

    index = build_report(copy_store(store, tmp_path), tmp_path / "r", notebooks=["01"], n_boot=200)
    _clean(index.parent / "01_screen.ipynb")


REFINES = [p for p in stores_with("refine") if p.name != DEFAULT_EXAMPLE.name]
ABBAS = [p for p in stores_with("confirm", "validate") if p.name != DEFAULT_EXAMPLE.name]


@pytest.mark.parametrize("store", store_params(REFINES, "holds refine trials besides default.sqlite"))
def test_refine_notebook_on_other_examples(store: Path, tmp_path: Path) -> None:
    from tunelab.report import execute_notebook, notebook_path

    out = execute_notebook(notebook_path("03"), tmp_path / "03.ipynb", {"study": str(copy_store(store, tmp_path))})
    _clean(out)


@pytest.mark.parametrize("store", store_params(ABBAS, "holds confirm/validate trials besides default.sqlite"))
def test_validate_notebook_on_other_examples(store: Path, tmp_path: Path) -> None:
    from tunelab.report import execute_notebook, notebook_path

    out = execute_notebook(notebook_path("04"), tmp_path / "04.ipynb", {"study": str(copy_store(store, tmp_path))})
    _clean(out)


def test_every_example_is_covered() -> None:
    """Sanity of the parametrisation above: every example store is exercised by some notebook test."""
    covered = {DEFAULT_EXAMPLE.name} | {p.name for p in OTHER_SCREENS + REFINES + ABBAS}
    assert {p.name for p in example_stores()} <= covered
