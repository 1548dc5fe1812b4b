"""The guard rule: a metric conditional on a guard is `not comparable` where the guard collapses.

Expected values come from the data (means computed here with pandas), from the recorded tool output
or from simulation with a known truth, never from the rule's own output.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tunelab
from tunelab.designs.schema import design_guards, parse_design
from tunelab.errors import DataError
from tunelab.loads.dnsperf import DnsperfLoad
from tunelab.stats import screen
from tunelab.stats.guards import apply_guards, change_text, guard_table
from tunelab.targets.base import CommandResult

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "data" / "examples" / "default.sqlite"
RECORDED = ROOT / "tests" / "loads" / "recorded"
SOMAXCONN, FIN = "net.core.somaxconn", "net.ipv4.tcp_fin_timeout"
NO_GUARDS = {"guards": [], "conditional_on": {}}


def _design(generator: str, metrics: list[dict], **extra) -> dict:
    return {"name": "g", "target": {"type": "dry-run"}, "load": {"generator": generator}, "metrics": metrics,
            "knobs": [{"name": "net.core.somaxconn", "levels": [4096, 16]}], "design": {"type": "oat"}, **extra}


# ---- the recorded default study ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_screen():
    """The default study screened as `tunelab screen default` does (design, load defaults and all)."""
    return tunelab.api.screen(STORE, n_boot=200)


def test_default_study_somaxconn_latency_is_not_comparable(default_screen) -> None:
    verdicts = default_screen.verdicts.set_index(["knob", "metric"])
    row = verdicts.loc[(SOMAXCONN, "latency_mean_ms")]
    assert row["verdict"] == "not comparable"
    assert row["direction"] == "none"                     # never "better"
    assert row["guard"].startswith("guard: qps -")
    assert "answered queries per second fell" in row["reason"]
    # the guards themselves keep their verdicts; qps is a screened metric too
    assert verdicts.loc[(SOMAXCONN, "qps"), "verdict"] == "matters"


def test_default_study_guard_effects_match_the_data(default_screen) -> None:
    data = tunelab.store.Store(STORE, readonly=True).tidy()
    data = data[data["round"] == 1]       # the study ran in rounds; somaxconn and the MTU were decided at the first
    base = data[(data[SOMAXCONN] == 4096) & (data["link.mtu[@link]"] == 1500) & (data[FIN] == 60)
                & (data["net.ipv4.tcp_syncookies"] == 1)]
    at16 = data[data[SOMAXCONN] == 16]
    expected = 100 * (at16["qps"].mean() / base["qps"].mean() - 1)      # about -99.8 %
    table = default_screen.guards
    row = table[(table["knob"] == SOMAXCONN) & (table["level"] == 16) & (table["guard"] == "qps")].iloc[0]
    assert row["effect_pct"] == pytest.approx(expected, rel=1e-9) and expected < -99
    assert row["tripped"] and row["text"] == f"qps {expected:+.1f} %"
    lost = table[(table["knob"] == "link.mtu[@link]") & (table["level"] == 128) & (table["guard"] == "lost_pct")]
    at128 = data[data["link.mtu[@link]"] == 128]
    assert lost["effect_abs"].iloc[0] == pytest.approx(at128["lost_pct"].mean() - base["lost_pct"].mean(), rel=1e-9)
    assert lost["text"].iloc[0].startswith("lost_pct +") and lost["text"].iloc[0].endswith(" pt")


def test_default_study_fin_timeout_unchanged(default_screen) -> None:
    """No guard moves at tcp_fin_timeout: its verdicts equal those of a screen without guards."""
    inputs = tunelab.study_data.screen_inputs(STORE)
    data, metrics, knobs, baseline = inputs.data, inputs.metrics, inputs.knobs, inputs.baseline
    alpha, correction = inputs.alpha, inputs.correction
    # one look at alpha over all runs: the study's own sequential looks depend on which rows the guards
    # decided, so a replay without them would be a different study
    design = replace(inputs.design, looks=None)
    plain = screen(data, metrics, knobs, baseline, alpha=alpha, correction=correction, n_boot=200,
                   design=design, guards=NO_GUARDS).verdicts.set_index(["knob", "metric"])
    one_look = screen(data, metrics, knobs, baseline, alpha=alpha, correction=correction, n_boot=200, design=design)
    guarded = one_look.verdicts.set_index(["knob", "metric"])
    assert not one_look.guards.query(f"knob == '{FIN}'")["tripped"].any()
    for metric in ("qps", "latency_mean_ms"):
        assert guarded.loc[(FIN, metric), "verdict"] == plain.loc[(FIN, metric), "verdict"] != "not comparable"
        assert guarded.loc[(FIN, metric), "guard"] is None
    # without guards the collapse reads as an effect on latency, which is what the rule prevents
    assert plain.loc[(SOMAXCONN, "latency_mean_ms"), "verdict"] == "matters"


def test_json_and_text_carry_the_guard(default_screen) -> None:
    import jsonschema

    from tunelab.cli.render import screen_text
    from tunelab.stats import schema

    document = default_screen.to_json()
    jsonschema.validate(document, schema())
    assert document["guards"] and document["settings"]["guards"]["conditional_on"]["latency_mean_ms"] == [
        "qps", "lost_pct"]
    assert "not comparable (guard: qps -" in screen_text(default_screen)


# ---- recorded dnsperf output with heavy loss --------------------------------------------------------


def _variant(text: str, scale: float, lost_share: float, latency_factor: float) -> str:
    """Recorded dnsperf output with the answered rate scaled, a share of the queries lost and the
    latency of the answered ones scaled (what an overloaded server that drops queries looks like)."""
    text = re.sub(r"^(\d+\.\d+): (\d+(?:\.\d+)?)$", lambda m: f"{m.group(1)}: {float(m.group(2)) * scale:.6f}",
                  text, flags=re.M)
    sent = int(re.search(r"Queries sent:\s+(\d+)", text).group(1))
    lost = int(round(sent * lost_share))
    text = re.sub(r"Queries completed:\s+\d+", f"Queries completed:    {sent - lost}", text)
    text = re.sub(r"Queries lost:\s+\d+", f"Queries lost:         {lost}", text)
    return re.sub(r"Average Latency \(s\):\s+(\d+\.\d+)",
                  lambda m: f"Average Latency (s):  {float(m.group(1)) * latency_factor:.6f}", text, count=1)


@pytest.fixture(scope="module")
def lossy_rows() -> pd.DataFrame:
    """Runs parsed by the dnsperf load from recorded UDP overload output: a clean baseline and a
    level that loses ~40 % of its queries while its few answers come back faster."""
    load, text = DnsperfLoad(), (RECORDED / "dnsperf_over_udp.out").read_text()
    rows = []
    for level, lost_share, latency in (("clean", 0.0, 1.0), ("lossy", 0.4, 0.5)):
        for i, scale in enumerate((0.97, 0.99, 1.0, 1.01, 1.03)):
            out = _variant(text, scale * (1 - lost_share), lost_share + 0.01 * i * (lost_share > 0),
                           latency * scale)
            result = load.parse(CommandResult(("dnsperf",), 0, out, "", 4.0), load.settings("udp_overload"), 1)
            assert result.status == "ok", result.reason
            rows.append({"k": level, **result.metrics})
    return pd.DataFrame(rows)


def test_heavy_loss_makes_latency_not_comparable(lossy_rows) -> None:
    assert lossy_rows.groupby("k")["lost_pct"].mean()["lossy"] > 39          # parsed, not made up here
    guards = design_guards(parse_design(_design("dnsperf", [{"name": "latency_mean_ms"}])))
    metrics = [{"name": "latency_mean_ms", "direction": "minimize", "sesoi_pct": 10}]
    plain = screen(lossy_rows, metrics, ["k"], {"k": "clean"}, n_boot=200, guards=NO_GUARDS).verdicts.iloc[0]
    assert (plain["verdict"], plain["direction"]) == ("matters", "better")   # the misleading reading
    result = screen(lossy_rows, metrics, ["k"], {"k": "clean"}, n_boot=200, guards=guards)
    row = result.verdicts.iloc[0]
    assert row["verdict"] == "not comparable" and row["direction"] == "none"
    assert "lost_pct +" in row["guard"] and "qps -" in row["guard"]
    assert "the lost ones were never timed" in row["reason"]
    assert set(result.guards["guard"]) == {"qps", "lost_pct"}                 # guards get no verdict rows
    assert list(result.verdicts["metric"]) == ["latency_mean_ms"]


# ---- noise, the other levels, iperf3 ------------------------------------------------------------------


QPS_GUARD = [{"name": "qps", "direction": "maximize", "sesoi_pct": 5}]


def test_a_guard_within_its_sesoi_does_not_trip() -> None:
    """-3 % with a tight interval (shown, but within the 5 % SESOI) does not trip; neither does -8 % with
    an interval that includes no change (noise); -30 % does."""
    rng = np.random.default_rng(1)
    base = 1000 * (1 + 0.002 * rng.standard_normal(6))
    noisy = np.array([700.0, 1300, 760, 1200, 640, 1000])                  # mean 933: -6.7 %, SD ~270
    data = pd.DataFrame({"k": ["b"] * 6 + ["small"] * 6 + ["noisy"] * 6 + ["big"] * 6,
                         "qps": np.concatenate([base, base * 0.97, noisy, base * 0.7])})
    table = guard_table(data, ["k"], {"k": "b"}, QPS_GUARD).set_index("level")
    assert table.loc["small", "ci_high"] < 0 and not table.loc["small", "tripped"]
    assert table.loc["noisy", "effect_pct"] < -5 < table.loc["noisy", "ci_high"]
    assert not table.loc["noisy", "tripped"]
    assert table.loc["big", "tripped"]


def test_noise_alone_trips_at_most_half_alpha() -> None:
    """With no true change, a guard trips only when its interval excludes 0 on the bad side: a one-sided
    error of at most alpha / 2 = 2.5 %, however noisy (3 runs, CV 10 %: half the estimates lie beyond
    the SESOI's reach of noise, so a rule on the estimate alone would trip far more often)."""
    rng = np.random.default_rng(7)
    trips, beyond = 0, 0
    n_sim = 400
    for _ in range(n_sim):
        values = 1000 * (1 + 0.10 * rng.standard_normal(6))
        data = pd.DataFrame({"k": ["b"] * 3 + ["x"] * 3, "qps": values})
        row = guard_table(data, ["k"], {"k": "b"}, QPS_GUARD).iloc[0]
        trips += bool(row["tripped"])
        beyond += row["effect_pct"] <= -5
    assert beyond / n_sim > 0.2                                              # the estimate alone would trip
    assert trips / n_sim <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / n_sim)


