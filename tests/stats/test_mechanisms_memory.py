"""Mechanisms bounded in memory: per-cell summaries give the tables the whole-matrix implementation gave.

References, independent of the code under test:

* the mechanism tables of ``data/examples/default.sqlite`` written by the implementation before it ran per
  column (one ``scipy.stats.ttest_ind`` over every counter at once), saved in ``tests/stats/reference/mechanisms/``
  by ``make_reference.py`` there;
* ``scipy.stats.ttest_ind(equal_var=True)`` called here on each row's raw runs, selected here by hand.

No memory figure is asserted here (``benchmarks/bench_memory.py`` measures it).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as ss

from tunelab.model import USABLE_STATUSES, AnalysisKind
from tunelab.stats.mechanisms import (CounterCells, cell_keys, mechanism_settings, mechanism_table,
                                      summarise_counters)
from tunelab.store import Store

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "stats" / "reference" / "mechanisms"
STORE = ROOT / "data" / "examples" / "default.sqlite"
KNOBS = ["net.core.somaxconn", "link.mtu[@link]", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_syncookies"]
BASELINE = {"net.core.somaxconn": 4096, "link.mtu[@link]": 1500, "net.ipv4.tcp_fin_timeout": 60,
            "net.ipv4.tcp_syncookies": 1}
NUMBERS = ["n", "baseline_n", "mean", "baseline_mean", "difference", "ci_low", "ci_high", "hedges_g", "g_ci_low",
           "g_ci_high", "t", "df", "p", "q"]


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    with Store(STORE, readonly=True) as store:
        return store.tidy("screen", include_failed=True)


def verdicts_of(reference: pd.DataFrame) -> pd.DataFrame:
    """A verdict table under which every knob level of ``reference`` matters (in its order)."""
    pairs = list(dict.fromkeys(zip(reference["knob"], reference["level"])))
    return pd.DataFrame({"knob": [k for k, _ in pairs], "verdict": "matters",
                         "level": pd.Series([lv for _, lv in pairs], dtype=object)})


@pytest.mark.parametrize("kind", [AnalysisKind.OAT, AnalysisKind.FACTORIAL])
def test_the_table_is_the_whole_matrix_implementations(runs: pd.DataFrame, kind: AnalysisKind) -> None:
    reference = pd.read_csv(REFERENCE / f"default-{kind.value}.csv")
    table = mechanism_table(runs, verdicts_of(reference), KNOBS, BASELINE, kind)
    assert len(table) == len(reference) == 443
    assert table["counter"].tolist() == reference["counter"].tolist()          # same rows, same order
    assert table["level"].tolist() == reference["level"].tolist()
    assert table["significant"].tolist() == reference["significant"].tolist()
    for column in NUMBERS:
        np.testing.assert_allclose(table[column].to_numpy(float), reference[column].to_numpy(float), rtol=1e-9,
                                   err_msg=column)


def test_every_row_is_scipys_t_test_on_its_runs(runs: pd.DataFrame) -> None:
    reference = pd.read_csv(REFERENCE / "default-oat.csv")
    table = mechanism_table(runs, verdicts_of(reference), KNOBS, BASELINE, AnalysisKind.OAT)
    usable = runs[runs["status"].isin(USABLE_STATUSES)]
    for row in table.itertuples():
        others = np.all([usable[k] == BASELINE[k] for k in KNOBS if k != row.knob], axis=0)
        x = usable.loc[others & (usable[row.knob] == row.level), row.counter].dropna().to_numpy(float)
        y = usable.loc[others & (usable[row.knob] == BASELINE[row.knob]), row.counter].dropna().to_numpy(float)
        test = ss.ttest_ind(x, y, equal_var=True)
        interval = test.confidence_interval(0.95)
        assert (row.n, row.baseline_n) == (len(x), len(y))
        np.testing.assert_allclose([row.t, row.p, row.ci_low, row.ci_high, row.mean - row.baseline_mean],
                                   [test.statistic, test.pvalue, interval.low, interval.high, x.mean() - y.mean()],
                                   rtol=1e-9, atol=1e-300, err_msg=row.counter)


def test_chunks_merged_summarise_as_the_whole(runs: pd.DataFrame) -> None:
    keys = cell_keys(runs, KNOBS)
    whole = summarise_counters(runs, keys)
    merged = CounterCells.merge([summarise_counters(runs.iloc[start:start + 7], keys)
                                 for start in range(0, len(runs), 7)])
    assert merged.counters == whole.counters and len(merged.cells) == len(whole.cells)
    position = {tuple(cell): i for i, cell in enumerate(merged.cells.itertuples(index=False))}
    order = [position[tuple(cell)] for cell in whole.cells.itertuples(index=False)]
    np.testing.assert_array_equal(merged.n[order], whole.n)
    for name in ("mean", "m2", "low", "high"):
        np.testing.assert_allclose(getattr(merged, name)[order], getattr(whole, name), rtol=1e-9, atol=1e-9,
                                   err_msg=name)
    verdicts = verdicts_of(pd.read_csv(REFERENCE / "default-oat.csv"))
    from_chunks = mechanism_table(runs.drop(columns=whole.counters), verdicts, KNOBS, BASELINE, counters=merged)
    at_once = mechanism_table(runs, verdicts, KNOBS, BASELINE)
    assert from_chunks["counter"].tolist() == at_once["counter"].tolist()
    for column in NUMBERS:
        np.testing.assert_allclose(from_chunks[column].to_numpy(float), at_once[column].to_numpy(float), rtol=1e-9,
                                   err_msg=column)
    assert mechanism_settings(runs.drop(columns=whole.counters), at_once, counters=merged) == \
        mechanism_settings(runs, at_once)


def test_text_infinities_and_failed_runs_count_as_before() -> None:
    """A text cell and an infinity are no value; a failed run's counters never count (nor move a counter)."""
    runs = pd.DataFrame({"s": [0] * 4 + [1] * 4 + [1], "status": ["ok"] * 8 + ["failed"],
                         "counter.a": ["1", "2", "x", "3", "5", "6", "7", "inf", "1e12"],
                         "counter.b": [0.0] * 8 + [5.0]})
    table = mechanism_table(runs, verdicts_of(pd.DataFrame({"knob": ["s"], "level": [1]})), ["s"], {"s": 0})
    assert table["counter"].tolist() == ["counter.a"]
    test = ss.ttest_ind([5.0, 6.0, 7.0], [1.0, 2.0, 3.0])
    assert (table["n"].iloc[0], table["baseline_n"].iloc[0]) == (3, 3)
    assert table["p"].iloc[0] == pytest.approx(test.pvalue, rel=1e-12)


