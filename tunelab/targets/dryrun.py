"""The ``dry-run`` target: reads come from this machine, writes and commands are only recorded.

Every write, command and service action is appended to :attr:`DryRunTarget.actions` (and printed
unless ``quiet``); nothing is executed, so a design can be rehearsed safely. :meth:`~DryRunTarget.reset`
(called before every trial) starts a trial's actions, and :meth:`~DryRunTarget.preview` turns them
into a compact preview: what every trial does, then each trial's own writes and commands, files
by name and size. A file this machine lacks (the lab's link, its disk) reads as what
:meth:`~DryRunTarget.assume` says.

Examples
--------
>>> t = DryRunTarget(quiet=True)
>>> t.write_text("server", "/proc/sys/net/core/somaxconn", "128")
>>> t.run("client", ["dnsperf", "-l", "5"], timeout_s=10).dry
True
>>> [a["action"] for a in t.actions]
['write', 'run']
>>> t.reset(); t.write_text("server", "/proc/sys/net/core/somaxconn", "16")
>>> t.write_text("server", "/proc/sys/net/core/somaxconn", "4096")
>>> t.preview(["screen:1"])[-1]
'  screen:1: server: write /proc/sys/net/core/somaxconn (2 B: 16; put back: 4096)'
"""
from __future__ import annotations

import os
import shlex
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
        "read back": "nothing is written, so a read-back shows this machine's value, not the one a trial set",
    }
    #: what the lab's symbolic devices are called in a preview (the lab's link is ``tl0``; its disk is made then)
    DEVICES = {"@link": "tl0", "@disk": "lab-disk"}

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.actions: list[dict[str, Any]] = []
        #: (host, path) -> text a file reads as when this machine lacks it (:meth:`assume`)
        self.assumed: dict[tuple[str, str], str] = {}
        #: trials begun (:meth:`reset`), and the trial each action belongs to (0: before the first)
        self.trials = 0
        self._trial_of: list[int] = []

    def _record(self, **action: Any) -> None:
        self.actions.append(action)
        self._trial_of.append(self.trials)
        if not self.quiet:
            detail = " ".join(f"{k}={v!r}" for k, v in action.items() if k != "action")
            print(f"[dry-run] {action['action']} {detail}", file=sys.stdout)

    def assume(self, host: str, path: str, text: str) -> None:
        """Let ``path`` on ``host`` read as ``text`` when this machine has no such file (nothing is recorded)."""
        self.assumed[(host, path)] = text

    def read_text(self, host: str, path: str) -> str:
        self.check_host(host)
        if (host, path) in self.assumed and not os.path.exists(path):
            return self.assumed[(host, path)]
        return read_local_text("dry-run", host, path)

    def resolve_device(self, device: str) -> str:
        """The lab's symbolic devices by the names a preview shows (:attr:`DEVICES`); others unchanged."""
        return self.DEVICES.get(device, device)

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
        """Recorded with what happens before the first trial (a run starts its load's service once)."""
        trials, self.trials = self.trials, 0
        self._record(action="start_service", service=name)
        self.trials = trials

    def restart_service(self, name: str) -> None:
        self._record(action="restart_service", service=name)

    def reset(self) -> None:
        """A trial begins (the runner resets the target before each): later actions are its own."""
        self.trials += 1
        self._record(action="reset")

    def is_writable(self, host: str, path: str) -> bool:
        self.check_host(host)
        return os.access(path, os.W_OK)

    def describe(self) -> dict[str, Any]:
        return {"target": "dry-run", **describe_local()}

    def preview(self, run_keys: Sequence[str] = ()) -> list[str]:
        """The recorded actions as a compact preview: once before the first trial, in every trial, then each
        trial's own (trials with the same own actions share a line). ``run_keys`` name the trials in the
        order they ran; a file written is shown by name and size, never inline."""
        groups: list[list[dict[str, Any]]] = [[] for _ in range(self.trials + 1)]
        for action, number in zip(self.actions, self._trial_of):
            groups[number].append(action)
        texts = [_texts(group) for group in groups]
        before, trials = list(dict.fromkeys(texts[0])), texts[1:]
        common = [text for text in trials[0] if all(text in group for group in trials)] if len(trials) > 1 else []
        names = list(run_keys) if len(run_keys) == len(trials) else [f"trial {i + 1}" for i in range(len(trials))]
        own: dict[str, list[str]] = {}
        for name, group in zip(names, trials):
            own.setdefault("; ".join(t for t in group if t not in common) or "no knob changes", []).append(name)
        lines = ["dry run (nothing is applied, run or recorded):"]
        lines += ["before the first trial:", *(f"  {text}" for text in before)] if before else []
        lines += ["every trial, after its knobs are set:", *(f"  {text}" for text in common)] if common else []
        lines.append("each trial's own writes and commands (a knob's file is put back after its trial):")
        return lines + [f"  {', '.join(keys)}: {text}" for text, keys in own.items()]


def _texts(actions: Sequence[dict[str, Any]]) -> list[str]:
    """One short line per action; a file written again in the same trial (put back) joins its first write."""
    texts: list[str] = []
    written: dict[tuple[str, str], int] = {}
    for action in actions:
        kind = action["action"]
        if kind == "write":
            key, text = (action["host"], action["path"]), action["text"]
            shown = f": {text.strip()}" if len(text) <= 24 and "\n" not in text.strip() else ""
            if key in written:
                index = written[key]
                texts[index] = texts[index][:-1] + f"; put back{shown})"
                continue
            written[key] = len(texts)
            texts.append(f"{action['host']}: write {action['path']} ({len(text.encode()):,} B{shown})")
        elif kind == "run":
            texts.append(f"{action['host']}: {shlex.join(action['argv'])}")
        elif kind in ("start_service", "restart_service"):
            texts.append(f"{kind.split('_')[0]} {action['service']}")
    return texts
