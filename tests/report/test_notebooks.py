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


#: loaded by the notebook's kernel (sitecustomize): the screen result carries notes, as the screen gives them
#: where a post-hoc test and a verdict disagree (a note in settings["notes"], or a verdict column with "note")
_NOTES_SITE = '''
import importlib

_loading = importlib.import_module("tunelab.report.loading")   # `tunelab.report` is also the API's function
from tunelab.report.tables import significant_pairs as _pairs

_screen_study = _loading.screen_study


def _with_notes(*args, **kwargs):
    inputs, result = _screen_study(*args, **kwargs)
    knob, metric, _ = _pairs(result.verdicts)[0]
    result.settings["notes"] = [*result.settings.get("notes", []),
                                f"`{knob}` x {metric}: SETTINGS-NOTE <script>alert(1)</script> why they disagree."]
    quiet = ~result.verdicts["significant"].astype(bool)
    result.verdicts["posthoc_note"] = ["COLUMN-NOTE of an untested pair." if q else None for q in quiet]
    return inputs, result


_loading.screen_study = _with_notes
'''


def test_posthoc_page_shows_the_notes_of_the_screen(default_store: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the screen explains a disagreement between a post-hoc test and a verdict, the post-hoc page
    shows the sentence, as text (markup in it is escaped), for a significant pair and for the others."""
    import os

    from tunelab.report import execute_notebook, notebook_path, render_html

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_NOTES_SITE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(Path(__file__).resolve().parents[2])]))
    out = execute_notebook(notebook_path("02"), tmp_path / "02.ipynb",
                           {"study": str(copy_store(default_store, tmp_path)), "n_boot": 100})
    _clean(out)
    page = render_html(out, tmp_path / "02.html").read_text()
    assert "<strong>Note.</strong>" in page and "SETTINGS-NOTE &lt;script&gt;alert(1)&lt;/script&gt; why" in page
    assert "<script>alert(1)</script>" not in page
    assert "COLUMN-NOTE of an untested pair." in page and "<strong>Note on <code>" in page
