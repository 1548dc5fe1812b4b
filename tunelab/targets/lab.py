"""The ``lab`` target: a server and a client in their own network namespaces on this machine.

Layout (``name`` is 6 hex digits unless given)::

    tl-NAME-srv  tl0 10.77.0.1/24  <-- veth -->  tl0 10.77.0.2/24  tl-NAME-cli

With ``bottleneck_mbit`` a router namespace sits in between and shapes both directions with
``tbf`` (the server is 10.77.0.1/25, the client 10.77.0.129/25)::

    tl-NAME-srv tl0 <--> tl-srv [tl-NAME-rtr, tbf] tl-cli <--> tl0 tl-NAME-cli

The server namespace runs a DNS server on port 53 (service ``dns``: ``dns_server`` names one of
:data:`tunelab.targets.dns_servers.DNS_SERVERS`, default NSD) serving the zone of
:mod:`tunelab.targets.dnszone` or an operator's zone file (``zone_file`` with ``zone``), and an
``iperf3 -s``; on demand also nginx (service ``http``: fixed files on port 80 for ``wrk``). A
sparse file on a loop device serves disk loads (``"@disk"``): created by ``up()`` with
``disk_mb=N``, or on the first ``resolve_device("@disk")`` with the default ``disk_mb="auto"``.
``delay_ms``/``loss_pct`` add ``netem`` on the client's link (client -> server) where the kernel
has it (:func:`netem_available`).
Per-namespace sysctls (``net.ipv4.*``, ``net.core.somaxconn``) are read and written through a
thread that has entered the namespace, so the host's values are never touched.

The lab's state lives in ``/run/tunelab/labs/NAME.json`` so ``tunelab lab status|down`` work
from another process and labs left by a crashed run can be found and removed.

Examples
--------
>>> from tunelab.targets import get_target
>>> with get_target("lab")(bottleneck_mbit=200) as lab:          # doctest: +SKIP
...     lab.write_text("server", "/proc/sys/net/core/somaxconn", "128")
...     lab.restart_service("dns")
...     lab.run("client", ["ping", "-c1", lab.address("server")], timeout_s=5).ok
True
"""
from __future__ import annotations

import atexit
import errno
import functools
import json
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import psutil

from tunelab.counters import NET_FILES, CounterRequest, CounterSource, FileCounters, ProcessCounters, block_file
from tunelab.counters import read_local_files
from tunelab.errors import TargetError, ToolMissingError
from tunelab.paths import DISK_DIR, RUN_DIR, is_inside, private_dir
from tunelab.registry import Registry
from tunelab.signals import teardown_on_sigterm
from tunelab.targets import dns_servers, netns
from tunelab.targets import services as svc
from tunelab.targets.base import TARGETS, CommandResult, Target, TargetOptionError
from tunelab.targets.hostinfo import ForeignCpuMeter, describe_local, parse_version
from tunelab.targets.local import read_file, write_file
from tunelab.targets.process import check_argv, process_alive, run_argv, written_text

STATE_DIR = RUN_DIR / "labs"
NS_PREFIX = "tl-"
ROLES = {"server": "srv", "client": "cli", "router": "rtr"}
LINK = "tl0"
#: largest lab disk (a sparse file, but fio may fill it): 64 GiB
MAX_DISK_MB = 65536
#: size of the disk ``disk_mb="auto"`` creates on the first ``resolve_device("@disk")``
AUTO_DISK_MB = 256
#: most one-way delay ``delay_ms`` may add (netem)
MAX_DELAY_MS = 10_000
#: why ``delay_ms``/``loss_pct`` cannot be used when :func:`netem_available` is false
NETEM_MISSING = ("this kernel has no netem (sch_netem): delay_ms/loss_pct cannot be emulated here; "
                 "run on a kernel with CONFIG_NET_SCH_NETEM (`modprobe sch_netem`) or drop delay_ms/loss_pct")
#: the Debian package of each tool the lab runs
TOOL_PACKAGES = {"ip": "iproute2", "tc": "iproute2", "losetup": "util-linux", "taskset": "util-linux",
                 "iperf3": "iperf3", "nginx": "nginx", **dns_servers.tool_packages()}
#: most A records in the lab's DNS zone
MAX_RECORDS = 1_000_000
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,23}$")
_NS_RE = re.compile(r"^tl-(?P<name>[a-z0-9][a-z0-9-]*)-(?:srv|cli|rtr)$")


# --------------------------------------------------------------------------------------------
# state: a JSON file per lab


@dataclass
class LabState:
    """Everything needed to find and remove a lab from any process."""

    name: str
    namespaces: dict[str, str]
    addresses: dict[str, str]
    workdir: str
    owner_pid: int
    owner_start: float
    detached: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    services: dict[str, int] = field(default_factory=dict)
    disk_file: str | None = None
    disk_device: str | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def path(self) -> Path:
        return state_path(self.name)

    def save(self, exclusive: bool = False) -> None:
        private_dir(RUN_DIR)
        private_dir(STATE_DIR)
        text = json.dumps(asdict(self), indent=2, sort_keys=True)
        if exclusive:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                raise TargetError(f"a lab named {self.name!r} already exists ({self.path}); pick another name or "
                                  f"remove it with `tunelab lab down --name {self.name}`") from None
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            return
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(text)
        os.replace(tmp, self.path)

    def owner_alive(self) -> bool:
        return process_alive(self.owner_pid, self.owner_start)

    def is_orphan(self) -> bool:
        """A lab whose creating process died without removing it (detached labs are never orphans)."""
        return not self.detached and not self.owner_alive()


