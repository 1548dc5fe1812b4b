"""Notebook parameters: declared in a tagged cell, unknown ones rejected with a clear message."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tunelab.report import COMMON_PARAMETERS, NOTEBOOKS, UnknownParameterError, execute_notebook, notebook_path
from tunelab.report.build import check_parameters, declared_parameters


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_notebook_shape(name: str) -> None:
    """Starts with a markdown cell saying what it answers and listing its parameters; one parameters cell."""
    path = notebook_path(name)
    nb = nbformat.read(str(path), as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# ")
    assert "Answers" in first.source
    declared = declared_parameters(path)
    assert set(COMMON_PARAMETERS) <= set(declared)
    for parameter in declared:
        assert f"`{parameter}`" in first.source, f"{name}: parameter {parameter} is not described in the first cell"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0].cell_type == "code"
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit notebooks without outputs"


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_notebooks_call_the_library(name: str) -> None:
    """Cells call tunelab.report / tunelab.stats / tunelab.optimize; no statistics re-implemented in cells."""
    nb = nbformat.read(str(notebook_path(name)), as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "from tunelab.report" in code
    for forbidden in ("scipy", "statsmodels", "pingouin", "scikit_posthocs", ".groupby(", "import numpy"):
        assert forbidden not in code, f"{name} re-implements analysis in a cell ({forbidden})"


def test_unknown_parameter_rejected_before_running(tmp_path: Path) -> None:
    path = notebook_path("01_screen")
    with pytest.raises(UnknownParameterError) as info:
        execute_notebook(path, tmp_path / "out.ipynb", {"study": "x", "metrics": "qps", "alfa": 0.1})
    message = str(info.value)
    assert "01_screen.ipynb has no parameter 'metrics', 'alfa'" in message
    assert "its parameters are: study, data_dir, metric, alpha" in message
    assert not (tmp_path / "out.ipynb").exists()


def test_known_parameters_pass() -> None:
    check_parameters(notebook_path("03_refine"), {"study": "x", "objectives": ["qps:max"]})
    with pytest.raises(UnknownParameterError, match="objectives"):
        check_parameters(notebook_path("01_screen"), {"objectives": ["qps:max"]})


def test_build_report_rejects_unknown_parameter(default_store: Path, tmp_path: Path) -> None:
    from tunelab.report import build_report

    with pytest.raises(UnknownParameterError) as info:
        build_report(default_store, tmp_path / "r", parameters={"bogus": 1})
    assert "'bogus'" in str(info.value) and "objectives" in str(info.value)
    assert not (tmp_path / "r" / "index.html").exists()


def test_cli_rejects_unknown_parameter(default_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tunelab.cli import main

    assert main(["report", str(default_store), "--out", str(tmp_path / "r"), "-p", "bogus=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tunelab: error: unknown notebook parameter(s) 'bogus'")
    assert main(["report", str(default_store), "--out", str(tmp_path / "r"), "-p", "no-equals"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err


def test_unknown_notebook_rejected(default_store: Path, tmp_path: Path) -> None:
    from tunelab.report import ReportError, build_report

    with pytest.raises(ReportError, match="unknown notebook '05'"):
        build_report(default_store, tmp_path / "r", notebooks=["05"])
