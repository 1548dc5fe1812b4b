"""Signals: SIGTERM behaves like Ctrl-C during a run, neither may cut a restore half-way, and outside
a run SIGTERM tears the live labs down first. The only module that handles SIGTERM.

SIGINT raises :class:`KeyboardInterrupt`; :func:`sigterm_interrupts` makes SIGTERM do the same,
so the runner records the trial in flight as ``interrupted`` and puts its knobs back.
:func:`deferred_interrupts` holds both signals while the machine is being put back; a run that put its
knobs back ends with :class:`RunInterrupted`, one line saying what it restored.
:func:`teardown_on_sigterm` is for SIGTERM outside a run (a lab up in a script): clean up, then die
of SIGTERM as before. Standard library only, so every layer may use it.
"""
from __future__ import annotations

import functools
import logging
import os
import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Callable, Iterator


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


# ---- a run cut short ---------------------------------------------------------------------------


class RunInterrupted(KeyboardInterrupt):
    """A run cut short by Ctrl-C or SIGTERM after it put its knobs back; ``str()`` is the one line that says
    what was restored (``interrupted: restored net.core.somaxconn on server``), which the CLI prints before it
    exits 130. Raised by :func:`tunelab.run_owner.owned_run`; a :class:`KeyboardInterrupt`, so every handler
    of Ctrl-C still sees it."""


# ---- SIGTERM as Ctrl-C ------------------------------------------------------------------------


#: where a raised KeyboardInterrupt would be lost: Python code run as a fork hook (logging's lock around every
#: ``subprocess`` fork with a ``preexec_fn``, as every target command has) prints "Exception ignored" and goes on
_LOST_IN = (logging.__file__,)
#: seconds after which a signal that arrived inside a fork hook is sent again
RESEND_S = 0.05


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    """Raise KeyboardInterrupt; inside a fork hook (where it would be ignored) send the signal again a moment
    later instead, so the run still stops and restores."""
    if frame is not None and frame.f_code.co_filename in _LOST_IN:
        threading.Timer(RESEND_S, os.kill, (os.getpid(), signum)).start()
        return
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so the runner restores the current trial's knobs; Ctrl-C (when Python's
    own handler has it) goes the same way, so neither is lost in a fork hook."""
    try:
        previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _sigterm_as_interrupt)}
    except ValueError:            # not the main thread: leave signals alone
        yield
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _sigterm_as_interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# ---- SIGTERM outside a run: clean up, then die of it ------------------------------------------


def _teardown_then_die(teardown: Callable[[], None], signum: int, frame: FrameType | None) -> None:
    teardown()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def teardown_on_sigterm(teardown: Callable[[], None]) -> None:
    """On SIGTERM run ``teardown`` and then die of SIGTERM, when nothing else handles it yet (a run's
    :func:`sigterm_interrupts` does its own cleanup); only from the main thread."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, functools.partial(_teardown_then_die, teardown))