def check_lab_name(name: Any) -> str:
    """Return ``name`` if it is a valid lab name (``[a-z0-9][a-z0-9-]{0,23}``), else raise TargetError.

    Every verb checks a lab name before using it in a path, so ``--name ../../..`` never leaves
    the lab state directory.
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise TargetError(f"lab name {name!r} is invalid; use 1-24 characters of a-z, 0-9 and '-', "
                          "starting with a letter or digit (`tunelab lab status` lists the labs)")
    return name


def state_path(name: str) -> Path:
    return STATE_DIR / f"{check_lab_name(name)}.json"


def state_problems(state: LabState) -> list[str]:
    """Why a state file must not be acted on: it names things that are not this lab's own.

    A lab only ever owns ``tl-NAME-{srv,cli,rtr}`` namespaces, the work directory
    ``STATE_DIR/NAME``, the backing file ``DISK_DIR/NAME.img`` and a ``/dev/loopN`` device, so a
    state file naming anything else (edited, or planted) is refused instead of followed.
    """
    name = state.name
    problems = []
    for role, ns in state.namespaces.items():
        if role not in ROLES or ns != f"{NS_PREFIX}{name}-{ROLES[role]}":
            problems.append(f"namespace {ns!r} for role {role!r} is not this lab's")
    if Path(state.workdir) != STATE_DIR / name:
        problems.append(f"work directory {state.workdir!r} is not {STATE_DIR / name}")
    if state.disk_file is not None and (Path(state.disk_file) != DISK_DIR / f"{name}.img"
                                        or not is_inside(state.disk_file, DISK_DIR)):
        problems.append(f"disk file {state.disk_file!r} is not {DISK_DIR / (name + '.img')}")
    if state.disk_device is not None and not re.fullmatch(r"/dev/loop[0-9]+", state.disk_device):
        problems.append(f"disk device {state.disk_device!r} is not a loop device")
    return problems


def load_state(name: str) -> LabState:
    path = state_path(name)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        known = ", ".join(s.name for s in list_states()) or "(none)"
        raise TargetError(f"no lab named {name!r} ({path} does not exist); known labs: {known}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TargetError(f"lab state file {path} is corrupt ({exc}); remove it and run `tunelab lab down --all`")
    state = _state_from(data)
    if state is None or state.name != name:
        raise TargetError(f"lab state file {path} does not describe lab {name!r}; remove it by hand")
    return state


def _state_from(data: Any) -> LabState | None:
    """A LabState from a state file's JSON, or None when it has the wrong shape or a bad name."""
    try:
        state = LabState(**data)
        check_lab_name(state.name)
    except (TypeError, TargetError):
        return None
    return state


def list_states() -> list[LabState]:
    """Every lab with a state file, oldest first."""
    states = []
    for path in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.exists() else []:
        try:
            state = _state_from(json.loads(path.read_text()))
        except (json.JSONDecodeError, UnicodeDecodeError, FileNotFoundError):
            continue
        if state is not None and path.stem == state.name:
            states.append(state)
    return sorted(states, key=lambda s: s.created_at)


def orphan_namespaces(min_age_s: float = 30.0) -> list[str]:
    """``tl-NAME-{srv,cli,rtr}`` namespaces that no lab state file claims, older than ``min_age_s``.

    The age guard protects a lab being created right now by another process.
    """
    claimed = {ns for s in list_states() for ns in s.namespaces.values()}
    orphans = []
    for ns in netns.list_namespaces(NS_PREFIX):
        if ns in claimed or not _NS_RE.match(ns):
            continue
        try:
            age = time.time() - os.stat(os.path.join(netns.NETNS_RUN_DIR, ns)).st_mtime
        except FileNotFoundError:
            continue
        if age >= min_age_s:
            orphans.append(ns)
    return orphans


def _loop_backing_file(device: str) -> str | None:
    try:
        return Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip()
    except OSError:
        return None


def detach_disk(device: str | None, backing_file: str | None) -> None:
    """Detach our loop device (only if it still maps our file) and delete the backing file."""
    if device and backing_file and _loop_backing_file(device) == backing_file:
        proc = subprocess.run(["losetup", "--detach", device], capture_output=True, text=True, check=False)
        if proc.returncode != 0 and _loop_backing_file(device) == backing_file:
            raise TargetError(f"could not detach loop device {device}: {proc.stderr.strip()}")
    if backing_file:
        Path(backing_file).unlink(missing_ok=True)


def destroy(state: LabState) -> list[str]:
    """Remove a lab completely: its processes, namespaces, loop device, files. Returns problems.

    A state file that names anything but the lab's own namespaces, directory and disk is refused
    (nothing is removed), so an edited or planted state file cannot make root delete other files.
    """
    refused = state_problems(state)
    if refused:
        return [f"lab state {state.path} refused, nothing removed: " + "; ".join(refused)]
    problems: list[str] = []
    netns.kill_pids([pid for pid in state.services.values() if pid_in_lab(pid, state)])
    for ns in state.namespaces.values():
        try:
            netns.delete_namespace(ns)
        except TargetError as exc:
            problems.append(str(exc))
    try:
        detach_disk(state.disk_device, state.disk_file)
    except TargetError as exc:
        problems.append(str(exc))
    shutil.rmtree(state.workdir, ignore_errors=True)
    state.path.unlink(missing_ok=True)
    return problems


def pid_in_lab(pid: int, state: LabState) -> bool:
    """Whether ``pid`` still lives in one of the lab's namespaces (guards against PID reuse)."""
    try:
        link = os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return False
    for ns in state.namespaces.values():
        try:
            st = os.stat(os.path.join(netns.NETNS_RUN_DIR, ns))
        except FileNotFoundError:
            continue
        if link == f"net:[{st.st_ino}]":
            return True
    return False


# --------------------------------------------------------------------------------------------
# services


