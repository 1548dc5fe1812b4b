"""The screen's model route: factorial, fractional, Plackett–Burman and range designs read through one model.

Reference values: Montgomery (2013), *Design and Analysis of Experiments*, 8th ed., Example 6.2
(filtration rate, unreplicated 2^4; Table 6.11 effects, Lenth's PSE = 2.625), used here as a
saturated 16-run design of 15 two-level columns; R comparisons of the model itself are in
``test_reference_model.py``. The recorded example ``data/examples/abort-on-overflow.sqlite`` is
the 3×2 factorial of issue 14.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunelab import api
from tunelab.designs import load_design_text
from tunelab.designs.generators import plackett_burman
from tunelab.errors import DataError, DesignError
from tunelab.stats import screen
from tunelab.stats.linear_model import fit_model
from tunelab.model import AnalysisKind

REFERENCE_DIR = Path(__file__).parent / "reference"
EXAMPLE = Path(__file__).parents[2] / "data" / "examples" / "abort-on-overflow.sqlite"
SOMAXCONN, ABORT = "net.core.somaxconn", "net.ipv4.tcp_abort_on_overflow"
MONTGOMERY_EFFECTS = {"A": 21.625, "B": 3.125, "C": 9.875, "D": 14.625, "AB": 0.125, "AC": -18.125, "AD": 16.625,
                      "BC": 2.375, "BD": -0.375, "CD": -1.125, "ABC": 1.875, "ABD": 4.125, "ACD": -1.625,
                      "BCD": -2.625, "ABCD": 1.375}


def test_the_recorded_factorial_gives_abort_on_overflow_a_ci_the_noise_allows() -> None:
    """Issue 14: the one-way reading gave +1.6 % [-70.4 %, +264.1 %]: somaxconn's -99.8 % in the error."""
    result = api.screen(EXAMPLE)
    row = result.verdicts.set_index(["knob", "metric"]).loc[(ABORT, "qps")]
    assert row["test"] in ("ols_type2", "ols_type3", "hc3_wald", "freedman_lane")
    assert row["effect_ci_high"] - row["effect_ci_low"] < 20           # measured: about 10 points wide
    assert row["scale"] == "log"
    somaxconn = result.verdicts.set_index(["knob", "metric"]).loc[(SOMAXCONN, "qps")]
    assert somaxconn["verdict"] == "matters" and somaxconn["effect_pct"] < -99
    assert f"{SOMAXCONN}:{ABORT}" in set(result.verdicts["knob"])      # the interaction has its own row
    assert set(result.model_terms["kind"]) == {"main", "interaction", "block"}
    assert result.emmeans["by"].notna().any()                           # cell means for the interaction plot


def _overload(seed: int, replicates: int = 4) -> pd.DataFrame:
    """Seed 001's finding in a 2×2: abort_on_overflow cuts lost queries, but only at a short backlog."""
    rng = np.random.default_rng(seed)
    rows = []
    for _, somaxconn, abort in itertools.product(range(replicates), (128, 4096), (False, True)):
        lost = 0.0 if somaxconn == 4096 else (3.0 if abort else 146.0)
        rows.append({SOMAXCONN: somaxconn, ABORT: abort,
                     "lost": max(0.0, round(lost + rng.normal(0, 12 if lost else 0))),
                     "qps": 20000 * np.exp(rng.normal(0, 0.04))})
    return pd.DataFrame(rows)


def test_a_loss_from_a_zero_baseline_matters_on_the_absolute_scale() -> None:
    data = _overload(1)
    result = screen(data, [{"name": "lost", "direction": "minimize", "sesoi_abs": 10}], [SOMAXCONN, ABORT],
                    {SOMAXCONN: 4096, ABORT: False})
    verdicts = result.verdicts.set_index("knob")
    assert verdicts.loc[SOMAXCONN, "verdict"] == "matters"             # 0 -> ~75 lost on average: not untestable
    assert verdicts.loc[SOMAXCONN, "scale"] == "linear"
    interaction = verdicts.loc[f"{SOMAXCONN}:{ABORT}"]
    assert interaction["verdict"] == "matters"
    assert "at net.core.somaxconn=128" in interaction["reason"] and "(no clear effect)" in interaction["reason"]
    abort = verdicts.loc[ABORT]
    assert abort["only_when"] == f"{SOMAXCONN}=128", abort["reason"]
    assert "holds only at" in abort["reason"]


