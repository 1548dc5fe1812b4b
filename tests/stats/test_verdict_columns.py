"""One definition per column (issue 24, item 2): each contradiction the issue found, against an
independent expectation (the data's own means with pandas, SciPy's Tukey HSD, pingouin's
Games–Howell, a hand computation), never the screen's own output.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tunelab
from tunelab.cli.render import screen_text, verdict_table
from tunelab.stats import screen

ROOT = Path(__file__).resolve().parents[2]
#: the default study as recorded on 2026-11-24 (before kernel counters): these tests pin its values and size
DEFAULT = ROOT / "tests" / "data" / "default-2026-11-24.sqlite"
OVERFLOW = ROOT / "data" / "examples" / "abort-on-overflow.sqlite"
SOMAXCONN, MTU = "net.core.somaxconn", "link.mtu[@link]"
BASELINE = {SOMAXCONN: 4096, MTU: 1500, "net.ipv4.tcp_fin_timeout": 60, "net.ipv4.tcp_syncookies": 1}


@pytest.fixture(scope="module")
def default_screen():
    return tunelab.api.screen(DEFAULT, n_boot=200)


@pytest.fixture(scope="module")
def first_round() -> pd.DataFrame:
    """The default study's runs of round 1 (somaxconn and the MTU were decided at that look)."""
    data = tunelab.store.Store(DEFAULT, readonly=True).tidy()
    return data[(data["round"] == 1) & data["status"].isin(["ok", "flagged"])]


def _oat_rows(data: pd.DataFrame, knob: str) -> pd.DataFrame:
    """The runs that compare ``knob``'s levels: every other knob at its baseline."""
    keep = np.ones(len(data), dtype=bool)
    for other, level in BASELINE.items():
        if other != knob:
            keep &= (data[other] == level).to_numpy()
    return data[keep]


def _row(result, knob: str, metric: str) -> pd.Series:
    verdicts = result.verdicts
    return verdicts[(verdicts["knob"] == knob) & (verdicts["metric"] == metric)].iloc[0]


def test_the_level_is_named_for_what_it_holds_and_every_significant_level_is_listed(default_screen,
                                                                                   first_round) -> None:
    """somaxconn hurts qps at every level: the row's level is its worst (16, -99.6 %) and 128's -84.8 %
    is beside it in ``levels`` (the issue: `best_level 16`, 128 never shown)."""
    rows = _oat_rows(first_round, SOMAXCONN)
    means = rows.groupby(SOMAXCONN)["qps"].mean()
    change = {level: 100 * (means[level] / means[4096] - 1) for level in (16, 128)}     # about -99.6, -84.8
    row = _row(default_screen, SOMAXCONN, "qps")
    assert "best_level" not in default_screen.verdicts.columns
    assert (row["verdict"], row["level"], row["direction"]) == ("matters", 16, "worse")
    assert [entry["level"] for entry in row["levels"]] == [16, 128]
    for entry in row["levels"]:
        assert entry["effect_pct"] == pytest.approx(change[entry["level"]], rel=1e-9)
        # Games–Howell's simultaneous interval as % of the baseline mean (issue 37): it may reach -100 % (the
        # metric falling to 0, which the data allow) but never below
        assert entry["p_adj"] < 0.05 and -100 <= entry["ci_low"] <= entry["effect_pct"] <= entry["ci_high"] < 0
    text = screen_text(default_screen, levels=True)
    assert f"{change[128]:+.1f} %" in text and "level" in text.splitlines()[1]


def test_the_row_shows_its_significant_level_with_that_levels_interval() -> None:
    """Welch + Games–Howell: level b moves most (+15 %) but is too noisy to differ from the baseline,
    c moves +8 % and does. The row shows c, its own change and interval, and the pairwise p-values
    are pingouin's Games–Howell (the issue: `matters` at 576 with an interval across 0)."""
    import pingouin

    base = [100.0, 100.5, 99.5, 100.2, 99.8, 100.0]
    data = pd.DataFrame({"k": ["a"] * 6 + ["b"] * 6 + ["c"] * 6,
                         "y": base + [60.0, 170, 80, 150, 95, 135] + [107.5, 108.4, 107.9, 108.2, 108.0, 108.0]})
    result = screen(data, [{"name": "y", "direction": "maximize", "sesoi_pct": 5}], ["k"], {"k": "a"}, n_boot=2000)
    row = result.verdicts.iloc[0]
    assert row["test"] == "welch+games_howell"
    reference = pingouin.pairwise_gameshowell(data, dv="y", between="k").set_index(["A", "B"])["pval"]
    assert reference[("a", "b")] > 0.05 > reference[("a", "c")]
    means = data.groupby("k")["y"].mean()
    assert (row["verdict"], row["level"], row["significant"]) == ("matters", "c", True)
    assert row["effect_pct"] == pytest.approx(100 * (means["c"] / means["a"] - 1), rel=1e-12)
    assert row["effect_ci_low"] > 0                                          # the interval agrees with the test
    assert [(e["level"], e["p_adj"]) for e in row["levels"]] == [("c", pytest.approx(reference[("a", "c")], rel=1e-6))]


