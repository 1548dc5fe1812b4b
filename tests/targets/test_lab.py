"""The lab target against real namespaces, NSD and iperf3 (needs root and the Debian tools)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tunelab.errors import TargetError
from tunelab.targets import get_target, netns
from tunelab.targets import services as svc
from tunelab.targets.lab import LabTarget, state_path

pytestmark = pytest.mark.lab

FIN = "/proc/sys/net/ipv4/tcp_fin_timeout"
SOMAXCONN = "/proc/sys/net/core/somaxconn"


def host_value(path: str) -> str:
    with open(path) as fh:
        return fh.read().strip()


def sysctl_via_exec(namespace: str, key: str) -> str:
    """Independent reference: read a sysctl with a separate process inside the namespace."""
    return subprocess.run(["ip", "netns", "exec", namespace, "cat", f"/proc/sys/{key.replace('.', '/')}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def listen_backlog(lab: LabTarget, port: int) -> int:
    """Send-Q of the TCP listening socket on ``port`` in the server namespace (= its accept backlog)."""
    out = lab.run("server", ["ss", "-Hltn", f"sport = :{port}"], timeout_s=5).stdout
    return int(out.split()[2])


def test_down_removes_everything_even_when_the_body_raises(lab_tools):
    lab = LabTarget(disk_mb=32, bottleneck_mbit=100)
    with pytest.raises(RuntimeError, match="boom"):
        with lab:
            namespaces = list(lab.namespaces.values())
            pids = [pid for ns in namespaces for pid in netns.namespace_pids(ns)]
            device, backing = lab.state.disk_device, lab.state.disk_file
            assert all(netns.namespace_exists(ns) for ns in namespaces)
            assert len(pids) >= 2  # nsd (plus its children) and iperf3
            assert Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip() == backing
            raise RuntimeError("boom")
    assert not any(netns.namespace_exists(ns) for ns in namespaces)
    assert not any(Path(f"/proc/{pid}").exists() and svc.pid_alive(pid) and
                   "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3] for pid in pids)
    assert not Path(f"/sys/block/{Path(device).name}/loop/backing_file").exists() or \
        Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip() != backing
    assert not Path(backing).exists()
    assert not state_path(lab.lab_name).exists()
    lab.down()  # idempotent


def test_per_namespace_sysctls_change_only_inside_the_namespace(make_lab):
    host_fin, host_somax = host_value(FIN), host_value(SOMAXCONN)
    lab = make_lab(services=())
    new_fin = "17" if host_fin != "17" else "18"
    new_somax = "77" if host_somax != "77" else "78"
    lab.write_text("server", FIN, new_fin)
    lab.write_text("server", SOMAXCONN, new_somax)
    assert lab.read_text("server", FIN).strip() == new_fin
    assert sysctl_via_exec(lab.namespace("server"), "net.ipv4.tcp_fin_timeout") == new_fin
    assert sysctl_via_exec(lab.namespace("server"), "net.core.somaxconn") == new_somax
    assert sysctl_via_exec(lab.namespace("client"), "net.ipv4.tcp_fin_timeout") != new_fin or new_fin == host_fin
    assert host_value(FIN) == host_fin
    assert host_value(SOMAXCONN) == host_somax


def test_bad_values_and_paths_raise_target_errors_naming_them(make_lab):
    lab = make_lab(services=())
    with pytest.raises(TargetError, match="tcp_fin_timeout.*rejected"):
        lab.write_text("server", FIN, "not-a-number")
    with pytest.raises(TargetError, match="no_such_knob"):
        lab.read_text("server", "/proc/sys/net/ipv4/no_such_knob")
    with pytest.raises(TargetError, match="no host 'router'"):
        lab.read_text("router", FIN)
    with pytest.raises(TargetError, match="No lab service named 'ftp'.*dns"):
        lab.start_service("ftp")


def test_sysfs_net_paths_show_the_namespace_devices(make_lab):
    lab = make_lab(services=())
    link = lab.resolve_device("@link")
    mac = lab.read_text("server", f"/sys/class/net/{link}/address").strip()
    out = subprocess.run(["ip", "-n", lab.namespace("server"), "link", "show", link],
                         capture_output=True, text=True, check=True).stdout
    assert mac in out
    lab.write_text("server", f"/sys/class/net/{link}/mtu", "1400")
    assert "mtu 1400" in subprocess.run(["ip", "-n", lab.namespace("server"), "link", "show", link],
                                        capture_output=True, text=True, check=True).stdout


def test_nsd_answers_zone_queries_from_the_client_namespace(make_lab):
    lab = make_lab(records=10, services=("dns",))
    answer = lab.in_namespace("client", svc.dns_query, lab.address("server"), "r1.tunelab.test.", 53, 1.0)
    assert answer is not None and answer.rcode == 0 and answer.answer_count == 1 and answer.authoritative
    missing = lab.in_namespace("client", svc.dns_query, lab.address("server"), "r10.tunelab.test.", 53, 1.0)
    assert missing is not None and missing.rcode == 3  # NXDOMAIN: the zone has r0..r9 only


def test_restart_service_applies_a_new_somaxconn_to_the_listen_backlog(make_lab):
    lab = make_lab(services=("iperf3",))
    before = listen_backlog(lab, svc.IPERF3_PORT)
    assert before > 16
    lab.write_text("server", SOMAXCONN, "16")
    assert listen_backlog(lab, svc.IPERF3_PORT) == before  # takes effect only at listen()
    old_pid = lab.state.services["iperf3"]
    lab.restart_service("iperf3")
    assert lab.state.services["iperf3"] != old_pid
    assert listen_backlog(lab, svc.IPERF3_PORT) == 16


def test_reset_gives_fresh_namespaces_with_default_values(make_lab):
    lab = make_lab(services=("dns",))
    default = lab.read_text("server", FIN).strip()
    inode = os.stat(f"/run/netns/{lab.namespace('server')}").st_ino
    lab.write_text("server", FIN, "17" if default != "17" else "18")
    lab.reset()
    assert os.stat(f"/run/netns/{lab.namespace('server')}").st_ino != inode
    assert lab.read_text("server", FIN).strip() == default
    answer = lab.in_namespace("client", svc.dns_query, lab.address("server"), "r1.tunelab.test.", 53, 1.0)
    assert answer is not None and answer.rcode == 0
    assert lab.timings["reset_s"] < 5


def test_namespace_pids_are_empty_after_down(make_lab):
    lab = make_lab()
    namespaces = list(lab.namespaces.values())
    assert netns.namespace_pids(namespaces[0])
    lab.down()
    assert all(netns.namespace_pids(ns) == [] for ns in namespaces)
    assert not any(netns.namespace_exists(ns) for ns in namespaces)


def test_two_concurrent_labs_do_not_collide(make_lab):
    a, b = make_lab(services=("dns",)), make_lab(services=("dns",))
    assert set(a.namespaces.values()).isdisjoint(b.namespaces.values())
    a.write_text("server", FIN, "21")
    b.write_text("server", FIN, "22")
    assert a.read_text("server", FIN).strip() == "21"
    assert b.read_text("server", FIN).strip() == "22"
    for lab in (a, b):
        answer = lab.in_namespace("client", svc.dns_query, lab.address("server"), "r1.tunelab.test.", 53, 1.0)
        assert answer is not None and answer.rcode == 0


def test_run_pins_the_cpu_and_kills_the_process_group_on_timeout(make_lab):
    lab = make_lab(services=())
    pinned = lab.run("server", ["grep", "Cpus_allowed_list", "/proc/self/status"], timeout_s=5)
    assert pinned.ok and pinned.stdout.split()[-1] == "0"
    assert pinned.argv == ("grep", "Cpus_allowed_list", "/proc/self/status")
    start = time.monotonic()
    result = lab.run("client", ["sh", "-c", "sleep 30 & sleep 30"], timeout_s=0.3)
    assert result.timed_out and not result.ok
    assert time.monotonic() - start < 5
    deadline = time.monotonic() + 2
    while netns.namespace_pids(lab.namespace("client")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert netns.namespace_pids(lab.namespace("client")) == []


def test_bottleneck_limits_iperf3_throughput(make_lab):
    lab = make_lab(bottleneck_mbit=50, services=("iperf3",))
    result = lab.run("client", ["iperf3", "-c", lab.address("server"), "-t", "1", "-J"], timeout_s=10)
    assert result.ok, result.stderr
    mbit = json.loads(result.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
    assert 25 < mbit < 55


def test_disk_is_a_loop_device_of_the_requested_size(make_lab):
    lab = make_lab(disk_mb=32, services=())
    device = lab.resolve_device("@disk")
    assert re.fullmatch(r"loop\d+", device)
    sectors = int(lab.read_text("server", f"/sys/block/{device}/size"))
    assert sectors * 512 == 32 * 1024 * 1024
    assert lab.resolve_device("sda") == "sda"


def test_disk_device_needs_disk_mb(make_lab):
    lab = make_lab(services=(), disk_mb=None)
    with pytest.raises(TargetError, match="disk_mb"):
        lab.resolve_device("@disk")


def test_describe_and_foreign_cpu(make_lab):
    lab = make_lab(services=())
    info = lab.describe()
    assert info["kernel"] == os.uname().release
    assert info["nproc"] == os.cpu_count()
    assert info["tools"]["nsd"] and info["tools"]["nsd"][0].isdigit()
    assert info["lab"]["namespaces"]["server"] == lab.namespace("server")
    lab.foreign_cpu_s()
    # a busy loop that is not our descendant (double fork) is foreign CPU time
    subprocess.run(["sh", "-c", "timeout 0.6 sh -c 'while :; do :; done' >/dev/null 2>&1 &"], check=True)
    time.sleep(0.8)
    assert lab.foreign_cpu_s() >= 0.4


def test_invalid_options_are_rejected_with_the_fix():
    with pytest.raises(TargetError, match="lab name"):
        LabTarget(name="Bad Name")
    with pytest.raises(TargetError, match="bottleneck_mbit"):
        LabTarget(bottleneck_mbit=0)
    with pytest.raises(TargetError, match="server_cpu=4096"):
        LabTarget(server_cpu=4096)
    assert get_target("lab") is LabTarget


def gone(pid: int, wait_s: float = 3.0) -> bool:
    """Whether ``pid`` has exited (or is a zombie), waiting up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while netns._alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``tunelab lab ARGV`` in-process; (exit status, stdout, stderr)."""
    from tunelab.cli import main

    capsys.readouterr()
    status = main(["lab", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_crashed_owner_leaves_an_orphan_that_lab_down_removes(lab_tools, capsys):
    name = f"orph{os.getpid() % 100000}"
    script = textwrap.dedent(f"""
        import os
        from tunelab.targets.lab import LabTarget
        lab = LabTarget(name={name!r}, services=("dns",))
        lab.up()
        os._exit(0)   # a crash: no down(), no atexit
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    try:
        status, out, _ = cli(capsys, "status", "--json")
        lab = next(entry for entry in json.loads(out)["labs"] if entry["name"] == name)
        assert lab["orphan"] and lab["services"]["dns"]["alive"]
        assert cli(capsys, "down")[0] == 0
        assert not netns.namespace_exists(f"tl-{name}-srv")
        assert not state_path(name).exists()
        assert gone(lab["services"]["dns"]["pid"])
    finally:
        if state_path(name).exists():
            cli(capsys, "down", "--name", name)


