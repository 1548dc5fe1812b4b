"""The ``dry-run`` target: reads come from this machine, writes and commands are only recorded.

Every write, command and service action is appended to :attr:`DryRunTarget.actions` (and printed
unless ``quiet``); nothing is executed, so a design can be rehearsed safely.

Examples
--------
>>> t = DryRunTarget(quiet=True)
>>> t.write_text("server", "/proc/sys/net/core/somaxconn", "128")
>>> t.run("client", ["dnsperf", "-l", "5"], timeout_s=10).dry
True
>>> [a["action"] for a in t.actions]
['write', 'run']
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from tunelab.targets.base import TARGETS, CommandResult, Target
from tunelab.targets.hostinfo import describe_local
from tunelab.targets.local import read_local_text
from tunelab.targets.process import check_argv


@dataclass(frozen=True)
class DryRunResult(CommandResult):
    """A CommandResult for a command that was recorded, not run (``dry`` is always True)."""

    dry: bool = True


@TARGETS.register("dry-run")
class DryRunTarget(Target):
    """Record instead of act; reads delegate to the local host (read-only).

    Parameters
    ----------
    quiet : bool
        Do not print actions as they are recorded.
    """

    name = "dry-run"
    hosts = ("server", "client")
    #: the runner records a dry run's trials in a throw-away store, never in the study's own
    writes_nothing = True
    cannot = {
        "write": "a dry run records writes and changes nothing: reads keep showing this machine's values",
        "run": "commands are recorded, not run: every command 'succeeds' with no output",
    }

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.actions: list[dict[str, Any]] = []

    def _record(self, **action: Any) -> None:
        self.actions.append(action)
        if not self.quiet:
            detail = " ".join(f"{k}={v!r}" for k, v in action.items() if k != "action")
            print(f"[dry-run] {action['action']} {detail}", file=sys.stdout)

    def read_text(self, host: str, path: str) -> str:
        self.check_host(host)
        return read_local_text("dry-run", host, path)

    def write_text(self, host: str, path: str, text: str) -> None:
        self.check_host(host)
        self._record(action="write", host=host, path=path, text=text)

    def has_tool(self, host: str, tool: str) -> bool:
        """A dry run runs nothing, so no tool is needed (the printed commands show which would be)."""
        return True

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        self.check_host(host)
        argv = check_argv(argv)
        self._record(action="run", host=host, argv=list(argv), timeout_s=timeout_s, cpu=cpu)
        return DryRunResult(argv=argv, returncode=0, stdout="", stderr="", duration_s=0.0)

    def start_service(self, name: str) -> None:
        self._record(action="start_service", service=name)

    def restart_service(self, name: str) -> None:
        self._record(action="restart_service", service=name)

    def reset(self) -> None:
        self._record(action="reset")

    def is_writable(self, host: str, path: str) -> bool:
        self.check_host(host)
        return os.access(path, os.W_OK)

    def describe(self) -> dict[str, Any]:
        return {"target": "dry-run", **describe_local()}
