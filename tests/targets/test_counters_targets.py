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
from tunelab.runner.trials import run_trial
from tunelab.store import Store
from tunelab.targets.local import LocalTarget
from tunelab.targets.ssh import SshTarget

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


def test_the_ssh_server_reads_its_services_cgroup_in_the_same_tail() -> None:
    """(The lab's sshd runs under `ip netns exec`, whose private /sys has no cgroup mount, so the files are
    checked here and their reading in the local target's test.)"""
    target = SshTarget(server="root@db1", client="root@load1",
                       server_cgroup="/sys/fs/cgroup/system.slice/nsd.service")
    server, client = target.counter_sources(CounterRequest(device="vdb"))
    assert [f.path for f in server.files] == ["/proc/net/netstat", "/proc/net/snmp", "/proc/net/snmp6",
                                             "/sys/block/vdb/stat", "/sys/fs/cgroup/system.slice/nsd.service/cpu.stat",
                                             "/sys/fs/cgroup/system.slice/nsd.service/memory.stat"]
    assert (server.place, client.place) == ("server", "client")
    assert [f.path for f in client.files] == ["/proc/net/netstat", "/proc/net/snmp", "/proc/net/snmp6"]


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


def this_cgroup() -> str | None:
    """This process's cgroup v2 folder (on a hybrid host, under /sys/fs/cgroup/unified), if it has cpu.stat."""
    lines = [line for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::")]
    if not lines:
        return None
    path = lines[0][3:].rstrip("/")
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if (root + path) != "/sys/fs/cgroup" and Path(root + path, "cpu.stat").exists():
            return root + path
    return None


BURN = "import time\nwhile time.process_time() < 0.3: pass"


class BurningLoad(CommandLoad):
    """Burns 0.3 s of CPU and says it answered 1000 queries per second."""

    service = "dns"
    metrics = {"qps": MetricInfo("1/s", "maximize"), "server_cpu_per_query": MetricInfo("us", "minimize")}
    server_cpu_metric = ("server_cpu_per_query", "qps")

    def parse(self, result, settings, warmup_s) -> LoadResult:
        return LoadResult("ok", None, {"qps": 1000.0}) if result.ok else LoadResult("failed", result.stderr, {})


def test_the_local_target_records_the_server_cgroups_cpu(tmp_path: Path) -> None:
    """The CPU of a process in the server's cgroup (here the test's own) is counted: at least the 0.3 s it burnt."""
    cgroup = this_cgroup()
    if cgroup is None:
        pytest.skip("needs a cgroup v2 hierarchy with cpu.stat")
    with LocalTarget(server_cgroup=cgroup) as target, \
            Store.open(tmp_path / "g.sqlite", study="g", design_hash="h", design_text="") as store:
        outcome = run_trial(target, BurningLoad([sys.executable, "-c", BURN]), [], {}, "screen:0", "screen", store,
                            0.0, 30.0)
        counters = store.trials().iloc[-1]["counters"]
    assert outcome.status == "ok", outcome.reason
    assert counters["deltas"]["proc.cpu_s"] >= 0.3 * 0.99
    assert outcome.metrics["server_cpu_per_query"] == pytest.approx(
        1e6 * counters["deltas"]["proc.cpu_s"] / counters["window_s"] / 1000.0)
