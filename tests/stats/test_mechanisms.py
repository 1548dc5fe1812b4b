"""The mechanism table (:mod:`tunelab.stats.mechanisms`) against independently computed reference values.

References: Welch's t-test and its interval from ``scipy.stats.ttest_ind(equal_var=True)`` called here
on the raw samples; Hedges' g and its interval from ``pingouin.compute_effsize``/``compute_esci``;
Benjamini-Hochberg q-values by hand on a small example (the step-up formula written out below) and the
15 p-values of Benjamini & Hochberg (1995), section 4.1, of which the procedure at 0.05 rejects four.
"""
from __future__ import annotations

import json
import re
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats as ss

from tunelab import stats
from tunelab.cli import main
from tunelab.model import AnalysisKind
from tunelab.stats.mechanisms import (MECHANISM_COLUMNS, counter_columns, mechanism_table, moving_counters,
                                      top_mechanisms, with_q_values)

QPS = [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}]

#: the runs of a small OAT study: knob s (baseline 4096) and t (baseline 0), five runs per configuration
S_LEVELS = {4096: [1000.0, 1010.0, 990.0, 1005.0, 995.0], 16: [5.0, 6.0, 4.0, 5.5, 4.5], 128: [150.0, 160.0, 140.0,
                                                                                               155.0, 145.0]}
OVERFLOWS = {4096: [0.0, 1.0, 0.0, 2.0, 0.0], 16: [9800.0, 10100.0, 12040.0, 9950.0, 11300.0],
             128: [3100.0, 2900.0, 3350.0, 2800.0, 3000.0]}
RCVBUF = {4096: [5.0, 6.0, 4.0, 5.0, 7.0], 16: [6.0, 5.0, 5.0, 7.0, 4.0], 128: [5.0, 4.0, 6.0, 6.0, 5.0]}


def oat_runs() -> pd.DataFrame:
    """Baseline runs, s = 16 and 128 (t at its baseline), t = 1 (s at its baseline; t moves RCVBUF)."""
    rows = []
    for level in (4096, 16, 128):
        for i in range(5):
            rows.append({"s": level, "t": 0, "qps": S_LEVELS[level][i], "counter.TcpExt.ListenOverflows":
                         OVERFLOWS[level][i], "counter.Udp.RcvbufErrors": RCVBUF[level][i],
                         "counter.proc.majflt": 0.0, "status": "ok"})
    for i, (q, r) in enumerate(zip([1001.0, 999.0, 1003.0, 997.0, 1000.0], [50.0, 55.0, 45.0, 52.0, 48.0])):
        rows.append({"s": 4096, "t": 1, "qps": q, "counter.TcpExt.ListenOverflows": [3.0, 0.0, 1.0, 0.0, 1.0][i],
                     "counter.Udp.RcvbufErrors": r, "counter.proc.majflt": 0.0, "status": "ok"})
    # a failed trial with absurd counters must not count
    rows.append({"s": 16, "t": 0, "qps": math.nan, "counter.TcpExt.ListenOverflows": 1e12,
                 "counter.Udp.RcvbufErrors": 1e12, "counter.proc.majflt": 7.0, "status": "failed"})
    return pd.DataFrame(rows)


def matters(*pairs: tuple[str, object]) -> pd.DataFrame:
    return pd.DataFrame({"knob": [k for k, _ in pairs], "verdict": "matters",
                         "level": pd.Series([lv for _, lv in pairs], dtype=object)})


def test_t_test_difference_interval_and_p_match_scipy() -> None:
    table = mechanism_table(oat_runs(), matters(("s", 16)), ["s", "t"], {"s": 4096, "t": 0})
    row = table[table["counter"] == "counter.TcpExt.ListenOverflows"].iloc[0]
    reference = ss.ttest_ind(OVERFLOWS[16], OVERFLOWS[4096], equal_var=True)
    interval = reference.confidence_interval(0.95)
    assert row["p"] == pytest.approx(reference.pvalue, rel=1e-12)
    assert row["t"] == pytest.approx(reference.statistic, rel=1e-12)
    assert row["df"] == 8
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((interval.low, interval.high), rel=1e-12)
    assert row["difference"] == pytest.approx(np.mean(OVERFLOWS[16]) - np.mean(OVERFLOWS[4096]), rel=1e-12)
    assert (row["n"], row["baseline_n"]) == (5, 5)


