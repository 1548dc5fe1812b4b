"""Where a trial's counters are read: a place's counter files, and the server's processes.

A target says which sources it has with :meth:`tunelab.targets.Target.counter_sources` (for a
:class:`CounterRequest`: the load's service and block device); each source is read whole at every
snapshot (:meth:`CounterSource.read`) and returns ``{"Group.Name": value}``:

* :class:`FileCounters`: files read together by the target's own reader (the lab reads a namespace's
  ``/proc/net`` from a thread inside it, ``/proc/thread-self/net/...``: a file open, no process;
  the ssh target reads every file of a snapshot with one remote ``tail``, :func:`tail_reader`);
* :class:`ProcessCounters`: the CPU time, faults and context switches of a service's processes and
  all their descendants (``/proc/PID/task/TID/children``), summed.
"""
from __future__ import annotations

import abc
import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from tunelab.counters.parsing import (parse_block_stat, parse_cgroup_stat, parse_net_table, parse_proc_stat,
                                      parse_proc_status, parse_snmp6, tail_sections)
from tunelab.errors import TargetError

#: the places counters are recorded at: the server's host or namespace, the load generator's
PLACES = ("server", "client")
#: ``paths -> {path: text}``; a file that does not exist on this kernel is left out, never an error
FileReader = Callable[[Sequence[str]], Mapping[str, str]]
#: the block device names a counter source may read (``loop3``, ``sda``, ``nvme0n1``)
_DEVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TICKS_PER_S = float(os.sysconf("SC_CLK_TCK"))


@dataclass(frozen=True)
class CounterRequest:
    """What the trial's load touches: its ``service`` (whose processes are the server's) and the block
    ``device`` it drives (fio's, as the target names it, e.g. ``loop3``); either may be None."""

    service: str | None = None
    device: str | None = None


class CounterSource(abc.ABC):
    """One source of counters at one place (:data:`PLACES`)."""

    place: str

    @abc.abstractmethod
    def read(self) -> dict[str, float]:
        """The current value of every counter of this source, ``{"Group.Name": value}``."""


@dataclass(frozen=True)
class CounterFile:
    """A counter file and its parser (:mod:`tunelab.counters.parsing`)."""

    path: str
    parse: Callable[[str], dict[str, float]]


#: the network stack's counters of a host or namespace (snmp6 is absent without IPv6)
NET_FILES = (CounterFile("/proc/net/netstat", parse_net_table), CounterFile("/proc/net/snmp", parse_net_table),
             CounterFile("/proc/net/snmp6", parse_snmp6))


def block_file(device: str) -> CounterFile:
    """The counter file of block device ``device`` (``loop3`` or ``/dev/loop3``: ``/sys/block/DEV/stat``);
    TargetError for anything else.

    >>> block_file("loop3").path
    '/sys/block/loop3/stat'
    """
    name = device[len("/dev/"):] if device.startswith("/dev/") else device
    if not _DEVICE.fullmatch(name):
        raise TargetError(f"block device {device!r} is not a device name like loop3 or sda; its counters cannot be read")
    return CounterFile(f"/sys/block/{name}/stat", parse_block_stat)


#: where cgroups live; a server cgroup must be a folder below it
CGROUP_ROOT = "/sys/fs/cgroup"
_CGROUP = re.compile(r"/sys/fs/cgroup(?:/[A-Za-z0-9_.@:+-]+)+")


def cgroup_files(cgroup: str) -> tuple[CounterFile, ...]:
    """The counter files of a cgroup v2 folder (``/sys/fs/cgroup/system.slice/nsd.service``): the CPU time
    and major faults of every process in it, as ``proc.*`` counters; TargetError for any other path.

    >>> [f.path for f in cgroup_files("/sys/fs/cgroup/system.slice/nsd.service")][0]
    '/sys/fs/cgroup/system.slice/nsd.service/cpu.stat'
    """
    if not isinstance(cgroup, str) or not _CGROUP.fullmatch(cgroup) or "/.." in cgroup or "/./" in f"{cgroup}/":
        raise TargetError(f"server_cgroup {cgroup!r} is not a cgroup folder under {CGROUP_ROOT}, e.g. "
                          f"{CGROUP_ROOT}/system.slice/nsd.service (`systemctl status UNIT` names it)")
    return (CounterFile(f"{cgroup}/cpu.stat", parse_cgroup_stat), CounterFile(f"{cgroup}/memory.stat", parse_cgroup_stat))


