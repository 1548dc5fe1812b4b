"""Run a ``tunelab`` command in the test's own process, with what a terminal would show of it.

A fresh interpreter (``python -m tunelab ...``) costs 1-2 s of start-up and imports per call. Tests that
check what a command prints, returns and writes (not the interpreter's start-up; each CLI test file keeps
one real ``python -m tunelab`` run for that) call :func:`tunelab.cli.main` here instead, keeping what a
separate process would add:

* the command runs in the given working directory, and a usage error's ``SystemExit`` gives its exit status;
* stdout and stderr are captured at the file descriptors (``capfd``), so what child processes the command
  starts (papermill's kernels) write to the terminal is in them too;
* what Python would print to a terminal's stderr besides the command's own lines is appended to stderr as it
  would be printed: every warning a user would see (the default filters hide only ``DeprecationWarning``,
  ``PendingDeprecationWarning``, ``ImportWarning`` and ``ResourceWarning`` outside ``__main__``; each other
  warning is shown once per place) and every log record of level WARNING or above from the command's own
  threads (tunelab configures no logging, so Python's last-resort handler would print its message; threads
  earlier tests left running are not the command's). A test that wants an exact or an empty stderr still
  fails on either.
"""
from __future__ import annotations

import logging
import subprocess
import threading
import warnings
from pathlib import Path
from typing import Callable, Sequence

import pytest

#: warning categories Python's default filters do not show (outside ``__main__``)
HIDDEN_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def run_in_process(args: Sequence[str], cwd: Path, capfd: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> subprocess.CompletedProcess[str]:
    """``tunelab ARGS`` in ``cwd``, in this process: the exit status, stdout and stderr (with shown warnings)."""
    from tunelab.cli import main

    monkeypatch.chdir(cwd)
    capfd.readouterr()                                    # only this command's output
    logged = _Records(logging.WARNING, {t.ident for t in threading.enumerate()} - {threading.get_ident()})
    logging.getLogger().addHandler(logged)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                status = main([str(arg) for arg in args])
            except SystemExit as exc:                     # argparse's usage errors exit 2 after their usage line
                status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        logging.getLogger().removeHandler(logged)
    out, err = capfd.readouterr()
    shown: dict[tuple, str] = {}
    for w in caught:
        if not issubclass(w.category, HIDDEN_BY_DEFAULT):
            shown.setdefault((w.category, str(w.message), w.filename, w.lineno),
                             warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line))
    return subprocess.CompletedProcess(["tunelab", *map(str, args)], status, out,
                                       err + "".join(shown.values()) + "".join(logged.lines))


class _Records(logging.Handler):
    """Keeps each record's message as Python's last-resort handler prints it (``%(message)s``, one line each),
    except records of the threads ``others`` (running before the command started)."""

    def __init__(self, level: int, others: set[int | None]) -> None:
        super().__init__(level)
        self.others = others
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread not in self.others:
            self.lines.append(record.getMessage() + "\n")


@pytest.fixture
def tunelab_here(capfd: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> Callable[[Sequence[str], Path], subprocess.CompletedProcess[str]]:
    """``tunelab_here(ARGS, cwd)``: :func:`run_in_process` with this test's ``capfd`` and ``monkeypatch``."""
    return lambda args, cwd: run_in_process(args, cwd, capfd, monkeypatch)