def test_a_pct_sesoi_on_a_zero_baseline_says_to_give_sesoi_abs() -> None:
    result = screen(_overload(2), [{"name": "lost", "direction": "minimize", "sesoi_pct": 5}], [SOMAXCONN, ABORT],
                    {SOMAXCONN: 4096, ABORT: False})
    reasons = " ".join(result.verdicts["reason"])
    assert set(result.verdicts["verdict"]) == {"untestable"} and "sesoi_abs" in reasons


def test_a_saturated_two_level_design_uses_lenths_pse_montgomery_6_2() -> None:
    """Montgomery's 2^4 as a saturated design: 15 columns (A, B, AB, ...), 16 runs, no residual df."""
    data = pd.read_csv(REFERENCE_DIR / "datasets" / "filtration_rate.csv")
    for word in MONTGOMERY_EFFECTS:
        data[word] = np.prod([data[letter] for letter in word], axis=0)
    fit = fit_model(data, "rate", list(MONTGOMERY_EFFECTS), baseline={w: -1 for w in MONTGOMERY_EFFECTS})
    assert fit.test == "lenth" and "effect sparsity" in fit.reason
    assert fit.assumptions["pse"] == pytest.approx(2.625, abs=1e-9)
    effects = fit.effects.set_index("term")["estimate"]
    for word, effect in MONTGOMERY_EFFECTS.items():
        assert effects[word] == pytest.approx(effect, abs=1e-9), word
    significant = fit.terms.loc[fit.terms["p"] < 0.05, "term"]
    assert sorted(significant) == ["A", "AC", "AD", "C", "D"]             # Montgomery: ME = 6.75


def _pb(seed: int, replicates: int, active: dict[int, float], runs: int = 8, k: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    coded = np.vstack([plackett_burman(k, runs)] * replicates)
    frame = pd.DataFrame((coded > 0).astype(int), columns=[f"k{i}" for i in range(k)])
    log_y = np.log(1000) + sum(np.log1p(size) * frame[f"k{i}"] for i, size in active.items())
    frame["y"] = np.exp(log_y + rng.normal(0, 0.04, len(frame)))
    return frame


def test_a_plackett_burman_screen_finds_active_knobs_through_its_model() -> None:
    data = _pb(3, replicates=2, active={0: 0.15, 3: -0.15})
    knobs = [f"k{i}" for i in range(7)]
    result = screen(data, [{"name": "y", "direction": "maximize", "sesoi_pct": 5}], knobs, {k: 0 for k in knobs})
    verdicts = result.verdicts.set_index("knob")
    assert list(verdicts.index) == knobs                                 # resolution III: main effects only
    assert verdicts.loc["k0", "verdict"] == "matters" and verdicts.loc["k3", "verdict"] == "matters"
    assert verdicts.loc["k0", "effect_pct"] == pytest.approx(15, abs=6)
    assert (verdicts.drop(index=["k0", "k3"])["verdict"] != "matters").all()
    # an 8-run PB is a regular 2^(7-4) fraction: every 2FI is aliased with a main effect, and named
    assert (result.model_terms["aliases"].str.len() > 0).all()


def test_a_12_run_plackett_burman_leaves_out_its_partially_aliased_interactions() -> None:
    data = _pb(8, replicates=2, active={0: 0.15}, runs=12, k=5)
    knobs = [f"k{i}" for i in range(5)]
    result = screen(data, [{"name": "y", "direction": "maximize", "sesoi_pct": 5}], knobs, {k: 0 for k in knobs})
    assert list(result.verdicts["knob"]) == knobs
    assert any("partially aliased with the main effects" in note for note in result.settings["notes"])


def test_an_unreplicated_plackett_burman_rests_on_effect_sparsity() -> None:
    data = _pb(4, replicates=1, active={0: 0.30})
    knobs = [f"k{i}" for i in range(7)]
    result = screen(data, [{"name": "y", "direction": "maximize", "sesoi_pct": 5}], knobs, {k: 0 for k in knobs})
    assert set(result.verdicts["test"]) == {"lenth"}
    assert "effect sparsity" in result.verdicts["reason"].iloc[0]
    assert result.verdicts.set_index("knob").loc["k0", "effect_pct"] == pytest.approx(30, abs=6)


def test_a_two_run_oat_collapse_is_decided_on_the_pooled_log_scale() -> None:
    """The quickstart: 2 runs per level, somaxconn=16 loses 99.8 % of the QPS."""
    rng = np.random.default_rng(5)
    rows = [(4096, 60, 170000), (16, 60, 320), (4096, 10, 170000)] * 2
    data = pd.DataFrame(rows, columns=[SOMAXCONN, "fin", "qps"])
    data["qps"] *= np.exp(rng.normal(0, 0.1, len(data)))
    result = screen(data, [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}], [SOMAXCONN, "fin"],
                    {SOMAXCONN: 4096, "fin": 60})
    row = result.verdicts.set_index("knob").loc[SOMAXCONN]
    assert row["verdict"] == "matters" and row["p_adj"] < 0.01
    assert "pooled" in row["reason"] and "log scale" in row["reason"]


