"""Discovery and the `tunelab knobs` command."""
from __future__ import annotations

import json

import pytest

from tunelab.cli import main
from tunelab.errors import KnobError
from tunelab.knobs import catalogue, discover
from tunelab.knobs.discovery import COLUMNS


@pytest.fixture
def small_tree(tree):
    tree.add("server", "/proc/sys/net/core/somaxconn", "4096\n")
    tree.add("server", "/proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n", mode=0o444)
    tree.add("server", "/proc/sys/vm/swappiness", "250\n")  # outside the catalogue range
    tree.add("server", "/sys/block/loop7/queue/scheduler", "none [mq-deadline]\n")
    tree.add("server", "/sys/class/net/veth0/mtu", "1500\n")
    return tree


def rows(frame):
    return frame.set_index("name")


def test_discover_reports_existence_writability_and_current_text(small_tree):
    frame = discover(small_tree, device="@disk", link_device="@link")
    assert list(frame.columns) == COLUMNS
    assert list(frame["name"]) == list(catalogue())
    by_name = rows(frame)
    assert by_name.loc["net.core.somaxconn", ["exists", "writable", "current"]].tolist() == [True, True, "4096"]
    assert by_name.loc["net.ipv4.tcp_rmem", ["exists", "writable", "current"]].tolist() == \
        [True, False, "4096 131072 6291456"]
    assert by_name.loc["block.queue.scheduler", "current"] == "none [mq-deadline]"
    assert by_name.loc["link.mtu", "current"] == "1500"
    assert by_name.loc["net.core.somaxconn", "scope"] == "netns"
    assert by_name.loc["vm.swappiness", "scope"] == "host"
    missing = by_name.loc["net.ipv4.tcp_fin_timeout"]
    assert not missing["exists"] and not missing["writable"] and missing["note"].startswith("missing or unreadable")
    assert int(frame["exists"].sum()) == 5


def test_discover_never_writes(small_tree):
    discover(small_tree, device="@disk", link_device="@link")
    assert small_tree.writes == [] and small_tree.commands == []


def test_discover_notes_values_the_catalogue_would_reject(small_tree):
    note = rows(discover(small_tree)).loc["vm.swappiness", "note"]
    assert note.startswith("current value outside the catalogue's range") and "250" in note


def test_device_knobs_without_a_device_are_not_checked(small_tree):
    by_name = rows(discover(small_tree, families=["block", "link"]))
    assert len(by_name) == sum(k.family in ("block", "link") for k in catalogue().values())
    assert by_name["note"].str.startswith("not checked").all()
    assert not by_name["exists"].any()


def test_discover_rejects_unknown_family_and_host(small_tree):
    with pytest.raises(KnobError, match="unknown knob family disk"):
        discover(small_tree, families=["disk"])
    with pytest.raises(Exception, match="has no host 'router'"):
        discover(small_tree, host="router")


def test_discover_on_this_machine_read_only(host_view):
    by_name = rows(discover(host_view, families=["sysctl"]))
    with open("/proc/sys/net/core/somaxconn") as fh:
        assert by_name.loc["net.core.somaxconn", "current"] == fh.read().strip()
    assert by_name.loc["net.core.somaxconn", "exists"]


# ---- CLI -----------------------------------------------------------------------------------------

def test_cli_list_json_on_dry_run(capsys):
    assert main(["knobs", "list", "--target", "dry-run", "--family", "sysctl", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in records} == {k.name for k in catalogue().values() if k.family == "sysctl"}
    assert set(records[0]) == set(COLUMNS)


def test_cli_list_table_says_what_is_missing(capsys):
    assert main(["knobs", "list", "--target", "dry-run", "--family", "link", "--link-device", "lo"]) == 0
    out = capsys.readouterr().out
    assert "link.mtu" in out and "link.txqueuelen" in out
    assert "2 of 2 checked knobs exist; none missing" in out


def test_cli_list_names_missing_entries(capsys):
    assert main(["knobs", "list", "--target", "dry-run", "--family", "link", "--link-device", "nosuchdev0"]) == 0
    assert "0 of 2 checked knobs exist; missing here: link.mtu, link.txqueuelen" in capsys.readouterr().out


def test_cli_show_and_check(capsys):
    assert main(["knobs", "show", "net.ipv4.tcp_rmem"]) == 0
    out = capsys.readouterr().out
    assert "triplet" in out and "netns" in out and "min default max" in out
    assert main(["knobs", "check", "net.ipv4.tcp_rmem", "4096", "131072", "6291456"]) == 0
    assert "(4096, 131072, 6291456)" in capsys.readouterr().out
    assert main(["knobs", "check", "net.ipv4.tcp_rmem", "4096", "131072"]) == 2
    assert "expected exactly 3 integers, got 2" in capsys.readouterr().err
    assert main(["knobs", "show", "net.core.somaxcon"]) == 2
    assert "did you mean net.core.somaxconn" in capsys.readouterr().err