def test_cli_lab_up_status_down(lab_tools, capsys):
    name = f"cli{os.getpid() % 100000}"
    try:
        status, out, err = cli(capsys, "up", "--name", name, "--disk-mb", "32")
        assert status == 0, err
        assert netns.namespace_exists(f"tl-{name}-srv") and netns.namespace_exists(f"tl-{name}-cli")
        # the lab outlives the object that created it: a new process sees it through the state file
        listing = subprocess.run([sys.executable, "-c", "from tunelab.api import lab_status; import json; "
                                  "print(json.dumps(lab_status().to_json()))"], capture_output=True, text=True, check=True)
        lab = next(entry for entry in json.loads(listing.stdout)["labs"] if entry["name"] == name)
        assert lab["detached"] and not lab["orphan"]
        assert all(ns["exists"] for ns in lab["namespaces"].values())
        assert lab["services"]["dns"]["alive"] and lab["services"]["iperf3"]["alive"]
        status, text, _ = cli(capsys, "status")
        assert name in text and "alive" in text
        status, _, err = cli(capsys, "up", "--name", name)
        assert status == 2 and "already exists" in err
        assert all(netns.namespace_exists(ns["name"]) for ns in lab["namespaces"].values())  # untouched
        status, _, err = cli(capsys, "down", "--name", name)
        assert status == 0, err
        assert not any(netns.namespace_exists(ns["name"]) for ns in lab["namespaces"].values())
        assert not state_path(name).exists()
        backing = Path(f"/sys/block/{Path(lab['disk']).name}/loop/backing_file")
        assert not backing.exists() or name not in backing.read_text()
        assert all(gone(s["pid"]) for s in lab["services"].values())
    finally:
        if state_path(name).exists():
            cli(capsys, "down", "--name", name)
