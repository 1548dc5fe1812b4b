"""The ssh target against a real sshd in the lab's server namespace, connected from the client namespace."""
from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from tunelab.errors import TargetError
from tunelab.targets import netns
from tunelab.targets.ssh import SshTarget, parse_spec

from .conftest import require_tools

FIN = "/proc/sys/net/ipv4/tcp_fin_timeout"
PORT = 2222


@pytest.fixture
def sshd(make_lab, tmp_path: Path) -> Iterator[dict]:
    require_tools("ssh-keygen", "sshd")
    lab = make_lab(services=())
    address = lab.address("server")
    for key in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / key)], check=True)
    (tmp_path / "authorized_keys").write_text((tmp_path / "client.pub").read_text())
    host_pub = (tmp_path / "host.pub").read_text().split()
    (tmp_path / "known_hosts").write_text(f"[{address}]:{PORT} {host_pub[0]} {host_pub[1]}\n")
    (tmp_path / "empty_known_hosts").write_text("")
    conf = tmp_path / "sshd_config"
    conf.write_text("\n".join([
        f"ListenAddress {address}:{PORT}", f"HostKey {tmp_path / 'host'}",
        f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}", f"PidFile {tmp_path / 'sshd.pid'}",
        "UsePAM no", "PermitRootLogin prohibit-password", "PasswordAuthentication no", "StrictModes no",
        "Subsystem sftp internal-sftp", ""]))
    Path("/run/sshd").mkdir(exist_ok=True)
    sshd_bin = "/usr/sbin/sshd"
    proc = subprocess.Popen(netns.exec_argv(lab.namespace("server"), [sshd_bin, "-D", "-e", "-f", str(conf)]),
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "sshd.log", "wb"),
                            start_new_session=True)
    try:
        from tunelab.targets import services as svc

        svc.wait_until(lambda: lab.in_namespace("server", svc.tcp_listening, PORT), 5, "sshd", proc=proc,
                       log=tmp_path / "sshd.log")

        def connect(host: str, port: int) -> socket.socket:
            # the socket is created in the client namespace's thread, so it belongs to that netns
            return lab.in_namespace("client", socket.create_connection, (host, port), 5)

        yield {"lab": lab, "address": address, "dir": tmp_path, "connect": connect}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def make_target(sshd: dict, known_hosts: str = "known_hosts") -> SshTarget:
    return SshTarget(server=f"root@{sshd['address']}:{PORT}", client=None,
                     connect_kwargs={"key_filename": str(sshd["dir"] / "client"), "look_for_keys": False,
                                     "allow_agent": False},
                     known_hosts=str(sshd["dir"] / known_hosts), connect_socket=sshd["connect"])


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
