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
import ipaddress
import os
import re
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


#: a DNS host name's label (RFC 1123): letters, digits and '-' inside, at most 63 characters
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
#: a user name ssh may log in as (POSIX-ish): no leading '-', no shell or ssh metacharacter
_USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
#: an IPv6 zone (``fe80::1%eth0``): an interface name
_IPV6_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,15}")
#: how a valid spec is written, for every error
_SPEC_FORMS = "write it as host, user@host, user@host:port or user@[IPv6]:port, e.g. root@192.0.2.10:22"


def parse_spec(spec: str) -> tuple[str | None, str, int]:
    """``"[user@]host[:port]"`` -> (user, host, port): the one check of an ssh host, wherever one is written.

    The host is a DNS host name (RFC 1123 labels) or an IP address; an IPv6 address with a port is written
    in brackets (and returned without them). The user starts with a letter or '_' and holds letters,
    digits, '_', '.' and '-' only; the port is 1-65535. Anything else (``-oProxyCommand=...``, ``$(...)``,
    blanks, an empty user) is one TargetError line quoting at most 60 characters of ``spec``.

    >>> parse_spec("root@10.0.0.1:2222")
    ('root', '10.0.0.1', 2222)
    >>> parse_spec("db1")
    (None, 'db1', 22)
    >>> parse_spec("tester@[2001:db8::1]:2200"), parse_spec("[::1]"), parse_spec("fe80::1%eth0")
    (('tester', '2001:db8::1', 2200), (None, '::1', 22), (None, 'fe80::1%eth0', 22))
    >>> parse_spec("root@$(touch${IFS}X):22")
    Traceback (most recent call last):
    ...
    tunelab.errors.TargetError: ssh host 'root@$(touch${IFS}X):22' is invalid: the host '$(touch${IFS}X)' is \
neither a DNS host name (letters, digits and '-' between dots) nor an IP address; write it as host, user@host, \
user@host:port or user@[IPv6]:port, e.g. root@192.0.2.10:22
    >>> parse_spec("[2001:db8::1]:99999")
    Traceback (most recent call last):
    ...
    tunelab.errors.TargetError: ssh host '[2001:db8::1]:99999' is invalid: the port '99999' is not a number from \
1 to 65535; write it as host, user@host, user@host:port or user@[IPv6]:port, e.g. root@192.0.2.10:22
    """
    if not isinstance(spec, str):
        raise TargetError(f"ssh host {_short(str(spec))} is not a string; {_SPEC_FORMS}")
    user, at, hostport = spec.rpartition("@")
    host, port = _split_port(hostport)
    problem = (_user_problem(user) if at else None) or _host_problem(host, hostport.startswith("[")) or \
        _port_problem(port)
    if problem is not None:
        raise TargetError(f"ssh host {_short(spec)} is invalid: {problem}; {_SPEC_FORMS}")
    return (user or None), host, int(port)


def _short(text: str, limit: int = 60) -> str:
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _split_port(hostport: str) -> tuple[str, str]:
    """``host:port``, ``[ipv6]:port``, ``[ipv6]``, a bare IPv6 address or ``host`` -> (host, port text)."""
    if hostport.startswith("["):
        address, closed, rest = hostport[1:].partition("]")
        if closed and rest.startswith(":"):
            return address, rest[1:]
        return (address, "22") if closed and not rest else (hostport, "22")
    if hostport.count(":") == 1:
        host, port = hostport.split(":")
        return host, port
    return hostport, "22"


def _user_problem(user: str) -> str | None:
    if _USER_NAME.fullmatch(user):
        return None
    what = "is empty" if not user else f"{_short(user, 32)} is not a user name"
    return f"the user {what} (a letter or '_' first, then letters, digits, '_', '.', '-'; at most 32)"


def _host_problem(host: str, bracketed: bool) -> str | None:
    """None when ``host`` is an IP address or an RFC 1123 host name (a numeric last label must be IPv4); in
    brackets only an IPv6 address."""
    address, _, zone = host.partition("%")
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        parsed = None
    if bracketed and (parsed is None or parsed.version != 6):
        return f"only an IPv6 address is written in brackets, not {_short(host)}"
    if parsed is not None and (not zone or (parsed.version == 6 and _IPV6_ZONE.fullmatch(zone))):
        return None
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    if parsed is None and len(host) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels) \
            and not labels[-1].isdigit():
        return None
    return (f"the host {_short(host)} is neither a DNS host name (letters, digits and '-' between dots) nor an "
            "IP address")


def _port_problem(port: str) -> str | None:
    if re.fullmatch(r"[0-9]{1,5}", port) and 0 < int(port) < 65536:
        return None
    return f"the port {_short(port, 10)} is not a number from 1 to 65535"


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
