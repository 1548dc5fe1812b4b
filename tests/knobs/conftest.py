"""Fixtures for the knob tests: a file-tree target and a read-only view of this machine."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import pytest

from tunelab.errors import TargetError
from tunelab.targets.base import CommandResult, Target


class FileTreeTarget(Target):
    """A target whose hosts are directories: ``/proc/sys/x`` on ``server`` is ``ROOT/server/proc/sys/x``.

    Like /proc and /sys, files must exist before they can be written. Writes and commands are
    recorded; ``ip link set dev D mtu|txqueuelen N`` is emulated by updating the sysfs file.
    """

    name = "file-tree"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.writes: list[tuple[str, str, str]] = []
        self.commands: list[tuple[str, list[str]]] = []
        self.failing_commands = False

    def local_path(self, host: str, path: str) -> Path:
        self.check_host(host)
        return self.root / host / path.lstrip("/")

    def add(self, host: str, path: str, text: str, mode: int = 0o644) -> Path:
        """Create a file (as a kernel would expose it) with ``text``."""
        local = self.local_path(host, path)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text)
        local.chmod(mode)
        return local

    def read_text(self, host: str, path: str) -> str:
        try:
            return self.local_path(host, path).read_text()
        except OSError as exc:
            raise TargetError(f"file-tree {host}: could not read {path}: {exc.strerror}") from None

    def write_text(self, host: str, path: str, text: str) -> None:
        local = self.local_path(host, path)
        if not local.exists():
            raise TargetError(f"file-tree {host}: could not write {path}: no such file")
        self.writes.append((host, path, text))
        local.write_text(text)

    def is_writable(self, host: str, path: str) -> bool:
        local = self.local_path(host, path)
        return local.exists() and bool(local.stat().st_mode & 0o200)

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        self.check_host(host)
        argv = list(argv)
        self.commands.append((host, argv))
        if self.failing_commands:
            return CommandResult(tuple(argv), 2, "", "RTNETLINK answers: Invalid argument", 0.0)
        if argv[:4] == ["ip", "link", "set", "dev"] and len(argv) == 7:
            attribute = {"mtu": "mtu", "txqueuelen": "tx_queue_len"}[argv[5]]
            self.add(host, f"/sys/class/net/{argv[4]}/{attribute}", argv[6] + "\n")
            return CommandResult(tuple(argv), 0, "", "", 0.0)
        return CommandResult(tuple(argv), 127, "", f"{argv[0]}: not emulated", 0.0)

    def resolve_device(self, device: str) -> str:
        return {"@disk": "loop7", "@link": "veth0"}.get(device, device)


class ReadOnlyHost(Target):
    """This machine's real files, read-only: any write or command fails the test."""

    name = "read-only-host"

    def read_text(self, host: str, path: str) -> str:
        try:
            with open(path) as fh:
                return fh.read()
        except OSError as exc:
            raise TargetError(f"could not read {path}: {exc.strerror}") from None

    def write_text(self, host: str, path: str, text: str) -> None:
        raise AssertionError(f"a read-only test tried to write {text!r} to {path}")

    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        raise AssertionError(f"a read-only test tried to run {argv}")

    def is_writable(self, host: str, path: str) -> bool:
        return os.access(path, os.W_OK)


@pytest.fixture
def tree(tmp_path: Path) -> FileTreeTarget:
    return FileTreeTarget(tmp_path)


@pytest.fixture
def host_view() -> ReadOnlyHost:
    return ReadOnlyHost()
