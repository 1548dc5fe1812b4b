"""Kernel counters recorded by real targets: the lab (a dnsperf TCP trial under a tiny listen backlog),
the local host, and the ssh target against a real sshd in a lab's server namespace."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any, Mapping

import pytest

from tunelab.cli import main
from tunelab.counters import CounterRequest, snapshot
from tunelab.counters.parsing import parse_net_table
from tunelab.loads.base import Load, LoadResult, MetricInfo
from tunelab.runner import run_trial
from tunelab.store import Store
from tunelab.targets.local import LocalTarget

from .conftest import require_tools
from .sshd_helper import PORT, running_sshd, ssh_target


class CommandLoad(Load):
    """Runs a fixed command on a host and reports that it ran."""

    name = "command"
    metrics = {"ran": MetricInfo("1", "maximize")}

    def __init__(self, argv: list[str], runs_on: str = "client") -> None:
        self.argv, self.runs_on = argv, runs_on

    def command(self, settings: Mapping[str, Any], duration_s: float, server_address: str) -> list[str]:
        return list(self.argv)

    def parse(self, result, settings, warmup_s) -> LoadResult:
        return LoadResult("ok", None, {"ran": 1.0}) if result.ok else LoadResult("failed", result.stderr, {})


SEND_UDP = "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nfor _ in range(300): s.sendto(b'x', ('127.0.0.1', 9))"


def test_the_local_target_records_this_hosts_counters(tmp_path: Path) -> None:
    """300 datagrams sent on loopback inside the window: the host's Udp.OutDatagrams rose by at least that."""
    with LocalTarget() as target, Store.open(tmp_path / "l.sqlite", study="l", design_hash="h", design_text="") as store:
        outcome = run_trial(target, CommandLoad([sys.executable, "-c", SEND_UDP]), [], {}, "screen:0", "screen",
                            store, 0.0, 30.0, plan_info={"run_id": 0})
        counters = store.trials().iloc[-1]["counters"]
        tidy = store.tidy()
    assert outcome.status == "ok", outcome.reason
    assert counters["deltas"]["Udp.OutDatagrams"] >= 300
    assert not [name for name in counters["deltas"] if name.startswith(("client.", "proc."))]   # one host, no services
    assert tidy["counter.Udp.OutDatagrams"].iloc[0] == pytest.approx(counters["deltas"]["Udp.OutDatagrams"]
                                                                      / counters["window_s"])


def overload_design(store: Path) -> str:
    return textwrap.dedent("""
        name: counters-overload
        target: {type: lab, options: {services: [dns]}}
        load: {generator: dnsperf, profile: overload, settings: {clients: 100, timeout: 2}}
        warmup_s: 1
        measure_s: 2
        metrics: [{name: qps}, {name: server_cpu_per_query}]
        knobs:
          - {name: net.core.somaxconn, levels: [4096, 4], baseline: 4096}
        design: {type: oat, replicates: 1, seed: 5}
    """)


@pytest.mark.lab
def test_a_lab_dnsperf_tcp_trial_records_the_listen_queue_counters(tmp_path: Path, lab_tools, capsys) -> None:
    require_tools("dnsperf")
    design, store_path = tmp_path / "design.yaml", tmp_path / "data" / "c.sqlite"
    design.write_text(overload_design(store_path))
    status = main(["run", str(design), "--store", str(store_path), "--no-progress"])
    out = capsys.readouterr().out
    assert status == 0 and "0 failed" in out, out
    with Store(store_path, readonly=True) as store:
        trials = store.trials()
        tidy = store.tidy(include_flagged=True)
    assert len(trials) == 2
    for counters in trials["counters"]:
        assert counters is not None and counters["problems"] == []
        assert 1.0 < counters["window_s"] < 4.0                     # the 2 s window, read while dnsperf ran
        assert counters["deltas"]["proc.cpu_s"] > 0                 # NSD worked
        assert counters["deltas"]["TcpExt.TCPBacklogDrop"] >= 0 and "TcpExt.ListenOverflows" in counters["deltas"]
    columns = [c for c in tidy.columns if c.startswith("counter.")]
    assert [c for c in columns if c.startswith("counter.TcpExt.")]
    assert [c for c in columns if c.startswith("counter.client.Tcp")]
    assert "counter.proc.cpu_s" in columns and "counter.Tcp.PassiveOpens" in columns
    assert (tidy[columns] >= 0).all().all()
    assert (tidy["server_cpu_per_query"] > 0).all()


@pytest.fixture
def sshd(make_lab, tmp_path: Path):
    require_tools("ssh-keygen", "sshd", "tail")
    with running_sshd(make_lab(services=()), tmp_path, PORT) as info:
        yield info


def namespace_in_segs(lab) -> float:
    return parse_net_table(lab.read_text("server", "/proc/net/snmp"))["Tcp.InSegs"]


@pytest.mark.lab
def test_the_ssh_target_records_the_server_namespaces_counters(sshd, tmp_path: Path) -> None:
    lab = sshd["lab"]
    with ssh_target(sshd) as target:
        sources = target.counter_sources(CounterRequest(service="dns"))
        assert [s.place for s in sources] == ["server", "client"]
        before = namespace_in_segs(lab)
        values, problems = snapshot(sources)
        after = namespace_in_segs(lab)
        assert problems == []
        # read over ssh inside the server's namespace: its own Tcp.InSegs (only the ssh traffic), not the host's
        assert before <= values["Tcp.InSegs"] <= after
        assert "client.Tcp.InSegs" in values and "TcpExt.ListenOverflows" in values
        with Store.open(tmp_path / "s.sqlite", study="s", design_hash="h", design_text="") as store:
            outcome = run_trial(target, CommandLoad(["sleep", "0.5"], runs_on="server"), [], {}, "screen:0",
                                "screen", store, 0.0, 0.3, plan_info={"run_id": 0})
            counters = store.trials().iloc[-1]["counters"]
            tidy = store.tidy()
    assert outcome.status == "ok", outcome.reason
    assert counters["deltas"]["Tcp.InSegs"] > 0                     # the load's own ssh channel, inside the window
    assert tidy["counter.Tcp.InSegs"].iloc[0] > 0


def test_fio_names_its_loop_device_only() -> None:
    from tunelab.loads.fio import FioLoad

    assert FioLoad().counted_device({"device_from_target": "/dev/loop3", "filename": "/dev/loop3"}) == "loop3"
    assert FioLoad().counted_device({"filename": "/var/tmp/tunelab/scratch/f"}) is None


@pytest.mark.lab
def test_the_lab_disk_counts_the_reads_of_its_window(make_lab) -> None:
    """256 direct 4 KiB reads of the lab's private loop device inside the window: 2048 sectors (more only if
    udev probed the new device at the same moment)."""
    from tunelab.counters import CounterWindow

    lab = make_lab(services=())
    device = lab.resolve_device("@disk")
    sources = lab.counter_sources(CounterRequest(device=device))
    with CounterWindow(sources, 0.0, 60.0) as window:
        result = lab.run("server", ["dd", f"if=/dev/{device}", "of=/dev/null", "bs=4096", "count=256",
                                    "iflag=direct"], timeout_s=30)
    assert result.ok, result.stderr
    deltas = window.record.deltas
    assert deltas["block.read_sectors"] >= 2048 and deltas["block.read_ios"] >= 1
    assert deltas["block.write_ios"] == 0
