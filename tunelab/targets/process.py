"""Run one argv with a time limit, killing its whole process group on timeout."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Sequence

from tunelab.errors import TargetError
from tunelab.targets.base import CommandResult


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
                                text=True, errors="replace")
    except FileNotFoundError as exc:
        return CommandResult(shown, 127, "", f"{argv[0]}: command not found ({exc})", time.monotonic() - start)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(input=stdin_text, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stdout, stderr = proc.communicate()
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    return CommandResult(shown, proc.returncode, stdout, stderr, time.monotonic() - start, timed_out)
