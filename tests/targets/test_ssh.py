"""The ssh target against a real sshd in the lab's server namespace, connected from the client namespace."""
from __future__ import annotations

import contextlib
import os
import pwd
import time
from pathlib import Path
from typing import Iterator

import paramiko
import pytest

from tunelab.errors import TargetError
from tunelab.targets import ssh as ssh_module
from tunelab.targets.ssh import SshTarget, parse_spec

from .conftest import require_tools
from .sshd_helper import PORT, login_user, running_sshd, ssh_target

FIN = "/proc/sys/net/ipv4/tcp_fin_timeout"
SOMAXCONN = "/proc/sys/net/core/somaxconn"
#: a line of the big file: an error that quoted the written text would carry it
SECRET = "private.example. A ; personal data\n"


@pytest.fixture
def sshd(make_lab, tmp_path: Path) -> Iterator[dict]:
    require_tools("ssh-keygen", "sshd")
    with running_sshd(make_lab(services=()), tmp_path, PORT) as info:
        yield info


def make_target(sshd: dict, known_hosts: str = "known_hosts", sudo: bool = False) -> SshTarget:
    return ssh_target(sshd, known_hosts, sudo)


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


@pytest.fixture
def user_sshd(make_lab, tmp_path: Path) -> Iterator:
    """``start(sudoers)``: sshd without the sftp subsystem, logged in to as a throwaway non-root user with the
    sudoers rule ``USER ALL=(root) NOPASSWD: SUDOERS`` (None: no rule); all removed after the test."""
    require_tools("ssh-keygen", "sshd", "useradd", "sudo", "visudo")
    with contextlib.ExitStack() as stack:
        def start(sudoers: str | None = "ALL") -> dict:
            user = stack.enter_context(login_user(sudoers=sudoers))
            return stack.enter_context(running_sshd(make_lab(services=()), tmp_path, PORT, sftp=False, user=user))
        yield start


@pytest.fixture
def no_sftp_sshd(make_lab, tmp_path: Path) -> Iterator[dict]:
    require_tools("ssh-keygen", "sshd")
    with running_sshd(make_lab(services=()), tmp_path, PORT, sftp=False) as info:
        yield info


def assert_no_sftp(target: SshTarget) -> None:
    """The sshd really offers no SFTP (so the writes below cannot have used it)."""
    with pytest.raises(paramiko.SSHException):
        target.connection("server").client.open_sftp()


def write_knob_and_big_file(sshd: dict, target: SshTarget, folder: Path) -> None:
    """A knob written in the server namespace and read back, and a 1 MB file streamed byte for byte."""
    lab = sshd["lab"]
    new = "23" if lab.read_text("server", FIN).strip() != "23" else "24"
    target.write_text("server", FIN, new + "\n")
    assert lab.read_text("server", FIN).strip() == new == target.read_text("server", FIN).strip()
    big = SECRET * (1_000_000 // len(SECRET))
    start = time.monotonic()
    target.write_text("server", str(folder / "sub" / "queries"), big)
    assert (folder / "sub" / "queries").read_text() == big and time.monotonic() - start < 5


def assert_one_line_without_content(exc: pytest.ExceptionInfo, *parts: str) -> None:
    text = str(exc.value)
    assert "\n" not in text and SECRET.strip() not in text and "Channel closed" not in text, text
    for part in parts:
        assert part in text, (part, text)


@pytest.mark.lab
def test_writes_go_through_the_exec_channel_without_sftp(no_sftp_sshd, tmp_path, monkeypatch):
    with make_target(no_sftp_sshd) as target:
        assert_no_sftp(target)
        write_knob_and_big_file(no_sftp_sshd, target, tmp_path / "out")
        # the kernel refuses the value: dd's own error, the value (a short knob value), the fix; one line
        with pytest.raises(TargetError) as einval:
            target.write_text("server", SOMAXCONN, "-1\n")
        assert_one_line_without_content(einval, SOMAXCONN, "'-1' (3 bytes)", "Invalid argument", "valid range")
        # a big text that cannot be written: the path and the byte count, never the text
        big = SECRET * 3000
        with pytest.raises(TargetError) as failed:
            target.write_text("server", str(tmp_path), big)
        assert_one_line_without_content(failed, str(tmp_path), f"{len(big)} bytes", "Is a directory")
        target.check_access({"server": ["dd"]})
        with pytest.raises(TargetError, match=r"ssh server .*no-such-tool-xyz is not installed"):
            target.check_access({"server": ["no-such-tool-xyz"]})
        # bounded in time: a write that blocks (a FIFO nobody reads) ends with the remote `timeout`
        monkeypatch.setattr(ssh_module, "WRITE_BASE_S", 1.0)
        os.mkfifo(tmp_path / "fifo")
        start = time.monotonic()
        with pytest.raises(TargetError) as stuck:
            target.write_text("server", str(tmp_path / "fifo"), big)
        assert_one_line_without_content(stuck, "timed out", f"{len(big)} bytes")
        assert time.monotonic() - start < 10


@pytest.mark.lab
def test_a_non_root_login_writes_through_sudo(user_sshd, tmp_path):
    sudo_sshd = user_sshd("ALL")
    user = sudo_sshd["user"]
    with make_target(sudo_sshd, sudo=True) as target:
        assert_no_sftp(target)
        uid = pwd.getpwnam(user).pw_uid            # reads run as the login user, not through sudo
        assert f"Uid:\t{uid}\t" in target.read_text("server", "/proc/self/status")
        assert target.run("server", ["id", "-un"], timeout_s=10).stdout.strip() == "root"      # through sudo -n
        out = tmp_path / "root-only"          # under pytest's 0700 root folder: only root can write there
        write_knob_and_big_file(sudo_sshd, target, out)
        assert target.is_writable("server", FIN)
        target.check_access({"client": ["sh"]})
        with pytest.raises(TargetError) as einval:
            target.write_text("server", SOMAXCONN, "-1")
        assert_one_line_without_content(einval, "'-1' (2 bytes)", "Invalid argument")
    # the same login without sudo: the plan check and a write name the fix
    with make_target(sudo_sshd) as plain:
        with pytest.raises(TargetError, match=rf"logs in as {user} .*not root.*`sudo: true`.*NOPASSWD"):
            plain.check_access()
        with pytest.raises(TargetError) as denied:
            plain.write_text("server", FIN, "25")
        assert_one_line_without_content(denied, "Permission denied", "sudo: true")


@pytest.mark.lab
def test_sudo_without_a_sudoers_rule_names_the_rule_to_add(user_sshd):
    sudo_sshd = user_sshd(None)
    user = sudo_sshd["user"]
    with make_target(sudo_sshd, sudo=True) as target:
        for action in (lambda: target.check_access(), lambda: target.write_text("server", FIN, "25")):
            start = time.monotonic()
            with pytest.raises(TargetError) as refused:
                action()
            assert time.monotonic() - start < 5            # sudo -n: no password prompt to wait for
            assert_one_line_without_content(refused, "sudo -n", f"{user} ALL=(root) NOPASSWD: ALL", "sudoers")
