"""Provenance of the local machine (kernel, CPU, tool versions) and foreign-CPU accounting."""
from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from typing import Callable, Iterable

import psutil

#: how to ask each tool for its version: argv after the tool name
VERSION_ARGS: dict[str, tuple[str, ...]] = {
    "nsd": ("-v",),
    "dnsperf": ("-h",),
    "iperf3": ("--version",),
    "fio": ("--version",),
    "wrk": ("--version",),
    "ip": ("-V",),
    "sshd": ("-V",),
}

_VERSION_RE = re.compile(r"\d+\.\d+(?:\.\d+)*(?:[-~+][\w.]+)*")


def parse_version(text: str) -> str | None:
    """The first version-looking token of a tool's banner (``None`` if there is none).

    >>> parse_version("DNS Performance Testing Tool\\nVersion 2.14.0\\n")
    '2.14.0'
    >>> parse_version("iperf 3.18 (cJSON 1.7.15)")
    '3.18'
    >>> parse_version("BIND 9.18.33-1~deb12u2-Debian (Extended Support Version) <id:>")
    '9.18.33-1~deb12u2-Debian'
    """
    for line in text.splitlines():
        if "version" in line.lower() or re.search(r"\d+\.\d+", line):
            match = _VERSION_RE.search(line)
            if match:
                return match.group(0)
    return None


@functools.lru_cache(maxsize=None)
def local_tool_version(tool: str) -> str | None:
    """Version of a locally installed tool, or ``None`` when it is missing or says nothing."""
    path = shutil.which(tool) or (shutil.which(tool, path="/usr/sbin:/sbin") if tool == "sshd" else None)
    if path is None:
        return None
    try:
        proc = subprocess.run([path, *VERSION_ARGS.get(tool, ("--version",))], capture_output=True,
                              text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(proc.stdout + "\n" + proc.stderr)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def describe_local(tools: Iterable[str] = ("nsd", "dnsperf", "iperf3", "fio", "wrk")) -> dict[str, object]:
    """Kernel, CPU model, CPU count and tool versions of this machine."""
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "nproc": os.cpu_count(),
        "tools": {tool: local_tool_version(tool) for tool in tools},
    }


def busy_cpu_seconds() -> float:
    """CPU seconds spent busy (all CPUs, excluding idle and iowait) since boot, from /proc/stat."""
    times = psutil.cpu_times()
    busy = times.user + times.nice + times.system + getattr(times, "irq", 0.0) + getattr(times, "softirq", 0.0)
    return busy + getattr(times, "steal", 0.0)


def _process_cpu(proc: psutil.Process) -> float:
    try:
        t = proc.cpu_times()
        return t.user + t.system
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return 0.0


class ForeignCpuMeter:
    """CPU seconds used by processes that are not ours, between successive calls.

    "Ours" is this process (including children it has reaped), its live descendants, and the
    processes listed by ``extra_pids`` (e.g. everything inside the lab's namespaces).
    The first call measures from the meter's creation.
    """

    def __init__(self, extra_pids: Callable[[], Iterable[int]] = lambda: ()) -> None:
        self._extra_pids = extra_pids
        self._last = self._sample()

    def _ours(self) -> float:
        me = psutil.Process()
        t = me.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        seen = {me.pid}
        procs = me.children(recursive=True)
        for pid in self._extra_pids():
            if pid not in seen:
                try:
                    procs.append(psutil.Process(pid))
                except psutil.NoSuchProcess:
                    pass
        for proc in procs:
            if proc.pid not in seen:
                seen.add(proc.pid)
                total += _process_cpu(proc)
        return total

    def _sample(self) -> tuple[float, float]:
        return busy_cpu_seconds(), self._ours()

    def __call__(self) -> float:
        busy, ours = self._sample()
        last_busy, last_ours = self._last
        self._last = (busy, ours)
        return max(0.0, (busy - last_busy) - (ours - last_ours))
