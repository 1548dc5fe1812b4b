"""The ``local`` target: this machine is both server and client (address 127.0.0.1).

Reads and writes go straight to the file system (``/proc/sys``, ``/sys``); commands run as
child processes. Which knobs may be changed here is the runner's policy, not this module's.

Services are the host's own: ``service_commands`` maps a service name to the argv that
(re)starts it, e.g. ``{"dns": ["systemctl", "restart", "nsd"]}``.
"""
from __future__ import annotations

import errno
import os
from typing import Any, Mapping, Sequence

from tunelab.counters import (NET_FILES, CounterFile, CounterRequest, CounterSource, FileCounters, block_file,
                              cgroup_files, read_local_files)
from tunelab.errors import TargetError
from tunelab.targets.base import TARGETS, CommandResult, Target, TargetOptionError
from tunelab.targets.hostinfo import ForeignCpuMeter, describe_local
from tunelab.targets.process import check_argv, run_argv, written_text


def taskset_argv(argv: Sequence[str], cpu: int | None) -> list[str]:
    """Prefix ``argv`` with ``taskset --cpu-list CPU`` when ``cpu`` is given."""
    if cpu is None:
        return list(argv)
    if not isinstance(cpu, int) or cpu < 0:
        raise TargetError(f"cpu must be a non-negative CPU number, got {cpu!r}")
    return ["taskset", "--cpu-list", str(cpu), *argv]


class ServiceCommandsMixin:
    """start/restart a named service by running a configured argv on the server host."""

    service_commands: dict[str, list[str]]
    service_timeout_s: float = 60.0

    def _configure_services(self, service_commands: Mapping[str, Sequence[str]] | None) -> None:
        self.service_commands = {}
        for name, argv in (service_commands or {}).items():
            self.service_commands[name] = list(check_argv(argv))

    def start_service(self, name: str) -> None:
        """Run the configured command for ``name``; without one, the service is assumed to be running."""
        if name in self.service_commands:
            self._run_service(name)

    def restart_service(self, name: str) -> None:
        if name not in self.service_commands:
            raise TargetError(f"target {self.name!r} cannot restart service {name!r}: no command configured; pass "
                              f"service_commands={{{name!r}: ['systemctl', 'restart', 'UNIT']}} in the target options")
        self._run_service(name)

    def _run_service(self, name: str) -> None:
        result = self.run("server", self.service_commands[name], timeout_s=self.service_timeout_s)  # type: ignore[attr-defined]
        if not result.ok:
            raise TargetError(f"service {name!r}: `{' '.join(result.argv)}` failed (exit {result.returncode}"
                              f"{', timed out' if result.timed_out else ''}): {result.stderr.strip()}")


def check_server_cgroup(cgroup: Any) -> None:
    """TargetOptionError unless ``cgroup`` is None or a cgroup folder under /sys/fs/cgroup."""
    if cgroup is not None:
        try:
            cgroup_files(cgroup)
        except TargetError as exc:
            raise TargetOptionError(str(exc), "server_cgroup") from None


def server_files(request: CounterRequest, cgroup: str | None) -> tuple[CounterFile, ...]:
    """The counter files of a server host: its network counters, the load's block device, the service's cgroup."""
    return (NET_FILES + ((block_file(request.device),) if request.device is not None else ())
            + (cgroup_files(cgroup) if cgroup is not None else ()))


def read_file(path: str) -> str:
    """The text of ``path`` (OSError as raised); the lab calls it from a thread inside a namespace."""
    with open(path) as fh:
        return fh.read()


def write_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` in one write, creating the folder of a file outside /proc, /sys, /dev."""
    if not path.startswith(("/proc/", "/sys/", "/dev/")):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def read_local_text(target: str, host: str, path: str) -> str:
    """Read a file of this machine for ``target`` (``'local'``, ``'dry-run'``); errors name the target."""
    try:
        return read_file(path)
    except OSError as exc:
        raise local_os_error(target, "read", host, path, exc) from None


def local_os_error(target: str, action: str, host: str, path: str, exc: OSError) -> TargetError:
    """A TargetError naming the target, host, action and path, with the fix for common errnos."""
    hint = {errno.EINVAL: " (the kernel rejected the value; check the knob's valid range)",
            errno.ENOENT: " (no such file on this kernel)",
            errno.EACCES: " (permission denied; run as root)",
            errno.EPERM: " (not permitted; run as root)"}.get(exc.errno or 0, "")
    return TargetError(f"{target} {host}: could not {action} {path}: {exc.strerror}{hint}")


@TARGETS.register("local")
class LocalTarget(ServiceCommandsMixin, Target):
    """This machine as both hosts.

    Parameters
    ----------
    service_commands : mapping, optional
        Service name -> argv that (re)starts it on this machine.
    server_cpu, client_cpu : int, optional
        Default CPU to pin commands of each host to (``None``: no pinning).
    server_cgroup : str, optional
        The cgroup v2 folder the server's service runs in (e.g. ``/sys/fs/cgroup/system.slice/nsd.service``):
        its CPU time and major faults are recorded with every trial as ``proc.*`` counters (docs/counters.md).
    """

    name = "local"
    hosts = ("server", "client")
    command_options = ("service_commands",)

    def __init__(self, service_commands: Mapping[str, Sequence[str]] | None = None,
                 server_cpu: int | None = None, client_cpu: int | None = None,
                 server_cgroup: str | None = None) -> None:
        self.validate_options({"server_cgroup": server_cgroup})
        self.server_cgroup = server_cgroup
        self._configure_services(service_commands)
        self.cpus = {"server": server_cpu, "client": client_cpu}
        self._meter = ForeignCpuMeter()

    def read_text(self, host: str, path: str) -> str:
        self.check_host(host)
        return read_local_text("local", host, path)

    def write_text(self, host: str, path: str, text: str) -> None:
        self.check_host(host)
        try:
            write_file(path, text)
        except OSError as exc:
            raise local_os_error("local", f"write {written_text(path, text)} to", host, path, exc) from None

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        self.check_host(host)
        argv = check_argv(argv)
        cpu = self.cpus[host] if cpu is None else cpu
        return run_argv(taskset_argv(argv, cpu), timeout_s, shown_argv=argv)

    def address(self, host: str) -> str:
        self.check_host(host)
        return "127.0.0.1"

    def is_writable(self, host: str, path: str) -> bool:
        self.check_host(host)
        return os.access(path, os.W_OK)

    def describe(self) -> dict[str, Any]:
        return {"target": "local", **describe_local()}

    def foreign_cpu_s(self) -> float:
        return self._meter()

    @classmethod
    def validate_options(cls, options: dict[str, Any]) -> None:
        """``server_cgroup`` is a cgroup folder under /sys/fs/cgroup (:func:`tunelab.counters.cgroup_files`)."""
        check_server_cgroup(options.get("server_cgroup"))

    def counter_sources(self, request: CounterRequest) -> list[CounterSource]:
        """This machine's network counters, the load's block device and the ``server_cgroup``'s CPU time, at
        the server (one host: no ``client.`` copy)."""
        return [FileCounters("server", server_files(request, self.server_cgroup), read_local_files)]
