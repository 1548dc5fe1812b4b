"""Bad data for a screen (issue 24): refused with one line before any statistic is computed.

* a CSV whose header names a column twice (pandas would read the second ``qps`` as a knob ``qps.1``);
* a metric with values <= 0 read as % changes or on the log scale (no explicit ``scale``, no
  ``sesoi_abs``): on a negative baseline a rise reads as "-99.8 % worse". With ``scale: linear``
  and a ``sesoi_abs`` the same data is screened, as differences.

The expected numbers are computed by hand from the data written here.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from tests.hostile.conftest import assert_one_error
from tunelab.designs import load_design_text
from tunelab.store import Store

#: baseline level a around -1000, level b around -2: the metric went UP by 998 (better, for max)
NEGATIVE = {"k": ["a"] * 5 + ["b"] * 5, "qps": [-1001, -999, -1000, -1002, -998, -3, -1, -2, -2.5, -1.5]}


def write_csv(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_a_csv_naming_a_column_twice_is_refused(cli, tmp_path: Path) -> None:
    csv = write_csv(tmp_path / "dup.csv", """
        k,qps,latency_mean_ms,qps
        a,1,5,2
        a,2,6,3
        b,3,5,4
        b,4,6,5
    """)
    result = cli("screen", str(csv), "--metric", "qps")
    assert_one_error(result, "dup.csv", "'qps' twice", "columns 2 and 4")
    assert "qps.1" not in result.err and result.out == ""


def test_a_csv_with_distinct_names_that_pandas_would_also_produce_is_screened(cli, tmp_path: Path) -> None:
    # "qps.1" written by the user is a name of its own, not a mangled duplicate
    csv = write_csv(tmp_path / "ok.csv", """
        k,qps,qps.1
        a,10,1
        a,11,1
        a,10.5,1
        b,20,1
        b,21,1
        b,20.5,1
    """)
    result = cli("screen", str(csv), "--metric", "qps", "--knob", "k")
    assert result.status == 0, result.err


def test_negative_values_of_a_percent_metric_are_refused_with_the_count_and_the_fix(cli, tmp_path: Path) -> None:
    csv = tmp_path / "neg.csv"
    pd.DataFrame(NEGATIVE).to_csv(csv, index=False)
    result = cli("screen", str(csv), "--metric", "qps:max")
    assert_one_error(result, "neg.csv", "'qps'", "10 value(s) <= 0", "lowest -1002", "scale: linear", "sesoi_abs",
                     "qps:max:linear:abs=n", "designs/README.md")
    assert "worse" not in result.out


@pytest.mark.parametrize("values, count", [([0.0, 5, 6, 7, 8, 9], 1), ([-1.0, -2, 6, 7, 8, 9], 2)])
def test_zero_counts_as_non_positive_on_the_log_scale(cli, tmp_path: Path, values: list[float], count: int) -> None:
    csv = tmp_path / "zero.csv"
    pd.DataFrame({"k": ["a"] * 3 + ["b"] * 3, "qps": values}).to_csv(csv, index=False)
    result = cli("screen", str(csv), "--metric", "qps:max:log")
    assert_one_error(result, f"{count} value(s) <= 0", "log scale")


def test_the_same_data_with_scale_linear_and_sesoi_abs_reads_as_better(cli, tmp_path: Path) -> None:
    csv = tmp_path / "neg.csv"
    pd.DataFrame(NEGATIVE).to_csv(csv, index=False)
    out = tmp_path / "screen.json"
    result = cli("screen", str(csv), "--metric", "qps:max:linear:abs=10", "--json", str(out))
    assert result.status == 0, result.err
    row = json.loads(out.read_text())["verdicts"][0]
    # mean(b) - mean(a) = -2 - (-1000) = +998: up, and better for a metric to maximise
    assert row["effect_abs"] == pytest.approx(998.0)
    assert row["direction"] == "better" and row["best_level"] == "b"


STORE_DESIGN = textwrap.dedent("""
    name: negative
    target: {{type: simulator, options: {{surface: simple}}}}
    load: {{generator: dnsperf, profile: overload}}
    measure_s: 1
    metrics: [{metric}]
    knobs:
      - {{name: net.core.somaxconn, levels: [128, 16], baseline: 128}}
    design: {{type: oat, replicates: 3, seed: 1}}
""")


def negative_store(tmp_path: Path, metric: str) -> Path:
    """A store of a design whose ``qps`` (as written by ``metric``) was recorded negative at every trial."""
    text = STORE_DESIGN.format(metric=metric)
    design = load_design_text(text, source="negative.yaml")
    path = tmp_path / "negative.sqlite"
    with Store.open(path, study=design.name, design_hash=design.design_hash, design_text=text) as store:
        for run_id, (level, qps) in enumerate([(128, -1000.0), (128, -1001.0), (128, -999.0),
                                               (16, -2.0), (16, -3.0), (16, -1.0)]):
            plan = {"run_id": run_id, "config_id": int(level == 16), "block": 0, "replicate": run_id % 3,
                    "run_order": run_id, "is_baseline": level == 128,
                    "varied_knob": None if level == 128 else "net.core.somaxconn"}
            trial = store.begin_trial(f"screen:{run_id}", "screen", {"net.core.somaxconn": level}, plan=plan)
            store.finish_trial(trial, "ok", None, {"net.core.somaxconn": level}, {"qps": qps})
    return path


def test_a_store_whose_design_gives_no_scale_is_refused(cli, tmp_path: Path) -> None:
    store = negative_store(tmp_path, "{name: qps, direction: maximize, sesoi_pct: 5}")
    result = cli("screen", str(store))
    assert_one_error(result, "negative.sqlite", "'qps'", "6 value(s) <= 0", "scale: linear")


def test_a_store_whose_design_says_linear_with_sesoi_abs_is_screened(cli, tmp_path: Path) -> None:
    store = negative_store(tmp_path, "{name: qps, direction: maximize, scale: linear, sesoi_abs: 10}")
    out = tmp_path / "screen.json"
    result = cli("screen", str(store), "--json", str(out))
    assert result.status == 0, result.err
    row = json.loads(out.read_text())["verdicts"][0]
    assert row["effect_abs"] == pytest.approx(-2.0 - (-1000.0))      # means -2 and -1000
    assert row["direction"] == "better"
