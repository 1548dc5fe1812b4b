"""The shipped designs/*.yaml against the real knob catalogue (skipped until tunelab.knobs exists)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tunelab.simulator  # noqa: F401 - registers the simulator target some shipped designs use
from tunelab.designs import load_design, make_plan, plan_summary
from tunelab.errors import DesignError
from tunelab.model import DesignType

knobs = pytest.importorskip("tunelab.knobs", reason="the knob catalogue (tunelab.knobs) is not available yet")
if not hasattr(knobs, "get_knob"):
    pytest.skip("tunelab.knobs has no get_knob yet", allow_module_level=True)

DESIGNS = Path(__file__).resolve().parents[2] / "designs"
FILES = sorted(DESIGNS.glob("*.yaml"))


def test_all_shipped_designs_are_present() -> None:
    names = {p.name for p in FILES}
    assert {"default.yaml", "abort_on_overflow_factorial.yaml", "table2_pb28.yaml", "fracfact_7.yaml",
            "iperf_bottleneck.yaml", "disk_fio.yaml", "lhs_buffers.yaml"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_shipped_design_loads_and_plans(path: Path) -> None:
    design = load_design(path)
    plan = make_plan(design)
    summary = plan_summary(design, plan)
    assert summary["runs"] == len(plan) > 0
    assert list(plan.columns[-len(design.knob_ids):]) == design.knob_ids
    assert set(plan.columns[7:-len(design.knob_ids)]) <= {"round", "profile"}    # optional plan columns


def test_default_study_fits_its_time_budget() -> None:
    design = load_design(DESIGNS / "default.yaml")
    plan = make_plan(design)
    summary = plan_summary(design, plan)
    # sequential: the first round takes about 4 minutes; no round starts past 8.5 minutes of trials,
    # so with the lab, the calibration, the looks and the report the study ends within 10 minutes
    assert 3 * 60 <= summary["estimated_wall_s"] <= 5 * 60
    assert design.rounds is not None and design.rounds.budget_minutes == 8.5
    assert summary["sequential"]["max_wall_s"] <= 8.5 * 60
    assert design.design_type is DesignType.OAT and design.target.type == "lab"
    assert {k.id for k in design.knobs} == {"net.core.somaxconn", "link.mtu[@link]",
                                            "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_syncookies"}
    assert summary["host_global"] == []


def test_table2_is_27_knobs_in_28_orthogonal_runs() -> None:
    design = load_design(DESIGNS / "table2_pb28.yaml")
    plan = make_plan(design)
    assert len(design.knobs) == 27
    rep = plan[plan["replicate"] == 0]
    x = np.column_stack([np.where(rep[k.id].map(lambda v, b=k.baseline: v == b), -1, 1) for k in design.knobs])
    assert x.shape == (28, 27)
    np.testing.assert_array_equal(x.T @ x, 28 * np.eye(27))


def test_fracfact_7_is_resolution_three_in_8_runs() -> None:
    design = load_design(DESIGNS / "fracfact_7.yaml")
    summary = plan_summary(design, make_plan(design))
    assert summary["runs_per_replicate"] == 8 and summary["fractional"]["resolution"] == 3


def test_real_catalogue_rejects_unknown_knob(tmp_path: Path) -> None:
    text = (DESIGNS / "default.yaml").read_text().replace("net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_fin_timeot")
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    with pytest.raises(DesignError, match=r"typo.yaml:\d+: knobs\[2\]\.name: .*tcp_fin_timeot"):
        load_design(path)


def test_real_catalogue_rejects_out_of_range_level(tmp_path: Path) -> None:
    text = (DESIGNS / "default.yaml").read_text().replace("levels: [1, 0]", "levels: [1, 9]")
    path = tmp_path / "range.yaml"
    path.write_text(text)
    with pytest.raises(DesignError, match=r"knobs\[3\]\.levels\[1\]"):
        load_design(path)


def test_real_catalogue_rejects_triplet_with_two_numbers(tmp_path: Path) -> None:
    path = tmp_path / "rmem.yaml"
    text = (DESIGNS / "default.yaml").read_text().split("knobs:")[0] + (
        "knobs:\n  - {name: net.ipv4.tcp_rmem, levels: [[4096, 131072, 6291456], [4096, 131072]]}\n"
        "design: {type: oat, seed: 1}\n")
    path.write_text(text)
    with pytest.raises(DesignError, match=r"rmem.yaml:\d+: knobs\[0\]\.levels\[1\]: net\.ipv4\.tcp_rmem"):
        load_design(path)
