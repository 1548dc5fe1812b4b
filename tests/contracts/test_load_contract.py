"""The load contract (docs/ARCHITECTURE.md, Contract 5): every registered Load, plus the
simulator's paired load, passes these items.

* parse: real output recorded on this machine (tests/loads/recorded/) parses into an ``ok`` result
  whose series has a ``t_s`` column;
* metric schema: every metric a parse reports is in the load's ``metrics``, with a unit and the
  shared direction vocabulary (:data:`tunelab.model.DIRECTION_WORDS`);
* failure detection: empty output, garbage and a non-zero exit give a ``failed`` LoadResult with a
  reason (never an exception, never metrics);
* settings: every profile passes ``validate_settings``; an unknown key is refused.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tunelab.errors import LoadError
from tunelab.loads import LOADS, Load, LoadResult, get_load
from tunelab.model import DIRECTION_WORDS, Direction
from tunelab.simulator import SimulatorLoad, SimulatorTarget, get_surface
from tunelab.targets.base import CommandResult

RECORDED = Path(__file__).resolve().parents[1] / "loads" / "recorded"

#: per load: a recorded ok run (stdout file, stderr file or None), the settings and warm-up it ran with
OK_RUNS = {
    "dnsperf": ("dnsperf_low_udp.out", "dnsperf_low_udp.err", {"profile": "low"}, 1),
    "iperf3": ("iperf3_tcp.json", None, {"overrides": {"omit": 1, "parallel": 2}}, 1),
    "fio": ("fio_randread.json", None, {"overrides": {"numjobs": 2}}, 1),
    "wrk": ("wrk_ok.out", None, {}, 0),
}
GARBAGE = "\x00\x01 not the output of any load generator {]\n" * 3


def simulated_ok_run() -> CommandResult:
    target = SimulatorTarget("simple", seed=1)
    return target.run("server", target.load().command({"profile": "overload"}, 1, ""), 5)


def make_load(name: str) -> Load | SimulatorLoad:
    return SimulatorLoad(get_surface("simple")) if name == "simulated" else get_load(name)()


def settings_of(load: Load | SimulatorLoad, spec: dict) -> dict:
    return load.settings(spec.get("profile"), spec.get("overrides"))


def ok_run(name: str) -> tuple[CommandResult, dict, float]:
    load = make_load(name)
    if name == "simulated":
        return simulated_ok_run(), load.settings("overload"), 0.0
    stdout, stderr, spec, warmup_s = OK_RUNS[name]
    result = CommandResult(("recorded",), 0, (RECORDED / stdout).read_text(),
                           (RECORDED / stderr).read_text() if stderr else "", 3.0)
    return result, settings_of(load, spec), warmup_s


LOAD_NAMES = [*LOADS.names(), "simulated"]


def test_every_registered_load_has_a_recorded_run() -> None:
    assert set(LOADS.names()) == set(OK_RUNS), "record a run of the new load in tests/loads/recorded/ and add it here"


@pytest.mark.parametrize("name", LOAD_NAMES)
def test_recorded_output_parses_ok(name: str) -> None:
    load = make_load(name)
    result, settings, warmup_s = ok_run(name)
    parsed = load.parse(result, settings, warmup_s)
    assert isinstance(parsed, LoadResult)
    assert parsed.status == "ok" and parsed.reason is None, parsed.reason
    assert parsed.metrics and all(isinstance(v, float) for v in parsed.metrics.values())
    assert parsed.series.empty or "t_s" in parsed.series.columns


@pytest.mark.parametrize("name", LOAD_NAMES)
def test_every_reported_metric_is_in_the_schema_with_a_direction(name: str) -> None:
    load = make_load(name)
    parsed = load.parse(*ok_run(name))
    assert load.metrics, f"{name} declares no metrics"
    for metric, info in load.metrics.items():
        assert info.direction in DIRECTION_WORDS.values(), (metric, info.direction)
        assert Direction.parse(info.direction).value == info.direction
        assert info.metric(metric).direction == info.direction
    unknown = sorted(set(parsed.metrics) - set(load.metrics))
    assert not unknown, f"{name} reports metrics missing from its schema: {unknown}"
    series_columns = set(parsed.series.columns) - {"t_s"}
    assert series_columns <= set(load.metrics), sorted(series_columns - set(load.metrics))


BAD_OUTPUTS = {
    "empty": CommandResult(("recorded",), 0, "", "", 1.0),
    "garbage": CommandResult(("recorded",), 0, GARBAGE, "", 1.0),
    "non-zero exit": CommandResult(("recorded",), 2, "", "error: something went wrong\n", 1.0),
    "killed at the time limit": CommandResult(("recorded",), -9, GARBAGE, "", 30.0, timed_out=True),
}


@pytest.mark.parametrize("output", list(BAD_OUTPUTS))
@pytest.mark.parametrize("name", LOAD_NAMES)
def test_bad_output_is_a_failed_result_never_an_exception(name: str, output: str) -> None:
    load = make_load(name)
    _, settings, warmup_s = ok_run(name)
    parsed = load.parse(BAD_OUTPUTS[output], settings, warmup_s)
    assert parsed.status == "failed", f"{name} on {output} output: {parsed.status}"
    assert parsed.reason and not parsed.metrics


@pytest.mark.parametrize("name", LOAD_NAMES)
def test_profiles_validate_and_unknown_settings_are_refused(name: str) -> None:
    load = make_load(name)
    assert load.profiles
    for profile in load.profiles:
        load.validate_settings(load.settings(profile))
    with pytest.raises(LoadError, match="unknown load setting 'no_such_setting'"):
        load.validate_settings({"no_such_setting": 1})
    with pytest.raises(LoadError, match="no load profile 'no-such-profile'"):
        load.settings("no-such-profile")
