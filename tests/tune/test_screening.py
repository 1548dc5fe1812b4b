"""tune's screen plan: a Plackett-Burman +1 cycles through each knob's other levels, evenly, and the analysis
sees each knob as baseline / changed; one at a time keeps the far level. Checked against counts made by hand."""
from __future__ import annotations

from collections import Counter

import numpy as np

from tunelab.designs import plackett_burman
from tunelab.model import DesignType
from tunelab.optimize.space import space_from_spec
from tunelab.optimize.tune.screening import CHANGED, UNCHANGED, coded_frame, screen_levels, screen_plan

SPACE = space_from_spec({
    "ints": {"kind": "int", "low": 0, "high": 90, "step": 10},          # baseline in the middle: both ends
    "flag": {"kind": "choice", "values": [False, True]},                  # two values: the other one only
    "mode": {"kind": "choice", "values": ["a", "b", "c", "d"]},
    **{f"pad{i}": {"kind": "choice", "values": [1, 2]} for i in range(6)},
})
BASELINE = {"ints": 30, "flag": False, "mode": "a", **{f"pad{i}": 1 for i in range(6)}}


def test_screen_levels_span_the_range_far_end_first() -> None:
    assert screen_levels(SPACE, "ints", 30) == (90, 0, 70, 10, 50, 20)
    assert screen_levels(SPACE, "flag", False) == (True,)
    assert screen_levels(SPACE, "mode", "a") == ("d", "c", "b")     # a short list: all its other values


def test_a_plackett_burman_plus_cycles_evenly_through_the_other_levels() -> None:
    plan = screen_plan(SPACE, BASELINE, DesignType.PLACKETT_BURMAN, runs=12, replicates=2, seed=5)
    assert len(plan.runs) == 24 and sorted(Counter(plan.runs["replicate"]).values()) == [12, 12]
    matrix = plackett_burman(len(SPACE.ids), runs=12)
    for j, knob in enumerate(SPACE.ids):
        changed = plan.runs[plan.runs[knob] != BASELINE[knob]][knob]
        assert len(changed) == 2 * int((matrix[:, j] > 0).sum())              # the +1 runs of both replicates
        counts = Counter(changed)
        assert set(counts) == set(plan.changed[knob]) == set(screen_levels(SPACE, knob, BASELINE[knob]))
        assert max(counts.values()) - min(counts.values()) <= 1              # each level as often (to one)
    coded, baseline = coded_frame(plan, plan.runs)
    assert baseline == {k: UNCHANGED for k in SPACE.ids}
    assert all(set(coded[k]) == {UNCHANGED, CHANGED} for k in SPACE.ids)
    # the coded design is the Plackett-Burman matrix itself, row by row (run order shuffled per replicate)
    signs = np.where(coded[list(SPACE.ids)].to_numpy() == CHANGED, 1, -1)
    assert sorted(map(tuple, signs)) == sorted(map(tuple, np.vstack([matrix, matrix])))


def test_one_at_a_time_sets_each_knob_at_its_far_level_alone() -> None:
    plan = screen_plan(SPACE, BASELINE, DesignType.OAT, runs=len(SPACE.ids) + 1, replicates=2, seed=5)
    varied = plan.runs.dropna(subset=["varied_knob"])
    assert len(varied) == 2 * len(SPACE.ids)
    assert set(varied[varied["varied_knob"] == "ints"]["ints"]) == {90}     # the end farther from 30
    assert set(varied[varied["varied_knob"] == "mode"]["mode"]) == {"d"}
    assert coded_frame(plan, plan.runs)[0] is plan.runs                      # analysed as measured
