"""Sequential replicates in design files: the `replicates: {min, max, ...}` form, its errors, and later rounds' plans."""
from __future__ import annotations

import textwrap

import pytest

from tunelab.designs import load_design_text, make_plan, plan_summary, round_plan
from tunelab.errors import DesignError

BASE = textwrap.dedent("""
    name: seq
    target: {type: dry-run}
    load: {generator: dnsperf, profile: low}
    measure_s: 2
    metrics: [{name: qps}]
    knobs:
      - {name: net.core.somaxconn, levels: [4096, 128, 16], baseline: 4096}
      - {name: net.ipv4.tcp_fin_timeout, levels: [60, 10]}
    design:
      type: {type}
      replicates: {replicates}
      seed: 7
""")


def design(replicates: str, design_type: str = "oat", extra: str = ""):
    text = BASE.replace("{type}", design_type).replace("{replicates}", replicates) + extra
    return load_design_text(text, source="seq.yaml")


def test_the_fixed_form_is_unchanged() -> None:
    fixed = design("5")
    assert fixed.rounds is None and fixed.replicates == 5
    assert "round" not in make_plan(fixed).columns


def test_the_sequential_form_runs_min_replicates_first() -> None:
    seq = design("{min: 3, max: 12, step: 2, until: decided, budget_trials: 50, budget_minutes: 9.5}")
    assert (seq.replicates, seq.rounds.max, seq.rounds.step) == (3, 12, 2)
    assert (seq.rounds.budget_trials, seq.rounds.budget_minutes) == (50, 9.5)
    plan = make_plan(seq)
    assert set(plan["round"]) == {1} and len(plan) == 3 * 5       # 3 varied + 2 baselines per replicate
    summary = plan_summary(seq, plan)["sequential"]
    assert summary["first_round_runs"] == 15 and summary["max_runs"] == 50    # the trial budget caps 60


def test_step_defaults_to_min_and_the_hash_sees_the_rule() -> None:
    a, b = design("{min: 3, max: 12}"), design("{min: 3, max: 15}")
    assert a.rounds.step == 3
    assert a.design_hash != b.design_hash != design("3").design_hash


@pytest.mark.parametrize("replicates, words", [
    ("{min: 5, max: 3}", "min=5 is larger than max=3"),
    ("{max: 3}", "`min` is required"),
    ("{min: 3, max: 9, until: forever}", "until"),
    ("{min: 3, max: 9, spending: guess}", "spending"),
    ("{min: 1, max: 9}", "min"),
    ("{min: 3, max: 9, budget_minutes: 0}", "budget_minutes"),
    ("{min: 3, max: 9, cadence: 2}", "cadence"),
])
def test_bad_sequential_forms_get_one_clear_error(replicates: str, words: str) -> None:
    with pytest.raises(DesignError) as caught:
        design(replicates)
    message = str(caught.value)
    assert words in message and "\n" not in message and "seq.yaml" in message


def test_blocks_are_refused_with_rounds() -> None:
    with pytest.raises(DesignError, match="blocks by round"):
        design("{min: 2, max: 8}\n  blocks: 2")


def test_a_later_oat_round_runs_only_the_pending_levels_with_fresh_baselines() -> None:
    seq = design("{min: 3, max: 12, step: 2}")
    first = make_plan(seq)
    later = round_plan(seq, {"net.core.somaxconn": [16]}, round_number=2, first_run_id=len(first))
    varied = later[~later["is_baseline"]]
    assert set(varied["varied_knob"]) == {"net.core.somaxconn"} and set(varied["net.core.somaxconn"]) == {16}
    assert len(varied) == 2 and later["is_baseline"].sum() == 2          # step 2; a baseline opens each replicate
    assert set(later["round"]) == {2} and set(later["block"]) == {1}
    assert later["run_id"].min() == len(first) and later["run_id"].is_unique
    assert set(later["replicate"]) == {3, 4}                              # replicates 0-2 were round 1's
    same = dict(zip(first["net.core.somaxconn"], first["config_id"]))     # config ids agree with round 1
    assert dict(zip(later["net.core.somaxconn"], later["config_id"]))[16] == same[16]
    again = round_plan(seq, {"net.core.somaxconn": [16]}, round_number=2, first_run_id=len(first))
    assert later.equals(again)                                            # a resumed study plans the same round


def test_only_one_at_a_time_designs_take_rounds() -> None:
    with pytest.raises(DesignError, match="one-at-a-time") as caught:
        design("{min: 2, max: 6}", design_type="full_factorial")
    assert "replicates: N" in str(caught.value)


def test_round_plans_refuse_fixed_designs_and_unknown_knobs() -> None:
    with pytest.raises(DesignError, match="fixed number of replicates"):
        round_plan(design("3"), {}, 2, 0)
    with pytest.raises(DesignError, match="not knobs"):
        round_plan(design("{min: 2, max: 4}"), {"vm.swappiness": [1]}, 2, 0)