def test_a_posthoc_that_does_not_separate_a_level_says_why(default_screen, first_round) -> None:
    """The MTU: Tukey HSD does not separate 576 from 1500 (SciPy's Tukey: p_adj 0.052) while 576's
    unadjusted interval lies below 0; the row says so in one sentence (the issue: nothing said why)."""
    from scipy.stats import tukey_hsd

    rows = _oat_rows(first_round, MTU)
    levels = sorted(rows[MTU].unique())
    result = tukey_hsd(*[rows.loc[rows[MTU] == level, "qps"].to_numpy() for level in levels])
    p = result.pvalue[levels.index(576), levels.index(1500)]
    assert 0.05 < p < 0.06
    row = _row(default_screen, MTU, "qps")
    note = row["posthoc_note"]
    assert note.startswith("Tukey HSD does not separate 576 from the baseline") and f"p_adj {p:.3g}" in note
    assert "excludes 0: the verdict follows Tukey HSD" in note
    assert 576 not in [entry["level"] for entry in row["levels"]]


def test_percent_intervals_stay_above_minus_100_and_agree_with_the_verdict_table(default_screen) -> None:
    """Guards: a screened guard (qps) shows the verdict table's own change and interval; no % interval
    reaches -100 % (the issue: somaxconn=16 qps at -107.4 % in the guards table)."""
    guards, effects = default_screen.guards, default_screen.effects
    percent = guards[guards["units"] == "%"]
    assert len(percent) and (percent["ci_low"] > -100).all()
    for row in percent[percent["guard"] == "qps"].itertuples(index=False):
        shown = effects[(effects["knob"] == row.knob) & (effects["metric"] == "qps")
                        & np.array([level == row.level for level in effects["level"]])].iloc[0]
        assert (row.effect_pct, row.ci_low, row.ci_high) == (shown["pct_change"], shown["ci_low"], shown["ci_high"])


def test_a_factorial_guard_agrees_with_its_verdict_row() -> None:
    """abort_on_overflow (a factorial): qps read "+1.6 % [-153, +156]" in the guards table and
    "-1.6 % [-6.9, +3.9]" in the verdict table; now the guards table holds the verdict table's numbers."""
    result = tunelab.api.screen(OVERFLOW, n_boot=200)
    guards, effects = result.guards, result.effects
    screened = {m["name"] for m in result.settings["metrics"]}
    checked = 0
    for row in guards[(guards["units"] == "%") & guards["guard"].isin(screened)].itertuples(index=False):
        shown = effects[(effects["knob"] == row.knob) & (effects["metric"] == row.guard)
                        & np.array([level == row.level for level in effects["level"]])]
        assert len(shown) == 1
        assert (row.effect_pct, row.ci_low, row.ci_high) == tuple(shown[["pct_change", "ci_low", "ci_high"]].iloc[0])
        checked += 1
    assert checked


