"""The ``ssh`` target: server (and optionally client) are remote machines reached with fabric.

Host keys are checked: an unknown or changed key is refused (paramiko ``RejectPolicy``) with a
TargetError that says how to trust the host. Commands are argv lists, quoted with
:func:`shlex.join` into the single command line SSH carries, and bounded on the remote side
with ``timeout`` as well as locally. With ``client=None`` the client host is this machine.

Examples
--------
>>> t = SshTarget(server="root@db1:22", known_hosts="~/.ssh/known_hosts")     # doctest: +SKIP
>>> with t:                                                                 # doctest: +SKIP
...     t.read_text("server", "/proc/sys/net/core/somaxconn")
'4096\\n'
"""
from __future__ import annotations

import functools
import os
import shlex
import socket
import time
from typing import Any, Callable, Mapping, Sequence

import paramiko
from fabric import Connection
from invoke.exceptions import CommandTimedOut

from tunelab.counters import NET_FILES, CounterRequest, CounterSource, FileCounters, tail_reader
from tunelab.errors import TargetError
from tunelab.targets.base import TARGETS, CommandResult, Target, TargetOptionError
from tunelab.targets.local import LocalTarget, ServiceCommandsMixin, check_server_cgroup, server_files, taskset_argv
from tunelab.targets.process import check_argv

#: extra seconds the remote ``timeout`` allows before SIGKILL, and the local wait beyond that
KILL_AFTER_S = 2
#: the only paramiko ``connect()`` keywords a target option may set: credentials and plain
#: switches. Everything that could open a ProxyCommand, socket, transport or GSS hook is refused.
CONNECT_KWARGS = ("key_filename", "password", "passphrase", "allow_agent", "look_for_keys", "compress",
                  "timeout", "disabled_algorithms")