def test_hedges_g_and_interval_match_pingouin() -> None:
    table = mechanism_table(oat_runs(), matters(("s", 128)), ["s", "t"], {"s": 4096, "t": 0})
    row = table[table["counter"] == "counter.Udp.RcvbufErrors"].iloc[0]
    g = pg.compute_effsize(RCVBUF[128], RCVBUF[4096], paired=False, eftype="hedges")
    low, high = pg.compute_esci(stat=g, nx=5, ny=5, eftype="hedges", decimals=15)
    assert row["hedges_g"] == pytest.approx(g, rel=1e-12)
    assert (row["g_ci_low"], row["g_ci_high"]) == pytest.approx((low, high), rel=1e-12)


def test_oat_compares_with_the_runs_where_every_knob_is_at_its_baseline() -> None:
    """t = 1's RcvbufErrors against the five baseline runs only, not against the s = 16/128 runs."""
    table = mechanism_table(oat_runs(), matters(("t", 1)), ["s", "t"], {"s": 4096, "t": 0})
    row = table[table["counter"] == "counter.Udp.RcvbufErrors"].iloc[0]
    reference = ss.ttest_ind([50.0, 55.0, 45.0, 52.0, 48.0], RCVBUF[4096], equal_var=True)
    assert row["p"] == pytest.approx(reference.pvalue, rel=1e-12)
    assert row["baseline_n"] == 5


def test_factorial_compares_marginal_runs() -> None:
    runs = pd.DataFrame({"a": [0, 0, 1, 1] * 2, "b": [0, 1, 0, 1] * 2,
                         "counter.x.Y": [1.0, 2.0, 5.0, 7.0, 1.5, 2.5, 6.0, 6.5]})
    table = mechanism_table(runs, matters(("a", 1)), ["a", "b"], {"a": 0, "b": 0}, AnalysisKind.FACTORIAL)
    reference = ss.ttest_ind([5.0, 7.0, 6.0, 6.5], [1.0, 2.0, 1.5, 2.5], equal_var=True)
    assert table["p"].iloc[0] == pytest.approx(reference.pvalue, rel=1e-12)


def test_q_values_are_benjamini_hochberg_over_every_counter_and_level() -> None:
    table = mechanism_table(oat_runs(), matters(("s", 16), ("s", 128), ("t", 1)), ["s", "t"], {"s": 4096, "t": 0})
    p = table["p"].to_numpy()
    m = len(p)
    assert m == 6      # 3 levels × 2 moving counters (majflt never moves in the usable runs)
    order = np.argsort(p)
    # step-up by hand: q_(i) = min over j >= i of m p_(j) / j
    by_rank = [min(m * p[order[j]] / (j + 1) for j in range(i, m)) for i in range(m)]
    expected = np.empty(m)
    expected[order] = np.minimum(by_rank, 1.0)
    assert table["q"].to_numpy() == pytest.approx(expected, rel=1e-12)
    assert table["significant"].tolist() == (table["q"] <= 0.05).tolist()


def test_every_significant_level_of_a_matters_row_counts_once_across_metrics() -> None:
    """The levels come from each matters row's ``levels`` (not only its decisive ``level``), a level that
    matters for two metrics is tested once, and BH runs over all of them: the same table as naming the
    three levels one row each (whose q-values the test above checks by hand)."""
    verdicts = pd.DataFrame({"knob": ["s", "s", "t", "t"], "metric": ["qps", "lat", "qps", "lat"],
                             "verdict": ["matters", "matters", "matters", "inconclusive"],
                             "level": pd.Series([16, 128, 1, 1], dtype=object),
                             "levels": [[{"level": 16}, {"level": 128}], [{"level": 128}], [{"level": 1}], []]})
    table = mechanism_table(oat_runs(), verdicts, ["s", "t"], {"s": 4096, "t": 0})
    assert list(dict.fromkeys(zip(table["knob"], table["level"]))) == [("s", 16), ("s", 128), ("t", 1)]
    assert len(table) == 6
    one_each = mechanism_table(oat_runs(), matters(("s", 16), ("s", 128), ("t", 1)), ["s", "t"], {"s": 4096, "t": 0})
    pd.testing.assert_frame_equal(table, one_each)


