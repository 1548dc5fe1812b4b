"""screen(): route choice, verdict logic, design detection, JSON schema, and the CLI."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
from scipy import stats as ss

from tunelab.cli import main
from tunelab.errors import DataError
from tunelab.stats import ScreenResult, design_kind, schema, screen
from tunelab.stats.screen_common import VERDICT_COLUMNS
from tunelab.model import AnalysisKind

Q = ss.norm.ppf((np.arange(1, 11) - 0.5) / 10)  # deterministic "normal sample" of 10
E = ss.expon.ppf((np.arange(1, 11) - 0.5) / 10) ** 2  # deterministic, strongly skewed


def _oat(values: dict[str, np.ndarray], knob: str = "k", base: str = "a") -> pd.DataFrame:
    return pd.DataFrame({knob: np.repeat(list(values), [len(v) for v in values.values()]),
                         "y": np.concatenate(list(values.values()))})


def _one(data: pd.DataFrame, direction: str = "maximize", sesoi: float = 5) -> ScreenResult:
    return screen(data, [{"name": "y", "direction": direction, "sesoi_pct": sesoi}], ["k"], {"k": "a"}, n_boot=300)


@pytest.mark.parametrize("values,route", [
    ({"a": 100 + Q, "b": 101 + Q, "c": 104 + Q}, "anova+tukey"),
    ({"a": 100 + Q, "b": 110 + 3 * Q, "c": 100 + 6 * Q}, "welch+games_howell"),
    ({"a": 100 + 10 * E, "b": 120 + 10 * E}, "kruskal+dunn"),
])
def test_each_route_is_recommended_on_constructed_data(values: dict, route: str) -> None:
    result = _one(_oat(values))
    verdict = result.verdicts.iloc[0]
    assert verdict["test"] == route
    a = result.assumptions.set_index("test")["p"]
    if route == "kruskal+dunn":
        assert a["shapiro_wilk_standardized"] < 0.01
    elif route == "welch+games_howell":
        assert a["shapiro_wilk_standardized"] >= 0.01 and a["brown_forsythe"] < 0.05
    else:
        assert a["shapiro_wilk_standardized"] >= 0.01 and a["brown_forsythe"] >= 0.05
    assert f"Shapiro–Wilk p={a['shapiro_wilk_standardized']:.3g}" in verdict["reason"]
    assert (f"Brown–Forsythe p={a['brown_forsythe']:.3g}" in verdict["reason"]) == (route != "kruskal+dunn")
    recommended = result.omnibus[result.omnibus["recommended"]]
    assert len(recommended) == 1 and route.startswith(recommended["test"].iloc[0].split("_")[0])
    assert verdict["p"] == recommended["p"].iloc[0]
    methods = set(result.posthoc.loc[result.posthoc["recommended"], "method"])
    assert len(methods) == 1 and methods.pop().split("_")[0] in route


def test_verdicts_matters_equivalent_inconclusive() -> None:
    matters = _one(_oat({"a": 100 + Q, "b": 120 + Q})).verdicts.iloc[0]
    assert matters["verdict"] == "matters" and matters["direction"] == "better" and matters["level"] == "b"
    assert matters["effect_pct"] == pytest.approx(20.0) and matters["effect_ci_low"] > 5
    worse = _one(_oat({"a": 100 + Q, "b": 120 + Q}), direction="minimize").verdicts.iloc[0]
    assert worse["verdict"] == "matters" and worse["direction"] == "worse"
    same = _one(_oat({"a": 100 + 0.5 * Q, "b": 100.2 + 0.5 * Q})).verdicts.iloc[0]
    assert same["verdict"] == "no effect (equivalent)" and same["equivalent"] and not same["relevant"]
    noisy = _one(_oat({"a": 100 + 30 * Q[::3], "b": 103 + 30 * Q[::3]})).verdicts.iloc[0]
    assert noisy["verdict"] == "inconclusive" and not noisy["significant"] and not noisy["equivalent"]


def test_the_level_prefers_a_relevant_improvement_else_the_largest_change() -> None:
    data = _oat({"a": 100 + Q, "b": 110 + Q, "c": 60 + Q})
    assert _one(data).verdicts.loc[0, "level"] == "b"
    assert _one(data, sesoi=20).verdicts.loc[0, "level"] == "c"  # no level improves by 20 %: largest change


def _oat_two_knobs(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for rep in range(4):
        for a, b in [(1, "x"), (2, "x"), (3, "x"), (1, "y")]:
            rows.append({"run_id": len(rows), "replicate": rep, "is_baseline": a == 1 and b == "x", "status": "ok",
                         "a": a, "b": b, "qps": 1000 * (1 + 0.2 * (a == 3)) + rng.normal(0, 20),
                         "lat": 5 + rng.normal(0, 0.1)})
    return pd.DataFrame(rows)


METRICS = [{"name": "qps", "direction": "maximize", "sesoi_pct": 5},
           {"name": "lat", "direction": "minimize", "sesoi_pct": 10}]


def test_oat_uses_the_knob_subset_and_adjusts_over_all_tests() -> None:
    data = _oat_two_knobs()
    result = screen(data, METRICS, ["a", "b"], {"a": 1, "b": "x"}, n_boot=300)
    assert result.design is AnalysisKind.OAT
    assert result.verdicts.columns.tolist() == VERDICT_COLUMNS
    assert len(result.verdicts) == 4
    n = result.assumptions.query("knob == 'b' and test == 'shapiro_wilk'")["n"]
    assert (n == 8).all()  # 4 baseline runs + 4 runs with b = y
    v = result.verdicts
    expected = np.minimum(1, np.maximum.accumulate(np.sort(v["p"]) * np.arange(4, 0, -1)))
    np.testing.assert_allclose(np.sort(v["p_adj"]), expected)
    assert v.set_index(["knob", "metric"]).loc[("a", "qps"), "verdict"] == "matters"


def test_failed_rows_are_ignored() -> None:
    data = _oat_two_knobs()
    data.loc[0, "status"], data.loc[0, "qps"] = "failed", -1e9
    assert screen(data, METRICS, ["a", "b"], {"a": 1, "b": "x"}, n_boot=300).settings["n_runs"] == 15


def test_factorial_design_reads_its_verdicts_from_one_model() -> None:
    rng = np.random.default_rng(1)
    grid = pd.DataFrame([(a, b) for a in (1, 2, 3) for b in ("x", "y") for _ in range(3)], columns=["a", "b"])
    grid["qps"] = 1000 + 60 * (grid["a"] == 3) + rng.normal(0, 20, len(grid))
    assert design_kind(grid, ["a", "b"], {"a": 1, "b": "x"}) is AnalysisKind.FACTORIAL
    result = screen(grid, METRICS[:1], ["a", "b"], {"a": 1, "b": "x"}, n_boot=300)
    assert result.design is AnalysisKind.FACTORIAL
    assert result.model_terms["term"].tolist() == ["a", "b", "a:b"]
    assert result.verdicts["knob"].tolist() == ["a", "b", "a:b"]
    assert set(result.verdicts["test"]) <= {"ols_type2", "hc3_wald", "freedman_lane"}
    assert (result.omnibus["recommended"]).all()
    assert (result.assumptions.query("test == 'model_shapiro_wilk'")["n"] == len(grid)).all()


def test_json_follows_the_schema() -> None:
    result = screen(_oat_two_knobs(), METRICS, ["a", "b"], {"a": 1, "b": "x"}, n_boot=300)
    document = result.to_json()
    jsonschema.validate(document, schema())
    text = json.dumps(document, allow_nan=False)  # NaN must have become null
    assert json.loads(text)["verdicts"][0]["knob"] == "a"
    broken = json.loads(text)
    broken["verdicts"][0]["verdict"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema())


@pytest.mark.parametrize("kwargs,message", [
    ({"baseline": {"a": 1}}, "no baseline level for knob 'b'"),
    ({"baseline": {"a": 7, "b": "x"}}, "baseline 7 of knob 'a' never occurs"),
    ({"knobs": ["a", "zz"]}, "unknown knob column 'zz'"),
    ({"metrics": [{"name": "qps", "direction": "up", "sesoi_pct": 5}]}, "direction must be 'maximize' or 'minimize'"),
    ({"metrics": [{"name": "qps", "direction": "maximize", "sesoi_pct": 0}]}, "sesoi_pct must be a positive"),
    ({"correction": "BH"}, "unknown correction 'BH'"),
])
def test_screen_input_errors(kwargs: dict, message: str) -> None:
    arguments = {"data": _oat_two_knobs(), "metrics": METRICS, "knobs": ["a", "b"], "baseline": {"a": 1, "b": "x"}}
    arguments.update(kwargs)
    with pytest.raises(DataError, match=message):
        screen(**arguments)


def test_cli_prints_verdicts_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "runs.csv"
    _oat_two_knobs().to_csv(csv, index=False)
    out = tmp_path / "screen.json"
    status = main(["screen", str(csv), "--metric", "qps:max:5", "--metric", "lat:min:10", "--json", str(out),
                   "--n-boot", "300"])
    printed = capsys.readouterr().out
    assert status == 0
    assert "verdict" in printed and "matters" in printed and "oat design" in printed
    assert "baselines: a=1, b=x" in printed  # from the is_baseline rows, knobs found by default
    document = json.loads(out.read_text())
    jsonschema.validate(document, schema())
    assert {(v["knob"], v["metric"]) for v in document["verdicts"]} == {("a", "qps"), ("a", "lat"), ("b", "qps"),
                                                                        ("b", "lat")}


def test_cli_baseline_flag_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "runs.csv"
    _oat_two_knobs().drop(columns="is_baseline").to_csv(csv, index=False)
    assert main(["screen", str(csv), "--metric", "qps", "--knob", "a", "--baseline", "a=2", "--n-boot", "200"]) == 0
    assert "baselines: a=2" in capsys.readouterr().out
    assert main(["screen", str(csv), "--metric", "qps", "--knob", "a", "--baseline", "a=9"]) == 2
    assert "'9' is not a level of 'a'" in capsys.readouterr().err
    assert main(["screen", str(csv)]) == 2
    assert "--metric" in capsys.readouterr().err
    assert main(["screen", str(csv), "--metric", "qps:sideways"]) == 2
    assert "neither max/min, a SESOI" in capsys.readouterr().err


def test_a_constant_level_and_a_zero_baseline_do_not_stop_the_screen() -> None:
    """Counts such as dnsperf's ``lost`` are often 0 in every baseline run: a knob × metric whose
    baseline mean is 0 is 'untestable' (no % change exists), and a level without variation sends
    the others to Kruskal–Wallis (Welch's weights n/s² are undefined); the rest of the screen runs."""
    from tunelab.errors import DataError
    from tunelab.stats import welch_anova

    data = pd.DataFrame({"k": np.repeat(["a", "b", "c"], 5),
                         "lost": np.r_[np.zeros(10), [0, 1, 0, 2, 1.0]],
                         "qps": np.r_[np.full(5, 100.0), 101 + np.arange(5.0), 90 + np.arange(5.0)]})
    metrics = [{"name": "lost", "direction": "minimize", "sesoi_pct": 5},
               {"name": "qps", "direction": "maximize", "sesoi_pct": 5}]
    verdicts = screen(data, metrics, ["k"], {"k": "a"}, n_boot=200).verdicts.set_index("metric")
    assert verdicts.loc["lost", "verdict"] == "untestable" and "mean 0" in verdicts.loc["lost", "reason"]
    assert verdicts.loc["qps", "test"] == "kruskal+dunn" and "no variation" in verdicts.loc["qps", "reason"]
    # Kruskal-Wallis is significant, but Dunn's test does not separate c (-8 %) from the baseline a: by hand,
    # mean ranks a 8, c 3 (b 13), sigma^2 = (N(N+1)/12 - sum(t^3 - t)/(12(N-1))) (1/5 + 1/5) with a's five
    # tied 100s, z = 5 / sigma; Holm over the 3 pairs (b-c is far smaller) doubles the two equal p-values
    from scipy.stats import norm

    n, ties = 15, 5
    z = 5 / np.sqrt((n * (n + 1) / 12 - (ties ** 3 - ties) / (12 * (n - 1))) * (2 / 5))
    holm = 2 * 2 * norm.sf(z)
    row = verdicts.loc["qps"]
    assert row["verdict"] == "inconclusive" and not row["significant"] and row["levels"] == []
    # b (+3 %) and c (-8 %) tie at that p_adj (mean ranks 13 and 3 sit 5 either side of a's 8); b comes first
    assert f"(closest: b, p_adj {holm:.3g};" in row["posthoc_note"] and "finds no level different" in row["posthoc_note"]
    with pytest.raises(DataError, match="no variation.*k = 'a'.*kruskal"):
        welch_anova(data, "qps", "k")


def test_csv_screen_never_guesses_a_reported_metric_to_be_a_knob(tmp_path: Path) -> None:
    """`tunelab export` writes every metric the load reported; screening one of them must not take
    the others (continuous, one level per run) for knobs. That made a factorial model with
    hundreds of thousands of columns, which crashed statsmodels (segfault) before the fix."""
    from tunelab.model import Metric
    from tunelab.study_data import screen_inputs

    frame = _oat_two_knobs()
    rng = np.random.default_rng(0)
    frame["latency_mean_ms"] = rng.normal(5, 1, len(frame))      # names from tunelab.loads.METRICS
    frame["achieved_qps"] = rng.normal(1000, 50, len(frame))
    csv = tmp_path / "export.csv"
    frame.to_csv(csv, index=False)
    knobs = screen_inputs(csv, metrics=[Metric.parse("qps:max:5")]).knobs
    assert knobs == ["a", "b", "lat"]                             # 'lat' is no known metric: a knob
    assert screen_inputs(csv, metrics=[Metric("qps")], knobs=["achieved_qps"]).knobs == ["achieved_qps"]  # unless asked


def test_factorial_anova_refuses_a_model_with_more_parameters_than_runs() -> None:
    """Checked before the design matrix is built: a 40-level 'factor' (a metric taken for a knob)
    on 40 runs is a clear DataError, not a huge fit."""
    from tunelab.stats import anova_factorial

    rng = np.random.default_rng(1)
    data = pd.DataFrame({"y": rng.normal(size=40), "k": np.repeat([0, 1], 20), "m": rng.normal(size=40)})
    with pytest.raises(DataError, match="no residual degrees of freedom .*40 runs, 80 parameters"):
        anova_factorial(data, "y", ["k", "m"], interactions=2)
