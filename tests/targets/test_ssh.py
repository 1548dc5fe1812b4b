"""The ssh target against a real sshd in the lab's server namespace, connected from the client namespace."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterator

import pytest

from tunelab.errors import TargetError
from tunelab.targets.ssh import SshTarget, parse_spec

from .conftest import require_tools
from .sshd_helper import PORT, running_sshd, ssh_target

FIN = "/proc/sys/net/ipv4/tcp_fin_timeout"


@pytest.fixture
def sshd(make_lab, tmp_path: Path) -> Iterator[dict]:
    require_tools("ssh-keygen", "sshd")
    with running_sshd(make_lab(services=()), tmp_path, PORT) as info:
        yield info


def make_target(sshd: dict, known_hosts: str = "known_hosts") -> SshTarget:
    return ssh_target(sshd, known_hosts)


@pytest.mark.lab
def test_ssh_reads_writes_and_runs_in_the_server_namespace(sshd):
    lab = sshd["lab"]
    host_fin = Path(FIN).read_text().strip()
    new = "23" if host_fin != "23" else "24"
    with make_target(sshd) as target:
        assert target.read_text("server", FIN).strip() == lab.read_text("server", FIN).strip()
        target.write_text("server", FIN, new)
        assert lab.read_text("server", FIN).strip() == new          # changed in the server namespace
        assert target.read_text("server", FIN).strip() == new
        assert Path(FIN).read_text().strip() == host_fin            # host untouched
        result = target.run("server", ["echo", "it's a \"quoted\" $HOME; arg"], timeout_s=10)
        assert result.ok and result.stdout == "it's a \"quoted\" $HOME; arg\n"
        assert target.run("server", ["false"], timeout_s=10).returncode == 1
        start = time.monotonic()
        slow = target.run("server", ["sleep", "20"], timeout_s=0.5)
        assert slow.timed_out and time.monotonic() - start < 10
        assert target.is_writable("server", FIN)
        assert target.has_tool("server", "sh") and not target.has_tool("server", "no-such-tool-xyz")
        assert target.describe()["hosts"]["server"]["kernel"] == os.uname().release
        # the client host is this machine
        assert target.read_text("client", FIN).strip() == host_fin
        with pytest.raises(TargetError, match=r"ssh server .*cat -- /proc/sys/net/ipv4/nope"):
            target.read_text("server", "/proc/sys/net/ipv4/nope")


@pytest.mark.lab
def test_unknown_host_key_is_rejected_with_the_fix(sshd):
    target = make_target(sshd, known_hosts="empty_known_hosts")
    with pytest.raises(TargetError, match=rf"unknown host key.*ssh-keyscan -p {PORT} {sshd['address']}"):
        target.up()
    target.down()


def test_parse_spec_rejects_bad_hosts():
    assert parse_spec("alice@example.org:2200") == ("alice", "example.org", 2200)
    for bad in ("", "a b", "host:99999", "host:x"):
        with pytest.raises(TargetError, match="user@host"):
            parse_spec(bad)


def test_missing_known_hosts_file_names_the_fix(tmp_path):
    with pytest.raises(TargetError, match="ssh-keyscan"):
        SshTarget(server="root@127.0.0.1:2222", known_hosts=str(tmp_path / "absent"))


def test_a_missing_client_known_hosts_file_names_the_fix(tmp_path):
    (tmp_path / "known").write_text("")
    with pytest.raises(TargetError, match=r"known_hosts file .*absent' does not exist.*ssh-keyscan"):
        SshTarget(server="root@127.0.0.1:2222", client="tester@127.0.0.2", known_hosts=str(tmp_path / "known"),
                  client_known_hosts=str(tmp_path / "absent"))
    target = SshTarget(server="root@127.0.0.1:2222", client="tester@127.0.0.2", known_hosts=str(tmp_path / "known"),
                       client_known_hosts=str(tmp_path / "known"))
    assert target.known_hosts_of == {"server": str(tmp_path / "known"), "client": str(tmp_path / "known")}