def test_q_values_of_a_hand_computable_example() -> None:
    # sorted p 0.005, 0.01, 0.03, 0.04; m p / rank: 0.02, 0.02, 0.04, 0.04 (already monotone)
    out = with_q_values(pd.DataFrame({"p": [0.01, 0.04, 0.03, 0.005]}))
    assert out["q"].tolist() == pytest.approx([0.02, 0.04, 0.04, 0.02], rel=1e-12)


def test_benjamini_hochberg_1995_example_rejects_four() -> None:
    p = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262, 0.5719, 0.6528,
         0.7590, 1.000]
    assert with_q_values(pd.DataFrame({"p": p}))["significant"].tolist() == [True] * 4 + [False] * 11


def test_counters_that_never_move_are_dropped_and_failed_runs_ignored() -> None:
    runs = oat_runs()
    assert counter_columns(runs) == ["counter.TcpExt.ListenOverflows", "counter.Udp.RcvbufErrors",
                                     "counter.proc.majflt"]
    assert "counter.proc.majflt" in moving_counters(runs, counter_columns(runs))     # the failed run moves it
    table = mechanism_table(runs, matters(("s", 16)), ["s", "t"], {"s": 4096, "t": 0})
    assert set(table["counter"]) == {"counter.TcpExt.ListenOverflows", "counter.Udp.RcvbufErrors"}
    assert table["mean"].max() < 1e5


def test_screen_carries_mechanisms_and_counters_never_change_a_verdict() -> None:
    runs = oat_runs()
    with_counters = stats.screen(runs, QPS, ["s", "t"], {"s": 4096, "t": 0}, n_boot=200)
    without = stats.screen(runs.drop(columns=counter_columns(runs)), QPS, ["s", "t"], {"s": 4096, "t": 0}, n_boot=200)
    pd.testing.assert_frame_equal(with_counters.verdicts, without.verdicts)
    assert without.mechanisms.empty and list(without.mechanisms.columns) == MECHANISM_COLUMNS
    assert "mechanisms" not in without.settings
    table = with_counters.mechanisms
    # every significant level of the matters row: s = 16 decides qps and 128 (qps 150 against 1000) is
    # significant too; t has no effect on qps
    s_row = with_counters.verdicts.set_index("knob").loc["s"]
    assert s_row["verdict"] == "matters" and [e["level"] for e in s_row["levels"]] == [16, 128]
    assert list(dict.fromkeys(zip(table["knob"], table["level"]))) == [("s", 16), ("s", 128)]
    assert with_counters.verdicts.set_index("knob").loc["t", "verdict"] != "matters"
    found = table[table["significant"]]
    assert set(zip(found["level"], found["counter"])) == {(16, "counter.TcpExt.ListenOverflows"),
                                                          (128, "counter.TcpExt.ListenOverflows")}
    assert with_counters.settings["mechanisms"] == {"counters": 3, "moving": 2, "tests": 4, "fdr": 0.05,
                                                    "method": "fdr_bh"}


def test_json_carries_the_table_and_validates() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    result = stats.screen(oat_runs(), QPS, ["s", "t"], {"s": 4096, "t": 0}, n_boot=200)
    out = result.to_json()
    jsonschema.validate(out, stats.schema())
    assert out["schema_version"] == 5
    assert len(out["mechanisms"]) == len(result.mechanisms)
    assert out["mechanisms"][0]["level"] in (16, 128) and isinstance(out["mechanisms"][0]["level"], int)