def test_a_latin_hypercube_is_never_untestable() -> None:
    design = load_design_text((Path(__file__).parents[2] / "designs" / "lhs_buffers.yaml").read_text())
    from tunelab.designs.plan import make_plan
    from tunelab.study_data import design_info

    plan = make_plan(design)
    rng = np.random.default_rng(6)
    lowat = plan[design.knob_ids[1]].astype(float)
    plan["throughput_mbps"] = 900 * np.exp(0.15 * np.log(lowat / lowat.max()) / np.log(256)
                                            + rng.normal(0, 0.02, len(plan)))
    result = screen(plan, [m.to_json() for m in design.metrics], design.knob_ids, design.baseline,
                    design=design_info(design))
    assert result.design is AnalysisKind.RANGE
    assert "untestable" not in set(result.verdicts["verdict"])
    assert set(result.verdicts["test"]) == {"range_regression"}
    assert set(result.response["knob"]) == set(design.knob_ids)


# ---- bad input: one clear error each ------------------------------------------------------------

DESIGN = """\
name: bad-model
target: {{type: lab}}
load: {{generator: dnsperf, profile: overload, settings: {{}}}}
metrics:
  - {metric}
knobs:
  - {{name: net.core.somaxconn, host: server, levels: [128, 4096], baseline: 4096}}
  - {{name: net.ipv4.tcp_abort_on_overflow, host: server, levels: [false, true], baseline: false}}
  - {{name: net.ipv4.tcp_fin_timeout, host: server, levels: [10, 60], baseline: 60}}
design: {design}
{analysis}
"""


def _error(metric: str = "{name: qps, sesoi_pct: 5}", design: str = "{type: full_factorial}",
           analysis: str = "") -> str:
    with pytest.raises(DesignError) as info:
        load_design_text(DESIGN.format(metric=metric, design=design, analysis=analysis), source="bad.yaml")
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_sesoi_abs_and_sesoi_pct_together_are_refused() -> None:
    assert "not both" in _error(metric="{name: lost, sesoi_pct: 5, sesoi_abs: 10}")


def test_a_model_with_more_terms_than_runs_is_refused_at_plan_time() -> None:
    message = _error(design="{type: plackett_burman, options: {runs: 4}}", analysis="analysis: {interactions: all}")
    assert "7 parameters" in message and "only 4 runs" in message