def parse_spec(spec: str) -> tuple[str | None, str, int]:
    """``"user@host[:port]"`` -> (user, host, port).

    >>> parse_spec("root@10.0.0.1:2222")
    ('root', '10.0.0.1', 2222)
    >>> parse_spec("db1")
    (None, 'db1', 22)
    """
    if not spec or any(ch.isspace() for ch in spec):
        raise TargetError(f"ssh host {spec!r} is invalid; write it as user@host or user@host:port")
    user, _, hostport = spec.rpartition("@")
    host, port = hostport, "22"
    if hostport.count(":") == 1:
        host, port = hostport.split(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise TargetError(f"ssh host {spec!r} is invalid; write it as user@host or user@host:port (port 1-65535)")
    return (user or None), host, int(port)


@TARGETS.register("ssh")
class SshTarget(ServiceCommandsMixin, Target):
    """Remote hosts over SSH (fabric/paramiko) with strict host-key checking.

    Parameters
    ----------
    server : str
        ``user@host[:port]`` of the machine whose knobs are tuned.
    client : str or None
        ``user@host[:port]`` of the load generator's machine; None runs loads on this machine.
    connect_kwargs : mapping, optional
        Passed to ``paramiko.SSHClient.connect`` (e.g. ``key_filename``, ``password``).
    known_hosts : str, optional
        known_hosts file to trust (default: the user's ``~/.ssh/known_hosts``).
    client_known_hosts : str, optional
        known_hosts file for the client host only (default: ``known_hosts``), e.g. a load host's own.
    service_commands : mapping, optional
        Service name -> argv that (re)starts it on the server, e.g. ``["systemctl", "restart", "nsd"]``.
    connect_socket : callable, optional
        ``(host, port) -> socket`` opening the TCP connection (e.g. from inside a network
        namespace); default: paramiko connects by itself.
    connect_timeout_s : float
        Seconds to wait for the TCP connection and the SSH handshake.
    server_cgroup : str, optional
        The cgroup v2 folder of the server's service (e.g. ``/sys/fs/cgroup/system.slice/nsd.service``):
        its CPU time and major faults are recorded with every trial as ``proc.*`` counters (docs/counters.md).
    """

    name = "ssh"
    hosts = ("server", "client")
    command_options = ("service_commands",)
    python_only_options = ("connect_socket",)

    def __init__(self, server: str, client: str | None = None, connect_kwargs: Mapping[str, Any] | None = None,
                 known_hosts: str | None = None, service_commands: Mapping[str, Sequence[str]] | None = None,
                 connect_socket: Callable[[str, int], socket.socket] | None = None,
                 connect_timeout_s: float = 10.0, server_cgroup: str | None = None,
                 client_known_hosts: str | None = None) -> None:
        self.validate_options({"server": server, "client": client, "connect_kwargs": connect_kwargs,
                               "server_cgroup": server_cgroup})
        self.server_cgroup = server_cgroup
        self.specs = {"server": parse_spec(server)}
        if client is not None:
            self.specs["client"] = parse_spec(client)
        self.connect_kwargs = dict(connect_kwargs or {})
        self.known_hosts = os.path.expanduser(known_hosts) if known_hosts else None
        client_known = os.path.expanduser(client_known_hosts) if client_known_hosts else None
        for path in (self.known_hosts, client_known):
            if path and not os.path.isfile(path):
                raise TargetError(f"known_hosts file {path!r} does not exist; create it with "
                                  f"`ssh-keyscan -p PORT HOST >> {path}` after checking the fingerprint")
        #: the known_hosts file each host's key is checked against (None: the user's own)
        self.known_hosts_of = {"server": self.known_hosts, "client": client_known or self.known_hosts}
        self._configure_services(service_commands)
        self.connect_socket = connect_socket
        self.connect_timeout_s = connect_timeout_s
        self._connections: dict[str, Connection] = {}
        self._local = LocalTarget() if client is None else None

    @classmethod
    def validate_options(cls, options: dict[str, Any]) -> None:
        """Host specs parse, ``connect_kwargs`` holds only :data:`CONNECT_KWARGS` (no ProxyCommand, no socket)
        and ``server_cgroup`` is a cgroup folder."""
        check_server_cgroup(options.get("server_cgroup"))
        for host in ("server", "client"):
            if options.get(host) is not None:
                try:
                    parse_spec(options[host])
                except TargetError as exc:
                    raise TargetOptionError(str(exc), host) from None
        for key in options.get("connect_kwargs") or {}:
            if key in ("hostname", "port", "username", "sock"):
                raise TargetOptionError(f"connect_kwargs may not set {key!r}; put it in the host spec "
                                        "user@host:port (or pass connect_socket for a custom socket)", "connect_kwargs")
            if key not in CONNECT_KWARGS:
                raise TargetOptionError(f"connect_kwargs: {str(key)[:40]!r} is not allowed; allowed keys: "
                                        f"{', '.join(CONNECT_KWARGS)} (nothing that opens a proxy command, socket, "
                                        "transport or GSS hook)", "connect_kwargs")

    # ---- connections ------------------------------------------------------------------------

    def _spec_text(self, host: str) -> str:
        user, hostname, port = self.specs[host]
        return f"{user + '@' if user else ''}{hostname}:{port}"

    def connection(self, host: str) -> Connection:
        """The open fabric Connection of ``host`` (opened on first use)."""
        self.check_host(host)
        if host in self._connections:
            return self._connections[host]
        user, hostname, port = self.specs[host]
        kwargs = dict(self.connect_kwargs, banner_timeout=self.connect_timeout_s, auth_timeout=self.connect_timeout_s)
        if self.connect_socket is not None:
            try:
                kwargs["sock"] = self.connect_socket(hostname, port)
            except OSError as exc:
                raise TargetError(f"ssh {host} ({self._spec_text(host)}): could not connect: {exc}") from None
        conn = Connection(hostname, user=user, port=port, connect_kwargs=kwargs,
                          connect_timeout=int(self.connect_timeout_s))
        conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            if self.known_hosts_of[host]:
                conn.client.load_host_keys(self.known_hosts_of[host])
            else:
                conn.client.load_system_host_keys()
        except (OSError, paramiko.SSHException) as exc:
            raise TargetError(f"could not read known_hosts {self.known_hosts_of[host] or '~/.ssh/known_hosts'}: "
                              f"{exc}") from None
        known = self.known_hosts_of[host] or "~/.ssh/known_hosts"
        try:
            conn.open()
        except paramiko.BadHostKeyException as exc:
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): the host key CHANGED ({exc}); if the change is "
                              f"expected, remove the old key with `ssh-keygen -R` and add the new one to {known}") from None
        except paramiko.AuthenticationException as exc:
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): authentication failed ({exc}); pass "
                              "connect_kwargs={'key_filename': PATH} or load the key into ssh-agent") from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise TargetError(
                    f"ssh {host} ({self._spec_text(host)}): unknown host key; add it to {known} after checking its "
                    f"fingerprint, e.g. `ssh-keyscan -p {port} {hostname} >> {known}`") from None
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): {exc}") from None
        except OSError as exc:
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): could not connect: {exc}") from None
        self._connections[host] = conn
        return conn

    def up(self) -> None:
        for host in self.specs:
            self.connection(host)

    def down(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def _is_local(self, host: str) -> bool:
        self.check_host(host)
        return host not in self.specs

    # ---- primitives -------------------------------------------------------------------------

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        """Run ``argv`` on ``host``; the remote side is bounded by ``timeout`` too."""
        if self._is_local(host):
            assert self._local is not None
            return self._local.run("client", argv, timeout_s, cpu)
        argv = check_argv(argv)
        if timeout_s is None or timeout_s <= 0:
            raise TargetError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        remote = ["timeout", f"--kill-after={KILL_AFTER_S}", f"{timeout_s:g}", *taskset_argv(argv, cpu)]
        conn = self.connection(host)
        start = time.monotonic()
        try:
            res = conn.run(shlex.join(remote), hide=True, warn=True, in_stream=False,
                           timeout=timeout_s + KILL_AFTER_S + 5)
        except CommandTimedOut as exc:
            return CommandResult(argv, -9, exc.result.stdout, exc.result.stderr, time.monotonic() - start, True)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): `{shlex.join(argv)}` failed: {exc}") from None
        timed_out = res.exited == 124 or res.exited == 137
        return CommandResult(argv, res.exited, res.stdout, res.stderr, time.monotonic() - start, timed_out)

    def _checked(self, host: str, argv: list[str], what: str) -> str:
        result = self.run(host, argv, timeout_s=30)
        if not result.ok:
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): could not {what}: `{shlex.join(argv)}` exited "
                              f"{result.returncode}: {result.stderr.strip()}")
        return result.stdout

    def read_text(self, host: str, path: str) -> str:
        if self._is_local(host):
            assert self._local is not None
            return self._local.read_text("client", path)
        return self._checked(host, ["cat", "--", path], f"read {path}")

    def write_text(self, host: str, path: str, text: str) -> None:
        """Write through SFTP (one open/write/close, like ``echo > file``)."""
        if self._is_local(host):
            assert self._local is not None
            self._local.write_text("client", path, text)
            return
        if not path.startswith(("/proc/", "/sys/", "/dev/")):
            self._checked(host, ["mkdir", "-p", "--", os.path.dirname(path) or "."], f"create the folder of {path}")
        try:
            sftp = self.connection(host).sftp()
            with sftp.open(path, "w") as fh:
                fh.write(text.encode())
        except (OSError, paramiko.SSHException) as exc:
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): could not write {text.strip()!r} to {path}: "
                              f"{exc}") from None

    def is_writable(self, host: str, path: str) -> bool:
        if self._is_local(host):
            return os.access(path, os.W_OK)
        return self.run(host, ["test", "-w", path], timeout_s=30).returncode == 0

    def has_tool(self, host: str, tool: str) -> bool:
        if self._is_local(host):
            assert self._local is not None
            return self._local.has_tool("client", tool)
        return self.run(host, ["sh", "-c", 'command -v "$1"', "sh", tool], timeout_s=30).returncode == 0

    def address(self, host: str) -> str:
        if self._is_local(host):
            return socket.gethostname()
        return self.specs[host][1]

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"target": "ssh", "hosts": {}}
        for host in self.hosts:
            if self._is_local(host):
                assert self._local is not None
                info["hosts"][host] = self._local.describe()
                continue
            out = self.run(host, ["sh", "-c", "uname -r; nproc; grep -m1 'model name' /proc/cpuinfo"], 30).stdout
            lines = out.splitlines() + ["", "", ""]
            info["hosts"][host] = {"address": self._spec_text(host), "kernel": lines[0], "nproc": lines[1],
                                   "cpu_model": lines[2].split(":", 1)[-1].strip()}
        return info

    def counter_sources(self, request: CounterRequest) -> list[CounterSource]:
        """The server's network counters, the load's block device and the ``server_cgroup``'s CPU time, read
        with one remote ``tail`` per snapshot; the client's network counters, remote the same way or this
        machine's."""
        sources: list[CounterSource] = []
        for host in self.hosts:
            files = server_files(request, self.server_cgroup) if host == "server" else NET_FILES
            if self._is_local(host):
                assert self._local is not None
                sources += [FileCounters(host, source.files, source.read_files)
                            for source in self._local.counter_sources(CounterRequest())]
                continue
            sources.append(FileCounters(host, files, tail_reader(functools.partial(self._run_quietly, host),
                                                                 f"ssh {host} ({self._spec_text(host)})")))
        return sources

    def _run_quietly(self, host: str, argv: list[str]) -> tuple[int, str, str]:
        result = self.run(host, argv, timeout_s=10)
        return result.returncode, result.stdout, result.stderr
