"""Seed 003: dominance beyond CIs, interval helpers and the Pareto-pairs figure (fast, no lab)."""
from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tunelab.seeds import s003_nsga2 as s003  # noqa: E402

MAX_MIN = {"tput": "maximize", "rtt": "minimize"}


def point(tput: tuple[float, float, float], rtt: tuple[float, float, float]) -> dict[str, tuple[float, float, float]]:
    return {"tput": tput, "rtt": rtt}


@pytest.mark.parametrize("front, expected", [
    # better on both beyond both CIs: dominated
    ([point((200, 195, 205), (2, 1.5, 2.5))], "dominated"),
    # better on both means, but the throughput CIs overlap: not separable
    ([point((192, 185, 199), (2, 1.5, 2.5))], "not separable"),
    # better RTT beyond the CIs, same throughput mean: no dominance beyond CIs, but dominates on means
    ([point((190, 189, 191), (2, 1.5, 2.5))], "not separable"),
    # a front point worse on throughput: the preset is a trade-off, on the front
    ([point((150, 148, 152), (2, 1.5, 2.5))], "on the front"),
    # no CI on the front point (measured once): never dominated beyond CIs
    ([point((200, math.nan, math.nan), (2, math.nan, math.nan))], "not separable"),
    # one of several front points suffices
    ([point((150, 148, 152), (2, 1.5, 2.5)), point((210, 205, 215), (1, 0.8, 1.2))], "dominated"),
    ([], "on the front"),
])
def test_dominance_verdict_on_hand_made_points(front, expected):
    preset = point((190, 186, 194), (20, 18, 22))
    assert s003.dominance_verdict(preset, front, MAX_MIN) == expected


def test_better_beyond_ci_respects_direction():
    assert s003.better_beyond_ci((10, 9, 11), (5, 4, 6), "maximize")
    assert not s003.better_beyond_ci((10, 9, 11), (5, 4, 6), "minimize")
    assert s003.better_beyond_ci((5, 4, 6), (10, 9, 11), "minimize")
    assert not s003.better_beyond_ci((10, 8, 12), (7, 5, 9), "maximize")    # touching/overlapping CIs


def test_dominates_by_means_needs_one_strictly_better():
    a, b = point((10, 0, 0), (1, 0, 0)), point((10, 0, 0), (1, 0, 0))
    assert not s003.dominates_by_means(a, b, MAX_MIN)
    assert s003.dominates_by_means(point((10, 0, 0), (0.5, 0, 0)), b, MAX_MIN)


def test_mean_interval_matches_statsmodels():
    from statsmodels.stats.weightstats import DescrStatsW

    values = [187.2, 191.5, 189.9, 190.4, 188.1]
    mean, low, high, n = s003.mean_interval(values)
    ref_low, ref_high = DescrStatsW(np.array(values)).tconfint_mean(alpha=0.05)
    assert (n, mean) == (5, pytest.approx(189.42))
    assert (low, high) == (pytest.approx(ref_low), pytest.approx(ref_high))
    assert math.isnan(s003.mean_interval([3.0])[1])


def test_pct_change_interval_matches_a_welch_reference():
    # reference: Welch t interval on the logs from scipy's ttest_ind(equal_var=False).confidence_interval
    from scipy import stats

    cand, base = [3.1, 3.4, 2.9, 3.2], [20.5, 27.0, 24.1, 22.8, 26.3, 25.5, 21.9, 23.0]
    pct, low, high = s003.pct_change_interval(cand, base)
    res = stats.ttest_ind(np.log(cand), np.log(base), equal_var=False)
    ci = res.confidence_interval(0.95)
    diff = np.log(cand).mean() - np.log(base).mean()
    assert pct == pytest.approx(100 * (math.exp(diff) - 1))
    assert (low, high) == (pytest.approx(100 * (math.exp(ci.low) - 1)), pytest.approx(100 * (math.exp(ci.high) - 1)))
    assert math.isnan(s003.pct_change_interval([1.0], base)[0])


def _configs() -> pd.DataFrame:
    rows = [("bbr", 191.0, 3.0, 40.0), ("reno", 190.0, 17.0, 0.0), ("bbr", 185.0, 2.0, 60.0),
            ("reno", 170.0, 20.0, 5.0)]
    out = []
    for cc, tput, rtt, retr in rows:
        out.append({s003.CC: cc, s003.WMEM: s003.DEFAULTS[s003.WMEM], s003.RMEM: s003.DEFAULTS[s003.RMEM],
                    s003.LOWAT: s003.DEFAULTS[s003.LOWAT], "n": 1, "label": cc, "throughput_mbps": tput,
                    "rtt_mean_ms": rtt, "retransmits": retr})
    return pd.DataFrame(out)


def _marked() -> pd.DataFrame:
    def row(label, kind, changes, tput, rtt, retr):
        return {"label": label, "kind": kind, "n": 4, **{**s003.DEFAULTS, **changes},
                "throughput_mbps": tput[0], "throughput_mbps_low": tput[1], "throughput_mbps_high": tput[2],
                "rtt_mean_ms": rtt[0], "rtt_mean_ms_low": rtt[1], "rtt_mean_ms_high": rtt[2],
                "retransmits": retr[0], "retransmits_low": retr[1], "retransmits_high": retr[2]}
    return pd.DataFrame([
        row("defaults", "defaults", {}, (189, 188, 190), (3, 2.8, 3.2), (40, 30, 50)),
        row("fasterdata", "preset", s003.PRESETS[0].changes, (180, 178, 182), (17, 16, 18), (1, 0, 2)),
        row("latency", "preset", s003.PRESETS[2].changes, (188, 186, 191.5), (2.9, 2.7, 3.1), (45, 35, 55)),
        row("front 1", "front", {s003.LOWAT: 131072}, (192, 191, 193), (2.5, 2.4, 2.6), (30, 25, 35))])


