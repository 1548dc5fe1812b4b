"""Knobs inside a real, freshly created network namespace (needs root and iproute2).

The namespace is private to each test and always deleted; host values are checked unchanged.
"""
from __future__ import annotations

import secrets
import shutil
import subprocess
import time
from typing import Iterator, Sequence

import pytest

from tunelab.errors import TargetError
from tunelab.knobs import catalogue, get_knob
from tunelab.targets.base import CommandResult, Target

pytestmark = pytest.mark.lab


class NetnsExecTarget(Target):
    """Both hosts are one namespace, entered with ``ip netns exec`` (argv only, no shell)."""

    name = "netns-exec"

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None,
            stdin_text: str | None = None) -> CommandResult:
        full = ["ip", "netns", "exec", self.namespace, *argv]
        start = time.monotonic()
        proc = subprocess.run(full, input=stdin_text, capture_output=True, text=True, timeout=timeout_s, check=False)
        return CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)

    def read_text(self, host: str, path: str) -> str:
        result = self.run(host, ["cat", path], timeout_s=10)
        if not result.ok:
            raise TargetError(f"cat {path} in {self.namespace}: {result.stderr.strip()}")
        return result.stdout

    def write_text(self, host: str, path: str, text: str) -> None:
        result = self.run(host, ["tee", path], timeout_s=10, stdin_text=text)
        if not result.ok:
            raise TargetError(f"tee {path} in {self.namespace}: {result.stderr.strip()}")

    def is_writable(self, host: str, path: str) -> bool:
        return self.run(host, ["test", "-w", path], timeout_s=10).ok


def _sysctl_in(namespace: str, name: str) -> str:
    return subprocess.run(["ip", "netns", "exec", namespace, "sysctl", "-n", name], capture_output=True, text=True,
                          timeout=10, check=True).stdout.strip()


def _host(name: str) -> str:
    with open("/proc/sys/" + name.replace(".", "/")) as fh:
        return fh.read().strip()


@pytest.fixture
def namespace() -> Iterator[str]:
    if shutil.which("sysctl") is None:
        pytest.skip("needs sysctl (procps) to cross-check values")
    name = f"tlknobtest-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True, timeout=10)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True, timeout=10)


def test_write_and_read_back_inside_a_namespace_leaves_the_host_alone(namespace):
    target = NetnsExecTarget(namespace)
    host_before = {name: _host(name) for name in ("net.core.somaxconn", "net.ipv4.tcp_fin_timeout")}
    # values that differ from the host's, so a leak to the host would show
    somaxconn = 1234 if host_before["net.core.somaxconn"] != "1234" else 1235
    fin_timeout = 17 if host_before["net.ipv4.tcp_fin_timeout"] != "17" else 18

    get_knob("net.core.somaxconn").write(target, "server", somaxconn)
    get_knob("net.ipv4.tcp_fin_timeout").write(target, "server", fin_timeout)

    assert get_knob("net.core.somaxconn").verify(target, "server", somaxconn) == somaxconn
    assert get_knob("net.ipv4.tcp_fin_timeout").read(target, "server") == fin_timeout
    assert _sysctl_in(namespace, "net.core.somaxconn") == str(somaxconn)
    assert _sysctl_in(namespace, "net.ipv4.tcp_fin_timeout") == str(fin_timeout)
    assert {name: _host(name) for name in host_before} == host_before


def test_triplet_and_bool_round_trip_inside_a_namespace(namespace):
    target = NetnsExecTarget(namespace)
    host_rmem = _host("net.ipv4.tcp_rmem")
    rmem = get_knob("net.ipv4.tcp_rmem")
    rmem.write(target, "server", (4096, 87380, 3000000))
    assert rmem.verify(target, "server", "4096 87380 3000000") == (4096, 87380, 3000000)
    assert _sysctl_in(namespace, "net.ipv4.tcp_rmem").split() == ["4096", "87380", "3000000"]
    abort = get_knob("net.ipv4.tcp_abort_on_overflow")
    abort.write(target, "server", True)
    assert abort.read(target, "server") is True
    assert _host("net.ipv4.tcp_rmem") == host_rmem


def test_link_mtu_of_the_namespace_loopback(namespace):
    target = NetnsExecTarget(namespace)
    mtu = get_knob("link.mtu")
    mtu.write(target, "server", 1500, device="lo")
    assert mtu.verify(target, "server", 1500, device="lo") == 1500


def test_knobs_scoped_netns_exist_in_a_fresh_namespace(namespace):
    """A knob the catalogue calls per-namespace must really be present per namespace."""
    target = NetnsExecTarget(namespace)
    netns_sysctls = [k for k in catalogue().values() if k.scope == "netns" and k.family == "sysctl"]
    absent = [k.name for k in netns_sysctls if not target.run("server", ["test", "-e", k.path(target)], 10).ok]
    assert len(netns_sysctls) > 20 and absent == []


def test_truly_host_global_knobs_are_absent_from_a_fresh_namespace(namespace):
    target = NetnsExecTarget(namespace)
    names = ["net.ipv4.tcp_mem", "net.core.netdev_max_backlog", "net.core.default_qdisc", "net.core.bpf_jit_enable",
             "net.core.dev_weight", "net.core.busy_poll", "net.core.rps_sock_flow_entries"]
    present = [n for n in names if target.run("server", ["test", "-e", get_knob(n).path(target)], 10).ok]
    assert all(get_knob(n).scope == "host" for n in names) and present == []