@dataclass(frozen=True)
class LabService:
    """A long-running server in the server namespace and how to tell it answers.

    ``tool`` is the program it runs, or a function of the lab (the ``dns`` service runs the lab's
    chosen DNS server).
    """

    tool: str | Callable[["LabTarget"], str]
    argv: Callable[["LabTarget"], list[str]]
    ready: Callable[["LabTarget"], bool]
    timeout_s: float = 5.0

    def tool_of(self, lab: "LabTarget") -> str:
        """The program this service runs in ``lab``."""
        return self.tool if isinstance(self.tool, str) else self.tool(lab)


def missing_tools_message(tools: Sequence[str]) -> str:
    """One line naming missing tools and the Debian packages that provide them.

    >>> missing_tools_message(["nginx", "tc"])[:62]
    'the lab needs nginx, tc; install the Debian packages nginx, ip'
    """
    packages = list(dict.fromkeys(TOOL_PACKAGES.get(tool, tool) for tool in tools))
    return (f"the lab needs {', '.join(tools)}; install the Debian packages {', '.join(packages)} "
            f"(apt-get install {' '.join(packages)}, or ./quickstart.sh as root)")


#: the services a lab can run; ``LAB_SERVICES.get(name)`` raises TargetError listing the known ones
LAB_SERVICES: Registry[LabService] = Registry("lab service", error=TargetError)


def _dns_argv(lab: "LabTarget") -> list[str]:
    conf = dns_servers.write_server_files(lab.dns_server, lab.workdir / "dns", lab.address("server"), lab.zone,
                                          lab.workdir / "dns.log", records=lab.records)
    return lab.dns_server.argv(conf)


def _dns_ready(lab: "LabTarget") -> bool:
    # the zone's SOA answered NOERROR: the server is up AND has loaded the zone. Short per-probe
    # timeout: a query sent before the socket exists is refused or lost, and waiting long for it
    # delays readiness (0.2 s timeout -> ~210 ms start, 0.02 s -> ~45 ms)
    return lab.in_namespace("client", svc.zone_answers, lab.address("server"), lab.zone.origin, svc.DNS_PORT, 0.02)


def _nginx_argv(lab: "LabTarget") -> list[str]:
    workdir = lab.workdir / "http"
    conf = svc.write_http_files(workdir, lab.address("server"))
    return ["nginx", "-p", str(workdir), "-e", str(workdir / "error.log"), "-c", str(conf), "-g", "daemon off;"]


def _nginx_ready(lab: "LabTarget") -> bool:
    return lab.in_namespace("client", svc.http_status, lab.address("server"), svc.HTTP_PORT, "/", 0.05) == 200


LAB_SERVICES.add("dns", LabService(lambda lab: lab.dns_server.tool, _dns_argv, _dns_ready,
                                   timeout_s=dns_servers.START_TIMEOUT_S))
LAB_SERVICES.add("http", LabService("nginx", _nginx_argv, _nginx_ready))
LAB_SERVICES.add("iperf3", LabService(
    "iperf3",
    lambda lab: ["iperf3", "--server", "--bind", lab.address("server"), "--port", str(svc.IPERF3_PORT)],
    lambda lab: lab.in_namespace("server", svc.tcp_listening, svc.IPERF3_PORT),
))


# --------------------------------------------------------------------------------------------
# cleanup on exit and SIGTERM

_LIVE: "weakref.WeakSet[LabTarget]" = weakref.WeakSet()
_HOOKS_INSTALLED = False


def _teardown_live() -> None:
    for lab in list(_LIVE):
        try:
            lab.down()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _install_hooks() -> None:
    """atexit always; on SIGTERM (when nothing else handles it) the live labs are torn down first
    (:func:`tunelab.signals.teardown_on_sigterm`, the one owner of SIGTERM).

    SIGINT needs no handler: it raises KeyboardInterrupt, which runs ``__exit__`` and atexit.
    """
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    atexit.register(_teardown_live)
    teardown_on_sigterm(_teardown_live)
    _HOOKS_INSTALLED = True


# --------------------------------------------------------------------------------------------
# CPU pinning: the server's services and the client's load on disjoint CPUs

#: what ``pin_cpus`` may be
PIN_CHOICES = ("auto", True, False)


def cpu_list_text(cpus: Sequence[int]) -> str:
    """A ``taskset --cpu-list`` text of ``cpus``, runs as ranges.

    >>> cpu_list_text([0, 1, 2, 5, 7, 8])
    '0-2,5,7-8'
    """
    parts: list[str] = []
    ordered = sorted(set(cpus))
    start = prev = None
    for cpu in ordered + [None]:
        if cpu is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(parts)


def check_pin_cpus(pin_cpus: Any) -> None:
    """TargetError unless ``pin_cpus`` is ``auto``, true or false."""
    if not any(pin_cpus is choice or (isinstance(choice, str) and pin_cpus == choice) for choice in PIN_CHOICES):
        raise TargetError(f"pin_cpus must be auto, true or false, got {pin_cpus!r} (auto pins the server and the "
                          "load to separate CPUs when at least 2 are available)")