@dataclass(frozen=True)
class FileCounters(CounterSource):
    """The counters of ``files``, read together with ``read_files`` at every snapshot."""

    place: str
    files: tuple[CounterFile, ...]
    read_files: FileReader

    def read(self) -> dict[str, float]:
        texts = self.read_files([file.path for file in self.files])
        values: dict[str, float] = {}
        for file in self.files:
            if file.path in texts:
                values.update(file.parse(texts[file.path]))
        return values


def read_local_files(paths: Sequence[str], rewrite: Callable[[str], str] = lambda path: path) -> dict[str, str]:
    """``{path: text}`` of the files of this machine that exist (``rewrite`` maps a path to the one to open,
    e.g. ``/proc/net/...`` to ``/proc/thread-self/net/...`` inside a namespace's thread)."""
    texts = {}
    for path in paths:
        try:
            with open(rewrite(path)) as fh:
                texts[path] = fh.read()
        except OSError:
            continue
    return texts


def tail_reader(run: Callable[[list[str]], tuple[int, str, str]], where: str) -> FileReader:
    """A reader of remote files through one command, ``tail -v -n +1 -- PATH...`` (``run(argv)`` returns
    exit status, stdout and stderr); a missing file only drops its section."""
    def read(paths: Sequence[str]) -> dict[str, str]:
        status, stdout, stderr = run(["tail", "-v", "-n", "+1", "--", *paths])
        texts = tail_sections(stdout)
        if status != 0 and not texts:
            raise TargetError(f"{where}: could not read counter files: {stderr.strip()[:200]}")
        return texts
    return read


@dataclass(frozen=True)
class ProcessCounters(CounterSource):
    """CPU seconds, page faults and context switches of the processes ``root_pids()`` names and all their
    descendants, summed (``proc.cpu_s`` counts the children they reaped too, so a worker that exits
    keeps its CPU time in the sum)."""

    place: str
    root_pids: Callable[[], Iterable[int]]
    proc_dir: str = "/proc"

    def read(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for pid in process_tree(self.root_pids(), self.proc_dir):
            for name, value in process_counters(pid, self.proc_dir).items():
                totals[name] = totals.get(name, 0.0) + value
        return {f"proc.{name}": value for name, value in totals.items()}


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def _tasks(pid: int, proc_dir: str) -> list[str]:
    try:
        return os.listdir(f"{proc_dir}/{pid}/task")
    except OSError:
        return []


def process_tree(roots: Iterable[int], proc_dir: str = "/proc") -> list[int]:
    """``roots`` and every live descendant, from each thread's ``children`` file (no scan of /proc)."""
    seen: list[int] = []
    todo = [int(pid) for pid in roots]
    while todo:
        pid = todo.pop()
        if pid in seen or not os.path.isdir(f"{proc_dir}/{pid}"):
            continue
        seen.append(pid)
        for tid in _tasks(pid, proc_dir):
            todo += [int(child) for child in (_read(f"{proc_dir}/{pid}/task/{tid}/children") or "").split()]
    return seen


def process_counters(pid: int, proc_dir: str = "/proc") -> dict[str, float]:
    """One process's CPU seconds (its own and its reaped children's), faults and context switches (all its
    threads); empty when it is gone."""
    stat = _read(f"{proc_dir}/{pid}/stat")
    if stat is None:
        return {}
    values = parse_proc_stat(stat, _TICKS_PER_S)
    if not values:
        return {}
    values["cpu_s"] += values.pop("child_cpu_s")
    for tid in _tasks(pid, proc_dir):
        for name, value in parse_proc_status(_read(f"{proc_dir}/{pid}/task/{tid}/status") or "").items():
            values[name] = values.get(name, 0.0) + value
    return values