def test_no_level_matters_gives_an_empty_table() -> None:
    table = mechanism_table(oat_runs(), pd.DataFrame({"knob": ["s"], "verdict": ["inconclusive"],
                                                      "level": pd.Series([16], dtype=object)}),
                            ["s", "t"], {"s": 4096, "t": 0})
    assert table.empty and list(table.columns) == MECHANISM_COLUMNS


def test_top_mechanisms_keeps_the_smallest_q_per_level() -> None:
    table = mechanism_table(oat_runs(), matters(("s", 16), ("t", 1)), ["s", "t"], {"s": 4096, "t": 0})
    top = top_mechanisms(table, top=1)
    assert top[["knob", "counter"]].values.tolist() == [["s", "counter.TcpExt.ListenOverflows"],
                                                         ["t", "counter.Udp.RcvbufErrors"]]


def test_cli_prints_the_mechanisms_and_its_json_carries_them(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    csv, out = tmp_path / "runs.csv", tmp_path / "screen.json"
    oat_runs().assign(is_baseline=lambda f: (f["s"] == 4096) & (f["t"] == 0)).to_csv(csv, index=False)
    # knobs found by default: the counter columns are never taken for knobs
    assert main(["screen", str(csv), "--metric", "qps:max:5", "--json", str(out), "--n-boot", "200"]) == 0
    printed = capsys.readouterr().out
    assert "baselines: s=4096, t=0" in printed
    block = printed[printed.index("mechanisms ("):]
    assert "2 of 3 counters move, 4 tests, Benjamini-Hochberg q <= 0.05" in block
    # about +10,600/s and +3,030/s, written out in full (never +1.06e+04/s)
    assert re.search(r"  s=16 \(vs 4096\):\n    TcpExt\.ListenOverflows  \+10,[56]\d\d/s \[", block), block
    assert re.search(r"  s=128 \(vs 4096\):\n    TcpExt\.ListenOverflows  \+3,0[23]\d/s \[", block), block
    assert "RcvbufErrors" not in block
    document = json.loads(out.read_text())
    jsonschema.validate(document, stats.schema())
    assert [(m["knob"], m["level"], m["counter"], m["significant"]) for m in document["mechanisms"]] == [
        ("s", 16, "counter.TcpExt.ListenOverflows", True), ("s", 16, "counter.Udp.RcvbufErrors", False),
        ("s", 128, "counter.TcpExt.ListenOverflows", True), ("s", 128, "counter.Udp.RcvbufErrors", False)]
    assert document["settings"]["mechanisms"]["tests"] == 4


def test_cli_without_counters_prints_no_mechanism_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "runs.csv"
    runs = oat_runs()
    runs.drop(columns=counter_columns(runs)).to_csv(csv, index=False)
    assert main(["screen", str(csv), "--metric", "qps:max:5", "--knob", "s", "--knob", "t", "--baseline", "s=4096",
                 "--baseline", "t=0", "--n-boot", "200", "--mechanisms"]) == 0
    assert "mechanisms" not in capsys.readouterr().out


def test_cli_block_shows_three_per_level_unless_asked_for_all() -> None:
    from tunelab.cli.screen import mechanisms_text

    rng = np.random.default_rng(3)
    runs = oat_runs()
    level = (runs["s"] == 16).to_numpy()
    for i in range(5):      # five more counters that overflow with s = 16
        runs[f"counter.TcpExt.More{i}"] = np.where(level, 500.0 + 10 * i, 0.0) + rng.normal(0, 1, len(runs))
    table = mechanism_table(runs, matters(("s", 16)), ["s", "t"], {"s": 4096, "t": 0})
    summary = {"counters": 8, "moving": 7, "tests": len(table), "fdr": 0.05}
    assert int(table["significant"].sum()) == 6
    short = mechanisms_text(table, summary)
    assert short.count("/s [") == 3 and "(3 more; --mechanisms lists them)" in short
    full = mechanisms_text(table, summary, top=None)
    assert full.count("/s [") == 6 and "more;" not in full
