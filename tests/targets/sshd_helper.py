"""A real sshd in a lab's server namespace, reached from its client namespace (shared by
``test_ssh.py`` and the target contract suite in ``tests/contracts``).

Options: an sshd without the ``sftp`` subsystem (``sftp=False``), and a throwaway non-root login user
(:func:`login_user`, with or without a NOPASSWD sudoers rule) whose home holds the authorized keys.
"""
from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psutil

from tunelab.targets import netns
from tunelab.targets import services as svc
from tunelab.targets.lab import LabTarget
from tunelab.targets.ssh import SshTarget

PORT = 2222


def write_sshd_files(directory: Path, address: str, port: int, client_key: Path | None = None,
                     sftp: bool = True, keys_dir: Path | None = None) -> Path:
    """Fresh host and client keys under ``directory``, authorized_keys, a known_hosts trusting
    ``[address]:port``, and an sshd_config listening there only; returns the config's path.

    With ``client_key`` (a private key whose ``.pub`` sits beside it) that key is authorised instead of
    a fresh one, so one key logs in to several sshds (a server and a load host). ``sftp=False`` leaves
    out the ``Subsystem sftp`` line (an sshd that offers no SFTP); ``keys_dir`` holds authorized_keys
    instead of ``directory`` (sshd reads it as the login user: a non-root user's home).
    """
    for key in ("host",) if client_key else ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / key)], check=True)
    public = Path(f"{client_key}.pub") if client_key else directory / "client.pub"
    keys = (keys_dir or directory) / "authorized_keys"
    keys.write_text(public.read_text())
    keys.chmod(0o644)
    host_pub = (directory / "host.pub").read_text().split()
    (directory / "known_hosts").write_text(f"[{address}]:{port} {host_pub[0]} {host_pub[1]}\n")
    conf = directory / "sshd_config"
    conf.write_text("\n".join([
        f"ListenAddress {address}:{port}", f"HostKey {directory / 'host'}",
        f"AuthorizedKeysFile {keys}", f"PidFile {directory / 'sshd.pid'}",
        "UsePAM no", "PermitRootLogin prohibit-password", "PasswordAuthentication no", "StrictModes no",
        *(["Subsystem sftp internal-sftp"] if sftp else []), ""]))
    return conf


@contextmanager
def login_user(sudoers: str | None = "ALL") -> Iterator[str]:
    """A throwaway non-root user (``useradd``, home a fresh /tmp/tunelab-sshuser.* folder) that may log in by
    key; with ``sudoers`` (a command list, e.g. ``ALL``) a rule ``USER ALL=(root) NOPASSWD: SUDOERS`` in
    /etc/sudoers.d. Yields the user name; the user, its home and the rule are removed on exit."""
    home = Path(tempfile.mkdtemp(prefix="tunelab-sshuser."))
    name = f"tl{os.getpid() % 100000}{home.name[-4:].lower()}".replace("_", "x")
    rule = Path(f"/etc/sudoers.d/{name}")
    try:
        # '*': no password, but not locked (sshd refuses a locked account's key without PAM)
        subprocess.run(["useradd", "-M", "-d", str(home), "-s", "/bin/sh", "-p", "*", name], check=True)
        shutil.chown(home, name)
        home.chmod(0o755)
        if sudoers is not None:
            rule.write_text(f"{name} ALL=(root) NOPASSWD: {sudoers}\n")
            rule.chmod(0o440)
            subprocess.run(["visudo", "-c", "-q", "-f", str(rule)], check=True)
        yield name
    finally:
        rule.unlink(missing_ok=True)
        kill_processes_of(name)
        subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def kill_processes_of(user: str) -> None:
    """SIGKILL, by pid, every process still running as the throwaway ``user`` (a session sshd left behind)."""
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return
    procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(procs, timeout=3)


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate ``proc`` (kill it after 3 s) if it still runs."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def running_sshd(lab: LabTarget, directory: Path, port: int = PORT, host: str = "server",
                 client_key: Path | None = None, sftp: bool = True, user: str = "root") -> Iterator[dict]:
    """Start sshd in ``lab``'s ``host`` namespace with fresh keys under ``directory``; stop it on exit.

    Yields ``{"lab", "address", "port", "dir", "connect", "user"}``; ``connect(host, port)`` opens a socket
    from the client namespace (pass it as the ssh target's ``connect_socket``). ``client_key``, ``sftp``:
    see :func:`write_sshd_files`; ``user`` logs in (a :func:`login_user`: its home holds the keys).
    """
    address = lab.address(host)
    keys_dir = None if user == "root" else Path(pwd.getpwnam(user).pw_dir)
    conf = write_sshd_files(directory, address, port, client_key, sftp, keys_dir)
    (directory / "empty_known_hosts").write_text("")
    Path("/run/sshd").mkdir(exist_ok=True)
    with open(directory / "sshd.log", "wb") as log:
        proc = subprocess.Popen(netns.exec_argv(lab.namespace(host), ["/usr/sbin/sshd", "-D", "-e", "-f", str(conf)]),
                                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        svc.wait_until(lambda: lab.in_namespace(host, svc.tcp_listening, port), 5, "sshd", proc=proc,
                       log=directory / "sshd.log")

        def connect(host: str, to_port: int) -> socket.socket:
            # the socket is created in the client namespace's thread, so it belongs to that netns
            return lab.in_namespace("client", socket.create_connection, (host, to_port), 5)

        yield {"lab": lab, "address": address, "port": port, "dir": directory, "connect": connect, "user": user}
    finally:
        stop_process(proc)


def ssh_target(sshd: dict, known_hosts: str = "known_hosts", sudo: bool = False) -> SshTarget:
    """An ssh target whose server is the sshd of :func:`running_sshd` (the client host is this machine), logged
    in as its ``user``."""
    return SshTarget(server=f"{sshd.get('user', 'root')}@{sshd['address']}:{sshd['port']}", client=None, sudo=sudo,
                     connect_kwargs={"key_filename": str(sshd["dir"] / "client"), "look_for_keys": False,
                                     "allow_agent": False},
                     known_hosts=str(sshd["dir"] / known_hosts), connect_socket=sshd["connect"])
