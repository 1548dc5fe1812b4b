"""The ``ssh`` target: server (and optionally client) are remote machines reached with fabric.

Host keys are checked: an unknown or changed key is refused (paramiko ``RejectPolicy``) with a
TargetError that says how to trust the host. Commands are argv lists, quoted with
:func:`shlex.join` into the single command line SSH carries, and bounded on the remote side
with ``timeout`` as well as locally. With ``client=None`` the client host is this machine.

Everything goes through SSH's exec channel; SFTP is never used (many sshds offer no ``sftp``
subsystem). A file is written by streaming its text into ``dd of=PATH`` on the remote host
(:func:`dd_argv`): a knob file under ``/proc`` or ``/sys`` gets one ``write()`` of the whole value,
as ``echo VALUE > FILE`` does, so a value the kernel rejects fails with dd's own error line.
(Fabric's ``run(in_stream=...)`` is not used for it: invoke feeds a stream one byte per 10 ms,
pyinvoke/invoke#774.)

With ``sudo=True`` a non-root login runs every server command that may change the server
(writes, ``test -w``, the restart command, any command a knob or load runs there, the cgroup
counters) as ``sudo -n -- ARGV``; the target's own reads (``cat`` of a knob, ``uname``, the
network counters, ``command -v``) run as the login user. ``sudo -n`` never asks for a password:
without a NOPASSWD rule it fails at once, and the error names the sudoers line to add.

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
from tunelab.targets.process import KERNEL_PREFIXES, check_argv, written_text

#: extra seconds the remote ``timeout`` allows before SIGKILL, and the local wait beyond that
KILL_AFTER_S = 2
#: the prefix of a server command that needs root when the login is not root (``sudo=True``)
SUDO = ("sudo", "-n", "--")
#: dd's block size, and the size of each send, when a file (not a kernel knob file) is streamed
CHUNK_BYTES = 1 << 20
#: seconds a remote write may take: a base, plus this per MiB of text (a 64 MiB query file: 158 s)
WRITE_BASE_S, WRITE_S_PER_MIB = 30.0, 2.0
#: stderr of ``sudo -n`` when no rule lets the user run the command without a password
SUDO_REFUSALS = ("a password is required", "a terminal is required", "not in the sudoers", "not allowed to execute",
                 "may not run sudo")
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


def dd_argv(path: str, size: int) -> list[str]:
    """The remote command that writes its stdin to ``path``: a kernel file (``/proc``, ``/sys``) in one
    ``write()`` of all ``size`` bytes (``iflag=fullblock`` gathers them), any other file in 1 MiB blocks.

    >>> dd_argv("/proc/sys/net/core/somaxconn", 5)
    ['dd', 'of=/proc/sys/net/core/somaxconn', 'bs=5', 'iflag=fullblock', 'status=none']
    """
    block = max(1, size) if path.startswith(KERNEL_PREFIXES) else CHUNK_BYTES
    return ["dd", f"of={path}", f"bs={block}", "iflag=fullblock", "status=none"]


def write_timeout_s(size: int) -> float:
    """Seconds a remote write of ``size`` bytes may take (:data:`WRITE_BASE_S` + :data:`WRITE_S_PER_MIB` a MiB)."""
    return WRITE_BASE_S + WRITE_S_PER_MIB * size / (1 << 20)


def stderr_line(stderr: str, limit: int = 300) -> str:
    """A command's stderr as one line (its lines joined by `` / ``), cut to ``limit`` characters."""
    line = " / ".join(part.strip() for part in stderr.splitlines() if part.strip())
    return line if len(line) <= limit else line[:limit] + "..."


def send_all(channel: paramiko.Channel, data: bytes, deadline: float) -> None:
    """Send ``data`` in :data:`CHUNK_BYTES` pieces, then end of file; stop quietly when the remote command stopped
    reading (it exited: its status and stderr say why) or ``deadline`` (``time.monotonic()``) passed."""
    try:
        for offset in range(0, len(data), CHUNK_BYTES):
            channel.settimeout(max(0.1, deadline - time.monotonic()))
            channel.sendall(data[offset:offset + CHUNK_BYTES])
        channel.shutdown_write()
    except (OSError, paramiko.SSHException):          # socket.timeout is an OSError
        return


