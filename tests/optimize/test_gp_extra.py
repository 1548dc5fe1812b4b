"""The gp engine's PyTorch is an optional extra (``pip install 'tunelab[gp]'``): the core install has no torch,
and asking for gp without it is one line naming the extra, from the API and the CLI, before anything runs."""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

import tunelab
from tunelab.cli import main
from tunelab.errors import TunelabError
from tunelab.optimize import EngineSettings, RefineError, make_engine
from tunelab.optimize.driver import check_engine
from tunelab.optimize.space import space_from_spec
from tunelab.model import Metric

ROOT = Path(__file__).resolve().parents[2]
#: what every refusal says: the engine, the missing module and the command that installs it
NEEDS_TORCH = "the gp engine needs torch, which is not installed: pip install 'tunelab[gp]'"


@pytest.fixture
def without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as if torch were not installed (``None`` in sys.modules: find_spec and import both fail)."""
    monkeypatch.setitem(sys.modules, "torch", None)


def test_torch_is_in_the_gp_extra_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {extra: [req.split("=")[0].strip().lower() for req in reqs]
             for extra, reqs in project["optional-dependencies"].items()}
    assert names["gp"] == ["torch"]
    assert "torch" not in [req.split("=")[0].strip().lower() for req in project["dependencies"]]
    assert "torch" not in names["test"]   # the test command (scripts/install.sh: .[test]) installs no torch


def test_building_gp_without_torch_is_one_refine_error(without_torch: None) -> None:
    space = space_from_spec({"n": {"kind": "int", "low": 1, "high": 8}})
    with pytest.raises(RefineError) as caught:
        make_engine("gp", EngineSettings(space, (Metric("qps"),), seed=0, budget=10))
    assert str(caught.value).startswith(NEEDS_TORCH)
    with pytest.raises(RefineError, match=r"pip install 'tunelab\[gp\]'"):
        check_engine("gp", None, 60)
    assert check_engine("tpe", None, 60) == 60   # the other Optuna engines need no torch


def test_the_api_refuses_gp_without_torch_before_opening_a_store(without_torch: None, tmp_path: Path) -> None:
    store = tmp_path / "gp.sqlite"
    with pytest.raises(TunelabError) as caught:
        tunelab.refine(target="simulator", engine="gp", budget=8, confirm_blocks=0, store=store)
    assert str(caught.value).startswith(NEEDS_TORCH)
    assert not store.exists()


def test_the_cli_says_it_in_one_line(without_torch: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["refine", "--target", "simulator", "--engine", "gp", "--budget", "8", "--store",
                   str(tmp_path / "gp.sqlite")])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.splitlines() == [f"tunelab: error: {NEEDS_TORCH} (or choose another engine, e.g. --engine tpe)"]
    assert not (tmp_path / "gp.sqlite").exists()