def test_another_level_tripped_keeps_the_verdict_with_a_note() -> None:
    verdicts = pd.DataFrame([{"knob": "k", "metric": "lat", "reason": "route", "level": 2, "verdict": "matters",
                              "direction": "better"}])
    table = pd.DataFrame([
        {"knob": "k", "level": 2, "guard": "qps", "tripped": False, "text": "qps -1.0 %", "effect_pct": -1.0,
         "effect_abs": -10.0, "units": "%", "sesoi": 5.0},
        {"knob": "k", "level": 3, "guard": "qps", "tripped": True, "text": "qps -60.0 %", "effect_pct": -60.0,
         "effect_abs": -600.0, "units": "%", "sesoi": 5.0}])
    out, notes = apply_guards(verdicts, table, {"lat": ("qps",)}, QPS_GUARD)
    out = out.iloc[0]
    assert (out["verdict"], out["direction"], out["guard"]) == ("matters", "better", None)
    assert "not comparable at k=3" in out["reason"] and "qps -60.0 %" in out["reason"] and notes
    # an equivalence claim covers every level, so it cannot stand
    out, _ = apply_guards(verdicts.assign(verdict="no effect (equivalent)"), table, {"lat": ("qps",)}, QPS_GUARD)
    assert out["verdict"].iloc[0] == "not comparable" and out["guard"].iloc[0] == "guard: qps -60.0 % at 3"