def test_a_csv_read_in_chunks_screens_as_the_whole_frame(runs: pd.DataFrame, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A CSV's counters summarised chunk by chunk (10 rows at a time here) give the mechanisms of the frame."""
    import tunelab.study_data
    from tunelab import stats
    from tunelab.model import Metric
    from tunelab.study_data import screen_inputs

    csv = tmp_path / "default.csv"
    runs[runs["status"] == "ok"].to_csv(csv, index=False)
    monkeypatch.setattr(tunelab.study_data, "CSV_CHUNK_ROWS", 10)
    inputs = screen_inputs(csv, metrics=[Metric.parse("qps")])
    assert not [c for c in inputs.data.columns if c.startswith("counter.")] and len(inputs.data) == 54
    chunked = inputs.screen(n_boot=200)
    whole = stats.screen(pd.read_csv(csv), inputs.metrics, inputs.knobs, inputs.baseline, n_boot=200)
    pd.testing.assert_frame_equal(chunked.verdicts, whole.verdicts)
    assert chunked.settings["mechanisms"] == whole.settings["mechanisms"]
    assert len(chunked.mechanisms) == len(whole.mechanisms) > 0
    assert chunked.mechanisms["counter"].tolist() == whole.mechanisms["counter"].tolist()
    for column in NUMBERS:
        np.testing.assert_allclose(chunked.mechanisms[column].to_numpy(float), whole.mechanisms[column].to_numpy(float),
                                   rtol=1e-9, err_msg=column)
