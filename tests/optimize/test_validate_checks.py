"""validate's checks before the first trial (nothing applied, nothing recorded) and its failure accounting."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

import tunelab
from tunelab.errors import KnobError, LoadError, TunelabError
from tunelab.optimize.confirm import (ValidationError, analyse_blocks, check_durations, overall_verdict,
                                      trial_failures)
from tunelab.optimize.validation import validate
from tunelab.model import Metric
from tunelab.simulator import SimulatorTarget


class WatchedTarget(SimulatorTarget):
    """The simulator target, recording every knob file written."""

    def __init__(self, *args, **kwargs) -> None:
        self.writes: list[str] = []
        super().__init__(*args, **kwargs)

    def write_text(self, host: str, path: str, text: str) -> None:
        self.writes.append(path)
        super().write_text(host, path, text)


REFUSED = [
    ({"baseline": "current", "candidate": {"net.core.somaxconn": "128"}}, ValidationError,
     r"the candidate equals the baseline \(the target's current values: net.core.somaxconn=128\)"),
    ({"baseline": {"net.ipv4.tcp_abort_on_overflow": "yes"}, "candidate": {"net.ipv4.tcp_abort_on_overflow": 1}},
     ValidationError, r"the candidate equals the baseline \(the baseline given"),
    ({"measure_s": -1}, ValidationError, r"the measured time \(--measure\) must be a number of seconds > 0, got -1"),
    ({"measure_s": float("nan")}, ValidationError, r"must be a number of seconds > 0, got nan"),
    ({"warmup_s": -0.5}, ValidationError, r"the warm-up \(--warmup\) must be a number of seconds >= 0"),
    ({"load_settings": {"foo": 1}}, LoadError, r"simulated: unknown load setting 'foo'"),
    ({"load_settings": {"key": "x"}}, ValidationError, r"load setting 'key' is set by tunelab"),
    ({"profiles": ("nope",)}, LoadError, r"no load profile 'nope'"),
    ({"metrics": ["nope:max"]}, ValidationError, r"simulated does not report metric 'nope'"),
    ({"sesoi_pct": 0}, ValidationError, r"--sesoi must be a percentage above 0 and below 100"),
    ({"blocks": 1}, ValidationError, r"at least 2 ABBA blocks"),
    ({"candidate": {"net.core.somaxconn": 1024, "net.core.netdev_max_backlog": 5000}, "surface": "wide27"},
     TunelabError, r"host-global"),
    ({"candidate": {"net.core.somaxconn": -5}}, KnobError, r"net.core.somaxconn: value -5 is invalid"),
]


@pytest.mark.parametrize("change, error, message", REFUSED)
def test_refused_before_any_knob_is_written_or_trial_recorded(store, change, error, message) -> None:
    target = WatchedTarget(change.pop("surface", "simple"), seed=1)
    before = target.current_config()
    arguments = {"baseline": "current", "candidate": {"net.core.somaxconn": 1024}, "metrics": ["qps:max:5"],
                 "blocks": 3, "warmup_s": 0, "measure_s": 1, **change}
    with pytest.raises(error, match=message):
        validate(target, target.load(), arguments.pop("baseline"), arguments.pop("candidate"),
                 arguments.pop("metrics"), store, **arguments)
    assert target.writes == [] and target.measurements == 0 and target.current_config() == before
    assert store.trials().empty and store.unrestored() == []


def test_api_refuses_before_the_store_is_created(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    with pytest.raises(ValidationError, match="candidate equals the baseline"):
        tunelab.validate("simulator", {"net.core.somaxconn": 128}, surface="simple", store=path)
    with pytest.raises(ValidationError, match="measured time"):
        tunelab.validate("simulator", {"net.core.somaxconn": 1024}, surface="simple", store=path, measure_s=-1)
    assert list(tmp_path.iterdir()) == []


def test_a_knob_only_the_baseline_sets_keeps_its_value_in_both_arms(store) -> None:
    target = SimulatorTarget("simple", seed=2)
    result = validate(target, target.load(), {"net.core.somaxconn": 128, "net.ipv4.tcp_abort_on_overflow": "1"},
                      {"net.core.somaxconn": 1024}, ["qps:max:5"], store, blocks=2, warmup_s=0, measure_s=1)
    assert result.baseline == {"net.core.somaxconn": 128, "net.ipv4.tcp_abort_on_overflow": True}
    assert result.candidate == {"net.core.somaxconn": 1024, "net.ipv4.tcp_abort_on_overflow": True}
    configs = store.trials("validate")["config"]
    assert all(config["net.ipv4.tcp_abort_on_overflow"] is True for config in configs)


def test_too_few_usable_blocks_are_untestable_and_estimate_nothing() -> None:
    rows = [{"block": 0, "arm": arm, "qps": 100.0} for arm in "ABBA"]
    rows += [{"block": 1, "arm": arm, "qps": math.nan if arm == "B" else 100.0} for arm in "ABBA"]
    result = analyse_blocks(pd.DataFrame(rows), Metric("qps", "maximize", 5.0), bootstrap=False)
    assert result["verdict"] == "untestable" and result["reason"] == "1 usable blocks, need 2"
    assert result["blocks"] == 1 and math.isnan(result["pct_change"]) and result["blocks_needed"] is None


def test_untestable_ranks_below_regress_and_above_inconclusive() -> None:
    assert overall_verdict(["improve", "untestable"]) == "untestable"
    assert overall_verdict(["untestable", "inconclusive"]) == "untestable"
    assert overall_verdict(["untestable", "regress"]) == "regress"
    assert overall_verdict(["untestable"]) == "untestable"


def test_trial_failures_count_the_last_record_of_each_key_and_keep_the_first_reason(store) -> None:
    keys = ["validate:a", "validate:b", "validate:c"]
    for key, status, reason in [("validate:a", "ok", None), ("validate:b", "failed", "dnsperf crashed\n(signal 11)"),
                                ("validate:c", "failed", "timeout"), ("validate:other", "failed", "not ours")]:
        trial = store.begin_trial(key, "validate", {"net.core.somaxconn": 128})
        store.finish_trial(trial, status, reason, {"net.core.somaxconn": 128}, {} if status == "failed" else {"qps": 1.0})
    counted = trial_failures(store, keys)
    assert (counted.trials, counted.failed, counted.first_reason) == (3, 2, "dnsperf crashed (signal 11)")
    assert counted.line() == "2 of 3 trials failed; first failure: dnsperf crashed (signal 11)"


def test_a_key_measured_again_counts_by_its_last_record(store) -> None:
    # a resumed validation records a key again: b failed, then succeeded; c succeeded, then failed
    for key, status, reason in [("validate:b", "failed", "dnsperf crashed"), ("validate:b", "ok", None),
                                ("validate:c", "ok", None), ("validate:c", "failed", "timeout")]:
        trial = store.begin_trial(key, "validate", {"net.core.somaxconn": 128})
        store.finish_trial(trial, status, reason, {"net.core.somaxconn": 128}, {} if status == "failed" else {"qps": 1.0})
    counted = trial_failures(store, ["validate:b", "validate:c"])
    assert (counted.trials, counted.failed, counted.first_reason) == (2, 1, "timeout")


def test_durations_accept_zero_warmup_and_refuse_a_bool() -> None:
    assert check_durations(0, 0.5) == (0.0, 0.5)
    with pytest.raises(ValidationError, match="got True"):
        check_durations(2, True)


def test_a_resumed_validation_still_reports_the_failures_it_reads_back(store) -> None:
    first = SimulatorTarget("simple", seed=3, fail_after=0)
    result = validate(first, first.load(), "current", {"net.core.somaxconn": 1024}, ["qps:max:5"], store, blocks=2,
                      warmup_s=0, measure_s=1)
    assert result.verdict == "untestable" and result.failures.all_failed and first.measurements == 8
    again = SimulatorTarget("simple", seed=3)          # a working target: every trial is taken from the store
    resumed = validate(again, again.load(), "current", {"net.core.somaxconn": 1024}, ["qps:max:5"], store, blocks=2,
                       warmup_s=0, measure_s=1)
    assert again.measurements == 0 and resumed.failures == result.failures
    assert resumed.summary() == result.summary()


def test_flagged_trials_are_counted_with_the_first_reason_so_an_untestable_run_says_why(store) -> None:
    # issue 26 (seen over ssh): every trial flagged with qps 0 left "0 usable blocks" and no reason on the terminal
    for key, status, reason, qps in [("validate:a", "flagged", "achieved 0 qps, below 50% of the requested 500 qps",
                                      0.0), ("validate:b", "ok", None, 10.0), ("validate:c", "flagged", "other", 0.0)]:
        trial = store.begin_trial(key, "validate", {"net.core.somaxconn": 128})
        store.finish_trial(trial, status, reason, {"net.core.somaxconn": 128}, {"qps": qps})
    counted = trial_failures(store, ["validate:a", "validate:b", "validate:c"])
    assert (counted.failed, counted.flagged) == (0, 2)
    assert counted.line() == "2 of 3 trials flagged; first: achieved 0 qps, below 50% of the requested 500 qps"
