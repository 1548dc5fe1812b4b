"""Run one argv with a time limit; on timeout or interrupt, kill everything it started.

A load may start processes that leave its process group (fio's job workers call ``setsid()``),
so the kill walks the process tree (psutil) as well as the group. Each child also gets a parent
death signal (``PR_SET_PDEATHSIG``, SIGTERM): when the runner itself is killed with -9, its loads
are told to stop instead of running on unseen.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from typing import Sequence

import psutil

from tunelab.errors import TargetError
from tunelab.targets.base import CommandResult


#: files whose text is a kernel knob's value (written in one ``write()``; named in errors when short)
KERNEL_PREFIXES = ("/proc/", "/sys/", "/dev/")
#: an error names a knob file's written value when it is at most this long; any other text only by its size
SHOWN_VALUE_CHARS = 200


def written_text(path: str, text: str) -> str:
    """How an error names what was written: its byte count, and a kernel knob file's value when it is
    short; never the text of any other file (a query file is personal data).

    >>> written_text("/proc/sys/net/core/somaxconn", "4096\\n"), written_text("/tmp/d/queries", "a.example A\\n")
    ("'4096' (5 bytes)", '12 bytes')
    """
    size = f"{len(text.encode())} bytes"
    value = text.strip()
    if path.startswith(KERNEL_PREFIXES) and len(value) <= SHOWN_VALUE_CHARS:
        return f"{value!r} ({size})"
    return size


def check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """Validate that ``argv`` is a non-empty sequence of strings (never a shell line)."""
    if isinstance(argv, (str, bytes)) or not argv:
        raise TargetError(f"a command must be a non-empty list of arguments, not {argv!r}; "
                          "e.g. ['sysctl', '-n', 'net.core.somaxconn']")
    bad = [a for a in argv if not isinstance(a, str)]
    if bad:
        raise TargetError(f"command arguments must be strings; got {bad!r} in {list(argv)!r}")
    return tuple(argv)


def run_argv(argv: Sequence[str], timeout_s: float, shown_argv: Sequence[str] | None = None,
             stdin_text: str | None = None) -> CommandResult:
    """Run ``argv`` in a new session; on timeout SIGKILL the session's process group.

    ``shown_argv`` is what the result reports as its argv (e.g. without an ``ip netns exec``
    prefix). A missing program gives returncode 127 and the error in ``stderr``, like a shell.
    """
    if timeout_s is None or timeout_s <= 0:
        raise TargetError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    shown = tuple(shown_argv if shown_argv is not None else argv)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                text=True, errors="replace", preexec_fn=_die_with_parent,
                                env={**os.environ, RUN_ID_ENV: run_id()})
    except FileNotFoundError as exc:
        return CommandResult(shown, 127, "", f"{argv[0]}: command not found ({exc})", time.monotonic() - start)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(input=stdin_text, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_tree(proc.pid)
        stdout, stderr = proc.communicate()
    except BaseException:
        kill_tree(proc.pid)
        proc.wait()
        raise
    return CommandResult(shown, proc.returncode, stdout, stderr, time.monotonic() - start, timed_out)


_PR_SET_PDEATHSIG = 1
#: environment variable marking every process a tunelab run starts (inherited by their children)
RUN_ID_ENV = "TUNELAB_RUN_ID"


def process_alive(pid: int, started: float) -> bool:
    """Whether the process ``pid`` that started at ``started`` (epoch s) still runs (not a reused pid)."""
    try:
        return abs(psutil.Process(pid).create_time() - started) < 1.0
    except psutil.NoSuchProcess:
        return False


def run_id(pid: int | None = None) -> str:
    """The id of a tunelab process (``PID-STARTTIME``), put into the environment of what it starts.

    A run killed with -9 cannot stop its loads; their marker lets :func:`kill_marked` find them.
    """
    process = psutil.Process(pid)
    return run_id_of(process.pid, process.create_time())


def run_id_of(pid: int, started: float) -> str:
    """The run id of the process ``pid`` that started at ``started`` (epoch seconds)."""
    return f"{pid}-{int(started * 100)}"


def kill_marked(marker: str) -> list[int]:
    """SIGKILL every process whose environment carries ``RUN_ID_ENV=marker``; returns their pids."""
    killed = []
    for process in psutil.process_iter(["pid"]):
        try:
            if process.environ().get(RUN_ID_ENV) == marker and process.pid != os.getpid():
                process.kill()
                killed.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return killed


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the parent dies (Linux prctl; best effort)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every descendant, also those that left the group (setsid)."""
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for child in descendants:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(descendants, timeout=2.0)