def received(recv: Callable[[int], bytes], deadline: float) -> str:
    """What ``recv`` (a channel's ``recv`` or ``recv_stderr``) gives until end of file or ``deadline``, as text."""
    chunks = []
    while time.monotonic() < deadline:
        try:
            chunk = recv(65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def write_hint(stderr: str, as_root: bool) -> str:
    """The fix for a failed remote write, from dd's error (empty when there is nothing to add)."""
    if "Invalid argument" in stderr:
        return " (the kernel rejected the value; check the knob's valid range)"
    if "Read-only file system" in stderr:
        return " (the file system is read-only there, e.g. /proc/sys in a container)"
    if "Permission denied" in stderr or "Operation not permitted" in stderr:
        return (" (not permitted even as root there)" if as_root else
                " (the login user may not write it; log in as root, or add `sudo: true` to the change file's "
                "server section with a NOPASSWD sudoers rule: docs/operators.md section 2)")
    return ""


def channel_failure(exc: BaseException, transport: paramiko.Transport | None) -> str:
    """Why an exec channel failed, with its cause: paramiko's bare ``Channel closed.`` says neither."""
    text = str(exc).strip() or type(exc).__name__
    if transport is None or not transport.is_active():
        return f"{text} (the ssh connection is gone: the server or the network closed it; check that sshd runs)"
    if isinstance(exc, paramiko.ChannelException):
        return (f"sshd refused a new session ({text}); check MaxSessions and the server's sshd log "
                "(journalctl -u ssh)")
    if "channel closed" in text.lower():
        return ("sshd closed the session before the command ran (it refused the exec request); check the server's "
                "sshd log (journalctl -u ssh): a ForceCommand, a key restricted by `command=` or `restrict`, or "
                "MaxSessions can cause this")
    return text


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
    sudo : bool
        The server login is not root: every server command that may change the server runs as
        ``sudo -n -- ARGV`` (see the module docstring). The client host never needs root.
    """

    name = "ssh"
    hosts = ("server", "client")
    command_options = ("service_commands",)
    python_only_options = ("connect_socket",)

    def __init__(self, server: str, client: str | None = None, connect_kwargs: Mapping[str, Any] | None = None,
                 known_hosts: str | None = None, service_commands: Mapping[str, Sequence[str]] | None = None,
                 connect_socket: Callable[[str, int], socket.socket] | None = None,
                 connect_timeout_s: float = 10.0, server_cgroup: str | None = None,
                 client_known_hosts: str | None = None, sudo: bool = False) -> None:
        self.validate_options({"server": server, "client": client, "connect_kwargs": connect_kwargs,
                               "server_cgroup": server_cgroup})
        self.server_cgroup = server_cgroup
        self.sudo = bool(sudo)
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

    def check_access(self, tools: Mapping[str, Sequence[str]] | None = None) -> None:
        """What a validation needs of its ssh hosts, checked before anything is applied (``--plan`` too): each
        logs in (host key checked) and runs a command through the exec channel, the server can write as root
        (a root login, or ``sudo -n true``), and each host in ``tools`` (host -> programs) has them. The first
        failure is one TargetError line naming the host and what to do."""
        for host in self.specs:
            where = f"ssh {host} ({self._spec_text(host)})"
            result = self._exec(host, ["id", "-u"], timeout_s=15)
            if not result.ok:
                raise TargetError(f"{where}: logged in, but could not run `id -u` through the exec channel (exit "
                                  f"{result.returncode}: {stderr_line(result.stderr, 160)}); sshd must let this user "
                                  "run commands (no ForceCommand or `command=` restriction on the key)")
            if host == "server":
                self._check_root(where, result.stdout.strip())
        for host, names in (tools or {}).items():
            for tool in names:
                if not self.has_tool(host, tool):
                    place = f"ssh {host} ({self._spec_text(host)})" if host in self.specs else "this machine"
                    raise TargetError(f"{place}: {tool} is not installed (or not on the login user's PATH); "
                                      f"install it there, e.g. apt-get install {tool}")

    def _check_root(self, where: str, uid: str) -> None:
        """The server can write knobs: the login is root, or ``sudo -n true`` runs (else one line with the fix)."""
        user = self.connection("server").user
        if uid == "0":
            return
        if not self.sudo:
            raise TargetError(f"{where}: logs in as {user} (uid {uid}), not root, and knob writes need root; log in "
                              f"as root, or add `sudo: true` to the change file's server section (target option "
                              f"sudo=true) with a sudoers rule such as `{user} ALL=(root) NOPASSWD: ALL`")
        result = self._exec("server", ["true"], timeout_s=15, root=True)     # _check_sudo names a refusal's fix
        if not result.ok:
            raise TargetError(f"{where}: `sudo -n true` failed (exit {result.returncode}: "
                              f"{stderr_line(result.stderr, 160)}); check sudo on the server")

    def _is_local(self, host: str) -> bool:
        self.check_host(host)
        return host not in self.specs

    # ---- primitives -------------------------------------------------------------------------

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        """Run ``argv`` on ``host``; the remote side is bounded by ``timeout`` too. On the server with
        ``sudo=True`` it runs as root (``sudo -n -- ARGV``)."""
        if self._is_local(host):
            assert self._local is not None
            return self._local.run("client", argv, timeout_s, cpu)
        return self._exec(host, check_argv(argv), timeout_s, cpu, root=True)

    def as_root(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` as it runs when it needs root: ``sudo -n -- ARGV`` on the server with ``sudo=True``."""
        return [*SUDO, *argv] if self.sudo and host == "server" else list(argv)

    def _remote_argv(self, argv: Sequence[str], timeout_s: float, cpu: int | None, root: bool, host: str) -> list[str]:
        """``timeout ... [taskset ...] [sudo -n --] ARGV``: sudo innermost, so a sudoers rule names the program."""
        if timeout_s is None or timeout_s <= 0:
            raise TargetError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        inner = self.as_root(host, argv) if root else list(argv)
        return ["timeout", f"--kill-after={KILL_AFTER_S}", f"{timeout_s:g}", *taskset_argv(inner, cpu)]

    def _exec(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None,
              root: bool = False) -> CommandResult:
        """Run ``argv`` on the remote ``host`` through the exec channel (``root``: :meth:`as_root`)."""
        remote = self._remote_argv(argv, timeout_s, cpu, root, host)
        conn = self.connection(host)
        start = time.monotonic()
        try:
            res = conn.run(shlex.join(remote), hide=True, warn=True, in_stream=False,
                           timeout=timeout_s + KILL_AFTER_S + 5)
        except CommandTimedOut as exc:
            return CommandResult(tuple(argv), -9, exc.result.stdout, exc.result.stderr, time.monotonic() - start, True)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): `{shlex.join(argv)}` failed: "
                              f"{channel_failure(exc, conn.transport)}") from None
        timed_out = res.exited == 124 or res.exited == 137
        result = CommandResult(tuple(argv), res.exited, res.stdout, res.stderr, time.monotonic() - start, timed_out)
        self._check_sudo(host, argv, result, root)
        return result

    def _check_sudo(self, host: str, argv: Sequence[str], result: CommandResult, root: bool) -> None:
        """A TargetError naming the fix when ``sudo -n`` refused to run ``argv`` (or is missing)."""
        if not root or not self.sudo or host != "server" or result.ok:
            return
        user = self.connection(host).user
        where = f"ssh {host} ({self._spec_text(host)})"
        if result.returncode == 127 and "sudo" in result.stderr:
            raise TargetError(f"{where}: sudo is not installed on the server; install it (apt-get install sudo) "
                              f"or log in as root (ssh: root@...) and drop `sudo: true`")
        if result.returncode == 1 and result.stderr.lstrip().startswith("sudo:") and any(
                refusal in result.stderr for refusal in SUDO_REFUSALS):
            raise TargetError(f"{where}: `sudo -n` may not run `{shlex.join(argv)[:120]}` as root without a password "
                              f"({stderr_line(result.stderr, 160)}); add a sudoers rule on the server, e.g. "
                              f"`{user} ALL=(root) NOPASSWD: ALL` in /etc/sudoers.d/tunelab (visudo -f), or one that "
                              "lists only the programs `tunelab validate CHANGE.yaml --plan` shows after `sudo -n --`")

    def _stream(self, host: str, argv: Sequence[str], data: bytes, timeout_s: float, root: bool) -> CommandResult:
        """Run ``argv`` on the remote ``host`` with ``data`` on its stdin, streamed in :data:`CHUNK_BYTES` sends
        through a paramiko exec channel, then end of file; bounded by ``timeout_s`` on both sides."""
        remote = self._remote_argv(argv, timeout_s, None, root, host)
        transport = self.connection(host).transport
        start = time.monotonic()
        deadline = start + timeout_s + KILL_AFTER_S + 5
        channel = None
        try:
            channel = transport.open_session(timeout=self.connect_timeout_s)
            channel.settimeout(timeout_s + KILL_AFTER_S + 5)
            channel.exec_command(shlex.join(remote))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if channel is not None:
                channel.close()
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): `{shlex.join(argv)}` failed: "
                              f"{channel_failure(exc, transport)}") from None
        with channel:
            send_all(channel, data, deadline)
            if not channel.status_event.wait(max(0.0, deadline - time.monotonic())):
                return CommandResult(tuple(argv), -9, "", "", time.monotonic() - start, True)
            status = channel.recv_exit_status()
            channel.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
            stdout, stderr = received(channel.recv, deadline), received(channel.recv_stderr, deadline)
        result = CommandResult(tuple(argv), status, stdout, stderr, time.monotonic() - start, status in (124, 137))
        self._check_sudo(host, argv, result, root)
        return result

    def _checked(self, host: str, argv: list[str], what: str, root: bool = False) -> str:
        result = self._exec(host, argv, timeout_s=30, root=root)
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
        """Stream ``text`` into ``dd of=PATH`` through the exec channel (:func:`dd_argv`: a knob file in one
        open/write/close, like ``echo > file``); as root on the server with ``sudo=True``. A failure names
        the path and the byte count (and a short knob value), never a file's text."""
        if self._is_local(host):
            assert self._local is not None
            self._local.write_text("client", path, text)
            return
        if not path.startswith(KERNEL_PREFIXES):
            self._checked(host, ["mkdir", "-p", "--", os.path.dirname(path) or "."], f"create the folder of {path}",
                          root=True)
        data = text.encode()
        result = self._stream(host, dd_argv(path, len(data)), data, write_timeout_s(len(data)), root=True)
        if not result.ok:
            why = ("timed out" if result.timed_out else f"dd exited {result.returncode}: "
                   f"{stderr_line(result.stderr) or 'no error message'}")
            raise TargetError(f"ssh {host} ({self._spec_text(host)}): could not write {written_text(path, text)} to "
                              f"{path}: {why}{write_hint(result.stderr, self.sudo and host == 'server')}")

    def is_writable(self, host: str, path: str) -> bool:
        if self._is_local(host):
            return os.access(path, os.W_OK)
        return self._exec(host, ["test", "-w", path], timeout_s=30, root=True).returncode == 0

    def has_tool(self, host: str, tool: str) -> bool:
        if self._is_local(host):
            assert self._local is not None
            return self._local.has_tool("client", tool)
        return self._exec(host, ["sh", "-c", 'command -v "$1"', "sh", tool], timeout_s=30).returncode == 0

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
            out = self._exec(host, ["sh", "-c", "uname -r; nproc; grep -m1 'model name' /proc/cpuinfo"], 30).stdout
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
        """A counter snapshot's ``tail``: as root on the server only when it reads the service's cgroup."""
        result = self._exec(host, argv, timeout_s=10, root=host == "server" and self.server_cgroup is not None)
        return result.returncode, result.stdout, result.stderr
