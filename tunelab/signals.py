"""Signals during a run: SIGTERM behaves like Ctrl-C, and neither may cut a restore half-way.

SIGINT raises :class:`KeyboardInterrupt`; :func:`sigterm_interrupts` makes SIGTERM do the same,
so the runner records the trial in flight as ``interrupted`` and puts its knobs back.
:func:`deferred_interrupts` holds both signals while the machine is being put back.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator


# ---- deferring Ctrl-C while the machine is being put back -------------------------------------


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until the block ends (so a restore is never cut half-way).

    Outside the main thread this is a no-op. A signal that arrived inside the block is
    re-raised as :class:`KeyboardInterrupt` when it ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pending:
        raise KeyboardInterrupt


# ---- SIGTERM as Ctrl-C ------------------------------------------------------------------------


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so the runner restores the current trial's knobs."""
    try:
        previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    except ValueError:            # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
