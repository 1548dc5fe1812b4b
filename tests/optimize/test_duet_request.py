"""A duet is one field of a validate request: from the flags or a change file, checked by ``check_request`` (so
``--plan`` refuses what validate refuses), previewed as two targets and pairs (in rounds: ``blocks: {min, max,
step}`` counts pairs), and run on two simulator targets."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tunelab.designs.change import BlockRule, load_change
from tunelab.errors import DesignError, TunelabError
from tunelab.optimize.confirm import row_text
from tunelab.optimize.validate_plan import preview_request
from tunelab.optimize.validation import (Measurement, check_request, flags_request, request_of_change,
                                         validate_change)
from tunelab.store import Store

CANDIDATE = {"net.core.somaxconn": 1024}


def change(tmp: Path, **edits) -> Path:
    content = {"name": "duet-somaxconn", "target": {"type": "simulator", "options": {"surface": "simple"}},
               "baseline": {"net.core.somaxconn": 128}, "candidate": CANDIDATE, "metrics": ["qps:max:5"],
               "measurement": "duet", "pairs": 4, **edits}
    path = tmp / "change.yaml"
    path.write_text(yaml.safe_dump(content, sort_keys=False))
    return path


def test_a_change_file_s_duet_runs_its_pairs_on_two_targets(tmp_path: Path) -> None:
    store = tmp_path / "c.sqlite"
    run = validate_change(change(tmp_path), store=store, write_sysctl=False)
    measured = run.confirmation.measurements
    assert sorted(zip(measured["pair"], measured["side"])) == [(p, s) for p in range(4) for s in (0, 1)]
    assert set(run.confirmation.table["measurement"]) == {"duet"}
    assert run.provenance["measurement"]["kind"] == "duet" and run.provenance["measurement"]["pairs"] == 4
    with Store(store, readonly=True) as opened:
        assert len(opened.trials("validate")) == 8


@pytest.mark.parametrize(("edits", "words"), [
    ({"measurement": "trio"}, "measurement"),
    ({"measurement": "sequential", "pairs": 4}, "pairs goes with measurement: duet"),
    ({"measurement": "sequential", "pairs": None, "cpu_layout": "split"}, "cpu_layout goes with measurement: duet"),
    ({"pairs": "many"}, "pairs"),
])
def test_a_change_file_s_bad_duet_keys_are_one_line_naming_the_key(tmp_path: Path, edits: dict, words: str) -> None:
    with pytest.raises(DesignError, match=words) as caught:
        load_change(change(tmp_path, **edits))
    assert "\n" not in str(caught.value) and "change.yaml" in str(caught.value)


@pytest.mark.parametrize(("edits", "words"), [
    ({"pairs": 2}, "a duet needs at least 4 pairs"),
    ({"pairs": 8, "blocks": {"min": 4, "max": 12}}, "counted in pairs.*not both"),
    ({"pairs": None, "blocks": {"min": 4, "max": 12, "step": 3}}, "count pairs, in even numbers"),
    ({"pairs": None, "blocks": {"min": 2, "max": 12, "step": 2}}, "at least 4 pairs"),
    ({"cpu_layout": "triple"}, "triple"),
])
def test_validate_and_its_plan_refuse_the_same_duet(tmp_path: Path, edits: dict, words: str) -> None:
    request = request_of_change(load_change(change(tmp_path, **edits)), store=tmp_path / "x.sqlite")
    if "cpu_layout" in edits:         # a layout applies to labs only: the simulator takes its options as given
        request = flags_request("lab", CANDIDATE, load="dnsperf", measurement="duet", cpu_layout="triple")
    for attempt in (check_request, lambda r: preview_request(r, offline=True)):
        with pytest.raises(TunelabError, match=words) as caught:
            attempt(request)
        assert "\n" not in str(caught.value)
    assert not (tmp_path / "x.sqlite").exists()


def test_a_duet_on_a_target_two_of_which_cannot_run_here_is_refused() -> None:
    request = flags_request("ssh", {"net.ipv4.tcp_fin_timeout": 30}, target_options={"server": "root@192.0.2.10"},
                            load="dnsperf", measurement="duet")
    with pytest.raises(TunelabError, match="two targets of one spec at once on this machine: lab, simulator"):
        check_request(request)


def test_the_plan_of_a_duet_names_both_sides_and_counts_pairs_not_blocks() -> None:
    request = flags_request("simulator", CANDIDATE, blocks=3, measurement="duet", warmup_s=2, measure_s=8)
    assert request.measurement == Measurement("duet")
    preview = preview_request(request, offline=True)
    text = preview.text()
    assert "measurement: duet on two simulator targets" in text and "pairs per profile: 6" in text
    assert "A B B A" not in text
    # 6 pairs x 1 profile x (2 s + 8 s + 1 s overhead): both sides of a pair measure at once
    assert preview.estimate_s == (66.0, 66.0)


def test_a_change_file_s_duet_in_rounds_counts_pairs_and_stops_at_a_look(tmp_path: Path) -> None:
    rounds = {"min": 4, "max": 16, "step": 4}
    path = change(tmp_path, pairs=None, blocks=rounds)
    request = request_of_change(load_change(path), store=tmp_path / "r.sqlite")
    checked = check_request(request)
    assert checked.request.measurement.pair_rule(checked.rule) == BlockRule(4, 16, 4)     # the rounds count pairs
    run = validate_change(path, store=tmp_path / "r.sqlite", write_sysctl=False)
    measured, row = run.confirmation.measurements, run.confirmation.table.iloc[0]
    pairs = measured["pair"].nunique()
    assert pairs in (4, 8, 12, 16) and len(measured) == 2 * pairs and row["blocks"] == pairs
    assert row["look"] == pairs // 4 and run.confirmation.note.startswith("pairs: looks at ")
    assert run.provenance["measurement"]["pairs"] == {**rounds, "spending": "linear"}
    with Store(tmp_path / "r.sqlite", readonly=True) as opened:
        assert len(opened.trials("validate")) == 2 * pairs


def test_the_plan_of_a_duet_in_rounds_shows_its_looks_and_the_range_of_its_time() -> None:
    request = flags_request("simulator", CANDIDATE, blocks=BlockRule(4, 16, 4), measurement="duet", warmup_s=2,
                            measure_s=8)
    preview = preview_request(request, offline=True)
    assert ("pairs per profile: 4 first, then 4 more per round while a metric is undecided, at most 16; looks at "
            "4 (alpha 0.0125), 8 (alpha 0.0125), 12 (alpha 0.0125), 16 (alpha 0.0125) (linear alpha spending)"
            in preview.text())
    # 4 to 16 pairs x 1 profile x (2 s + 8 s + 1 s overhead)
    assert preview.estimate_s == (44.0, 176.0)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the split layout needs 2 CPUs")
def test_a_lab_duet_s_sides_get_the_cpu_layout_s_pinning() -> None:
    checked = check_request(flags_request("lab", CANDIDATE, load="dnsperf", measurement="duet", cpu_layout="split"))
    zero, one = (side["options"] for side in checked.sides)
    assert zero["server_cpu"] == zero["client_cpu"] != one["server_cpu"] == one["client_cpu"]
    assert "server_cpu" not in checked.spec["options"]       # the store's spec is the one asked for
    assert checked.build_spec is checked.sides[0]


def test_a_row_says_its_nominal_level_and_its_unit() -> None:
    row = SimpleNamespace(profile="overload", metric="qps", verdict="inconclusive", pct_change=1.0, ci_low=-2.0,
                          ci_high=4.0, sesoi_pct=5.0, tost_p=0.2, blocks_needed=14, measurement="duet",
                          alpha_nominal=0.01)
    assert row_text(row) == ("  [overload] qps: +1.00 % (99 % CI -2.00 .. +4.00), SESOI ±5 %, TOST p=0.2 -> "
                             "inconclusive; about 14 pairs in total would decide")
    blocks = SimpleNamespace(**{**vars(row), "measurement": None, "alpha_nominal": None})
    assert row_text(blocks).endswith("(95 % CI -2.00 .. +4.00), SESOI ±5 %, TOST p=0.2 -> inconclusive; "
                                     "about 14 blocks in total would decide")


def test_a_duet_screen_asks_the_budget_before_every_pair(tmp_path: Path) -> None:
    from simulator_helpers import SOMAXCONN_KNOB, simulator_design

    from tunelab.designs import load_design_text
    from tunelab.duet import run_duet_design
    from tunelab.simulator import SimulatorTarget

    design = load_design_text(simulator_design("duet-budget", cv=0.02, knobs=(SOMAXCONN_KNOB,), replicates="4",
                                               extra="measurement: duet\n"), source="d.yaml")
    asked: list[int] = []

    def may_start() -> bool:          # the budget allows 3 pairs
        asked.append(1)
        return len(asked) <= 3

    sides = [SimulatorTarget(), SimulatorTarget()]
    with Store.open(tmp_path / "b.sqlite", study=design.name, design_hash=design.design_hash,
                    design_text="d") as store:
        summary = run_duet_design(design, sides, [side.load() for side in sides], store, progress=False,
                                  may_start=may_start)
        recorded = store.trials("screen")
    assert len(recorded) == 6 and summary.planned > 6 and len(asked) == 4
