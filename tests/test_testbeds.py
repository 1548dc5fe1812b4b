"""Testbeds files: parsing (every bad file is one line naming the entry), the checks before a study
(keys, known_hosts, TCP reach on loopback only, root and ip), merged options and shared-machine warnings.

No test needs the network beyond loopback: reach checks use 127.0.0.1, and the shared-machine
tests only resolve IP literals (``getaddrinfo`` on a literal makes no query and no connection).
"""
from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

import tunelab.simulator  # noqa: F401  (registers the "simulator" target)
from tunelab.errors import TargetError, TestbedError
from tunelab.testbeds import (MAX_FILE_BYTES, Testbed, check_testbeds, load_testbeds, parse_testbeds,
                              shared_machine_warnings)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WHERE = "beds.yaml"


def _refusal(data: Any, **kwargs: Any) -> str:
    """The one-line message parse_testbeds refuses ``data`` with."""
    with pytest.raises(TestbedError) as caught:
        parse_testbeds(data, WHERE, **kwargs)
    message = str(caught.value)
    assert "\n" not in message, message
    assert message.startswith(f"{WHERE}: "), message
    return message


def _beds(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"testbeds": list(entries)}


def _closed_port() -> int:
    """A loopback TCP port nothing listens on: bind a socket, take its port, close it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _problems(testbeds: list[Testbed], **kwargs: Any) -> list[str]:
    with pytest.raises(TestbedError) as caught:
        check_testbeds(testbeds, **kwargs)
    return str(caught.value).splitlines()


@pytest.fixture
def ssh_files(tmp_path: Path) -> dict[str, str]:
    """An existing key file and known_hosts file."""
    key = tmp_path / "id_test"
    key.write_text("not a real key\n")
    known = tmp_path / "known_hosts"
    known.write_text("")
    return {"key": str(key), "known_hosts": str(known)}


def _ssh(name: str, server: str, files: dict[str, str], **options: Any) -> Testbed:
    opts = {"server": server, "known_hosts": files["known_hosts"], "connect_kwargs": {"key_filename": files["key"]}}
    return Testbed(name, "ssh", {**opts, **options})


# ---- parsing: one line per malformed file, the entry named ------------------------------------


def test_a_good_file_parses_into_testbeds() -> None:
    beds = parse_testbeds(_beds({"name": "lab1", "type": "lab"},
                                {"name": "dns-a", "type": "ssh", "options": {"server": "root@192.0.2.10:22"}}), WHERE)
    assert beds == [Testbed("lab1", "lab", {}), Testbed("dns-a", "ssh", {"server": "root@192.0.2.10:22"})]
    assert beds[0].spec() == {"type": "lab", "options": {"name": "lab1"}}
    assert beds[1].spec() == {"type": "ssh", "options": {"server": "root@192.0.2.10:22"}}


def test_the_error_is_a_target_error() -> None:
    assert issubclass(TestbedError, TargetError)


@pytest.mark.parametrize("data, expected", [
    (["lab1"], "beds.yaml: a testbeds file must be a mapping with a `testbeds:` list, got ['lab1']"),
    (None, "beds.yaml: a testbeds file must be a mapping with a `testbeds:` list, got None"),
    ({}, "beds.yaml: `testbeds` must be a list of testbeds (name, type, options), got None"),
    ({"testbeds": "lab1"}, "beds.yaml: `testbeds` must be a list of testbeds (name, type, options), got 'lab1'"),
    ({"testbeds": []}, "beds.yaml: `testbeds` is empty; list at least one testbed (name, type, options)"),
    ({"testbeds": [{"name": "a", "type": "lab"}], "defaults": {}},
     "beds.yaml: unknown top-level key 'defaults'; allowed keys: testbeds"),
])
def test_a_malformed_file_is_one_line(data: Any, expected: str) -> None:
    assert _refusal(data) == expected


@pytest.mark.parametrize("entries, expected", [
    (["lab1"], "testbeds[0] (no name): an entry must be a mapping with name, type and options, got 'lab1'"),
    ([{"name": "a", "type": "lab"}, {"name": "b", "type": "lab", "host": "x"}],
     "testbeds[1] ('b'): unknown key 'host'; allowed keys: name, type, options"),
    ([{"type": "lab"}], "testbeds[0] (no name): `name` is required"),
    ([{"name": "Lab_1", "type": "lab"}], "testbeds[0] ('Lab_1'): invalid name 'Lab_1'; use 1-24 characters"),
    ([{"name": "-lab", "type": "lab"}], "testbeds[0] ('-lab'): invalid name '-lab'"),
    ([{"name": "a" * 25, "type": "lab"}], f"invalid name '{'a' * 25}'"),
    ([{"name": 7, "type": "lab"}], "testbeds[0] (7): invalid name 7"),
    ([{"name": "a"}], "testbeds[0] ('a'): `type` is required; choose one of"),
    ([{"name": "a", "type": "kvm"}], "testbeds[0] ('a'): unknown target type 'kvm'; choose one of"),
    ([{"name": "a", "type": "lab", "options": [1]}], "testbeds[0] ('a'): options must be a mapping"),
    ([{"name": "a", "type": "lab", "options": {"pin": True}}],
     "testbeds[0] ('a'): options: target lab: unknown option 'pin'; allowed options:"),
    ([{"name": "a", "type": "lab", "options": {"records": "many"}}],
     "testbeds[0] ('a'): options: target lab: option records='many' must be of type"),
    ([{"name": "a", "type": "lab", "options": {"pin_cpus": "sometimes"}}], "testbeds[0] ('a'): options: target lab:"),
    ([{"name": "a", "type": "ssh", "options": {}}],
     "testbeds[0] ('a'): options: target ssh: option 'server' is required"),
    ([{"name": "a", "type": "ssh", "options": {"server": "root@h", "connect_kwargs": {"sock": 1}}}],
     "testbeds[0] ('a'): options: connect_kwargs may not set 'sock'"),
    ([{"name": "a", "type": "lab", "options": {"name": "Bad Lab"}}],
     "testbeds[0] ('a'): invalid lab name options.name='Bad Lab'"),
])
def test_a_malformed_entry_is_one_line_naming_the_entry(entries: list[Any], expected: str) -> None:
    message = _refusal({"testbeds": entries})
    assert message.startswith(f"{WHERE}: ") and expected in message, message


def test_unknown_type_lists_the_registered_ones() -> None:
    message = _refusal(_beds({"name": "a", "type": "kvm"}))
    for known in ("dry-run", "lab", "local", "simulator", "ssh"):
        assert known in message


def test_duplicate_names_name_both_entries() -> None:
    message = _refusal(_beds({"name": "lab1", "type": "lab"}, {"name": "x", "type": "local"},
                             {"name": "lab1", "type": "dry-run"}))
    assert message == ("beds.yaml: testbeds[0] and testbeds[2] are both named 'lab1'; "
                       "give every testbed its own name")


def test_two_labs_with_one_lab_name_are_duplicates() -> None:
    message = _refusal(_beds({"name": "lab1", "type": "lab"},
                             {"name": "lab2", "type": "lab", "options": {"name": "lab1"}}))
    assert message.startswith("beds.yaml: testbeds[0] (lab1) and testbeds[1] (lab2) are the same lab 'lab1'")


def test_command_options_need_the_users_permission() -> None:
    entry = {"name": "dns-a", "type": "ssh",
             "options": {"server": "root@192.0.2.10", "service_commands": {"dns": ["systemctl", "restart", "nsd"]}}}
    message = _refusal(_beds(entry))
    assert message.startswith("beds.yaml: testbeds[0] ('dns-a'): options name commands that would run as root")
    assert "service_commands.dns: systemctl restart nsd" in message
    assert "--allow-design-commands" in message
    bed, = parse_testbeds(_beds(entry), WHERE, allow_commands=True)
    assert bed.options["service_commands"] == {"dns": ["systemctl", "restart", "nsd"]}


# ---- reading files ------------------------------------------------------------------------------


def _load_refusal(path: Path) -> str:
    with pytest.raises(TestbedError) as caught:
        load_testbeds(path)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    assert _load_refusal(path) == f"{path}: no such testbeds file; see examples/testbeds-*.yaml"


def test_unreadable_file(tmp_path: Path) -> None:
    assert _load_refusal(tmp_path).startswith(f"{tmp_path}: cannot read the testbeds file:")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("testbeds:\n  - name: lab1\n    type: [lab\n")
    message = _load_refusal(path)
    assert message.startswith(f"{path}:") and "malformed YAML" in message and "line 4" in message


def test_a_key_written_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("testbeds:\n  - name: lab1\n    type: lab\n    name: lab2\n")
    assert "duplicate key 'name'" in _load_refusal(path)


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * MAX_FILE_BYTES + "\ntestbeds: []\n")
    assert "larger than the limit MAX_FILE_BYTES" in _load_refusal(path)


def test_an_alias_bomb_stops_before_it_expands(tmp_path: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        lines.append(f"{level}: &{level} [" + ",".join([f"*{previous}"] * 9) + "]")
    lines.append("testbeds: [{name: x, type: lab, options: {pin_cpus: *i}}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert "MAX_NODES" in _load_refusal(path)


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("testbeds: &t [*t]\n")
    message = _load_refusal(path)
    assert "MAX_DEPTH" in message or "MAX_NODES" in message


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"testbeds: [{name: caf\xe9, type: lab}]\n")
    assert "not UTF-8" in _load_refusal(path)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_loads(path: Path) -> None:
    testbeds = load_testbeds(path)
    assert len(testbeds) >= 2
    assert len({bed.name for bed in testbeds}) == len(testbeds)


def test_the_examples_are_the_ones_promised() -> None:
    assert [(b.name, b.type, b.options) for b in load_testbeds(EXAMPLES / "testbeds-simulator.yaml")] == [
        (name, "simulator", {"surface": "simple", "cv": 0.03, "seed": 0}) for name in ("sim1", "sim2", "sim3")]
    assert [b.type for b in load_testbeds(EXAMPLES / "testbeds-2labs.yaml")] == ["lab", "lab"]
    for bed in load_testbeds(EXAMPLES / "testbeds-ssh.yaml"):
        host = bed.options["server"].split("@")[1].split(":")[0]
        assert host.startswith(("192.0.2.", "198.51.100.", "203.0.113.")), "use RFC 5737 documentation addresses"


# ---- checks that touch the world (loopback only) ------------------------------------------------


def test_a_reachable_ssh_testbed_passes(ssh_files: dict[str, str]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        check_testbeds([_ssh("dns-a", f"root@127.0.0.1:{port}", ssh_files)], timeout_s=2.0)


def test_a_closed_port_is_refused(ssh_files: dict[str, str]) -> None:
    port = _closed_port()
    assert _problems([_ssh("dns-a", f"root@127.0.0.1:{port}", ssh_files)], timeout_s=2.0) == [
        f"testbed dns-a: cannot reach 127.0.0.1:{port} (connection refused: nothing listens on that port); "
        "check the host is up and the address"]


def test_the_client_is_checked_too(ssh_files: dict[str, str]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port, closed = server.getsockname()[1], _closed_port()
        problems = _problems([_ssh("dns-a", f"root@127.0.0.1:{port}", ssh_files, client=f"127.0.0.1:{closed}")])
    assert len(problems) == 1 and f"cannot reach 127.0.0.1:{closed}" in problems[0]


def test_a_timeout_says_how_long_it_waited(ssh_files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []

    def silent(address: tuple[str, int], timeout: float) -> socket.socket:
        asked.append((address, timeout))
        raise socket.timeout("timed out")

    monkeypatch.setattr(socket, "create_connection", silent)
    problems = _problems([_ssh("dns-a", "root@127.0.0.1:2222", ssh_files)], timeout_s=0.25)
    assert asked == [(("127.0.0.1", 2222), 0.25)]
    assert problems == ["testbed dns-a: cannot reach 127.0.0.1:2222 (timed out after 0.25 s); "
                        "check the host is up and the address"]


def test_missing_key_and_known_hosts_files(tmp_path: Path, ssh_files: dict[str, str]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        bed = Testbed("dns-a", "ssh", {"server": f"root@127.0.0.1:{port}", "known_hosts": str(tmp_path / "kh"),
                                       "connect_kwargs": {"key_filename": [ssh_files["key"], str(tmp_path / "k2")]}})
        problems = _problems([bed])
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"testbed dns-a: key file {tmp_path / 'k2'} does not exist")
    assert problems[1].startswith(f"testbed dns-a: known_hosts file {tmp_path / 'kh'} does not exist")


def test_a_key_filename_that_is_no_path(ssh_files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "create_connection", lambda address, timeout: socket.socket())
    bed = _ssh("dns-a", "root@127.0.0.1:22", ssh_files, connect_kwargs={"key_filename": 42})
    assert _problems([bed]) == ["testbed dns-a: options.connect_kwargs.key_filename must be a path or a list of "
                                "paths, got 42"]


def test_every_problem_of_every_testbed_in_one_error(tmp_path: Path, ssh_files: dict[str, str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(shutil, "which", lambda tool: None)
    closed = _closed_port()
    beds = [Testbed("lab1", "lab"),
            Testbed("here", "local"),
            _ssh("dns-a", f"root@127.0.0.1:{closed}", {**ssh_files, "key": str(tmp_path / "nokey")})]
    problems = _problems(beds, timeout_s=2.0)
    assert problems == [
        "testbed lab1: a lab needs root (it builds network namespaces); run tunelab as root",
        "testbed lab1: a lab needs `ip` (iproute2), which is not installed; install it with `apt-get install iproute2`",
        f"testbed dns-a: key file {tmp_path / 'nokey'} does not exist; fix options.connect_kwargs.key_filename "
        "or create the key (ssh-keygen)",
        f"testbed dns-a: cannot reach 127.0.0.1:{closed} (connection refused: nothing listens on that port); "
        "check the host is up and the address",
    ]


def test_local_and_simulator_testbeds_need_nothing_more() -> None:
    check_testbeds([Testbed("here", "local"), Testbed("sim", "simulator", {"surface": "simple"})])


def test_check_refuses_bad_options_of_a_testbed_built_in_python() -> None:
    assert _problems([Testbed("here", "local", {"colour": "blue"})]) == [
        "testbed here: options: target local: unknown option 'colour'; allowed options: service_commands, "
        "server_cpu, client_cpu, server_cgroup; fix or remove that option"]


# ---- merged options ------------------------------------------------------------------------------


def test_merged_design_options_are_defaults_the_testbed_overrides() -> None:
    design_target = {"type": "lab", "options": {"records": 500, "pin_cpus": True, "name": "design-lab"}}
    merged = Testbed("lab2", "lab", {"pin_cpus": False}).merged(design_target)
    assert merged == Testbed("lab2", "lab", {"records": 500, "pin_cpus": False, "name": "lab2"})
    named = Testbed("lab3", "lab", {"name": "east"}).merged(design_target)
    assert named.options["name"] == "east" and named.spec()["options"]["name"] == "east"


def test_merged_ignores_a_design_target_of_another_type() -> None:
    bed = Testbed("sim1", "simulator", {"seed": 3})
    assert bed.merged({"type": "lab", "options": {"records": 500}}) == bed
    ssh = Testbed("dns-a", "ssh", {"server": "root@192.0.2.10"})
    merged = ssh.merged({"type": "ssh", "options": {"server": "root@192.0.2.99", "known_hosts": "/kh"}})
    assert merged.options == {"server": "root@192.0.2.10", "known_hosts": "/kh"}


# ---- shared machines -----------------------------------------------------------------------------


def test_two_labs_share_this_machine() -> None:
    assert shared_machine_warnings([Testbed("lab1", "lab"), Testbed("lab2", "lab")]) == [
        "warning: testbeds lab1, lab2 run on the same machine (this machine); they share its CPUs, so their "
        "trials interfere. Use one testbed per machine for measurements you will publish."]


def test_simulator_only_groups_need_no_warning() -> None:
    beds = [Testbed(f"sim{i}", "simulator", {"surface": "simple"}) for i in range(3)]
    assert shared_machine_warnings(beds) == []
    assert shared_machine_warnings(beds + [Testbed("dry", "dry-run")]) == []


def test_a_simulator_beside_a_lab_still_disturbs_it() -> None:
    warnings = shared_machine_warnings([Testbed("lab1", "lab"), Testbed("sim1", "simulator")])
    assert len(warnings) == 1 and "testbeds lab1, sim1 run on the same machine (this machine)" in warnings[0]


def test_ssh_to_loopback_and_a_lab_share_this_machine() -> None:
    beds = [Testbed("dns-a", "ssh", {"server": "root@127.0.0.1:22", "client": "root@127.0.0.2:22"}),
            Testbed("lab1", "lab")]
    warnings = shared_machine_warnings(beds)
    assert len(warnings) == 1 and "testbeds dns-a, lab1 run on the same machine (this machine)" in warnings[0]


def test_ssh_testbeds_on_one_remote_address_share_it() -> None:
    beds = [Testbed("dns-a", "ssh", {"server": "root@192.0.2.10:22", "client": "root@192.0.2.20"}),
            Testbed("dns-b", "ssh", {"server": "admin@192.0.2.10:2222", "client": "root@192.0.2.30"}),
            Testbed("dns-c", "ssh", {"server": "root@192.0.2.11", "client": "root@192.0.2.31"})]
    assert shared_machine_warnings(beds) == [
        "warning: testbeds dns-a, dns-b run on the same machine (192.0.2.10); they share its CPUs, so their "
        "trials interfere. Use one testbed per machine for measurements you will publish."]


def test_an_ssh_testbed_without_client_loads_from_this_machine() -> None:
    beds = [Testbed("dns-a", "ssh", {"server": "root@192.0.2.10"}), Testbed("lab1", "lab")]
    warnings = shared_machine_warnings(beds)
    assert len(warnings) == 1 and "testbeds dns-a, lab1 run on the same machine (this machine)" in warnings[0]


def test_separate_machines_give_no_warning() -> None:
    beds = [Testbed("dns-a", "ssh", {"server": "root@192.0.2.10", "client": "root@192.0.2.20"}),
            Testbed("lab1", "lab")]
    assert shared_machine_warnings(beds) == []
