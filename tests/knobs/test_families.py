"""Knob families: paths, and read/write/verify through target primitives on a fake file tree."""
from __future__ import annotations

import pytest

from tunelab.errors import KnobError
from tunelab.knobs import FAMILIES, get_knob
from tunelab.knobs.families import check_device_name


def test_families_are_registered():
    assert FAMILIES.names() == ["block", "link", "sysctl"]


@pytest.mark.parametrize("name, device, path", [
    ("net.core.somaxconn", None, "/proc/sys/net/core/somaxconn"),
    ("net.ipv4.conf.all.rp_filter", None, "/proc/sys/net/ipv4/conf/all/rp_filter"),
    ("fs.file-max", None, "/proc/sys/fs/file-max"),
    ("block.queue.scheduler", "sda", "/sys/block/sda/queue/scheduler"),
    ("block.queue.read_ahead_kb", "@disk", "/sys/block/loop7/queue/read_ahead_kb"),
    ("link.mtu", "veth1", "/sys/class/net/veth1/mtu"),
    ("link.txqueuelen", "@link", "/sys/class/net/veth0/tx_queue_len"),
])
def test_paths(tree, name, device, path):
    assert get_knob(name).path(tree, device) == path


def test_sysctl_round_trip_on_a_file_tree(tree):
    tree.add("server", "/proc/sys/net/core/somaxconn", "4096\n")
    tree.add("client", "/proc/sys/net/core/somaxconn", "4096\n")
    knob = get_knob("net.core.somaxconn")
    knob.write(tree, "server", 128)
    assert knob.read(tree, "server") == 128
    assert knob.read(tree, "client") == 4096  # the other host is untouched
    assert tree.writes == [("server", "/proc/sys/net/core/somaxconn", "128")]
    assert knob.verify(tree, "server", "128") == 128


def test_triplet_round_trip_reads_tab_separated_kernel_text(tree):
    tree.add("server", "/proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n")
    knob = get_knob("net.ipv4.tcp_rmem")
    assert knob.read(tree, "server") == (4096, 131072, 6291456)
    knob.write(tree, "server", [8192, 262144, 16777216])
    assert tree.writes[-1][2] == "8192 262144 16777216"
    assert knob.read(tree, "server") == (8192, 262144, 16777216)


def test_invalid_value_is_never_written(tree):
    tree.add("server", "/proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n")
    with pytest.raises(KnobError, match="expected exactly 3 integers"):
        get_knob("net.ipv4.tcp_rmem").write(tree, "server", "4096 131072")
    assert tree.writes == []


def test_block_scheduler_round_trip(tree):
    tree.add("server", "/sys/block/loop7/queue/scheduler", "[mq-deadline] none\n")
    knob = get_knob("block.queue.scheduler")
    assert knob.read(tree, "server", "@disk") == "mq-deadline"
    knob.write(tree, "server", "none", device="@disk")
    assert tree.writes == [("server", "/sys/block/loop7/queue/scheduler", "none")]
    assert knob.read(tree, "server", "loop7") == "none"


def test_link_mtu_is_written_with_ip_link_argv(tree):
    tree.add("server", "/sys/class/net/veth0/mtu", "1500\n")
    knob = get_knob("link.mtu")
    knob.write(tree, "server", 9000, device="veth0")
    assert tree.commands == [("server", ["ip", "link", "set", "dev", "veth0", "mtu", "9000"])]
    assert tree.writes == []  # sysfs is only read
    assert knob.verify(tree, "server", 9000, device="veth0") == 9000


def test_link_txqueuelen_uses_its_own_ip_keyword(tree):
    tree.add("client", "/sys/class/net/veth1/tx_queue_len", "1000\n")
    get_knob("link.txqueuelen").write(tree, "client", 64, device="veth1")
    assert tree.commands[-1] == ("client", ["ip", "link", "set", "dev", "veth1", "txqueuelen", "64"])
    assert get_knob("link.txqueuelen").read(tree, "client", "veth1") == 64


def test_failed_link_command_names_knob_command_and_stderr(tree):
    tree.failing_commands = True
    with pytest.raises(KnobError) as info:
        get_knob("link.mtu").write(tree, "server", 9000, device="veth0")
    message = str(info.value)
    assert message.startswith("link.mtu: `ip link set dev veth0 mtu 9000` on server failed (exit 2)")
    assert "Invalid argument" in message


def test_verify_reports_a_clamped_value(tree):
    tree.add("server", "/proc/sys/net/core/rmem_max", "212992\n")
    knob = get_knob("net.core.rmem_max")
    with pytest.raises(KnobError, match=r"wrote '4194304' on server but read back '212992'"):
        knob.verify(tree, "server", 4194304)


def test_missing_file_becomes_a_knob_error_naming_the_knob(tree):
    with pytest.raises(KnobError, match=r"^net.ipv4.tcp_fin_timeout: could not read on server: "):
        get_knob("net.ipv4.tcp_fin_timeout").read(tree, "server")
    with pytest.raises(KnobError, match=r"^net.ipv4.tcp_fin_timeout: could not write '30' on server: "):
        get_knob("net.ipv4.tcp_fin_timeout").write(tree, "server", 30)


def test_device_rules(tree):
    with pytest.raises(KnobError, match="needs a device .*'loop0'.*add `device:`"):
        get_knob("block.queue.scheduler").read(tree, "server")
    with pytest.raises(KnobError, match="needs a device .*'veth0'"):
        get_knob("link.mtu").path(tree, None)
    with pytest.raises(KnobError, match="takes no device, but device 'eth0' was given"):
        get_knob("net.core.somaxconn").read(tree, "server", "eth0")


@pytest.mark.parametrize("device", ["../../etc", "sda/queue", "", ".", "a b", "x" * 65, "-x"])
def test_unsafe_device_names_are_refused(tree, device):
    with pytest.raises(KnobError, match="is not a valid device name"):
        get_knob("block.queue.scheduler").path(tree, device)


@pytest.mark.parametrize("device", ["sda", "nvme0n1", "loop7", "veth0", "eth0.100", "br-lan", "wlp2s0"])
def test_ordinary_device_names_pass(device):
    assert check_device_name("link.mtu", device) == device


def test_is_writable_does_not_write(tree):
    tree.add("server", "/proc/sys/net/core/somaxconn", "4096\n", mode=0o644)
    tree.add("server", "/proc/sys/net/ipv4/tcp_mem", "1 2 3\n", mode=0o444)
    assert get_knob("net.core.somaxconn").is_writable(tree, "server") is True
    assert get_knob("net.ipv4.tcp_mem").is_writable(tree, "server") is False
    assert tree.writes == [] and tree.commands == []


def test_symbolic_device_unknown_to_the_target_is_explained(host_view):
    with pytest.raises(KnobError, match="does not know the symbolic device '@disk'"):
        get_knob("block.queue.scheduler").path(host_view, "@disk")
