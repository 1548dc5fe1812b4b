"""Every notebook executes with papermill on the example data without any error or warning output."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from report_helpers import (DEFAULT_EXAMPLE, copy_store, example_stores, nb_outputs, phases_of, store_params,
                            stores_with)

# the session's report builds (conftest's default_report, refine_report) happen once: on one worker
pytestmark = pytest.mark.xdist_group("default-report")


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


#: the factorial example whose 01 report test_model_figures.py::test_abort_report_shows_the_model builds (and checks
#: clean: no error, no stderr) with the same call as below; it is not executed a second time here
ABORT_EXAMPLE = "abort-on-overflow.sqlite"
OTHER_SCREENS = [p for p in stores_with("screen") if p.name not in (DEFAULT_EXAMPLE.name, ABORT_EXAMPLE)]


@pytest.mark.parametrize("store", store_params(OTHER_SCREENS,
                                               f"holds screen trials besides default.sqlite and {ABORT_EXAMPLE}"))
def test_screen_notebook_on_other_examples(store: Path, tmp_path: Path) -> None:
    """01 on every other example study (e.g. the factorial one: interaction plots, factorial ANOVA)."""
    from tunelab.report import build_report

    index = build_report(copy_store(store, tmp_path), tmp_path / "r", notebooks=["01"], n_boot=200)
    _clean(index.parent / "01_screen.ipynb")


#: the example store 03 and 04 read by default (run as shipped in test_notebooks_run_as_shipped)
SHIPPED_DEFAULT = "iperf-bottleneck.sqlite"
REFINES = [p for p in stores_with("refine") if p.name not in (DEFAULT_EXAMPLE.name, SHIPPED_DEFAULT)]
ABBAS = [p for p in stores_with("confirm", "validate") if p.name not in (DEFAULT_EXAMPLE.name, SHIPPED_DEFAULT)]


@pytest.mark.parametrize("store", store_params(REFINES, f"holds refine trials besides {SHIPPED_DEFAULT}"))
def test_refine_notebook_on_other_examples(store: Path, tmp_path: Path) -> None:
    from tunelab.report import execute_notebook, notebook_path

    out = execute_notebook(notebook_path("03"), tmp_path / "03.ipynb", {"study": str(copy_store(store, tmp_path))})
    _clean(out)


@pytest.mark.parametrize("store", store_params(ABBAS, f"holds confirm/validate trials besides {SHIPPED_DEFAULT}"))
def test_validate_notebook_on_other_examples(store: Path, tmp_path: Path) -> None:
    from tunelab.report import execute_notebook, notebook_path

    out = execute_notebook(notebook_path("04"), tmp_path / "04.ipynb", {"study": str(copy_store(store, tmp_path))})
    _clean(out)


def test_every_example_is_covered() -> None:
    """Sanity of the parametrisation above: every example store is exercised by some notebook test."""
    covered = {DEFAULT_EXAMPLE.name, SHIPPED_DEFAULT, ABORT_EXAMPLE} | {p.name for p in OTHER_SCREENS + REFINES
                                                                        + ABBAS}
    assert {p.name for p in example_stores()} <= covered
    assert SHIPPED_DEFAULT in {p.name for p in stores_with("refine")} & {p.name for p in stores_with("confirm")}


# ---- as shipped: a fresh clone, default parameters; a user's mistake is one line ------------------------------

@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a fresh clone holds of tunelab/, notebooks/ and data/ (the files git tracks, as they are now):
    the example stores, but no data/default.sqlite or any store the lab writes."""
    import shutil
    import subprocess

    root = Path(__file__).resolve().parents[2]
    clone = tmp_path_factory.mktemp("clone")
    tracked = subprocess.run(["git", "ls-files", "-z", "tunelab", "notebooks", "data"], cwd=root, capture_output=True,
                             check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, clone / name)
    assert not (clone / "data" / "default.sqlite").exists()
    return clone


