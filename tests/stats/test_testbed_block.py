"""The testbed as a blocking factor of the screen (issue 9, part 3).

A study run on several identical testbeds records each trial's ``testbed``; the screen then reads
the testbed as an additive block (docs/stats-notes.md, "Testbeds as blocks"). References:

* Montgomery, *Design and Analysis of Experiments* (8th/9th ed.), Example 4.1: the vascular graft
  experiment, 4 extrusion pressures in 6 batches of resin (a randomized complete block design). Its
  published ANOVA: pressure SS 178.17, 3 df, MS 59.39, F0 = 8.11, P = 0.0019; blocks SS 192.25,
  5 df, MS 38.45; error SS 109.89, 15 df, MS 7.33.
* Box, Hunter & Hunter, *Statistics for Experimenters* (2nd ed.), chapter 4: penicillin yield of
  4 processes in 5 blends of corn steep liquor (also R ``faraway::penicillin``). Published ANOVA:
  blends SS 264, 4 df, MS 66.0, F 3.50, p 0.04; processes SS 70, 3 df, MS 23.33, F 1.24, p 0.34;
  residual SS 226, 12 df, MS 18.83.

Other reference values come from statsmodels (``anova_lm`` of the formula model, with and without
``robust="hc3"``), scipy (``friedmanchisquare``, ``kruskal``, ``studentized_range``) and
scikit-posthocs (``posthoc_dunn``), or from pandas arithmetic, never from tunelab itself.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
import scikit_posthocs as sp
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy import stats as ss

from tunelab.cli import main
from tunelab.stats import schema, screen
from tunelab.stats.blocking import TESTBED_COLUMNS, between_testbed_spread, stratified_dunn, stratified_kruskal

VASCULAR = {8500: [90.3, 89.2, 98.2, 93.9, 87.4, 97.9], 8700: [92.5, 89.5, 90.6, 94.7, 87.0, 95.8],
            8900: [85.5, 90.8, 89.6, 86.2, 88.0, 93.4], 9100: [82.5, 89.5, 85.6, 87.4, 78.9, 90.7]}
PENICILLIN = {"A": [89, 84, 81, 87, 79], "B": [88, 77, 87, 92, 81], "C": [97, 92, 87, 89, 80],
              "D": [94, 79, 85, 84, 88]}
QPS = [{"name": "qps", "direction": "maximize", "sesoi_pct": 2}]


def _rcbd(table: dict, knob: str) -> pd.DataFrame:
    """A randomized complete block design as tidy runs: the blocks are the testbeds."""
    return pd.DataFrame([{knob: level, "testbed": f"batch{b + 1}", "y": float(value)}
                         for level, values in table.items() for b, value in enumerate(values)])


def _row(frame: pd.DataFrame, **where: object) -> pd.Series:
    mask = np.ones(len(frame), dtype=bool)
    for column, value in where.items():
        mask &= frame[column].to_numpy() == value
    assert mask.sum() == 1, where
    return frame[mask].iloc[0]


# --------------------------------------------------------------------------------------------
# published randomized complete block designs


@pytest.fixture(scope="module")
def vascular() -> tuple[pd.DataFrame, object]:
    data = _rcbd(VASCULAR, "pressure")
    metric = [{"name": "y", "direction": "maximize", "sesoi_pct": 2}]
    return data, screen(data, metric, ["pressure"], {"pressure": 8500}, n_boot=200)


def test_blocked_anova_reproduces_montgomery_example_4_1(vascular: tuple[pd.DataFrame, object]) -> None:
    data, result = vascular
    anova = _row(result.omnibus, test="anova")
    assert round(float(anova["statistic"]), 2) == 8.11                     # published F0
    assert float(anova["p"]) == pytest.approx(0.0019, abs=5e-5)            # published P
    assert (anova["df1"], anova["df2"]) == (3.0, 15.0)
    assert float(anova["effect_size"]) == pytest.approx(178.17 / (178.17 + 109.89), abs=1e-4)
    reference = sm.stats.anova_lm(smf.ols("y ~ C(pressure) + C(testbed)", data).fit(), typ=2)
    assert float(anova["statistic"]) == pytest.approx(reference.loc["C(pressure)", "F"], rel=1e-9)
    assert float(anova["p"]) == pytest.approx(reference.loc["C(pressure)", "PR(>F)"], rel=1e-9)
    verdict = result.verdicts.iloc[0]
    assert verdict["test"] == "anova+tukey" and "testbed as a block (6 testbeds" in verdict["reason"]
    assert float(verdict["p"]) == pytest.approx(float(anova["p"]))
    # the block's own test in the spread table: MS_blocks / MS_error = 38.45 / 7.33
    spread = result.testbeds
    assert len(spread) == 6 and set(spread["metric"]) == {"y"}
    assert float(spread["statistic"].iloc[0]) == pytest.approx(38.45 / 7.33, abs=0.01)
    assert (spread["df1"].iloc[0], spread["df2"].iloc[0]) == (5.0, 15.0)
    assert float(spread["partial_eta2"].iloc[0]) == pytest.approx(192.25 / (192.25 + 109.89), abs=1e-4)


def test_blocked_anova_reproduces_the_penicillin_example() -> None:
    data = _rcbd(PENICILLIN, "process")
    result = screen(data, [{"name": "y", "direction": "maximize", "sesoi_pct": 5}], ["process"], {"process": "A"},
                    n_boot=200)
    anova = _row(result.omnibus, test="anova")
    assert round(float(anova["statistic"]), 2) == 1.24 and round(float(anova["p"]), 2) == 0.34
    assert (anova["df1"], anova["df2"]) == (3.0, 12.0)
    assert round(float(result.testbeds["statistic"].iloc[0]), 2) == 3.50
    assert round(float(result.testbeds["p"].iloc[0]), 2) == 0.04
    # blend means 92, 83, 85, 88, 82 (grand mean 86): offsets +6, -3, -1, +2, -4
    assert result.testbeds["offset"].round(9).tolist() == [6.0, -3.0, -1.0, 2.0, -4.0]


def test_tukey_pairs_use_the_blocked_models_residual_variance(vascular: tuple[pd.DataFrame, object]) -> None:
    data, result = vascular
    mse = sm.stats.anova_lm(smf.ols("y ~ C(pressure) + C(testbed)", data).fit(), typ=2).loc["Residual", "sum_sq"] / 15
    se_mean = np.sqrt(mse / 6)                                  # 6 blocks per pressure
    means = data.groupby("pressure")["y"].mean()
    half_width = ss.studentized_range.ppf(0.95, 4, 15) * se_mean
    tukey = result.posthoc[result.posthoc["method"] == "tukey_hsd"]
    assert len(tukey) == 6 and tukey["recommended"].all()
    for row in tukey.itertuples():
        difference = means[row.group2] - means[row.group1]
        assert row.estimate == pytest.approx(difference)
        assert row.p_adj == pytest.approx(ss.studentized_range.sf(abs(difference) / se_mean, 4, 15), abs=1e-6)
        assert (row.ci_low, row.ci_high) == pytest.approx((difference - half_width, difference + half_width), rel=1e-6)
    # the effects compare the block-adjusted means (here the plain means: every batch ran every pressure)
    effects = result.effects.set_index("level")
    assert effects.loc[9100, "pct_change"] == pytest.approx(100 * (means[9100] / means[8500] - 1))
    assert effects.loc[9100, "ci_low"] < effects.loc[9100, "pct_change"] < effects.loc[9100, "ci_high"]


def test_welch_row_is_the_hc3_wald_test_of_the_blocked_model(vascular: tuple[pd.DataFrame, object]) -> None:
    data, result = vascular
    reference = sm.stats.anova_lm(smf.ols("y ~ C(pressure) + C(testbed)", data).fit(), typ=2, robust="hc3")
    welch = _row(result.omnibus, test="welch_anova")
    assert float(welch["statistic"]) == pytest.approx(reference.loc["C(pressure)", "F"], rel=1e-9)
    assert float(welch["p"]) == pytest.approx(reference.loc["C(pressure)", "PR(>F)"], rel=1e-9)


def test_stratified_rank_tests_reduce_to_friedman_kruskal_and_dunn(vascular: tuple[pd.DataFrame, object]) -> None:
    data, result = vascular
    # one run per pressure and batch: ranking within batches is Friedman's test
    friedman = ss.friedmanchisquare(*[np.array(v) for v in VASCULAR.values()])
    kruskal = _row(result.omnibus, test="kruskal")
    assert float(kruskal["statistic"]) == pytest.approx(friedman.statistic, rel=1e-9)
    assert float(kruskal["p"]) == pytest.approx(friedman.pvalue, rel=1e-9)
    # one stratum: the tie-corrected Kruskal–Wallis H and Dunn's z of scikit-posthocs
    one = pd.DataFrame({"k": list("aaaabbbbcccc"), "lab": "x",
                        "y": [1.0, 2, 2, 3, 2, 4, 4, 5, 6, 6, 7, 9]})
    h = stratified_kruskal(one, "y", "k", "lab").iloc[0]
    reference = ss.kruskal(*[one.loc[one.k == g, "y"] for g in "abc"])
    assert h["H"] == pytest.approx(reference.statistic, rel=1e-12) and h["p"] == pytest.approx(reference.pvalue)
    pairs = stratified_dunn(one, "y", "k", "lab", p_adjust="none")
    matrix = sp.posthoc_dunn(one, val_col="y", group_col="k", p_adjust=None)
    for row in pairs.itertuples():
        assert row.p == pytest.approx(float(matrix.loc[row.group1, row.group2]), rel=1e-9)


# --------------------------------------------------------------------------------------------
# power and error rates by simulation


def _oat_study(rng: np.random.Generator, effect: float, replicates: int = 4,
               offsets: tuple[float, ...] = (-0.10, 0.0, 0.10), cv: float = 0.02) -> pd.DataFrame:
    """One knob (baseline 0, level 1) run ``replicates`` times per level on each testbed; the
    testbeds differ by ``offsets`` (a share of the mean), the knob changes qps by ``effect``."""
    rows = [{"k": level, "testbed": f"lab{t + 1}", "qps": 1000 * (1 + offset) * (1 + effect * level) * (1 + cv * z)}
            for t, offset in enumerate(offsets) for level in (0, 1) for z in rng.normal(size=replicates)]
    return pd.DataFrame(rows)


def _significant(data: pd.DataFrame) -> bool:
    return bool(screen(data, QPS, ["k"], {"k": 0}, n_boot=100).verdicts["significant"].iloc[0])


def test_blocking_finds_an_effect_the_testbed_spread_hides() -> None:
    """Testbeds ±10 % apart, a real +3 % effect, CV 2 %, 4 runs per level per testbed (30 studies):
    the blocked screen finds it in nearly every study, the one-way screen of the same runs rarely."""
    rng = np.random.default_rng(20240905)
    studies = [_oat_study(rng, 0.03) for _ in range(30)]
    blocked = np.mean([_significant(study) for study in studies])
    unblocked = np.mean([_significant(study.drop(columns="testbed")) for study in studies])
    assert blocked >= 0.8 and unblocked <= 0.3 and blocked - unblocked >= 0.5


def test_blocked_screen_keeps_alpha_without_an_effect() -> None:
    """No knob effect, the same testbed spread: the blocked screen's false-positive rate over 200
    studies stays near alpha = 0.05 (a binomial 95 % band reaches about 0.08)."""
    rng = np.random.default_rng(7)
    rate = np.mean([_significant(_oat_study(rng, 0.0)) for _ in range(200)])
    assert rate <= 0.10


# --------------------------------------------------------------------------------------------
# the rank route


def _heavy_tailed(rng: np.random.Generator, plan: dict, effect: float = 0.0, offset: float = 0.10) -> pd.DataFrame:
    """Runs per (testbed, level) from ``plan``; noise 1 % × Cauchy; lab2 ``offset`` faster."""
    rows = [{"k": level, "testbed": testbed, "qps": 1000 * (1 + offset * (testbed == "lab2")) * (1 + effect * level)
             * (1 + 0.01 * z)} for (testbed, level), n in plan.items() for z in rng.standard_cauchy(n)]
    return pd.DataFrame(rows)


#: the knob's level 1 ran mostly on the faster testbed: an unstratified comparison sees the testbed
UNEVEN = {("lab1", 0): 10, ("lab1", 1): 3, ("lab2", 0): 3, ("lab2", 1): 10}
EVEN = {("lab1", 0): 6, ("lab1", 1): 6, ("lab2", 0): 6, ("lab2", 1): 6}


def test_rank_route_is_stratified_by_testbed() -> None:
    """Cauchy noise sends the screen to the rank route; with level 1 run mostly on the 10 % faster
    testbed and no knob effect, Kruskal–Wallis on the pooled runs calls the knob significant,
    the test stratified by testbed does not."""
    data = _heavy_tailed(np.random.default_rng(3), {cell: 2 * runs for cell, runs in UNEVEN.items()})
    blocked = screen(data, QPS, ["k"], {"k": 0}, n_boot=200)
    pooled = screen(data.drop(columns="testbed"), QPS, ["k"], {"k": 0}, n_boot=200)
    assert blocked.verdicts["test"].iloc[0] == "kruskal+dunn"
    assert "stratified by testbed" in blocked.verdicts["reason"].iloc[0]
    assert _row(pooled.omnibus, test="kruskal")["p"] < 0.01
    assert _row(blocked.omnibus, test="kruskal")["p"] > 0.05
    assert not blocked.verdicts["significant"].iloc[0]
    dunn = blocked.posthoc[blocked.posthoc["method"] == "dunn"]
    assert dunn["recommended"].all() and float(dunn["p"].iloc[0]) == pytest.approx(
        float(_row(blocked.omnibus, test="kruskal")["p"]), rel=1e-9)      # two levels: z² = H


def test_stratified_kruskal_keeps_its_size_and_gains_power() -> None:
    """300 heavy-tailed studies each: with the uneven plan and no effect the pooled Kruskal–Wallis
    rejects most of the time, the stratified test about alpha; with an even plan and a real +3 %
    effect the stratified test finds it far more often."""
    rng = np.random.default_rng(11)

    def rates(plan: dict, effect: float) -> tuple[float, float]:
        stratified, pooled = [], []
        for _ in range(300):
            data = _heavy_tailed(rng, plan, effect)
            stratified.append(stratified_kruskal(data, "qps", "k", "testbed")["p"].iloc[0] < 0.05)
            pooled.append(ss.kruskal(*[g["qps"] for _, g in data.groupby("k")]).pvalue < 0.05)
        return float(np.mean(stratified)), float(np.mean(pooled))

    size, pooled_size = rates(UNEVEN, 0.0)
    assert size <= 0.09 and pooled_size >= 0.4
    power, pooled_power = rates(EVEN, 0.03)
    assert power >= 0.6 and pooled_power <= 0.35


# --------------------------------------------------------------------------------------------
# the model route


def _factorial_on_testbeds(seed: int = 7) -> pd.DataFrame:
    """A 2^3 factorial, two replicates (design blocks 1, 2), run on two testbeds, lab2 15 % faster:
    a +20 %, b nothing, c -10 %, noise CV 2 %."""
    rng = np.random.default_rng(seed)
    rows = [{"a": a, "b": b, "c": c, "testbed": testbed, "block": block,
             "qps": 1000 * speed * (1.2 if a else 1.0) * (0.9 if c else 1.0) * np.exp(rng.normal(0, 0.02))}
            for testbed, speed in (("lab1", 1.0), ("lab2", 1.15)) for block in (1, 2)
            for a, b, c in itertools.product((0, 1), repeat=3)]
    return pd.DataFrame(rows)


def test_model_route_recovers_effects_with_a_testbed_offset() -> None:
    data = _factorial_on_testbeds().drop(columns="block")
    baseline = {"a": 0, "b": 0, "c": 0}
    metric = [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}]
    blocked = screen(data, metric, ["a", "b", "c"], baseline, n_boot=200)
    pooled = screen(data.drop(columns="testbed"), metric, ["a", "b", "c"], baseline, n_boot=200)
    block = _row(blocked.model_terms, term="testbed")
    assert block["kind"] == "block" and block["df1"] == 1.0
    reference = sm.stats.anova_lm(smf.ols("np.log(qps) ~ C(testbed) + (C(a) + C(b) + C(c)) ** 2", data).fit(), typ=2)
    assert float(block["statistic"]) == pytest.approx(reference.loc["C(testbed)", "F"], rel=1e-9)
    verdicts = blocked.verdicts.set_index("knob")
    assert verdicts.loc["a", "effect_pct"] == pytest.approx(20.0, abs=2.0)
    assert verdicts.loc["c", "effect_pct"] == pytest.approx(-10.0, abs=2.0)
    assert abs(verdicts.loc["b", "effect_pct"]) < 2.0
    assert verdicts.loc[["a", "c"], "verdict"].tolist() == ["matters", "matters"]
    assert verdicts.loc["b", "verdict"] == "no effect (equivalent)"
    width = lambda result, knob: float(result.verdicts.set_index("knob").loc[knob, "effect_ci_high"]  # noqa: E731
                                       - result.verdicts.set_index("knob").loc[knob, "effect_ci_low"])
    assert width(blocked, "a") < width(pooled, "a") / 3           # the offset no longer counts as noise
    # the spread table: lab2 is 15 % faster; in % of the grand mean each testbed is about ±7 % off
    offsets = blocked.testbeds.set_index("testbed")["offset_pct"]
    assert offsets["lab2"] == pytest.approx(-offsets["lab1"]) and 6.0 < offsets["lab2"] < 8.0


def test_design_blocks_and_testbeds_combine_into_one_block() -> None:
    data = _factorial_on_testbeds()
    result = screen(data, QPS, ["a", "b", "c"], {"a": 0, "b": 0, "c": 0}, n_boot=200)
    block = _row(result.model_terms, term="block|testbed")
    assert block["kind"] == "block" and block["df1"] == 3.0         # 2 design blocks × 2 testbeds
    labelled = data.assign(unit=data["block"].astype(str) + "|" + data["testbed"])
    reference = sm.stats.anova_lm(smf.ols("np.log(qps) ~ C(unit) + (C(a) + C(b) + C(c)) ** 2", labelled).fit(), typ=2)
    assert float(block["statistic"]) == pytest.approx(reference.loc["C(unit)", "F"], rel=1e-9)
    assert float(_row(result.model_terms, term="a")["statistic"]) == pytest.approx(reference.loc["C(a)", "F"],
                                                                                   rel=1e-9)


# --------------------------------------------------------------------------------------------
# the spread table, the pooled-error path, untestable knobs


def test_spread_table_by_hand() -> None:
    rng = np.random.default_rng(5)
    data = pd.DataFrame([{"k": level, "testbed": testbed, "qps": 1000 + 50 * level + shift + rng.normal(0, 10)}
                         for testbed, shift in (("lab1", 0.0), ("lab2", 30.0), ("lab3", -15.0))
                         for level in (0, 0, 1, 2)])
    table = between_testbed_spread(data, QPS, ["k"], {"k": 0}).set_index("testbed")
    by_testbed = data.groupby("testbed")["qps"]
    assert table["n"].tolist() == by_testbed.size().tolist()
    assert table["mean"].to_numpy() == pytest.approx(by_testbed.mean().to_numpy())
    assert table["sd"].to_numpy() == pytest.approx(by_testbed.std().to_numpy())
    base = data[data["k"] == 0].groupby("testbed")["qps"]
    assert table["baseline_n"].tolist() == base.size().tolist() == [2, 2, 2]
    assert table["baseline_mean"].to_numpy() == pytest.approx(base.mean().to_numpy())
    # every testbed ran the same runs: its offset is its mean's distance from the mean of testbed means
    offsets = by_testbed.mean() - by_testbed.mean().mean()
    assert table["offset"].to_numpy() == pytest.approx(offsets.to_numpy())
    assert table["offset_pct"].to_numpy() == pytest.approx(100 * offsets.to_numpy() / data["qps"].mean())
    assert table["spread_pct"].iloc[0] == pytest.approx(100 * offsets.abs().max() / data["qps"].mean())
    reference = sm.stats.anova_lm(smf.ols("qps ~ C(k) + C(testbed)", data).fit(), typ=2).loc["C(testbed)"]
    assert table["statistic"].iloc[0] == pytest.approx(reference["F"]) and table["p"].iloc[0] == pytest.approx(
        reference["PR(>F)"])
    # uneven runs (lab3 lost its level-2 runs): the F test is still statsmodels' type II one
    uneven = data.drop(index=data.index[(data["testbed"] == "lab3") & (data["k"] == 2)])
    table = between_testbed_spread(uneven, QPS, ["k"], {"k": 0})
    reference = sm.stats.anova_lm(smf.ols("qps ~ C(k) + C(testbed)", uneven).fit(), typ=2).loc["C(testbed)"]
    assert table["statistic"].iloc[0] == pytest.approx(reference["F"]) and table["p"].iloc[0] == pytest.approx(
        reference["PR(>F)"])
    assert table["df2"].iloc[0] == len(uneven) - 3 - 2              # 3 configurations, 3 testbeds


def test_pooled_error_path_blocks_by_testbed() -> None:
    """A metric with an absolute SESOI goes through the one-way model: the testbed joins it."""
    rng = np.random.default_rng(9)
    data = _oat_study(rng, 0.05)
    metric = [{"name": "qps", "direction": "maximize", "sesoi_abs": 20}]
    result = screen(data, metric, ["k"], {"k": 0}, n_boot=200)
    reference = sm.stats.anova_lm(smf.ols("qps ~ C(testbed) + C(k)", data).fit(), typ=2)
    omnibus = result.omnibus.iloc[0]
    assert float(omnibus["statistic"]) == pytest.approx(reference.loc["C(k)", "F"], rel=1e-9)
    assert "testbed is an additive block" in result.verdicts["reason"].iloc[0]


def test_profile_crossed_knob_gets_the_testbed_block() -> None:
    """An OAT knob under two load profiles is modelled as knob × profile; the testbed joins as a block."""
    rng = np.random.default_rng(12)
    data = pd.DataFrame([{"k": level, "profile": profile, "testbed": testbed,
                          "qps": 1000 * speed * (1.1 if level and profile == "overload" else 1.0)
                          * np.exp(rng.normal(0, 0.02))}
                         for testbed, speed in (("lab1", 1.0), ("lab2", 1.2)) for profile in ("low", "overload")
                         for level in (0, 1) for _ in range(3)])
    result = screen(data, QPS, ["k"], {"k": 0}, n_boot=200, design={"profiles": ["low", "overload"]})
    row = result.verdicts.set_index("knob").loc["k"]
    assert "testbed is an additive block" in row["reason"]
    reference = sm.stats.anova_lm(smf.ols("np.log(qps) ~ C(testbed) + C(k) * C(profile)", data).fit(), typ=2)
    assert float(_row(result.model_terms, term="k:profile")["statistic"]) == pytest.approx(
        reference.loc["C(k):C(profile)", "F"], rel=1e-9)


def test_the_report_states_the_testbed_block() -> None:
    from tunelab.report.tables import between_testbeds_frame
    from tunelab.report.wording import between_testbeds_markdown

    result = screen(_oat_study(np.random.default_rng(1), 0.03), QPS, ["k"], {"k": 0}, n_boot=200)
    text = between_testbeds_markdown(result)
    assert text.startswith("**Testbeds.** The runs were spread over 3 testbeds (lab1, lab2, lab3)")
    assert "qps: ±" in text and "testbed F = " in text
    assert len(between_testbeds_frame(result)) == 3
    plain = screen(_oat_study(np.random.default_rng(1), 0.03).drop(columns="testbed"), QPS, ["k"], {"k": 0},
                   n_boot=200)
    assert between_testbeds_markdown(plain) == "" and between_testbeds_frame(plain).empty


def test_a_level_run_only_on_its_own_testbed_is_untestable() -> None:
    data = pd.DataFrame({"k": [0] * 6 + [1] * 3 + [2] * 3,
                         "testbed": ["lab1"] * 3 + ["lab2"] * 3 + ["lab1"] * 3 + ["lab3"] * 3,
                         "qps": [100.0, 101, 99, 110, 111, 109, 104, 105, 103, 120, 121, 119]})
    result = screen(data, QPS, ["k"], {"k": 0}, n_boot=200)
    row = result.verdicts.iloc[0]
    assert row["verdict"] == "untestable" and "confounded" in row["reason"]


# --------------------------------------------------------------------------------------------
# one testbed is today's screen; JSON and CLI


def _oat_two_knobs(seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [{"a": 1, "b": "x"}] * 5 + [{"a": 2, "b": "x"}] * 5 + [{"a": 1, "b": "y"}] * 5
    data = pd.DataFrame(rows)
    data["qps"] = 1000 + 80 * (data["a"] == 2) + rng.normal(0, 15, len(data))
    data["lat"] = 2.0 + rng.normal(0, 0.1, len(data))
    return data


@pytest.mark.parametrize("kind", ["oat", "factorial"])
def test_one_testbed_is_analysed_exactly_as_without_the_column(kind: str) -> None:
    if kind == "oat":
        data, knobs, baseline = _oat_two_knobs(), ["a", "b"], {"a": 1, "b": "x"}
    else:
        data, knobs, baseline = _factorial_on_testbeds().drop(columns=["testbed", "block"]), ["a", "b", "c"], \
            {"a": 0, "b": 0, "c": 0}
    metrics = [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}]
    plain = screen(data, metrics, knobs, baseline, n_boot=300)
    constant = screen(data.assign(testbed="lab1"), metrics, knobs, baseline, n_boot=300)
    for name in plain.tables:
        pd.testing.assert_frame_equal(getattr(constant, name), getattr(plain, name))
    assert constant.settings == plain.settings and "testbeds" not in plain.settings
    assert plain.testbeds.empty and plain.testbeds.columns.tolist() == TESTBED_COLUMNS


def test_json_with_testbeds_follows_the_schema() -> None:
    data = _oat_study(np.random.default_rng(1), 0.03)
    result = screen(data, QPS, ["k"], {"k": 0}, n_boot=200)
    document = json.loads(json.dumps(result.to_json(), allow_nan=False))
    jsonschema.validate(document, schema())
    assert [row["testbed"] for row in document["testbeds"]] == ["lab1", "lab2", "lab3"]
    assert document["settings"]["testbeds"] == ["lab1", "lab2", "lab3"]
    assert any(note.startswith("testbed is a blocking factor (3 testbeds") for note in document["settings"]["notes"])
    assert jsonschema.validate(screen(_oat_two_knobs(), QPS, ["a", "b"], {"a": 1, "b": "x"},
                                      n_boot=200).to_json(), schema()) is None


def test_cli_prints_the_testbeds_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "runs.csv"
    _oat_study(np.random.default_rng(1), 0.03).to_csv(csv, index=False)
    assert main(["screen", str(csv), "--metric", "qps:max:2", "--knob", "k", "--baseline", "k=0",
                 "--n-boot", "200"]) == 0
    printed = capsys.readouterr().out
    block = printed[printed.index("\ntestbeds:\n") + 1:].splitlines()
    assert block[1].startswith("  qps: testbed block: 3 testbeds, F=") and "between-testbed spread ±" in block[1]
    assert "(lab1 -" in block[1] and "lab3 +" in block[1]
    single = tmp_path / "one.csv"
    _oat_study(np.random.default_rng(1), 0.03).assign(testbed="lab1").to_csv(single, index=False)
    assert main(["screen", str(single), "--metric", "qps:max:2", "--knob", "k", "--baseline", "k=0",
                 "--n-boot", "200"]) == 0
    assert "testbeds:" not in capsys.readouterr().out