def test_front_mask_against_hand_counted_front():
    mask = s003.front_mask(_configs(), "throughput_mbps", "rtt_mean_ms", s003.DIRECTIONS)
    assert mask.tolist() == [True, False, True, False]


def test_dominance_table_judges_each_preset_per_pair():
    table = s003.dominance_table(_configs(), _marked())
    head = table[table["pair"] == "throughput_mbps vs rtt_mean_ms"].set_index("point")["verdict"]
    # front 1 (192 [191, 193], 2.5 [2.4, 2.6]) beats the defaults beyond both CIs; latency's throughput CI
    # reaches 191.5, over front 1's low 191; fasterdata (180 [178, 182], 17 [16, 18]) is beaten beyond both CIs
    # by the defaults, latency and front 1
    assert head.to_dict() == {"defaults": "dominated", "fasterdata": "dominated", "latency": "not separable"}
    assert table.set_index(["pair", "point"]).loc[("throughput_mbps vs rtt_mean_ms", "fasterdata"), "dominated_by"] \
        == "defaults, latency, front 1"
    # throughput vs retransmits: the searched reno (190 Mbit/s, 0 retransmits, measured once, no CI) beats
    # fasterdata (180, 1) on the means only; front 1 has more retransmits: not separable
    assert table.set_index(["pair", "point"]).loc[("throughput_mbps vs retransmits", "fasterdata"), "verdict"] \
        == "not separable"
    assert len(table) == 3 * len(s003.PAIRS)


def test_a_point_is_not_judged_against_its_own_search_measurement():
    configs = _configs().iloc[[0]].assign(throughput_mbps=250.0, rtt_mean_ms=1.0)   # the defaults, measured once
    marked = _marked().iloc[[0]]
    table = s003.dominance_table(configs, marked, pairs=s003.PAIRS[:1])
    assert table["verdict"].tolist() == ["on the front"]


def test_pareto_pairs_figure_has_one_axes_per_pair_and_a_legend_entry_per_preset():
    fig = s003.pareto_pairs_figure(_configs(), _marked())
    try:
        assert len(fig.axes) == len(s003.PAIRS)
        labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
        for name in ("defaults", "fasterdata", "latency", "front 1", "Pareto front (search)"):
            assert labels.count(name) == 1
        assert [ax.get_title() for ax in fig.axes] == [f"{x} vs {y}" for x, y in s003.PAIRS]
    finally:
        plt.close(fig)


def test_presets_are_distinct_configurations_of_the_search_space():
    import yaml

    design = yaml.safe_load(s003.DESIGN.read_text())
    levels = {}
    for knob in design["knobs"]:
        kid = knob["name"] + ("@client" if knob.get("host") == "client" else "")
        levels[kid] = [tuple(v) if isinstance(v, list) else v for v in knob["levels"]]
    assert {k: v[0] for k, v in levels.items()} == s003.DEFAULTS
    keys = {s003._key(p.config) for p in s003.PRESETS} | {s003._key(s003.DEFAULTS)}
    assert len(keys) == len(s003.PRESETS) + 1
    for preset in s003.PRESETS:
        assert all(preset.config[k] in levels[k] for k in s003.KNOBS)
        assert s003.name_of(preset.config) == preset.name


def test_mean_interval_floor_clips_the_lower_bound_only():
    mean, low, high, _ = s003.mean_interval([0.0, 0.0, 900.0], floor=0.0)
    ref = s003.mean_interval([0.0, 0.0, 900.0])
    assert (mean, low, high) == (300.0, 0.0, ref[2]) and ref[1] < 0


def test_best_gain_without_rtt_cost_picks_the_largest_gain_with_rtt_not_worse():
    marked = pd.DataFrame({"label": ["defaults", "a", "b", "c"], "kind": ["defaults", "preset", "preset", "front"],
                           "throughput_mbps_pct": [np.nan, 3.0, 1.0, 2.0], "rtt_mean_ms_pct": [np.nan, 5.0, -1.0, 0.0]})
    assert s003.best_gain_without_rtt_cost(marked)["label"] == "c"
    assert s003.best_gain_without_rtt_cost(marked.iloc[[0, 1]]) is None


def test_beaten_on_names_the_objective_separated_beyond_the_cis():
    preset = point((190, 186, 194), (20, 18, 22))
    same_tput_shorter_rtt = point((191, 189, 193), (3, 2.5, 3.5))
    assert s003.beaten_on(preset, [same_tput_shorter_rtt], MAX_MIN) == ["rtt"]
    assert s003.beaten_on(preset, [point((150, 148, 152), (2, 1.5, 2.5))], MAX_MIN) == []   # a trade-off, not a win


@pytest.mark.parametrize("verdicts, beaten, agreement", [
    (["dominated", "dominated"], ["", ""], "agrees"),
    (["dominated", "on the front"], ["", ""], "partly"),
    (["not separable", "on the front"], ["rtt_mean_ms", ""], "partly"),
    (["not separable", "on the front"], ["", ""], "differs"),
])
def test_agreement_follows_the_verdicts(verdicts, beaten, agreement):
    dominance = pd.DataFrame({"pair": "throughput_mbps vs rtt_mean_ms", "point": ["defaults", "fasterdata"],
                              "verdict": verdicts, "dominated_by": "", "beaten_on": beaten})
    measured = s003._measured(_configs().assign(n=1), _marked(), dominance)
    assert measured.agreement == agreement
    assert f"{verdicts.count('dominated')} of 2 baselines" in measured.verdict