@pytest.mark.parametrize("name", ["01_screen", "03_refine", "04_validate"])   # 02: test_posthoc_page_shows_...
def test_notebooks_run_as_shipped(name: str, fresh_clone: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Each notebook with its default parameters, in a fresh clone (cwd and tunelab from the clone): it reads
    the example stores shipped in data/examples/ and runs without an error or stderr output."""
    from tunelab.report import execute_notebook, notebook_path

    monkeypatch.setenv("PYTHONPATH", str(fresh_clone))
    out = execute_notebook(notebook_path(name, fresh_clone / "notebooks"), tmp_path / f"{name}.ipynb", {},
                           cwd=fresh_clone)
    _clean(out)
    text = " ".join(str(o.get("data", {}).get("text/html", "")) for o in nb_outputs(out))
    if name == "01_screen":                    # it names the store it read: the clone's example
        assert f"(store <code>{fresh_clone / 'data' / 'examples' / 'default.sqlite'}</code>)" in text, text[:3000]
    else:
        assert f"Study <strong><code>{SHIPPED_DEFAULT.removesuffix('.sqlite')}</code></strong>" in text, text[:3000]


@pytest.mark.parametrize("name, parameters, fix", [
    ("01_screen", {"metric": "nonsense", "n_boot": 50},
     "ReportError: metric 'nonsense' was not measured in default.sqlite; its main metrics: qps"),
    ("04_validate", {"study": "nope"}, "ReportError: no trial store for study 'nope' at "),
    ("03_refine", {"objectivs": ["qps:max"]},
     "UnknownParameterError: 03_refine.ipynb has no parameter 'objectivs' (did you mean 'objectives'?)"),
])
def test_a_notebook_users_error_is_one_line(name: str, parameters: dict, fix: str, tmp_path: Path) -> None:
    """Run with papermill itself (which only warns of an unknown parameter name): the failing cell's error
    output is one line naming the mistake and the fix, no traceback."""
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from tunelab.report import notebook_path
    from tunelab.report.build import KERNEL_NAME, venv_kernel

    with venv_kernel(), pytest.raises(PapermillExecutionError):
        papermill.execute_notebook(str(notebook_path(name)), str(tmp_path / "out.ipynb"), parameters=parameters,
                                   kernel_name=KERNEL_NAME, progress_bar=False, cwd=str(tmp_path))
    errors = [o for o in nb_outputs(tmp_path / "out.ipynb") if o["output_type"] == "error"]
    assert len(errors) == 1 and len(errors[0]["traceback"]) == 1, errors
    line = errors[0]["traceback"][0]
    assert "\n" not in line and fix in line, line
    assert line.startswith("\x1b[0;31m")       # red, as IPython shows an error
    nb = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    failed = next(c for c in nb.cells if c.cell_type == "code" and any(o["output_type"] == "error" for o in c.outputs))
    assert failed.source.startswith(("from tunelab.report.build import check_notebook_parameters", "from IPython"))


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


def test_posthoc_page_shows_the_notes_of_the_screen(fresh_clone: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the screen explains a disagreement between a post-hoc test and a verdict, the post-hoc page
    shows the sentence, as text (markup in it is escaped), for a significant pair and for the others.
    Run as shipped (default parameters, in a fresh clone), like 01, 03 and 04 in test_notebooks_run_as_shipped."""
    import os

    from tunelab.report import execute_notebook, notebook_path, render_html

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_NOTES_SITE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(fresh_clone)]))
    out = execute_notebook(notebook_path("02", fresh_clone / "notebooks"), tmp_path / "02.ipynb", {}, cwd=fresh_clone)
    _clean(out)
    page = render_html(out, tmp_path / "02.html").read_text()
    assert "<strong>Note.</strong>" in page and "SETTINGS-NOTE &lt;script&gt;alert(1)&lt;/script&gt; why" in page
    assert "<script>alert(1)</script>" not in page
    assert "COLUMN-NOTE of an untested pair." in page and "<strong>Note on <code>" in page
    assert f"(store <code>{fresh_clone / 'data' / 'examples' / 'default.sqlite'}</code>)" in page


@pytest.mark.parametrize("given, message", [
    ({"alpha": 5}, "02_posthoc.ipynb: invalid parameter alpha=5: a significance level between 0 and 1"),
    ({"correction": "holmes"}, "invalid parameter correction='holmes': one of holm, bonferroni, fdr_bh, none"),
    ({"n_boot": 0}, "invalid parameter n_boot=0: a whole number of resamples, 1 or more"),
    ({"include_flagged": "yes"}, "invalid parameter include_flagged='yes': True or False"),
    ({"sesoi_pct": -1}, "invalid parameter sesoi_pct=-1: a positive percentage"),
    ({"studdy": "x"}, "02_posthoc.ipynb has no parameter 'studdy' (did you mean 'study'?)"),
])
def test_notebook_parameter_check(given: dict, message: str) -> None:
    """The check the notebooks run first (in a kernel: tested above), on a namespace as the kernel has it."""
    import math

    from tunelab.report import ReportError
    from tunelab.report.build import check_notebook_parameters

    shipped = {"study": "default", "data_dir": None, "metric": None, "alpha": None, "correction": None,
               "sesoi_pct": None, "include_flagged": False, "n_boot": 1000, "math": math, "_private": 1,
               "check_notebook_parameters": check_notebook_parameters}
    check_notebook_parameters(shipped, "02_posthoc")    # as shipped: passes (modules, functions, _names ignored)
    with pytest.raises(ReportError) as info:
        check_notebook_parameters({**shipped, **given}, "02_posthoc")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_tour_checks_its_parameter_names() -> None:
    """The tour runs the same first check as the report notebooks: a mistyped ``-p`` name is one line."""
    from tunelab.report import ReportError
    from tunelab.report.build import check_notebook_parameters

    shipped = {"target": "simulator", "out_dir": None, "design": None, "replicates": 4, "budget": 30, "blocks": 6,
               "seed": 7}
    check_notebook_parameters(shipped, "00_tour")
    with pytest.raises(ReportError) as info:
        check_notebook_parameters({**shipped, "replicats": 3}, "00_tour")
    assert "00_tour.ipynb has no parameter 'replicats' (did you mean 'replicates'?)" in str(info.value)
