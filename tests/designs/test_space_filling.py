"""Space-filling and range designs (issue 14, item 7): the Latin hypercube and Morris generators
built on SALib, their stratification, determinism, ranges and trajectory structure, the
too-few-runs errors, and the round trip design -> plan -> tidy runs -> tunelab.stats.response."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from SALib.sample import latin as salib_latin

from tests.designs.conftest import fake_lookup
from tunelab.designs import GENERATORS, generators, load_design_text, make_plan, plan_summary
from tunelab.designs.generators import latin_hypercube, morris_trajectories, runs_per_replicate
from tunelab.errors import DesignError
from tunelab.stats.response import morris_effects, range_effects
from tunelab.model import DesignType

DESIGNS = Path(__file__).resolve().parents[2] / "designs"
RANGE_KNOBS = [{"name": "fake.k00", "low": 0, "high": 1000, "baseline": 500},
               {"name": "fake.k01", "low": 1, "high": 4096, "scale": "log", "baseline": 64},
               {"name": "fake.k02", "low": 128, "high": 8192, "step": 128, "baseline": 1024}]


def _rows(design) -> Any:
    return GENERATORS.get(design.design_type).build(design, np.random.default_rng(design.seed))


def _yaml_design(design: str, knobs: str = "") -> str:
    """A design file as text: three range knobs (or the ``knobs`` lines given) and the ``design`` line."""
    knobs = knobs or ("- {name: fake.k00, low: 0, high: 1000, baseline: 500}\n"
                      "- {name: fake.k01, low: 1, high: 4096, scale: log, baseline: 64}\n"
                      "- {name: fake.k02, low: 128, high: 8192, step: 128, baseline: 1024}")
    lines = ["name: space", "target: {type: dry-run}", "load: {generator: dnsperf, profile: low}",
             "metrics:", "  - {name: qps, direction: maximize, sesoi_pct: 5}", "knobs:",
             *(f"  {line}" for line in knobs.splitlines()), f"design: {design}"]
    return "\n".join(lines) + "\n"


def _load_error(text: str) -> str:
    with pytest.raises(DesignError) as info:
        load_design_text(text, source="space.yaml", knob_lookup=fake_lookup)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith("space.yaml:")
    return message


# --------------------------------------------------------------------------------------------
# Latin hypercube


def test_latin_hypercube_is_salibs_sample_from_the_given_generator() -> None:
    ours = latin_hypercube(9, 3, np.random.default_rng(5))
    problem = {"num_vars": 3, "names": ["a", "b", "c"], "bounds": [[0.0, 1.0]] * 3}
    np.testing.assert_array_equal(ours, salib_latin.sample(problem, 9, seed=np.random.default_rng(5)))
    for column in ours.T:
        assert sorted((column * 9).astype(int)) == list(range(9))


def test_lhs_keeps_every_knob_stratified_on_its_own_scale_and_grid(make_design) -> None:
    n = 12
    design = make_design(knobs=RANGE_KNOBS, design={"type": "latin_hypercube", "seed": 4, "options": {"samples": n}})
    rows = _rows(design).rows
    assert len(rows) == n
    linear = np.array([r["fake.k00"] for r in rows], dtype=float) / 1000
    logpos = np.log(np.array([r["fake.k01"] for r in rows], dtype=float)) / np.log(4096)
    stepped = np.array([r["fake.k02"] for r in rows])
    for position in (linear, logpos, (stepped - 128) / (8192 - 128)):
        assert sorted(np.minimum((position * n).astype(int), n - 1)) == list(range(n))
    assert ((stepped - 128) % 128 == 0).all() and all(isinstance(r["fake.k00"], int) for r in rows)


def test_lhs_is_deterministic_from_the_design_seed(make_design) -> None:
    def plan(seed: int) -> pd.DataFrame:
        return make_plan(make_design(knobs=RANGE_KNOBS, design={"type": "latin_hypercube", "seed": seed,
                                                                "options": {"samples": 8}}))
    pd.testing.assert_frame_equal(plan(3), plan(3))
    assert not plan(3)["fake.k00"].sort_values().reset_index(drop=True).equals(
        plan(4)["fake.k00"].sort_values().reset_index(drop=True))


def test_lhs_info_records_the_ranges_and_samples(make_design) -> None:
    knobs = RANGE_KNOBS + [{"name": "fake.k03", "levels": [30, 10, 20]}]
    design = make_design(knobs=knobs, design={"type": "latin_hypercube", "seed": 1, "options": {"samples": 6}})
    info = _rows(design).info
    assert info["samples"] == 6 and info["unit"].shape == (6, 4)
    assert info["ranges"]["fake.k01"] == {"low": 1, "high": 4096, "scale": "log", "step": None, "levels": None}
    assert info["ranges"]["fake.k02"]["step"] == 128
    assert info["ranges"]["fake.k03"] == {"low": 10, "high": 30, "scale": "linear", "step": None,
                                          "levels": [30, 10, 20]}


def test_lhs_with_too_few_samples_is_one_clear_error() -> None:
    message = _load_error(_yaml_design("{type: latin_hypercube, options: {samples: 4}}"))
    assert "design: latin_hypercube: samples=4 is too few for 3 knobs" in message
    assert "use samples: 5 or more" in message and "10 or more to also fit a curvature" in message


def test_lhs_with_fewer_runs_than_knobs_is_refused_and_k_plus_2_is_enough() -> None:
    message = _load_error(_yaml_design("{type: latin_hypercube, options: {samples: 2}}"))
    assert "samples=2 is too few for 3 knobs" in message
    design = load_design_text(_yaml_design("{type: latin_hypercube, options: {samples: 5}}"), knob_lookup=fake_lookup)
    assert len(make_plan(design)) == 5


def test_lhs_redraws_until_two_level_knobs_are_not_confounded(make_design, two_level) -> None:
    """3 two-level knobs in 5 samples: about a third of raw draws alias two knobs (seed 3 does)."""
    for seed in range(12):
        design = make_design(knobs=two_level(3), design={"type": "latin_hypercube", "seed": seed,
                                                         "options": {"samples": 5}})
        x = pd.DataFrame(_rows(design).rows)[design.knob_ids].to_numpy(dtype=float)
        assert np.linalg.matrix_rank(np.column_stack([np.ones(5), x])) == 4, seed


def test_lhs_that_cannot_separate_its_knobs_is_one_clear_error(make_design, two_level,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generators, "MAX_LHS_DRAWS", 1)
    with pytest.raises(DesignError) as info:
        make_design(knobs=two_level(3), design={"type": "latin_hypercube", "seed": 3, "options": {"samples": 5}})
    assert "varies the 3 knobs independently" in str(info.value) and "use more samples" in str(info.value)


# --------------------------------------------------------------------------------------------
# Morris


def _morris(make_design, knobs: list[dict[str, Any]] | None = None, seed: int = 2, **options: Any):
    return make_design(knobs=knobs or RANGE_KNOBS, design={"type": "morris", "seed": seed, "options": options})


def test_morris_trajectories_move_one_knob_at_a_time_by_half_the_grid() -> None:
    index = morris_trajectories(5, 3, 4, np.random.default_rng(0))
    assert index.shape == (20, 3) and set(np.unique(index)) <= {0, 1, 2, 3}
    for trajectory in index.reshape(5, 4, 3):
        steps = np.diff(trajectory, axis=0)
        assert ((steps != 0).sum(axis=1) == 1).all()                 # one knob per step ...
        assert sorted(np.flatnonzero(steps.any(axis=0))) == [0, 1, 2]  # ... each knob once
        assert set(np.abs(steps[steps != 0])) == {2}                  # Δ = p / 2 grid steps


def test_morris_points_are_trajectories_over_each_knobs_grid(make_design) -> None:
    knobs = RANGE_KNOBS + [{"name": "fake.k03", "levels": [30, 10, 20]}]
    design = _morris(make_design, knobs, trajectories=7)
    rows = _rows(design)
    k = len(knobs)
    assert rows.info["trajectories"] == 7 and rows.info["levels"] == 4
    points = pd.DataFrame(rows.info["points"])
    assert len(points) == 7 * (k + 1) and points.to_dict("records") == rows.rows
    ids = design.knob_ids
    for t in range(7):
        trajectory = points.iloc[t * (k + 1):(t + 1) * (k + 1)][ids].to_numpy()
        moved = (np.diff(trajectory, axis=0) != 0)
        assert (moved.sum(axis=1) == 1).all() and (moved.sum(axis=0) == 1).all()
    assert set(points["fake.k00"]) <= {0, 333, 667, 1000}
    assert set(points["fake.k01"]) <= {1, 16, 256, 4096}                      # log-spaced grid
    assert set(points["fake.k02"]) <= {128, 2816, 5504, 8192}                 # on the step grid
    assert set(points["fake.k03"]) <= {10, 20, 30}
    assert rows.info["ranges"]["fake.k01"]["scale"] == "log"


def test_morris_runs_per_replicate_counts_trajectories_baselines_and_replicates(make_design) -> None:
    design = make_design(knobs=RANGE_KNOBS, design={"type": "morris", "replicates": 2, "seed": 5,
                                                    "options": {"trajectories": 4, "baseline_runs": 1}})
    plan = make_plan(design)
    assert runs_per_replicate(design) == 4 * 4 + 1
    assert len(plan) == 2 * (4 * 4 + 1) and plan["is_baseline"].sum() >= 2
    assert plan_summary(design, plan)["runs_per_replicate"] == 17
    default = _morris(make_design)
    assert runs_per_replicate(default) == len(make_plan(default)) == 10 * 4


def test_morris_is_deterministic_from_the_seed(make_design) -> None:
    assert _rows(_morris(make_design, seed=8)).rows == _rows(_morris(make_design, seed=8)).rows
    assert _rows(_morris(make_design, seed=8)).rows != _rows(_morris(make_design, seed=9)).rows
    pd.testing.assert_frame_equal(make_plan(_morris(make_design, seed=8)), make_plan(_morris(make_design, seed=8)))


@pytest.mark.parametrize(("design", "knobs", "expected"), [
    ("{type: morris, options: {trajectories: 1}}", "",
     "option trajectories must be an integer >= 2, got 1"),
    ("{type: morris, options: {levels: 3}}", "", "option levels must be an even integer >= 2, got 3"),
    ("{type: morris, options: {samples: 10}}", "", "unknown key 'samples'"),
    ("{type: morris}", "- {name: fake.k00, low: 0, high: 2}",
     "a 4-level Morris grid over 0..2 rounds to only 3 distinct values"),
    ("{type: morris}", "- {name: fake.k00, levels: [5]}", "has the single level 5"),
    ("{type: morris}", "- {name: block.queue.scheduler, device: loop0, levels: [none, bfq]}",
     "Morris elementary effects need ordered numeric levels"),
], ids=["one-trajectory", "odd-levels", "unknown-option", "narrow-range", "one-level", "words"])
def test_bad_morris_designs_are_one_clear_error(design: str, knobs: str, expected: str) -> None:
    message = _load_error(_yaml_design(design, knobs))
    assert expected in message and "design" in message


def test_shipped_space_filling_designs_load_and_plan() -> None:
    pytest.importorskip("tunelab.knobs")
    from tunelab.designs import load_design

    lhs = load_design(DESIGNS / "lhs_buffers.yaml")
    assert len(make_plan(lhs)) == 14
    morris = load_design(DESIGNS / "morris_buffers.yaml")
    assert morris.design_type is DesignType.MORRIS and morris.knob_ids == lhs.knob_ids
    assert len(make_plan(morris)) == runs_per_replicate(morris) == 6 * 5
    assert (DESIGNS / "morris_buffers.yaml").read_text().startswith("# ")      # a header says what it answers


# --------------------------------------------------------------------------------------------
# design -> plan -> runs -> analysis


def _simulate(plan: pd.DataFrame, active: str, width: float, seed: int) -> pd.DataFrame:
    """Tidy runs: qps = 1000 · exp(0.2 · position of ``active`` in its range) · noise (CV 1 %)."""
    rng = np.random.default_rng(seed)
    position = (plan[active] - plan[active].min()) / width
    return plan.assign(qps=1000 * np.exp(0.2 * position + rng.normal(0, 0.01, len(plan))))


def test_a_well_posed_lhs_is_read_by_the_range_regression(make_design) -> None:
    design = make_design(knobs=RANGE_KNOBS, design={"type": "latin_hypercube", "seed": 7, "replicates": 2,
                                                    "options": {"samples": 5, "baseline_runs": 1}})
    runs = _simulate(make_plan(design), "fake.k00", 1000, seed=1)
    info = _rows(design).info
    scales = {knob: spec["scale"] for knob, spec in info["ranges"].items()}
    terms, curves = range_effects(runs, "qps", design.knob_ids, design.baseline, x_scale=scales, log_y=True)
    assert terms["p"].notna().all() and terms["df2"].gt(0).all()
    top = terms.iloc[0]
    assert top["knob"] == "fake.k00" and top["p"] < 0.001
    assert len(curves) == 3 * 21


def test_a_morris_design_is_read_by_its_elementary_effects(make_design) -> None:
    design = _morris(make_design, trajectories=6)
    plan = make_plan(design)
    runs = _simulate(plan, "fake.k02", 8192 - 128, seed=2)
    info = _rows(design).info
    points = pd.DataFrame(info["points"])[design.knob_ids]
    bounds = {knob: (spec["low"], spec["high"]) for knob, spec in info["ranges"].items()}
    out = morris_effects(points, runs, "qps", design.knob_ids, bounds, levels=info["levels"], log_y=True)
    assert out["knob"].iloc[0] == "fake.k02"
    assert out["mu_star"].iloc[0] == pytest.approx(0.2, abs=0.03)          # the log change over the range
    assert (out["mu_star"].iloc[1:] < 0.05).all()
