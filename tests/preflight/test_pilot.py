"""The pilot (``--pilot SECONDS``): its pure parts with exact values, and one short window on the real lab."""
from __future__ import annotations

import shutil

import pytest

from tunelab.counters import CounterRecord
from tunelab.errors import DesignError
from tunelab.knobs import get_knob
from tunelab.preflight.checks import KnobChange
from tunelab.preflight.pilot import (PilotReport, PilotWindow, binding, check_pilot, children_cpu_s, direction,
                                     run_pilot, timed_argv)

SOMAXCONN = KnobChange(get_knob("net.core.somaxconn"), "server", (1024, 4096), "net.core.somaxconn")


def test_a_moving_counter_binds_with_its_rate() -> None:
    found = binding(SOMAXCONN, "1024", "4096", CounterRecord(4.0, {"TcpExt.ListenOverflows": 4936.0,
                                                                  "TcpExt.ListenDrops": 0.0}))
    assert found.binds is True and not found.cannot_help
    assert found.text == "binds at 1024: TcpExt.ListenOverflows +1234/s"
    assert found.rates == {"TcpExt.ListenOverflows": 1234.0, "TcpExt.ListenDrops": 0.0}


def test_a_still_counter_is_phrased_by_direction() -> None:
    still = CounterRecord(10.0, {"TcpExt.ListenOverflows": 0.0, "TcpExt.ListenDrops": 0.0})
    raised, lowered = binding(SOMAXCONN, "1024", "4096", still), binding(SOMAXCONN, "4096", "16", still)
    assert raised.binds is False and raised.cannot_help
    assert raised.text.startswith("does not bind at 1024: none of TcpExt.ListenOverflows, TcpExt.ListenDrops "
                                  "moved in 10 s (the change can act only if it moves them)")
    assert "cannot act under this load" in raised.text
    assert lowered.binds is False and not lowered.cannot_help and "may bind where 4096 does not" in lowered.text


def test_unmeasured_and_client_side_counters() -> None:
    assert binding(SOMAXCONN, "1024", "4096", None).binds is None
    assert "not measured" in binding(SOMAXCONN, "1024", "4096", CounterRecord(1.0, {"Udp.InErrors": 1.0})).text
    ports = get_knob("net.ipv4.ip_local_port_range")
    change = KnobChange(ports, "client", ("32768 60999", "1024 65535"), "net.ipv4.ip_local_port_range@client")
    found = binding(change, "32768 60999", "1024 65535", CounterRecord(2.0, {"client.Tcp.AttemptFails": 6.0,
                                                                             "Tcp.AttemptFails": 0.0}))
    assert found.binds is True and found.rates == {"Tcp.AttemptFails": 3.0}    # read at the client, not the server


def test_direction_of_numbers_and_tuples() -> None:
    assert direction("16", "4096") == "raises" and direction(4096, 16) == "lowers"
    assert direction("1 2", "2 1") is None and direction("cubic", "bbr") is None and direction(5, 5) is None


def test_children_cpu_from_times_and_the_wrapper() -> None:
    assert children_cpu_s("tunelab-pilot-times\n0m0.00s 0m0.00s\n1m2.50s 0m0.50s\n") == (63.0, "")
    assert children_cpu_s("no marker\n") == (None, "no marker\n")
    argv = timed_argv(["dnsperf", "-s", "10.0.0.1"])
    assert argv[0] == "sh" and argv[-3:] == ["dnsperf", "-s", "10.0.0.1"]


def test_load_share_and_the_prominent_line() -> None:
    window = PilotWindow("overload", 10.0, None, {"lost_pct": 0.5}, {}, 9.5, 1, 10.0, "ok")
    assert window.load_busy_pct() == 95.0 and "may be the bottleneck" in window.load_text()
    assert "lost 0.50 %" in window.load_text()
    assert "not measured on this target" in PilotWindow("p", 1.0, None, {}, {}, None, None, 1.0, "ok").load_text()
    still = CounterRecord(10.0, {"TcpExt.ListenOverflows": 0.0, "TcpExt.ListenDrops": 0.0})
    report = PilotReport((window,), {"overload": (binding(SOMAXCONN, "1024", "4096", still),)})
    assert report.cannot_help and any(line.startswith("  PILOT:") for line in report.lines())
    lowered = PilotReport((window,), {"overload": (binding(SOMAXCONN, "4096", "16", still),)})
    assert not lowered.cannot_help and not any("PILOT:" in line for line in lowered.lines())


@pytest.mark.parametrize("bad", [0, -1, float("nan"), 601, "ten", True])
def test_check_pilot_refuses_bad_seconds(bad) -> None:
    with pytest.raises(DesignError, match="--pilot must be a number of seconds"):
        check_pilot(bad)


@pytest.mark.lab
def test_pilot_window_on_the_lab() -> None:
    """A 3 s window at somaxconn 4096 (nothing written): the report has the mechanism's counters read, the load's
    CPU and lost queries, and a per-second series; what they say is left to the noise."""
    for tool in ("dnsperf", "nsd", "ip", "taskset"):
        if shutil.which(tool) is None and shutil.which(tool, path="/usr/sbin:/sbin") is None:
            pytest.skip(f"needs Debian's {tool}")
    from tunelab.loads import get_load
    from tunelab.runner.binding import bind_knob_ids
    from tunelab.runner.load_setup import cleanup_load
    from tunelab.targets.lab import LabTarget

    load = get_load("dnsperf")()
    specs = bind_knob_ids(["net.core.somaxconn"])
    with LabTarget() as lab:                 # torn down pass or fail
        before = lab.run("server", ["sysctl", "-n", "net.core.somaxconn"], timeout_s=10).stdout
        try:
            report = run_pilot(lab, load, {"overload": load.settings("overload")}, specs, {},
                               {"net.core.somaxconn": 16}, 0.5, 3.0)
        finally:
            cleanup_load(load, lab)
        assert lab.run("server", ["sysctl", "-n", "net.core.somaxconn"], timeout_s=10).stdout == before
    (window,) = report.windows
    assert window.record is not None and "TcpExt.ListenOverflows" in window.record.deltas
    (found,) = report.bindings["overload"]
    assert found.binds in (True, False) and set(found.rates) == {"TcpExt.ListenOverflows", "TcpExt.ListenDrops"}
    assert window.load_cpu_s is not None and window.load_cpu_s > 0 and window.load_cpus >= 1
    assert "lost_pct" in window.metrics and len(window.series["qps"]) >= 2
    assert report.to_json()["bindings"]["overload"][0]["counters"] == ["TcpExt.ListenOverflows", "TcpExt.ListenDrops"]
