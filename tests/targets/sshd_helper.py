"""A real sshd in a lab's server namespace, reached from its client namespace (shared by
``test_ssh.py`` and the target contract suite in ``tests/contracts``)."""
from __future__ import annotations

import socket
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tunelab.targets import netns
from tunelab.targets import services as svc
from tunelab.targets.lab import LabTarget
from tunelab.targets.ssh import SshTarget

PORT = 2222


def write_sshd_files(directory: Path, address: str, port: int, client_key: Path | None = None) -> Path:
    """Fresh host and client keys under ``directory``, authorized_keys, a known_hosts trusting
    ``[address]:port``, and an sshd_config listening there only; returns the config's path.

    With ``client_key`` (a private key whose ``.pub`` sits beside it) that key is authorised instead of
    a fresh one, so one key logs in to several sshds (a server and a load host).
    """
    for key in ("host",) if client_key else ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / key)], check=True)
    public = Path(f"{client_key}.pub") if client_key else directory / "client.pub"
    (directory / "authorized_keys").write_text(public.read_text())
    host_pub = (directory / "host.pub").read_text().split()
    (directory / "known_hosts").write_text(f"[{address}]:{port} {host_pub[0]} {host_pub[1]}\n")
    conf = directory / "sshd_config"
    conf.write_text("\n".join([
        f"ListenAddress {address}:{port}", f"HostKey {directory / 'host'}",
        f"AuthorizedKeysFile {directory / 'authorized_keys'}", f"PidFile {directory / 'sshd.pid'}",
        "UsePAM no", "PermitRootLogin prohibit-password", "PasswordAuthentication no", "StrictModes no",
        "Subsystem sftp internal-sftp", ""]))
    return conf


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
                 client_key: Path | None = None) -> Iterator[dict]:
    """Start sshd in ``lab``'s ``host`` namespace with fresh keys under ``directory``; stop it on exit.

    Yields ``{"lab", "address", "port", "dir", "connect"}``; ``connect(host, port)`` opens a socket
    from the client namespace (pass it as the ssh target's ``connect_socket``). ``client_key``: see
    :func:`write_sshd_files`.
    """
    address = lab.address(host)
    conf = write_sshd_files(directory, address, port, client_key)
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

        yield {"lab": lab, "address": address, "port": port, "dir": directory, "connect": connect}
    finally:
        stop_process(proc)


def ssh_target(sshd: dict, known_hosts: str = "known_hosts") -> SshTarget:
    """An ssh target whose server is the sshd of :func:`running_sshd` (the client host is this machine)."""
    return SshTarget(server=f"root@{sshd['address']}:{sshd['port']}", client=None,
                     connect_kwargs={"key_filename": str(sshd["dir"] / "client"), "look_for_keys": False,
                                     "allow_agent": False},
                     known_hosts=str(sshd["dir"] / known_hosts), connect_socket=sshd["connect"])
