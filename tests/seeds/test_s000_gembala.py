"""Seed 000 helpers: the gembala2013 GA scaled to a budget, and the claim row chosen from the data."""
from __future__ import annotations

import pandas as pd
import pytest

from tunelab.seeds import s000_gembala as s000


@pytest.mark.parametrize("budget, expected", [
    (400, {"pop_size": 80, "offspring": 8, "generations": 40}),   # the paper: population 80, 40 generations, 10 %
    (40, {"pop_size": 20, "offspring": 2, "generations": 10}),    # 20 + 10 x 2
    (10, {"pop_size": 4, "offspring": 2, "generations": 2}),      # 4 + 2 x 2 (6 would need 6 + 3 x 2 = 12)
])
def test_scaled_gembala_keeps_the_papers_proportions(budget: int, expected: dict[str, int]) -> None:
    assert s000.scaled_gembala(budget) == expected


def _confirmation(gain_verdict: str, rtt_verdict: str) -> pd.DataFrame:
    return pd.DataFrame([
        {"metric": "throughput_mbps", "pct_change": 30.0, "ci_low": 20.0, "ci_high": 41.0, "verdict": gain_verdict},
        {"metric": "rtt_mean_ms", "pct_change": -2.0, "ci_low": -6.0, "ci_high": 3.0, "verdict": rtt_verdict}])


VERDICTS = pd.DataFrame({"knob": ["link.mtu[@link]@client", "net.ipv4.tcp_rmem", "a:b"],
                         "metric": "throughput_mbps", "verdict": ["matters", "no effect (equivalent)", "matters"],
                         "effect_pct": [80.0, 1.0, 5.0], "effect_ci_low": [60.0, -2.0, 1.0],
                         "effect_ci_high": [100.0, 4.0, 9.0], "p_adj": [0.001, 0.9, 0.01]})


@pytest.mark.parametrize("gain, rtt, agreement", [("improve", "equivalent", "agrees"), ("improve", "regress", "partly"),
                                                  ("equivalent", "equivalent", "differs"),
                                                  ("inconclusive", "inconclusive", "differs")])
def test_measured_row_follows_the_confirmation(gain: str, rtt: str, agreement: str) -> None:
    row = s000.measured_row(_confirmation(gain, rtt), VERDICTS)
    assert row.agreement == agreement
    assert row.effect.startswith("GA winner vs defaults: throughput_mbps +30 % [+20 %, +41 %]; rtt_mean_ms -2 %")
    assert "link.mtu[@link]@client" in row.why and "a:b" not in row.why     # main effects only
    assert ("not on TCP buffers" in row.why) == (gain == "improve")


def test_top_verdicts_orders_main_effects_by_size() -> None:
    table = s000.top_verdicts(VERDICTS, per_metric=2)
    assert table["knob"].tolist() == ["link.mtu[@link]@client", "net.ipv4.tcp_rmem"]
