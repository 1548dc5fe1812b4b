"""The Python API (:mod:`tunelab.api`): every result has a ``to_json()`` that survives ``json.dumps``.

Only dry-run and simulator targets and copies of the example stores in data/examples/ are used, so
no knob of this machine changes; the lab functions are marked ``lab``.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import tunelab
from tunelab import api
from tunelab.errors import DesignError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "data" / "examples" / "default.sqlite"
DESIGN = ROOT / "designs" / "default.yaml"
DRY_DESIGN = ROOT / "designs" / "abort_on_overflow_factorial.yaml"    # no lab-only devices: runs on dry-run


def round_trip(result) -> object:
    """``result.to_json()`` through strict JSON and back."""
    return json.loads(json.dumps(result.to_json(), allow_nan=False))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    if not EXAMPLE.is_file():
        pytest.skip(f"{EXAMPLE} is missing")
    shutil.copy(EXAMPLE, tmp_path / "default.sqlite")
    return tmp_path


def test_root_exports_the_api_even_next_to_the_report_subpackage(monkeypatch: pytest.MonkeyPatch) -> None:
    import inspect

    import tunelab.report  # noqa: F401 - the subpackage is also the API's report function

    assert tunelab.plan is api.plan and tunelab.lab_status is api.lab_status
    assert tunelab.report is sys.modules["tunelab.report"]
    assert inspect.signature(tunelab.report) == inspect.signature(api.report)
    calls = []
    monkeypatch.setattr(api, "report", lambda *args, **kwargs: calls.append((args, kwargs)) or "built")
    assert tunelab.report("a-study", notebooks="01") == "built" and calls == [(("a-study",), {"notebooks": "01"})]


def test_plan_to_json_and_old_unpacking() -> None:
    result = tunelab.plan(DESIGN)
    data = round_trip(result)
    assert data["runs"] == len(result.plan) == len(data["plan"])
    design, frame, summary = result
    assert summary is result.summary and design.name == "default"


def test_run_dry_run_records_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tunelab.journal.remove_orphan_labs", lambda: [])
    store = tmp_path / "study.sqlite"
    points: list[str] = []
    result = tunelab.run(DRY_DESIGN, target="dry-run", store=store, progress=False, checkpoint=points.append)
    data = round_trip(result)
    assert data["recorded"] is False and not store.exists() and data["planned"] == len(tunelab.plan(DRY_DESIGN).plan)
    assert "begin" in points and result.store_path.name == store.name and not result.store_path.exists()


def test_screen_export_restore(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tunelab.journal.remove_orphan_labs", lambda: [])
    assert round_trip(tunelab.screen("default", data_dir=data_dir, n_boot=100))["verdicts"]
    exported = api.export("default", data_dir=data_dir)
    assert len(round_trip(exported)["rows"]) == len(exported.tidy) > 0
    assert exported.file_name("csv") == "default-screen.csv"
    restored = tunelab.restore(["default"], data_dir=data_dir)
    assert round_trip(restored)["ok"] and restored.exit_status == 0


def test_refine_and_validate_on_the_simulator(tmp_path: Path) -> None:
    refined = tunelab.refine(target="simulator", surface="simple", budget=8, confirm_blocks=2,
                             store=tmp_path / "sim.sqlite")
    data = round_trip(refined)
    assert data["winner"] and refined.synthetic and refined.exit_status in (0, 3, 4)
    assert "=" in refined.sysctl_conf() or refined.sysctl_conf()
    knob, value = next(iter(refined.result.winner.items()))
    with pytest.raises(DesignError, match="mapping knob id -> value"):
        tunelab.validate("simulator", [f"{knob}={value}"], surface="simple")
    checked = tunelab.validate("simulator", {knob: value}, surface="simple", blocks=2,
                               store=tmp_path / "validate.sqlite")
    assert round_trip(checked)["verdict"] == checked.verdict


def test_knob_info_and_check_are_json() -> None:
    assert json.dumps(api.knob_info("net.core.somaxconn"))
    assert api.knob_check("net.core.somaxconn", ["4096"])["canonical"] == 4096


def test_knob_list_on_the_dry_run_target() -> None:
    listing = api.knob_list("dry-run")
    assert len(round_trip(listing)) == len(listing.table)


@pytest.mark.lab
def test_lab_up_status_down() -> None:
    name = "apitest"
    try:
        up = tunelab.lab_up(name, records=10)
        assert round_trip(up)["name"] == name
        status = round_trip(tunelab.lab_status())
        assert any(lab["name"] == name for lab in status["labs"])
    finally:
        down = tunelab.lab_down(name)
    assert name in round_trip(down)["removed"] and down.ok