def test_iperf3_retransmits_are_a_trade_off_of_throughput_not_a_guard() -> None:
    """iperf3's throughput is goodput, already net of retransmissions: the retransmits are a cost shown
    beside the gain (the load's schema: throughput is not measured on survivors), never a reason to
    call the gain not comparable. Expected values are the data's own means (pandas)."""
    guards = design_guards(parse_design(_design("iperf3", [{"name": "throughput_mbps"}])))
    spec = {g["name"]: g for g in guards["guards"]}["retransmits"]
    assert spec["direction"] == "minimize" and spec["sesoi_abs"] == 100
    assert "throughput_mbps" not in guards["conditional_on"]
    assert guards["trade_offs"]["throughput_mbps"] == ["retransmits"]
    rng = np.random.default_rng(3)
    data = pd.DataFrame({"k": ["bbr"] * 5 + ["reno"] * 5,
                         "throughput_mbps": np.r_[180 + rng.standard_normal(5), 191 + rng.standard_normal(5)],
                         "retransmits": np.r_[20 + rng.integers(0, 5, 5), 2000 + rng.integers(0, 50, 5)]})
    means = data.groupby("k").mean()
    gain = 100 * (means.loc["reno", "throughput_mbps"] / means.loc["bbr", "throughput_mbps"] - 1)   # about +6 %
    cost = means.loc["reno", "retransmits"] - means.loc["bbr", "retransmits"]                        # about +1,990
    metrics = [{"name": "throughput_mbps", "direction": "maximize", "sesoi_pct": 5}]
    row = screen(data, metrics, ["k"], {"k": "bbr"}, n_boot=200, guards=guards).verdicts.iloc[0]
    assert (row["verdict"], row["direction"], row["guard"], row["level"]) == ("matters", "better", None, "reno")
    assert row["effect_pct"] == pytest.approx(gain, rel=1e-12)
    assert row["trade_off"] == f"throughput_mbps {gain:+.1f} %, at retransmits {cost:+,.4g}"
    # the report's verdict table shows the same sentence beside the verdict
    from tunelab.report.tables import verdict_frame

    shown = verdict_frame(screen(data, metrics, ["k"], {"k": "bbr"}, n_boot=200, guards=guards).verdicts)
    assert shown["verdict"].iloc[0] == "matters" and shown["trade-off"].iloc[0] == row["trade_off"]


