"""The Target interface: where knobs are read and written and where commands run.

A target has named hosts (usually ``"server"``, whose knobs are tuned and which runs the
service under test, and ``"client"``, which runs the load generator). Everything above this
layer (knob backends, loads, the runner) talks to a target only through these primitives, so a
new target (a cloud VM, a container) is one class registered in :data:`TARGETS`.

Commands are always argument lists, never shell strings.

What a target cannot do by design it declares in :attr:`Target.cannot` (item -> reason), so
callers and the contract tests (``tests/contracts``) know instead of finding out.

Examples
--------
>>> get_target("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
tunelab.errors.TargetError: No target named 'nope'; known: ...
"""
from __future__ import annotations

import abc
import os
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from tunelab.errors import TargetError
from tunelab.registry import Registry

if TYPE_CHECKING:
    from tunelab.counters import CounterRequest, CounterSource
    from tunelab.loads.base import Load


class TargetOptionError(TargetError):
    """A target option is unknown, missing or of the wrong type; ``option`` names it (or None)."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class CommandResult:
    """What one command did: its exit status, its output and how long it took."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class Target(abc.ABC):
    """Base class for every target; use as a context manager so ``down()`` always runs."""

    name: str = "abstract"
    hosts: tuple[str, ...] = ("server", "client")
    #: constructor options whose values are commands run on a host (as root); a design may only
    #: set them with ``--allow-design-commands`` (see :func:`tunelab.targets.build_target`)
    command_options: tuple[str, ...] = ()
    #: constructor options only Python callers may pass (callables, sockets); never from a design
    python_only_options: tuple[str, ...] = ()
    #: options a rebuild for ``tunelab restore`` replaces (:func:`tunelab.journal.restore_target`): restore
    #: only writes knobs back, so what a run needed to measure (services, files it read) is left out
    restore_options: Mapping[str, Any] = {}
    #: what this target cannot do by design, item -> reason (items of the contract: ``"write"``,
    #: ``"run"``, ``"client_files"``, ``"up_twice"``, ...); empty: it does everything
    cannot: Mapping[str, str] = {}

    @classmethod
    def validate_options(cls, options: dict[str, Any]) -> None:
        """Check option values without building anything (no connection, no file); TargetOptionError if bad.

        Called by :func:`tunelab.targets.check_target_spec` after the names and types were checked,
        so ``tunelab plan`` refuses what the constructor would refuse. Default: nothing more to check.
        """

    @classmethod
    def paired_load(cls, options: Mapping[str, Any], profile: str | None) -> "tuple[Load, dict[str, Any]] | None":
        """The load this kind of target always measures with, and its settings for ``profile``.

        ``None`` (the default): the design's own load generator runs. A target that answers its
        load itself (the simulator) returns its load, so callers never need to know its type.
        """
        return None

    def up(self) -> None:  # noqa: B027 - optional hook
        """Create whatever the target needs (namespaces, servers, connections)."""

    def down(self) -> None:  # noqa: B027 - optional hook
        """Remove everything ``up()`` created; must be safe to call twice."""

    def __enter__(self) -> "Target":
        self.up()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.down()

    def check_host(self, host: str) -> None:
        """Raise TargetError unless ``host`` is one of :attr:`hosts`."""
        if host not in self.hosts:
            raise TargetError(f"target {self.name!r} has no host {host!r}; hosts are {', '.join(self.hosts)}")

    @abc.abstractmethod
    def read_text(self, host: str, path: str) -> str:
        """Return the text of ``path`` on ``host`` (e.g. a /proc/sys or /sys file)."""

    @abc.abstractmethod
    def write_text(self, host: str, path: str, text: str) -> None:
        """Write ``text`` to ``path`` on ``host``."""

    @abc.abstractmethod
    def run(self, host: str, argv: Sequence[str], timeout_s: float, cpu: int | None = None) -> CommandResult:
        """Run ``argv`` on ``host``, bounded by ``timeout_s``; optionally pinned to ``cpu``."""

    def address(self, host: str) -> str:
        """The address the other host reaches ``host`` on."""
        return "127.0.0.1"

    def start_service(self, name: str) -> None:  # noqa: B027
        """Start a named service (``"dns"``, ``"iperf3"``) on the server host."""

    def restart_service(self, name: str) -> None:
        """Restart a named service so settings read at start-up (e.g. listen backlog) apply."""
        self.start_service(name)

    def has_tool(self, host: str, tool: str) -> bool:
        """Whether ``tool`` is on the PATH of ``host`` (default: of this machine)."""
        return shutil.which(tool) is not None

    def reset(self) -> None:  # noqa: B027
        """Return to a clean state between trials (lab: fresh namespaces); no-op by default."""

    def resolve_device(self, device: str) -> str:
        """Map a symbolic device (``"@disk"``, ``"@link"``) to a real one; other names pass through."""
        return device

    def is_writable(self, host: str, path: str) -> bool:
        """Whether ``path`` on ``host`` could be written, checked without writing."""
        return os.access(path, os.W_OK)

    def describe(self) -> dict[str, Any]:
        """Provenance recorded with every trial (kernel, CPU, tool versions, ...)."""
        return {"target": self.name}

    def foreign_cpu_s(self) -> float:
        """CPU seconds used by processes that are not ours since the previous call (0 if unknown)."""
        return 0.0

    def counter_sources(self, request: "CounterRequest") -> "Sequence[CounterSource]":
        """Where this target's kernel counters are read for a trial whose load touches ``request``'s
        service and device (:mod:`tunelab.counters`); none by default (dry run, simulator)."""
        return ()


#: the registered targets; ``TARGETS.get(name)`` raises TargetError listing the known ones
TARGETS: Registry[type[Target]] = Registry("target", error=TargetError)


def get_target(name: str) -> type[Target]:
    """Return the target class registered as ``name`` (TargetError listing known ones otherwise)."""
    return TARGETS.get(name)