def test_an_unscreened_percent_guard_has_a_log_scale_interval() -> None:
    """A guard that collapses by 99.9 % with 3 noisy baseline runs: Welch's interval of the difference
    divided by the baseline mean reaches below -100 %; the ratio's interval on the log scale cannot.
    Expected: the delta-method interval of log(mean x / mean b) with Welch's df, by hand."""
    from scipy.stats import t as student
    from tunelab.stats.guards import guard_table

    base, low = np.array([1000.0, 700.0, 1300.0]), np.array([1.0, 1.2, 0.8])
    data = pd.DataFrame({"k": ["b"] * 3 + ["x"] * 3, "qps": np.r_[base, low]})
    row = guard_table(data, ["k"], {"k": "b"}, [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}]).iloc[0]
    vx, vb = low.var(ddof=1) / (3 * low.mean() ** 2), base.var(ddof=1) / (3 * base.mean() ** 2)
    df = (vx + vb) ** 2 / (vx ** 2 / 2 + vb ** 2 / 2)
    half = student.ppf(0.975, df) * np.sqrt(vx + vb)
    centre = np.log(low.mean() / base.mean())
    assert row["ci_low"] == pytest.approx(100 * np.expm1(centre - half), rel=1e-9) and row["ci_low"] > -100
    assert row["ci_high"] == pytest.approx(100 * np.expm1(centre + half), rel=1e-9)
    welch_low = 100 * (low.mean() - base.mean() - student.ppf(0.975, 2.0) * np.sqrt(base.var(ddof=1) / 3)) / 1000
    assert welch_low < -100                                          # what the old table would have shown
    assert row["effect_pct"] == pytest.approx(100 * (low.mean() / base.mean() - 1), rel=1e-12) and row["tripped"]


def test_a_tiny_significant_change_has_no_direction_and_prints_its_digits() -> None:
    """-1.6e-5 % with almost no noise: significant, far inside the 5 % SESOI, so equivalent; its
    direction is none (only a `matters` row has one) and it prints with significant digits."""
    rng = np.random.default_rng(0)
    base = 1000.0 + 1e-9 * rng.standard_normal(8)
    data = pd.DataFrame({"k": ["a"] * 8 + ["b"] * 8, "y": np.r_[base, base * (1 - 1.6e-7)]})
    result = screen(data, [{"name": "y", "direction": "maximize", "sesoi_pct": 5}], ["k"], {"k": "a"}, n_boot=200)
    row = result.verdicts.iloc[0]
    assert row["significant"] and row["effect_pct"] == pytest.approx(-1.6e-5, rel=1e-3)
    assert (row["verdict"], row["direction"]) == ("no effect (equivalent)", "none")
    text = verdict_table(result.verdicts)
    assert "-1.6e-05 %" in text and "-0.0 %" not in text and "-0.0%" not in text


def test_an_underflowed_p_prints_below_1e_300() -> None:
    verdicts = pd.DataFrame([{"knob": "k", "metric": "y", "verdict": "matters", "test": "anova+tukey", "p_adj": 0.0,
                              "level": 16, "effect_pct": -99.6, "effect_ci_low": -99.7, "effect_ci_high": -99.5,
                              "effect_abs": -10.0, "effect_abs_ci_low": np.nan, "effect_abs_ci_high": np.nan,
                              "direction": "worse", "equivalent": False, "only_when": None, "guard": None,
                              "levels": []}])
    text = verdict_table(verdicts)
    assert "< 1e-300" in text and " 0 " not in text.splitlines()[1]


def test_the_model_route_shows_the_level_its_dunnett_contrast_makes_significant() -> None:
    """Two runs per level: the pooled one-way model on the log scale with Dunnett contrasts. b is
    +9.8 % (beyond the 5 % SESOI) but not significant, c is -30 % and is; the row shows c with its
    own interval (the issue: link.mtu `matters` at 576 with [-17.3 %, +46.0 %]). The p-values are
    SciPy's Dunnett test on log(y) (the same model, an independent implementation)."""
    from scipy.stats import dunnett

    data = pd.DataFrame({"k": ["a", "a", "b", "b", "c", "c"], "y": [100.0, 104, 107, 117, 70, 73]})
    result = screen(data, [{"name": "y", "direction": "maximize", "sesoi_pct": 5}], ["k"], {"k": "a"}, n_boot=200)
    row = result.verdicts.iloc[0]
    logs = {level: np.log(data.loc[data["k"] == level, "y"].to_numpy()) for level in "abc"}
    reference = dunnett(logs["b"], logs["c"], control=logs["a"]).pvalue
    assert reference[0] > 0.05 > reference[1]
    geometric = {level: np.exp(values.mean()) for level, values in logs.items()}
    assert (row["verdict"], row["level"], row["direction"]) == ("matters", "c", "worse")
    assert row["effect_pct"] == pytest.approx(100 * (geometric["c"] / geometric["a"] - 1), rel=1e-9)
    assert -100 < row["effect_ci_low"] < row["effect_ci_high"] < 0
    assert [e["level"] for e in row["levels"]] == ["c"]
    assert row["levels"][0]["p_adj"] == pytest.approx(reference[1], abs=2e-3)