def test_a_dnsperf_latency_stays_guarded_by_its_schema() -> None:
    """dnsperf's latency is timed on the answered queries only (MetricInfo.on_survivors): guarded."""
    from tunelab.loads.metrics import METRICS

    assert METRICS["latency_mean_ms"].on_survivors and not METRICS["throughput_mbps"].on_survivors
    guards = design_guards(parse_design(_design("dnsperf", [{"name": "latency_mean_ms"}])))
    assert guards["conditional_on"]["latency_mean_ms"] == ["qps", "lost_pct"]
    assert "latency_mean_ms" not in guards["trade_offs"]


def test_a_design_may_switch_a_guard_off_or_add_one() -> None:
    off = design_guards(parse_design(_design("dnsperf", [{"name": "latency_mean_ms", "conditional_on": []}])))
    assert "latency_mean_ms" not in off["conditional_on"]
    added = design_guards(parse_design(_design("dnsperf", [{"name": "qps"}], guards=[{"name": "lost",
                                                                                     "sesoi_abs": 50}])))
    # a guard no metric is conditional on guards every metric that is not a guard itself (qps is one)
    assert added["conditional_on"]["latency_mean_ms"] == ["qps", "lost_pct", "lost"]
    assert added["conditional_on"]["reconnections"] == ["lost"] and "qps" not in added["conditional_on"]
    assert {g["name"]: g for g in added["guards"]}["lost"]["sesoi_abs"] == 50


def test_malformed_guards_are_one_data_error() -> None:
    data = pd.DataFrame({"k": [0, 0, 1, 1], "y": [1.0, 2, 3, 4]})
    with pytest.raises(DataError, match="conditional on 'qps', which is not among the guards"):
        screen(data, [{"name": "y", "sesoi_pct": 5}], ["k"], {"k": 0},
               guards={"guards": [], "conditional_on": {"y": ["qps"]}})


@pytest.mark.parametrize(("spec", "pct", "diff", "digits", "expected"), [
    ({"name": "qps"}, -0.0, 0.0, 3, "qps +0.0 %"),                 # a zero change with a negative sign
    ({"name": "qps"}, -0.04, -0.4, 3, "qps -0.04 %"),              # rounds to 0.0 at one decimal: two digits
    ({"name": "qps"}, -99.8123, -998.1, 3, "qps -99.8 %"),
    ({"name": "lost", "sesoi_abs": 1, "unit": "%"}, float("nan"), -0.0, 3, "lost +0 pt"),
    ({"name": "retransmits", "sesoi_abs": 100}, 12.0, 4330.4, 4, "retransmits +4,330"),
    ({"name": "retransmits", "sesoi_abs": 100}, 12.0, 4330.4, 3, "retransmits +4.33e+03"),
    ({"name": "lat", "sesoi_abs": 1, "unit": "ms"}, float("nan"), -1.5, 3, "lat -1.5 ms"),
])
def test_a_guard_change_never_reads_minus_zero(spec, pct, diff, digits, expected) -> None:
    """One text for a guard's change (guard table and trade-offs), by Python's own format rules."""
    text = change_text(spec, pct, diff, digits=digits)
    assert text == expected
    assert "-0.0 " not in text and "-0 " not in text
