"""One root exception for everything tunelab raises on purpose, with one subclass per concern.

Every message states the rule that was broken, the value that broke it and, where
possible, what to do about it::

    raise KnobError(f"net.core.somaxconn: value {value!r} is above the maximum 4294967295; "
                    "choose a level between 0 and 4294967295")
"""
from __future__ import annotations

from typing import Any


def quoted(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: how an error message quotes an untrusted value.

    >>> quoted("x" * 100, limit=10)
    "'xxxxxxxxx... (102 characters)"
    """
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class TunelabError(Exception):
    """Root of every error tunelab raises deliberately; the CLI prints it and exits 2.

    In IPython and Jupyter it shows as one red line, ``ReportError: message``, as on the command line,
    instead of a traceback (IPython's ``_render_traceback_`` hook).
    """

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[0;31m{type(self).__name__}: {self}\x1b[0m"]


class DesignError(TunelabError):
    """A design file is malformed or asks for something impossible."""


class KnobError(TunelabError):
    """An unknown knob, a value of the wrong type or out of range, or a failed read/write/verify."""


class TargetError(TunelabError):
    """A target could not be set up, reached or commanded."""


class LoadError(TunelabError):
    """A load generator is missing, misconfigured, or produced no usable output."""


class ToolMissingError(LoadError, TargetError):
    """A required system tool (dnsperf, nsd, iperf3, fio, ip, ...) is not installed."""


class StoreError(TunelabError):
    """The trial store is unreadable, locked, or belongs to a different design."""


class StoreDamagedError(StoreError):
    """SQLite's integrity check found the store damaged: nothing may be written to it."""


class DataError(TunelabError):
    """Input data for the statistics is unusable (missing column, non-numeric metric, ...)."""


class SafetyError(TunelabError):
    """A change was refused to protect the machine (e.g. host-global knob without permission)."""


class TestbedError(TargetError):
    """A testbeds file is malformed, or a testbed it names cannot be used (unreachable, no key, not root)."""

    __test__ = False   # a name pytest would otherwise try to collect where it is imported


class ClusterError(TargetError):
    """The Dask cluster of a many-testbed study could not be started or reached, or its workers do not
    match the testbeds."""


class SeedError(TunelabError):
    """A seed study of the gallery cannot be recorded or shown (missing store, unknown study, failed step)."""
