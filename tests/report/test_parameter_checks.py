"""Every notebook in notebooks/ checks its papermill parameters before any work: each bad one is named in one
line, with the closest good value where there is one (a mistyped name, a correction, a target, a metric the
study did not measure), ``objectives`` included; ``-p objectives METRIC:max`` (one text) is one objective."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from report_helpers import nb_outputs

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: a bad value of every parameter a notebook may declare (a new parameter needs one here)
BAD = {"study": "nope", "data_dir": "", "metric": "qsp", "alpha": 5, "correction": "holmes", "sesoi_pct": -1,
       "include_flagged": "yes", "n_boot": 0, "objectives": 5, "target": "simulater", "out_dir": "",
       "design": "/nonexistent/design.yaml", "replicates": 0, "budget": 0, "blocks": "six", "seed": 1.5}


def shipped(path: Path) -> dict:
    """The notebook's parameters with their shipped values, as its kernel holds them."""
    from tunelab.report.build import declared_parameters

    return {name: ast.literal_eval(p["default"]) for name, p in declared_parameters(path).items()}


def test_every_notebook_is_covered() -> None:
    assert [p.stem for p in NOTEBOOKS] == ["00_tour", "01_screen", "02_posthoc", "03_refine", "04_validate"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_check_comes_before_any_work(path: Path) -> None:
    """The cell after the parameters imports, then calls check_notebook_parameters(globals(), NAME) first."""
    nb = nbformat.read(str(path), as_version=4)
    index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    cell = next(c for c in nb.cells[index + 1:] if c.cell_type == "code")
    body = ast.parse(cell.source).body
    first = next(i for i, node in enumerate(body) if not isinstance(node, (ast.Import, ast.ImportFrom)))
    call = body[first].value                 # an expression, or `objectives = check_notebook_parameters(...)[...]`
    call = call.value if isinstance(call, ast.Subscript) else call
    assert isinstance(call, ast.Call), ast.unparse(body[first])
    assert ast.unparse(call) == f"check_notebook_parameters(globals(), {path.stem!r})"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_bad_parameter_is_named_in_one_line(path: Path) -> None:
    from tunelab.report import ReportError
    from tunelab.report.build import check_notebook_parameters

    values = shipped(path)
    assert check_notebook_parameters(values, path.stem).keys() == values.keys()     # as shipped: passes
    assert set(values) <= set(BAD), f"give BAD a bad value of {sorted(set(values) - set(BAD))}"
    for name in values:
        with pytest.raises(ReportError) as info:
            check_notebook_parameters({**values, name: BAD[name]}, path.stem)
        message = str(info.value)
        assert "\n" not in message and len(message) < 400, message
        assert re.search(rf"\b{name}\b|{BAD[name]!r}", message), (name, message)


@pytest.mark.parametrize("path, given, close", [
    ("02_posthoc", {"correction": "holmes"}, "(did you mean 'holm'?)"),
    ("00_tour", {"target": "simulater"}, "(did you mean 'simulator'?)"),
    ("01_screen", {"metric": "qsp"}, "(did you mean 'qps'?)"),
    ("01_screen", {"metric": "latency_mean_msec"}, "(did you mean 'latency_mean_ms'"),
    ("03_refine", {"objectives": ["throughput_mbs:max"]}, "(did you mean 'throughput_mbps'"),
    ("04_validate", {"alfa": 0.1}, "(did you mean 'alpha'?)"),
])
def test_a_bad_parameter_gets_a_suggestion(path: str, given: dict, close: str) -> None:
    from tunelab.report import ReportError
    from tunelab.report.build import check_notebook_parameters

    with pytest.raises(ReportError) as info:
        check_notebook_parameters({**shipped(ROOT / "notebooks" / f"{path}.ipynb"), **given}, path)
    assert close in str(info.value), str(info.value)


def test_a_misspelt_metric_of_a_store_with_counters_is_one_short_line() -> None:
    """The default study measured over a hundred counters: the line names a handful of close names, not all."""
    from tunelab.report import ReportError
    from tunelab.report.build import check_notebook_parameters
    from tunelab.report.loading import SUGGESTIONS, examples_dir, load_study, measured_metrics

    measured = measured_metrics(load_study("default", examples_dir()))
    assert len(measured) > 100
    with pytest.raises(ReportError) as info:
        check_notebook_parameters({**shipped(ROOT / "notebooks" / "01_screen.ipynb"), "metric": "counter.Tcp.OutSeg"}, "01_screen")
    message = str(info.value)
    assert len(message) < 400, message
    suggested = re.search(r"\(did you mean (.*?)\?\)", message).group(1).split(" or ")
    assert 1 <= len(suggested) <= SUGGESTIONS
    assert all(name.strip("'") in measured for name in suggested)


def test_every_bad_parameter_is_named_at_once() -> None:
    from tunelab.report import UnknownParameterError
    from tunelab.report.build import check_notebook_parameters

    with pytest.raises(UnknownParameterError) as info:
        check_notebook_parameters({**shipped(ROOT / "notebooks" / "00_tour.ipynb"), "replicats": 3, "blocks": 0},
                                  "00_tour")
    message = str(info.value)
    assert "no parameter 'replicats' (did you mean 'replicates'?)" in message and "blocks=0" in message


def test_objectives_as_one_text_or_a_list() -> None:
    """``-p objectives M:max`` gives the kernel one text; the header's ``-y`` example a list: both are objectives."""
    from tunelab.report.build import check_notebook_parameters

    path = ROOT / "notebooks" / "03_refine.ipynb"
    header = nbformat.read(str(path), as_version=4).cells[0].source
    example = re.search(r"-y 'objectives: (\[.*?\])'", header).group(1)
    listed = [text.strip() for text in example.strip("[]").split(",")]
    assert check_notebook_parameters({**shipped(path), "objectives": listed}, "03_refine")["objectives"] == listed
    one = check_notebook_parameters({**shipped(path), "objectives": "throughput_mbps:max"}, "03_refine")
    assert one["objectives"] == ["throughput_mbps:max"]


def test_refine_runs_with_one_objective_given_as_text(tmp_path: Path) -> None:
    """``papermill notebooks/03_refine.ipynb out.ipynb -p objectives throughput_mbps:max`` (a TypeError in the
    convergence cell before): it runs, and its search settings name the objective."""
    from tunelab.report import execute_notebook, notebook_path

    out = execute_notebook(notebook_path("03_refine"), tmp_path / "out.ipynb", {"objectives": "throughput_mbps:max"})
    outputs = nb_outputs(out)
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert "throughput_mbps" in " ".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
