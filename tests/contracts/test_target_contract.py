"""The target contract (docs/ARCHITECTURE.md, Contract 4): every Target passes these items.

Cases: ``lab`` (real namespaces), ``ssh`` (a real sshd in the lab), ``local`` (reads of host knobs
and harmless commands only), ``local-netns`` (the local target inside a private namespace, where
it may write), ``dry-run`` (writes recorded, nothing changed), ``simulator`` and the test fake
``file-fake`` (tests/runner/runner_fakes.py). A target that cannot do an item by design declares
it in ``Target.cannot`` and the item is skipped with that reason; a case may also leave an item
out (``Case.skips``), e.g. the tests never write a host knob.

The ``lab`` case comes last and ``test_reset`` is the last item: a lab reset recreates the
namespaces, which stops the sshd the ``ssh`` case talks to.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tunelab.counters import PLACES, CounterRequest, CounterSource, check_counter_name, placed, snapshot
from tunelab.errors import TargetError
from tunelab.targets import TARGETS

from contract_cases import Case, direct

CASES = [
    "simulator",
    "file-fake",
    "dry-run",
    "local",
    pytest.param("local-netns", marks=pytest.mark.lab),
    pytest.param("ssh", marks=pytest.mark.lab),
    pytest.param("lab", marks=pytest.mark.lab),
]


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest) -> Case:
    return request.getfixturevalue(request.param.replace("-", "_") + "_case")


def needs(case: Case, item: str) -> None:
    reason = case.skip_reason(item)
    if reason:
        pytest.skip(f"{case.target.name} {item}: {reason}")


def test_every_registered_target_has_a_case() -> None:
    covered = {"lab", "local", "ssh", "dry-run", "simulator"}
    assert set(TARGETS.names()) == covered, "add a case for the new target to tests/contracts/conftest.py"


def test_read(case: Case) -> None:
    text = case.read()
    assert isinstance(text, str) and text.strip(), f"{case.path} read as {text!r}"
    if case.target.name in ("local", "dry-run") and case.call is direct:
        assert text == Path(case.path).read_text()          # this machine's file, as it is


def test_write(case: Case) -> None:
    """Writing either changes the file (read back: see test_verify) or, for a target that cannot
    write, is recorded and changes nothing."""
    if case.skips.get("write"):
        pytest.skip(f"{case.target.name} write: {case.skips['write']}")
    before = case.read()
    case.write(case.values[0])
    if "write" in case.target.cannot:
        assert case.read() == before, "a target that cannot write changed the file"
        assert case.recorded is not None and case.recorded()[-1]["text"] == case.values[0]
    else:
        assert case.read().strip() == case.values[0]
        case.write(before)


def test_verify(case: Case) -> None:
    """What is written reads back as written, and the original value can be put back."""
    needs(case, "write")
    needs(case, "verify")
    before = case.read()
    try:
        for value in case.values:
            case.write(value)
            assert case.read().strip() == value
    finally:
        case.write(before)
    assert case.read() == before


def test_run(case: Case) -> None:
    """argv in, returncode/stdout out; a time limit kills the command; a shell line is refused."""
    needs(case, "run")
    target, host = case.target, case.host
    echo = case.call(target.run, host, ["echo", "it's $HOME; x"], 10)
    assert (echo.returncode, echo.stdout, echo.ok, echo.timed_out) == (0, "it's $HOME; x\n", True, False)
    assert tuple(echo.argv) == ("echo", "it's $HOME; x")
    false = case.call(target.run, host, ["false"], 10)
    assert false.returncode == 1 and not false.ok
    start = time.monotonic()
    slow = case.call(target.run, host, ["sleep", "20"], 0.5)
    assert slow.timed_out and not slow.ok and time.monotonic() - start < 10
    with pytest.raises(TargetError, match="list of arguments"):
        case.call(target.run, host, "echo hi", 10)


def test_up_and_down_are_idempotent(case: Case) -> None:
    """``with`` brings a target up and down; up() on an up target and a second down() are harmless
    (a target that claims something once declares ``up_twice`` and raises TargetError instead)."""
    if case.fresh is None:                  # the shared lab: its second down() runs in the module teardown
        assert "up_twice" in case.target.cannot
        with pytest.raises(TargetError, match="already up"):
            case.target.up()
        assert case.read().strip()          # still up and usable
        return
    fresh = case.fresh()
    with fresh as same:
        assert same is fresh
        if "up_twice" not in fresh.cannot:
            case.call(fresh.up)
        assert case.call(fresh.read_text, case.host, case.path).strip()
    fresh.down()


def test_describe_is_a_json_dict_naming_the_target(case: Case) -> None:
    info = case.call(case.target.describe)
    assert isinstance(info, dict) and info["target"] == case.target.name
    json.dumps(info)


def test_unknown_hosts_are_refused(case: Case, tmp_path: Path) -> None:
    target, scratch = case.target, str(tmp_path / "never-written")
    for action, args in (("read_text", ("nowhere", case.path)), ("write_text", ("nowhere", scratch, "1")),
                         ("run", ("nowhere", ["true"], 5))):
        with pytest.raises(TargetError, match="no host 'nowhere'"):
            case.call(getattr(target, action), *args)
    assert not Path(scratch).exists()


def test_counter_sources_read_named_counters(case: Case) -> None:
    """Every source is at a known place and one snapshot gives counter names the store accepts; a target
    without counters (dry run, simulator) has none."""
    sources = list(case.target.counter_sources(CounterRequest(service="dns")))
    assert all(isinstance(source, CounterSource) and source.place in PLACES for source in sources)
    values, problems = case.call(snapshot, sources)
    assert problems == []
    assert bool(values) == bool(sources)
    assert all(check_counter_name(name) for name in values)
    assert all(name.startswith("client.") for source in sources if source.place == "client"
               for name in placed(source.place, case.call(source.read)))


def test_reset(case: Case) -> None:
    """After reset() the target is usable; a target that resets to defaults (the lab) does so."""
    needs(case, "reset")
    writable = not case.skip_reason("write")
    before = case.read()
    if writable:
        case.write(case.values[0])
    case.call(case.target.reset)
    after = case.read()
    assert after.strip()
    if case.reset_default is not None:
        assert after.strip() == case.reset_default
    elif writable and "write" not in case.target.cannot:
        assert after.strip() == case.values[0]           # reset keeps the values of a target without fresh state
        case.write(before)
