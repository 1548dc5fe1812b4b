"""One short duet A/A on two real labs: the structure only (pairs, sides swapped, both labs removed), never a verdict."""
from __future__ import annotations

import os
import subprocess

import pytest

from tunelab.duet import side_options
from tunelab.loads import get_load
from tunelab.optimize.duet_confirm import RunnerDuetEvaluator
from tunelab.runner.binding import bind_knob_ids
from tunelab.runner.load_setup import cleanup_load
from tunelab.store import Store
from tunelab.targets.lab import LabTarget, state_path

from tests.targets.conftest import require_tools

pytestmark = pytest.mark.lab

KNOB = "net.ipv4.tcp_fin_timeout"


def namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a duet's CPU layout needs 2 CPUs")
def test_a_duet_aa_records_two_pairs_on_two_labs_with_the_sides_swapped(lab_tools, tmp_path):
    require_tools("dnsperf")
    options = side_options("lab", {"services": ("dns",)})
    load_settings = get_load("dnsperf")().settings("low", {"rate": 500})
    loads = [get_load("dnsperf")(), get_load("dnsperf")()]
    config = {KNOB: 60}
    with LabTarget(**options[0]) as lab0, LabTarget(**options[1]) as lab1, \
            Store.open(tmp_path / "duet.sqlite", study="duet-aa", design_hash="h", design_text="aa") as store:
        names = [lab0.lab_name, lab1.lab_name]
        evaluator = RunnerDuetEvaluator([lab0, lab1], loads, bind_knob_ids([KNOB]), store, warmup_s=1, measure_s=2,
                                        load_settings=load_settings)
        sides = [evaluator.evaluate_pair(pair, {"A": config, "B": config}, "aa:") for pair in (0, 1)]
        for lab, load in zip((lab0, lab1), loads):
            cleanup_load(load, lab)
        trials = store.trials("validate")
    assert [[(side, arm) for side, arm, _, _ in pair] for pair in sides] == [[(0, "A"), (1, "B")], [(0, "B"), (1, "A")]]
    assert len(trials) == 4 and set(trials["status"]) <= {"ok", "flagged"}, trials[["run_key", "status", "reason"]]
    recorded = sorted((plan["duet_pair"], plan["duet_side"], plan["duet_arm"]) for plan in trials["plan"])
    assert recorded == [(0, 0, "A"), (0, 1, "B"), (1, 0, "B"), (1, 1, "A")]
    assert all(metrics.get("qps", 0) > 0 for metrics in trials["metrics"])
    listed = namespaces()
    for name in names:
        assert not state_path(name).exists() and f"tl-{name}-" not in listed
