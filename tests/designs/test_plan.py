"""Properties of plans (Contract 2): sizes, balance, OAT interleaving, blocks, seeds, hash, cost."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from tunelab.designs import make_plan, plan_summary
from tunelab.designs.plan import PLAN_COLUMNS, RESTART_S, RUN_OVERHEAD_S

OAT_KNOBS = [
    {"name": "net.core.somaxconn", "levels": [4096, 128, 16]},
    {"name": "net.ipv4.tcp_fin_timeout", "levels": [60, 10]},
    {"name": "net.ipv4.tcp_syncookies", "levels": [1, 0]},
    {"name": "net.ipv4.tcp_rmem", "levels": [[4096, 131072, 6291456], [4096, 131072, 16777216]], "host": "client"},
]


def coded(plan: pd.DataFrame, design) -> np.ndarray:
    """±1 coding of a two-level plan: -1 where the knob is at its baseline."""
    return np.column_stack([np.where(plan[k.id].map(lambda v, b=k.baseline: v == b), -1, 1) for k in design.knobs])


def test_columns_follow_contract_order_and_types(make_design) -> None:
    design = make_design(knobs=OAT_KNOBS, design={"type": "oat", "replicates": 2, "seed": 5})
    plan = make_plan(design)
    assert list(plan.columns) == PLAN_COLUMNS + ["net.core.somaxconn", "net.ipv4.tcp_fin_timeout",
                                                 "net.ipv4.tcp_syncookies", "net.ipv4.tcp_rmem@client"]
    assert sorted(plan["run_id"]) == list(range(len(plan)))
    assert list(plan["run_order"]) == list(range(len(plan)))             # sorted by execution order
    assert plan["net.core.somaxconn"].dtype == np.int64
    assert all(isinstance(v, tuple) and len(v) == 3 for v in plan["net.ipv4.tcp_rmem@client"])
    assert plan.loc[~plan["is_baseline"], "varied_knob"].map(lambda v: isinstance(v, str)).all()
    assert plan.loc[plan["is_baseline"], "varied_knob"].map(lambda v: v is None).all()


def test_full_factorial_3_knobs_3_replicates_gives_24_runs(make_design) -> None:
    knobs = [{"name": n, "levels": lv} for n, lv in [("fake.k00", [1, 2]), ("fake.k01", [3, 4]), ("fake.k02", [5, 6])]]
    design = make_design(knobs=knobs, design={"type": "full_factorial", "replicates": 3, "seed": 2})
    plan = make_plan(design)
    assert len(plan) == 24
    ids = design.knob_ids
    combos = Counter(tuple(r) for r in plan[ids].itertuples(index=False, name=None))
    assert len(combos) == 8 and set(combos.values()) == {3}
    assert plan.groupby("replicate").size().tolist() == [8, 8, 8]
    # config_id identifies the setting: one id per combination
    assert plan.groupby("config_id")[ids].nunique().max().max() == 1
    assert plan["config_id"].nunique() == 8


def test_full_factorial_mixed_levels(make_design) -> None:
    knobs = [{"name": "fake.k00", "levels": [1, 2, 3]}, {"name": "fake.k01", "levels": [1, 2]},
             {"name": "block.queue.scheduler", "device": "loop0", "levels": ["none", "mq-deadline", "bfq", "kyber"]}]
    plan = make_plan(make_design(knobs=knobs, design={"type": "full_factorial", "seed": 1}))
    assert len(plan) == 24 and plan["config_id"].nunique() == 24


def test_oat_has_every_level_with_baseline_and_interleaves_baselines(make_design) -> None:
    design = make_design(knobs=OAT_KNOBS, design={"type": "oat", "replicates": 3, "seed": 11})
    plan = make_plan(design)
    baseline = design.baseline
    assert plan["is_baseline"].sum() >= 3
    for knob in design.knobs:
        for level in (lv for lv in knob.levels if lv != knob.baseline):
            rows = plan[plan[knob.id].map(lambda v, lv=level: v == lv)]
            assert len(rows) == 3 and (rows["varied_knob"] == knob.id).all()
            # every other knob stays at its baseline in OAT
            for other in design.knobs:
                if other.id != knob.id:
                    assert rows[other.id].map(lambda v, b=baseline[other.id]: v == b).all()
    varied = plan[~plan["is_baseline"]]
    assert varied.groupby("varied_knob").size().to_dict() == {"net.core.somaxconn": 6, "net.ipv4.tcp_fin_timeout": 3,
                                                              "net.ipv4.tcp_syncookies": 3, "net.ipv4.tcp_rmem@client": 3}
    # 5 varied runs per replicate, baseline_every 2 -> 3 baselines per replicate, never two varied
    # groups longer than 2 without a baseline, and baselines spread over the whole plan
    assert plan.groupby("replicate")["is_baseline"].sum().tolist() == [3, 3, 3]
    flags = plan["is_baseline"].tolist()
    longest = max(len(run) for run in "".join("v" if not f else "b" for f in flags).split("b"))
    assert longest <= 2
    positions = plan.index[plan["is_baseline"]]
    assert positions.min() == 0 and positions.max() > len(plan) * 0.75


def test_oat_baseline_every_option(make_design) -> None:
    design = make_design(knobs=OAT_KNOBS, design={"type": "oat", "seed": 1, "options": {"baseline_every": 1}})
    plan = make_plan(design)
    assert plan["is_baseline"].tolist() == [True, False] * 5


def test_same_seed_same_plan_other_seed_other_order(make_design) -> None:
    spec = {"type": "full_factorial", "replicates": 4, "seed": 7}
    knobs = [{"name": "fake.k00", "levels": [1, 2, 3]}, {"name": "fake.k01", "levels": [1, 2]}]
    first, again = make_plan(make_design(knobs=knobs, design=spec)), make_plan(make_design(knobs=knobs, design=spec))
    pd.testing.assert_frame_equal(first, again)
    other = make_plan(make_design(knobs=knobs, design={**spec, "seed": 8}))
    assert first["run_id"].tolist() != other["run_id"].tolist()
    # the same runs, only in another order: run_id keeps its meaning across seeds
    pd.testing.assert_frame_equal(first.drop(columns="run_order").sort_values("run_id").reset_index(drop=True),
                                  other.drop(columns="run_order").sort_values("run_id").reset_index(drop=True))


def test_oat_order_depends_on_seed(make_design) -> None:
    plans = [make_plan(make_design(knobs=OAT_KNOBS, design={"type": "oat", "replicates": 3, "seed": s})) for s in (1, 2)]
    assert plans[0]["run_id"].tolist() != plans[1]["run_id"].tolist()


def test_blocks_hold_whole_replicates_and_are_randomised_within(make_design) -> None:
    design = make_design(knobs=[{"name": "fake.k00", "levels": [1, 2, 3, 4]}],
                         design={"type": "full_factorial", "replicates": 6, "blocks": 3, "seed": 4})
    plan = make_plan(design)
    assert (plan.groupby("replicate")["block"].nunique() == 1).all()
    assert plan.groupby("block")["replicate"].nunique().tolist() == [2, 2, 2]
    # blocks run one after another
    assert plan["block"].is_monotonic_increasing
    # within a block the runs are shuffled (not in standard order)
    assert not plan[plan["block"] == 0]["run_id"].is_monotonic_increasing


@pytest.mark.parametrize(("k", "runs"), [(7, 8), (11, 12), (19, 20), (27, 28)])
def test_plackett_burman_plan_is_balanced_and_orthogonal(make_design, two_level, k: int, runs: int) -> None:
    design = make_design(knobs=two_level(k), design={"type": "plackett_burman", "replicates": 2, "seed": 3})
    plan = make_plan(design)
    assert len(plan) == 2 * runs
    for _, rep in plan.groupby("replicate"):
        x = coded(rep, design)
        np.testing.assert_array_equal(x.sum(axis=0), 0)
        np.testing.assert_array_equal(x.T @ x, runs * np.eye(k))


def test_seven_knob_plackett_burman_has_8_runs_per_replicate(make_design, two_level) -> None:
    design = make_design(knobs=two_level(7), design={"type": "plackett_burman", "replicates": 3, "seed": 3})
    plan = make_plan(design)
    assert plan.groupby("replicate").size().tolist() == [8, 8, 8]
    assert plan_summary(design, plan)["runs_per_replicate"] == 8


def test_fractional_plan_and_summary(make_design, two_level) -> None:
    design = make_design(knobs=two_level(7), design={"type": "fractional_factorial", "seed": 3,
                                                     "options": {"generators": ["D=AB", "E=AC", "F=BC", "G=ABC"]}})
    plan = make_plan(design)
    assert len(plan) == 8
    x = coded(plan, design)
    np.testing.assert_array_equal(x.T @ x, 8 * np.eye(7))
    np.testing.assert_array_equal(x[:, 3], x[:, 0] * x[:, 1])            # D = AB holds in the plan itself
    summary = plan_summary(design, plan)["fractional"]
    assert summary["resolution"] == 3
    assert summary["letters"]["A"] == "fake.k00"
    assert "BD" in summary["aliases"]["A"]


def test_baseline_runs_option_adds_baseline_runs(make_design, two_level) -> None:
    design = make_design(knobs=two_level(3), design={"type": "plackett_burman", "seed": 1, "options": {"baseline_runs": 2}})
    plan = make_plan(design)
    assert len(plan) == 6 and plan["is_baseline"].sum() == 2
    assert plan.loc[plan["is_baseline"], "config_id"].nunique() == 1


def test_latin_hypercube_plan_stratifies_each_knob(make_design) -> None:
    knobs = [{"name": "fake.k00", "low": 0, "high": 1000}, {"name": "fake.k01", "low": 1, "high": 4096, "scale": "log"},
             {"name": "block.queue.scheduler", "device": "loop0", "levels": ["none", "mq-deadline"]}]
    n = 8
    design = make_design(knobs=knobs, design={"type": "latin_hypercube", "replicates": 2, "seed": 9,
                                              "options": {"samples": n}})
    plan = make_plan(design)
    assert len(plan) == 2 * n
    first = plan[plan["replicate"] == 0]
    linear = np.minimum((first["fake.k00"].to_numpy() / 1000 * n).astype(int), n - 1)
    assert sorted(linear) == list(range(n))
    logpos = np.log(first["fake.k01"].to_numpy(dtype=float)) / np.log(4096)
    assert sorted(np.minimum((logpos * n).astype(int), n - 1)) == list(range(n))
    assert Counter(first["block.queue.scheduler[loop0]"]) == {"none": n // 2, "mq-deadline": n // 2}


def test_knob_ids_name_device_and_client(make_design) -> None:
    knobs = [{"name": "block.queue.read_ahead_kb", "device": "loop0", "levels": [128, 4096]},
             {"name": "net.core.somaxconn", "host": "client", "levels": [4096, 16]}]
    design = make_design(knobs=knobs)
    assert design.knob_ids == ["block.queue.read_ahead_kb[loop0]", "net.core.somaxconn@client"]


def test_range_levels_step_and_log(make_design) -> None:
    design = make_design(knobs=[{"name": "fake.k00", "low": 10, "high": 50, "step": 20},
                                {"name": "fake.k01", "low": 1, "high": 1000, "scale": "log", "n": 4, "baseline": 10}])
    assert design.knobs[0].levels == (10, 30, 50)
    assert design.knobs[1].levels == (1, 10, 100, 1000)
    assert design.knobs[1].baseline == 10


def test_design_hash_is_stable_and_tracks_content(make_design) -> None:
    a = make_design()
    assert a.design_hash == make_design().design_hash
    assert len(a.design_hash) == 64
    assert make_design(description="only words differ").design_hash == a.design_hash
    assert make_design(warmup_s=3).design_hash != a.design_hash
    assert make_design(design={"type": "oat", "replicates": 1, "seed": 2}).design_hash != a.design_hash


def test_estimated_wall_time_counts_runs_and_restarts(make_design) -> None:
    # somaxconn requires a restart (fake catalogue); fin_timeout does not
    design = make_design(knobs=[{"name": "net.core.somaxconn", "levels": [4096, 16]},
                                {"name": "net.ipv4.tcp_fin_timeout", "levels": [60, 10]}],
                         design={"type": "oat", "replicates": 2, "seed": 3, "options": {"baseline_every": 1}},
                         warmup_s=2, measure_s=6)
    plan = make_plan(design)
    changes = sum(a != b for a, b in zip(plan["net.core.somaxconn"], plan["net.core.somaxconn"][1:]))
    summary = plan_summary(design, plan)
    assert summary["runs"] == 8 and summary["restarts"] == changes > 0
    assert summary["estimated_wall_s"] == pytest.approx(8 * (2 + 6 + RUN_OVERHEAD_S) + changes * RESTART_S)


def test_summary_flags_host_global_knobs(make_design) -> None:
    design = make_design(knobs=[{"name": "net.core.rmem_max", "levels": [212992, 16777216]}])
    summary = plan_summary(design, make_plan(design))
    assert summary["host_global"] == ["net.core.rmem_max"]
    assert summary["knobs"][0]["scope"] == "host"
    assert any("allow_host_global" in w for w in summary["warnings"])
    allowed = make_design(knobs=[{"name": "net.core.rmem_max", "levels": [212992, 16777216]}],
                          target={"type": "dry-run", "allow_host_global": True})
    assert plan_summary(allowed, make_plan(allowed))["warnings"] == []
