"""The pilot's noise arithmetic (exact values) and its wiring into ``validate`` (the simulator runs no load: the
pilot says so and the validation goes on)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

import tunelab
from tunelab.counters import CounterRecord
from tunelab.errors import DesignError
from tunelab.model import Metric
from tunelab.optimize.confirm import blocks_needed
from tunelab.optimize.pilot_noise import blocks_at_sesoi, noise_entry, paired_power, window_noise, with_noise
from tunelab.optimize.trial_time import trial_seconds
from tunelab.preflight.pilot import PilotReport, PilotWindow


def test_window_noise_exact() -> None:
    # mean 100, SD 10 (ddof 1), lag-1 correlation of 90,110,90,110,100: negative, clipped to 0
    noise = window_noise([90.0, 110.0, 90.0, 110.0, 100.0], 4.0)
    assert noise["per_second_cv_pct"] == pytest.approx(10.0) and noise["lag1_r"] == 0.0
    assert noise["trial_cv_pct"] == pytest.approx(5.0)              # 10 / sqrt(4)
    rising = window_noise([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 9.0)      # r = 1 is clipped to 0.95: sqrt(39 / 9)
    assert rising["lag1_r"] == 0.95
    assert rising["trial_cv_pct"] == pytest.approx(rising["per_second_cv_pct"] * math.sqrt(39 / 9), rel=1e-3)
    assert window_noise([1.0, 2.0], 8.0) is None and window_noise([0.0, 0.0, 0.0], 8.0) is None


def test_blocks_at_sesoi_are_the_larger_of_detect_and_bound() -> None:
    blocks = blocks_at_sesoi(5.0, 5.0)
    sd, bound = math.log1p(0.05), math.log1p(0.05)
    assert blocks["bound"] == blocks_needed(0.0, sd, bound)
    assert paired_power(blocks["detect"], sd, bound, 0.05) >= 0.8 > paired_power(blocks["detect"] - 1, sd, bound, 0.05)
    assert blocks["needed"] == max(blocks["detect"], blocks["bound"])
    assert blocks_at_sesoi(0.1, 20.0) == {"detect": 2, "bound": 2, "needed": 2}     # never below MIN_BLOCKS


def test_noise_entry_line_and_json() -> None:
    window = PilotWindow("overload", 5.0, CounterRecord(5.0, {}), {}, {"qps": (90.0, 110.0, 90.0, 110.0, 100.0)},
                         None, None, 5.0, "ok")
    per_trial = trial_seconds(1.0, 4.0, restarts=False)            # 6 s
    entry = noise_entry(window, Metric("qps", "maximize", 5.0), 4.0, per_trial)
    assert entry["trial_cv_pct"] == pytest.approx(5.0) and entry["needed"] == blocks_at_sesoi(5.0, 5.0)["needed"]
    assert entry["estimate_s"] == entry["needed"] * 4 * per_trial
    assert f"at least {entry['needed']} blocks" in entry["line"] and "one window, not separate trials" in entry["line"]
    latency = noise_entry(window, Metric("latency_mean_ms", "minimize", 10.0), 4.0, per_trial)
    assert "not estimated" in latency["line"] and "qps only" in latency["line"]
    report = with_noise(PilotReport((window,), {"overload": ()}), [Metric("qps", "maximize", 5.0)], 4.0, per_trial)
    assert report.to_json()["noise"][0]["finding"] == entry["line"]


def test_validate_records_the_pilot_and_refuses_a_bad_one(tmp_path: Path, capsys) -> None:
    with pytest.raises(DesignError, match="--pilot must be"):
        tunelab.validate("simulator", {"net.core.somaxconn": 1024}, surface="simple", blocks=2, pilot_s=-1,
                         store=tmp_path / "bad.sqlite")
    assert not (tmp_path / "bad.sqlite").exists()
    run = tunelab.validate("simulator", {"net.core.somaxconn": 1024}, surface="simple", blocks=2, pilot_s=2,
                           store=tmp_path / "v.sqlite", write_sysctl=False)
    assert run.provenance["pilot"]["note"].startswith("pilot: not measured on this target")
    assert "pilot: not measured on this target" in capsys.readouterr().err