def plan_pinning(pin_cpus: Any, available: Sequence[int], server_cpu: int | None = None,
                 client_cpu: int | None = None) -> tuple[dict[str, str | None], str]:
    """Which CPUs the server's services and the client's commands run on, and why.

    ``pin_cpus``: ``auto`` pins when at least 2 CPUs are ``available`` (the server gets the first
    half, the client the rest: CPU 0 and CPU 1 on two cores), ``true`` pins or raises, ``false``
    never pins. ``server_cpu``/``client_cpu`` pin that host to one CPU whatever ``pin_cpus`` says
    (unless it is false). Returns ``({"server": cpu list or None, "client": ...}, note)``.

    >>> plan_pinning("auto", [0, 1, 2, 3])
    ({'server': '0-1', 'client': '2-3'}, 'pinned (auto): server CPUs 0-1, client CPUs 2-3 of 4 available')
    >>> plan_pinning("auto", [0])[1]
    'not pinned: only 1 CPU available to this process (pin_cpus=auto needs 2)'
    """
    check_pin_cpus(pin_cpus)
    cpus = sorted(available)
    explicit = {"server": server_cpu, "client": client_cpu}
    if pin_cpus is False:
        if any(cpu is not None for cpu in explicit.values()):
            raise TargetError("pin_cpus=false contradicts server_cpu/client_cpu; drop one of them")
        return {"server": None, "client": None}, "not pinned: pin_cpus=false"
    for label, cpu in explicit.items():
        if cpu is not None and cpu not in cpus:
            raise TargetError(f"{label}_cpu={cpu} is not a CPU this process may use ({cpus}); pick one of those "
                              f"or leave {label}_cpu out")
    if len(cpus) < 2 and not any(cpu is not None for cpu in explicit.values()):
        if pin_cpus is True:
            raise TargetError(f"pin_cpus=true needs at least 2 CPUs for the server and the load, but this process "
                              f"may use only {cpu_list_text(cpus)}; use pin_cpus=auto or false")
        return ({"server": None, "client": None},
                f"not pinned: only {len(cpus)} CPU available to this process (pin_cpus={pin_cpus} needs 2)")
    half = max(1, len(cpus) // 2)
    split = {"server": cpus[:half], "client": cpus[half:] or cpus[:half]}
    sets = {host: cpu_list_text([explicit[host]] if explicit[host] is not None else split[host])
            for host in ("server", "client")}
    mode = "explicit" if any(cpu is not None for cpu in explicit.values()) else str(pin_cpus).lower()
    return sets, (f"pinned ({mode}): server CPUs {sets['server']}, client CPUs {sets['client']} "
                  f"of {len(cpus)} available")


# --------------------------------------------------------------------------------------------
# the target


def _os_error(action: str, host: str, path: str, exc: OSError, text: str | None = None) -> TargetError:
    what = f" {written_text(path, text)} to" if text is not None else ""
    hint = {errno.EINVAL: "the kernel rejected the value; check the knob's valid range",
            errno.ENOENT: "the file does not exist on this kernel (or in a network namespace)",
            errno.EACCES: "permission denied; the lab needs root",
            errno.EPERM: "not permitted; the setting may be read-only inside a network namespace"}
    return TargetError(f"lab {host}: could not {action}{what} {path}: {exc.strerror}"
                       + (f" ({hint[exc.errno]})" if exc.errno in hint else ""))


@TARGETS.register("lab")
class LabTarget(Target):
    """Server and client in network namespaces of this machine, with NSD, iperf3 and a loop disk.

    Parameters
    ----------
    name : str, optional
        Lab name (``[a-z0-9-]``, at most 24 characters); namespaces are ``tl-NAME-srv`` etc.
        Default: 6 random hex digits, so concurrent labs never collide.
    bottleneck_mbit : float, optional
        Put a router namespace between client and server that shapes both directions to this rate
        with ``tbf``.
    queue_limit_bytes : int, optional
        tbf queue length (default: 20 ms at the bottleneck rate, at least 64 KiB).
    records : int
        A records in the DNS zone (``r0`` ... ``r{records-1}``).
    disk_mb : int, "auto" or None
        Size in MiB of a sparse file attached to a loop device (``resolve_device("@disk")``),
        created by ``up()``. ``"auto"`` (default): a disk of :data:`AUTO_DISK_MB` is created on the
        first ``resolve_device("@disk")``, so a design naming ``@disk`` needs no option; None: no disk.
        ``down()`` removes the disk either way.
    delay_ms, loss_pct : float, optional
        Emulate a path: ``netem`` on the client's link adds this one-way delay (client -> server,
        so the RTT grows by ``delay_ms``) and drops this share of packets. Needs netem in the kernel
        (:func:`netem_available`); without it ``up()`` fails with :data:`NETEM_MISSING` before
        creating anything.
    pin_cpus : "auto", True or False
        Pin the server's services and commands, and the client's commands (the load generator),
        to disjoint CPU sets with ``taskset`` (:func:`plan_pinning`): ``auto`` (default) when at
        least 2 CPUs are available, ``True`` always (TargetError with fewer), ``False`` never.
        ``describe()["lab"]["pinning"]`` records the sets or why nothing was pinned.
    server_cpu, client_cpu : int or None
        Pin that host to this one CPU instead of its half of the available CPUs.
    services : sequence of str
        Services started by ``up()`` (default ``("dns", "iperf3")``); any of ``LAB_SERVICES``
        (``dns``, ``iperf3``, ``http``) can also be started later with ``start_service``.
    dns_server : str
        The DNS server the ``dns`` service runs: a name in
        :data:`tunelab.targets.dns_servers.DNS_SERVERS` (``nsd`` (default), ``bind9``, ``knot``,
        ``unbound``).
    zone, zone_file : str, optional
        Serve the operator's zone file ``zone_file`` (read now, at most
        :data:`~tunelab.targets.dns_servers.MAX_ZONE_FILE_BYTES`) as the zone ``zone`` (e.g.
        ``example.org.``) instead of the lab's own ``tunelab.test.`` (``records`` then does not
        apply). ``up()`` checks it with the server's own checker before it creates anything.
    """

    name = "lab"
    hosts = ("server", "client")
    #: a lab rebuilt for restore starts no service and never reads the operator's zone file (it may be gone)
    restore_options: Mapping[str, Any] = {"services": [], "zone": None, "zone_file": None}
    cannot = {"up_twice": "a lab claims its name once: up() on a live lab raises TargetError (use reset())"}

    def __init__(self, name: str | None = None, bottleneck_mbit: float | None = None,
                 queue_limit_bytes: int | None = None, records: int = 1000, disk_mb: int | str | None = "auto",
                 server_cpu: int | None = None, client_cpu: int | None = None,
                 services: Sequence[str] = ("dns", "iperf3"), pin_cpus: bool | str = "auto",
                 delay_ms: float | None = None, loss_pct: float | None = None, dns_server: str = "nsd",
                 zone: str | None = None, zone_file: str | None = None) -> None:
        self.lab_name = name if name is not None else secrets.token_hex(3)
        if not _NAME_RE.match(self.lab_name):
            raise TargetError(f"lab name {self.lab_name!r} is invalid; use 1-24 characters of a-z, 0-9 and '-', "
                              "starting with a letter or digit")
        if bottleneck_mbit is not None and not 0 < bottleneck_mbit <= 100_000:
            raise TargetError(f"bottleneck_mbit must be a rate in Mbit/s above 0 and at most 100000, "
                              f"got {bottleneck_mbit!r}")
        if queue_limit_bytes is not None and (bottleneck_mbit is None or queue_limit_bytes < 1500):
            raise TargetError(f"queue_limit_bytes={queue_limit_bytes!r} needs bottleneck_mbit and at least 1500 bytes")
        if isinstance(records, bool) or not isinstance(records, int) or not 2 <= records <= MAX_RECORDS:
            raise TargetError(f"records must be an integer from 2 (r1.tunelab.test must exist) to {MAX_RECORDS}, "
                              f"got {records!r}")
        if disk_mb not in (None, "auto") and (isinstance(disk_mb, bool) or not isinstance(disk_mb, int)
                                              or not 16 <= disk_mb <= MAX_DISK_MB):
            raise TargetError(f"disk_mb must be an integer from 16 to {MAX_DISK_MB} MiB, 'auto' (a {AUTO_DISK_MB} MiB "
                              f"disk when '@disk' is first used) or null (no disk), got {disk_mb!r}")
        check_path_options(delay_ms, loss_pct)
        cpus, self.pinning_note = plan_pinning(pin_cpus, sorted(os.sched_getaffinity(0)), server_cpu, client_cpu)
        self.pin_cpus = pin_cpus
        for service in services:
            LAB_SERVICES.get(service)
        #: the DNS server the ``dns`` service runs, and the zone it serves
        self.dns_server = dns_servers.get_dns_server(dns_server)
        self.zone = dns_servers.load_zone(zone, zone_file)
        self.zone_file = zone_file
        self.bottleneck_mbit = bottleneck_mbit
        self.queue_limit_bytes = queue_limit_bytes
        self.records = records
        self.disk_mb = disk_mb
        self.delay_ms = delay_ms
        self.loss_pct = loss_pct
        #: host -> taskset CPU list (``"0"``, ``"2-3"``) or None: the server's services and commands, the client's
        self.cpus: dict[str, str | None] = cpus
        self.initial_services = tuple(services)
        routed = bottleneck_mbit is not None
        roles = ("server", "client", "router") if routed else ("server", "client")
        self.namespaces = {role: f"{NS_PREFIX}{self.lab_name}-{ROLES[role]}" for role in roles}
        self.addresses = ({"server": "10.77.0.1", "client": "10.77.0.129", "router_server": "10.77.0.126",
                           "router_client": "10.77.0.254"} if routed else {"server": "10.77.0.1", "client": "10.77.0.2"})
        self.workdir = STATE_DIR / self.lab_name
        self.state: LabState | None = None
        self._workers: dict[str, netns.NetnsWorker] = {}
        self._procs: dict[str, subprocess.Popen] = {}
        self._meter: ForeignCpuMeter | None = None
        self._lock = threading.RLock()
        self.timings: dict[str, float] = {}

    @classmethod
    def validate_options(cls, options: dict[str, Any]) -> None:
        """``pin_cpus`` must be auto, true or false; ``delay_ms``/``loss_pct`` in range; ``dns_server`` a
        registered server; ``zone_file`` readable and accepted by that server's checker (when installed)
        as the zone ``zone`` (checked at plan time)."""
        check_dns_options(options.get("dns_server", "nsd"), options.get("zone"), options.get("zone_file"))
        if "pin_cpus" in options:
            try:
                check_pin_cpus(options["pin_cpus"])
            except TargetError as exc:
                raise TargetOptionError(f"target lab: {exc}", "pin_cpus") from None
        for key in ("delay_ms", "loss_pct"):
            try:
                check_path_options(**{"delay_ms": None, "loss_pct": None, key: options.get(key)})
            except TargetError as exc:
                raise TargetOptionError(f"target lab: {exc}", key) from None

    # ---- lifecycle ------------------------------------------------------------------------

    def up(self) -> None:
        """Create namespaces, links, disk and services; on any failure everything is removed."""
        with self._lock:
            if self.state is not None:
                raise TargetError(f"lab {self.lab_name!r} is already up")
            self._check_tools()
            dns_servers.check_zone(self.dns_server, self.zone)   # an operator's zone: rejected before anything exists
            start = time.monotonic()
            self.workdir.parent.mkdir(parents=True, exist_ok=True)
            me = psutil.Process()
            state = LabState(name=self.lab_name, namespaces=dict(self.namespaces), addresses=dict(self.addresses),
                             workdir=str(self.workdir), owner_pid=me.pid, owner_start=me.create_time(),
                             options=self._options())
            state.save(exclusive=True)  # claims the name before anything exists; raises if taken
            self.state = state          # only now is there something of ours to tear down
            _install_hooks()
            _LIVE.add(self)
            try:
                self.workdir.mkdir(parents=True, exist_ok=True)
                self._build_network()
                if isinstance(self.disk_mb, int):
                    self._make_disk(self.disk_mb)
                for service in self.initial_services:
                    self.start_service(service)
            except BaseException:
                self.down()
                raise
            self._meter = ForeignCpuMeter(self._lab_pids)
            self.timings["up_s"] = time.monotonic() - start

    def detach(self) -> None:
        """Leave the lab running after this process exits (``tunelab lab up``); remove it with ``lab down``."""
        with self._lock:
            self._require_up()
            assert self.state is not None
            self.state.detached = True
            self.state.save()
            _LIVE.discard(self)
            for worker in self._workers.values():
                worker.close()
            self._workers.clear()
            self.state = None

    def down(self) -> None:
        """Stop services, delete namespaces, detach the loop device, delete files. Safe to call twice."""
        with self._lock:
            state = self.state
            if state is None:
                return
            problems: list[str] = []
            for name in list(self._procs):
                svc.stop(self._procs.pop(name), grace_s=0.5)
            self._close_workers()
            problems += destroy(state)
            self.state = None
            _LIVE.discard(self)
            if problems:
                raise TargetError(f"lab {self.lab_name!r} teardown had problems: " + "; ".join(problems))

    def reset(self) -> None:
        """Fresh namespaces (defaults, no TIME_WAIT sockets) with the same services running again."""
        with self._lock:
            self._require_up()
            assert self.state is not None
            start = time.monotonic()
            running = [name for name in self.state.services]
            for name in list(self._procs):
                svc.stop(self._procs.pop(name), grace_s=0.5)
            self.state.services.clear()
            self._close_workers()
            for ns in self.namespaces.values():
                netns.delete_namespace(ns)
            self._build_network()
            for name in running:
                self.start_service(name)
            self.timings["reset_s"] = time.monotonic() - start

    def __del__(self) -> None:  # a lab that goes out of scope unclosed is still removed
        try:
            if getattr(self, "state", None) is not None and not self.state.detached:
                self.down()
        except Exception:  # noqa: BLE001
            pass

    # ---- building ---------------------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        return {"bottleneck_mbit": self.bottleneck_mbit, "queue_limit_bytes": self.queue_limit_bytes,
                "records": self.records, "disk_mb": self.disk_mb, "server_cpu": self.cpus["server"],
                "client_cpu": self.cpus["client"], "pin_cpus": self.pin_cpus, "delay_ms": self.delay_ms,
                "loss_pct": self.loss_pct, "dns_server": self.dns_server.name, "zone": self.zone.origin,
                "zone_file": self.zone_file}

    @property
    def emulates_path(self) -> bool:
        """Whether ``delay_ms`` or ``loss_pct`` asks for netem."""
        return self.delay_ms is not None or self.loss_pct is not None

    def _check_tools(self) -> None:
        needed = ["ip"] + [LAB_SERVICES.get(s).tool_of(self) for s in self.initial_services]
        if self.bottleneck_mbit is not None or self.emulates_path:
            needed.append("tc")
        if isinstance(self.disk_mb, int):
            needed.append("losetup")
        if any(cpu is not None for cpu in self.cpus.values()):
            needed.append("taskset")
        missing = list(dict.fromkeys(tool for tool in needed if shutil.which(tool) is None))
        if missing:
            raise ToolMissingError(missing_tools_message(missing))
        if self.emulates_path and not netem_available():
            raise TargetError(NETEM_MISSING)

    def _build_network(self) -> None:
        start = time.monotonic()
        ns = self.namespaces
        for namespace in ns.values():
            netns.create_namespace(namespace, loopback_up=False)
        addr = self.addresses
        if self.bottleneck_mbit is None:
            netns.ip_batch([["link", "add", LINK, "netns", ns["server"], "type", "veth",
                             "peer", "name", LINK, "netns", ns["client"]]])
            for role, prefix in (("server", "/24"), ("client", "/24")):
                netns.ip_batch([["link", "set", "lo", "up"], ["addr", "add", addr[role] + prefix, "dev", LINK],
                                ["link", "set", LINK, "up"]], namespace=ns[role])
        else:
            netns.ip_batch([
                ["link", "add", LINK, "netns", ns["server"], "type", "veth", "peer", "name", "tl-srv",
                 "netns", ns["router"]],
                ["link", "add", LINK, "netns", ns["client"], "type", "veth", "peer", "name", "tl-cli",
                 "netns", ns["router"]],
            ])
            for role, gateway in (("server", addr["router_server"]), ("client", addr["router_client"])):
                netns.ip_batch([["link", "set", "lo", "up"], ["addr", "add", addr[role] + "/25", "dev", LINK],
                                ["link", "set", LINK, "up"], ["route", "add", "default", "via", gateway]],
                               namespace=ns[role])
            netns.ip_batch([["link", "set", "lo", "up"],
                            ["addr", "add", addr["router_server"] + "/25", "dev", "tl-srv"],
                            ["addr", "add", addr["router_client"] + "/25", "dev", "tl-cli"],
                            ["link", "set", "tl-srv", "up"], ["link", "set", "tl-cli", "up"]], namespace=ns["router"])
            netns.ip_batch([["qdisc", "add", "dev", dev, "root", *tbf_args(self.bottleneck_mbit, self.queue_limit_bytes)]
                            for dev in ("tl-srv", "tl-cli")], namespace=ns["router"], tool="tc")
        if self.emulates_path:
            netns.ip_batch([["qdisc", "add", "dev", LINK, "root", *netem_args(self.delay_ms, self.loss_pct)]],
                           namespace=ns["client"], tool="tc")
        for role, namespace in ns.items():
            self._workers[role] = netns.NetnsWorker(namespace)
        if "router" in ns:
            self.in_namespace("router", write_file, "/proc/sys/net/ipv4/ip_forward", "1")
        self.timings["network_s"] = time.monotonic() - start

    def _make_disk(self, size_mb: int) -> None:
        assert self.state is not None
        if shutil.which("losetup") is None:
            raise ToolMissingError(missing_tools_message(["losetup"]))
        backing = private_dir(DISK_DIR) / f"{self.lab_name}.img"
        # O_EXCL | O_NOFOLLOW: never write through a file or symlink someone else put there
        fd = os.open(backing, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.truncate(size_mb * 1024 * 1024)
        self.state.disk_file = str(backing)
        self.state.save()
        proc = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True,
                              timeout=30, check=False)
        if proc.returncode != 0:
            raise TargetError(f"losetup could not attach {backing}: {proc.stderr.strip()} "
                              "(is the loop module available? `modprobe loop`)")
        self.state.disk_device = proc.stdout.strip()
        self.state.save()

    def _close_workers(self) -> None:
        for worker in self._workers.values():
            worker.close()
        self._workers.clear()

    def _lab_pids(self) -> list[int]:
        return [pid for ns in self.namespaces.values() for pid in netns.namespace_pids(ns)]

    def _require_up(self) -> None:
        if self.state is None:
            raise TargetError(f"lab {self.lab_name!r} is not up; use it as `with get_target('lab')() as lab:` "
                              "or call up() first")

    # ---- primitives -------------------------------------------------------------------------

    def namespace(self, host: str) -> str:
        """The network namespace of ``host`` (``server``, ``client`` or, with a bottleneck, ``router``)."""
        if host not in self.namespaces:
            self.check_host(host)
        return self.namespaces[host]

    def in_namespace(self, host: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in the thread that lives in ``host``'s namespace (sockets, /proc/sys)."""
        self._require_up()
        self.namespace(host)
        return self._workers[host].call(fn, *args)

    def read_text(self, host: str, path: str) -> str:
        self.check_host(host)
        if netns.needs_namespace_sysfs(path):
            return self._sysfs_via_exec(host, ["cat", path], path)
        try:
            return self.in_namespace(host, read_file, netns.thread_path(path))
        except OSError as exc:
            raise _os_error("read", host, path, exc) from None

    def write_text(self, host: str, path: str, text: str) -> None:
        self.check_host(host)
        if netns.needs_namespace_sysfs(path):
            self._sysfs_via_exec(host, ["tee", path], path, stdin_text=text)
            return
        try:
            self.in_namespace(host, write_file, netns.thread_path(path), text)
        except OSError as exc:
            raise _os_error("write", host, path, exc, text) from None

    def _sysfs_via_exec(self, host: str, argv: list[str], path: str, stdin_text: str | None = None) -> str:
        self._require_up()
        result = run_argv(netns.exec_argv(self.namespace(host), argv), timeout_s=10, stdin_text=stdin_text)
        if not result.ok:
            raise TargetError(f"lab {host}: `{' '.join(argv)}` failed for {path}: {result.stderr.strip()}")
        return result.stdout

    def is_writable(self, host: str, path: str) -> bool:
        self.check_host(host)
        return bool(self.in_namespace(host, os.access, netns.thread_path(path), os.W_OK))

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        """Run ``argv`` in ``host``'s namespace, pinned to ``cpu`` (default: the host's CPU set, if pinned)."""
        self.check_host(host)
        self._require_up()
        argv = check_argv(argv)
        cpu = self.cpus.get(host) if cpu is None else cpu
        return run_argv(netns.exec_argv(self.namespace(host), argv, cpu), timeout_s, shown_argv=argv)

    def address(self, host: str) -> str:
        self.check_host(host)
        return self.addresses[host]

    def resolve_device(self, device: str) -> str:
        if device == "@link":
            return LINK
        if device == "@disk":
            with self._lock:
                if self.state is not None and not self.state.disk_device and self.disk_mb == "auto":
                    self._make_disk(AUTO_DISK_MB)
                if self.state is None or not self.state.disk_device:
                    raise TargetError("device '@disk' needs a lab disk; create the lab with disk_mb (e.g. disk_mb=256) "
                                      "or disk_mb='auto'" + ("" if self.state is not None else ", and bring it up"))
            return Path(self.state.disk_device).name
        return device

    def start_service(self, name: str) -> None:
        """Start ``name`` ("dns", "iperf3" or "http") in the server namespace and wait until it answers."""
        with self._lock:
            self._require_up()
            assert self.state is not None
            service = LAB_SERVICES.get(name)
            proc = self._procs.get(name)
            if proc is not None and proc.poll() is None:
                return
            tool = service.tool_of(self)
            if shutil.which(tool) is None:
                raise ToolMissingError(f"lab service {name!r}: " + missing_tools_message([tool]))
            log = self.workdir / f"{name}.log"
            argv = netns.exec_argv(self.namespace("server"), service.argv(self), self.cpus["server"])
            proc = svc.spawn(argv, log)
            self._procs[name] = proc
            self.state.services[name] = proc.pid
            self.state.save()
            waited = svc.wait_until(lambda: service.ready(self), service.timeout_s,
                                         f"lab service {name!r} ({tool})", proc=proc, log=log)
            self.timings[f"start_{name}_s"] = waited

    def restart_service(self, name: str) -> None:
        """Stop and start ``name`` so settings read at start-up (e.g. somaxconn at listen()) apply."""
        with self._lock:
            self._require_up()
            assert self.state is not None
            LAB_SERVICES.get(name)
            proc = self._procs.pop(name, None)
            if proc is not None:
                svc.stop(proc, grace_s=0.5)
            self.state.services.pop(name, None)
            self.start_service(name)

    def describe(self) -> dict[str, Any]:
        """This machine's description, the lab's, and ``dns_server``: the software the ``dns`` service runs
        and its version (what a sysctl.d file's provenance names)."""
        info = describe_local()
        version = dns_servers.server_version(self.dns_server.name)
        info["dns_server"] = {"software": self.dns_server.name, "version": parse_version(version) or version}
        info.update({"target": "lab", "lab": {
            "name": self.lab_name, "namespaces": dict(self.namespaces), "addresses": dict(self.addresses),
            "link": LINK, "disk": self.state.disk_device if self.state else None, **self._options(),
            "dns_server_version": dns_servers.server_version(self.dns_server.name),
            "pinning": {"server": self.cpus["server"], "client": self.cpus["client"], "note": self.pinning_note}}})
        return info

    def foreign_cpu_s(self) -> float:
        if self._meter is None:
            return 0.0
        return self._meter()

    def counter_sources(self, request: CounterRequest) -> list[CounterSource]:
        """The server's and the client's namespace counters (through the thread living in each: a file open,
        no process), the processes of the load's service, and the load's block device."""
        self._require_up()
        sources: list[CounterSource] = [FileCounters(host, NET_FILES, functools.partial(self._read_in_namespace, host))
                                        for host in ("server", "client")]
        if request.service is not None:
            sources.append(ProcessCounters("server", functools.partial(self._service_pids, request.service)))
        if request.device is not None:
            sources.append(FileCounters("server", (block_file(request.device),), read_local_files))
        return sources

    def _read_in_namespace(self, host: str, paths: Sequence[str]) -> dict[str, str]:
        """``/proc/net`` files of ``host``'s namespace, read through its worker thread's ``/proc/PID/task/TID``
        from the calling thread: no hand-over to the worker (it costs milliseconds on a busy machine)."""
        self._require_up()
        tid = self._workers[host].native_id
        return read_local_files(paths, functools.partial(netns.task_path, tid=tid))

    def _service_pids(self, name: str) -> list[int]:
        """The pid of the lab service ``name`` while it runs (its workers are its descendants)."""
        proc = self._procs.get(name)
        return [proc.pid] if proc is not None and proc.poll() is None else []


def check_dns_options(dns_server: str, zone: str | None, zone_file: str | None) -> None:
    """TargetOptionError naming the option unless ``dns_server`` is registered and ``zone_file`` (if any)
    is a readable zone file for ``zone`` that the server's checker accepts (skipped when the checker is
    not installed here: ``up()`` checks again and names the package)."""
    try:
        server = dns_servers.get_dns_server(dns_server)
    except TargetError as exc:
        raise TargetOptionError(f"target lab: option dns_server: {exc}", "dns_server") from None
    try:
        dns_servers.check_zone(server, dns_servers.load_zone(zone, zone_file))
    except ToolMissingError:
        pass
    except TargetError as exc:
        raise TargetOptionError(str(exc), "zone_file" if zone_file is not None else "zone") from None


def check_path_options(delay_ms: Any, loss_pct: Any) -> None:
    """TargetError unless ``delay_ms`` is None or in (0, MAX_DELAY_MS] and ``loss_pct`` None or in (0, 100).

    >>> check_path_options(20, None)
    >>> check_path_options(None, 100)
    Traceback (most recent call last):
    ...
    tunelab.errors.TargetError: loss_pct must be a percentage above 0 and below 100, got 100
    """
    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    if delay_ms is not None and not (number(delay_ms) and 0 < delay_ms <= MAX_DELAY_MS):
        raise TargetError(f"delay_ms must be a one-way delay in ms above 0 and at most {MAX_DELAY_MS}, "
                          f"got {delay_ms!r}")
    if loss_pct is not None and not (number(loss_pct) and 0 < loss_pct < 100):
        raise TargetError(f"loss_pct must be a percentage above 0 and below 100, got {loss_pct!r}")


def tbf_args(rate_mbit: float, limit_bytes: int | None = None) -> list[str]:
    """``tbf`` parameters for ``rate_mbit``: burst of one timer tick (>= 64 KiB), queue of 20 ms.

    >>> tbf_args(200)
    ['tbf', 'rate', '200mbit', 'burst', '100000', 'limit', '500000']
    """
    rate_bytes_s = rate_mbit * 1e6 / 8
    burst = max(65536, int(rate_bytes_s / 250))
    limit = limit_bytes if limit_bytes is not None else max(65536, int(rate_bytes_s * 0.020))
    rate = f"{rate_mbit:g}mbit"
    return ["tbf", "rate", rate, "burst", str(burst), "limit", str(limit)]


def netem_args(delay_ms: float | None, loss_pct: float | None) -> list[str]:
    """``netem`` parameters for a one-way ``delay_ms`` and a ``loss_pct`` (either may be None).

    The queue holds 100000 packets so the emulated path itself does not drop at high rates.

    >>> netem_args(20, 0.5)
    ['netem', 'limit', '100000', 'delay', '20ms', 'loss', '0.5%']
    """
    args = ["netem", "limit", "100000"]
    if delay_ms is not None:
        args += ["delay", f"{delay_ms:g}ms"]
    if loss_pct is not None:
        args += ["loss", f"{loss_pct:g}%"]
    return args


@functools.lru_cache(maxsize=1)
def netem_available() -> bool:
    """Whether this kernel can run the ``netem`` qdisc (cached for the process).

    Probes in a private, anonymous network namespace (``unshare --net``; with ``--user`` when not
    root) that disappears with the probe, so nothing on the host changes. False when the probe
    cannot run at all (no ``unshare`` or ``tc``); :data:`NETEM_MISSING` says what that means.
    """
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        return False
    prefix = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--net"]
    try:
        proc = subprocess.run(prefix + ["tc", "qdisc", "add", "dev", "lo", "root", *netem_args(1, None)],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0