def test_an_unknown_interaction_knob_is_refused() -> None:
    assert "is not a knob of this design" in _error(analysis="analysis: {interactions: [[net.core.somaxconn, vm.x]]}")


def test_an_lhs_with_fewer_runs_than_knobs_is_refused() -> None:
    assert "too few for 3 knobs" in _error(design="{type: latin_hypercube, options: {samples: 2}}")


def test_dnsperf_lost_gets_an_absolute_sesoi_by_default() -> None:
    design = load_design_text(DESIGN.format(metric="{name: lost}", design="{type: full_factorial}", analysis=""))
    assert design.metrics[0].sesoi_abs == 10 and design.metrics[0].to_json() == {
        "name": "lost", "direction": "minimize", "sesoi_abs": 10.0}


def test_screen_refuses_both_sesois_and_a_log_scale_with_sesoi_abs() -> None:
    data = _overload(7)
    for metric in ({"name": "lost", "sesoi_pct": 5, "sesoi_abs": 10},
                   {"name": "lost", "sesoi_abs": 10, "scale": "log"}):
        with pytest.raises(DataError):
            screen(data, [metric], [SOMAXCONN, ABORT], {SOMAXCONN: 4096, ABORT: False})


def test_a_knob_whose_direction_depends_on_another_matters_through_the_interaction() -> None:
    """c lowers y by 26 % when a = 0 and raises it by 35 % when a = 1: averaged over a it is ~0."""
    rng = np.random.default_rng(2)
    rows = [{"a": a, "c": c, "y": 1000 * np.exp((0.3 if a else -0.3) * c + rng.normal(0, 0.04))}
            for _, a, c in itertools.product(range(3), (0, 1), (0, 1))]
    result = screen(pd.DataFrame(rows), [{"name": "y", "direction": "maximize", "sesoi_pct": 5}], ["a", "c"],
                    {"a": 0, "c": 0})
    c = result.verdicts.set_index("knob").loc["c"]
    assert c["p_adj"] > 0.05 and c["verdict"] == "matters"
    assert "depends on a" in c["reason"] and "averaged over a it is not significant" in c["reason"]
    assert result.verdicts.set_index("knob").loc["a:c", "verdict"] == "matters"
    assert result.verdicts["level"].tolist()[:2] == [1, 1]          # levels keep their type


def test_a_morris_design_with_a_list_knob_is_screened_over_the_generators_ranges() -> None:
    """A Morris knob given as a list of levels has its bounds from the design generator (min and max)."""
    from tunelab.designs.plan import make_plan
    from tunelab.study_data import design_info

    text = (Path(__file__).parents[2] / "designs" / "morris_buffers.yaml").read_text()
    lowat = "net.ipv4.tcp_notsent_lowat@client"
    text = text.replace("  - {name: net.ipv4.tcp_fin_timeout, low: 5, high: 120, baseline: 60}",
                        "  - {name: net.ipv4.tcp_fin_timeout, levels: [10, 30, 60, 120], baseline: 60}")
    design = load_design_text(text)
    assert not next(k for k in design.knobs if k.id == "net.ipv4.tcp_fin_timeout").is_range
    plan = make_plan(design)
    rng = np.random.default_rng(9)
    plan["throughput_mbps"] = 900 * np.exp(0.2 * np.log(plan[lowat] / plan[lowat].max()) / np.log(256)
                                            + rng.normal(0, 0.01, len(plan)))
    result = screen(plan, [m.to_json() for m in design.metrics], design.knob_ids, design.baseline,
                    design=design_info(design))
    assert result.design is AnalysisKind.RANGE and set(result.verdicts["test"]) == {"morris"}
    assert result.morris["knob"].iloc[0] == lowat                      # the only active knob ranks first
    assert set(result.morris["knob"]) == set(design.knob_ids)
