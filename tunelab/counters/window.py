"""The measured window's counters: a snapshot at its start and at its end, their differences.

The load runs once for warm-up plus measurement (:mod:`tunelab.runner`), so the snapshot at the end
of the warm-up is taken by a timer thread while the load runs, and the one at the end of the window
by another (or at once when the load returns early). :class:`CounterWindow` is a context manager
around the load::

    with CounterWindow(sources, warmup_s, measure_s) as window:
        result = target.run(...)
    window.record        # a CounterRecord, or None (no sources, or the load ended in its warm-up)

A counter is named ``Group.Name`` at the server (``TcpExt.ListenOverflows``, ``proc.cpu_s``,
``block.read_ios``) and ``PLACE.Group.Name`` elsewhere (``client.TcpExt.ListenOverflows``). A counter
missing from one snapshot, or lower at the end than at the start (a process that went away), has no
difference and is left out.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from tunelab.counters.sources import CounterSource
from tunelab.errors import TunelabError


@dataclass(frozen=True)
class CounterRecord:
    """The counters of one trial: each counter's increase over the measured window of ``window_s`` seconds,
    and one line per source that could not be read."""

    window_s: float
    deltas: dict[str, float]
    problems: tuple[str, ...] = ()

    def rates(self) -> dict[str, float]:
        """Each counter per second of the window.

        >>> CounterRecord(2.0, {"TcpExt.ListenDrops": 10.0}).rates()
        {'TcpExt.ListenDrops': 5.0}
        """
        return {name: delta / self.window_s for name, delta in self.deltas.items()}

    def cpu_us_per(self, answered_per_s: float | None) -> float | None:
        """CPU microseconds of the server's processes per answered request, from ``proc.cpu_s`` and the
        load's rate of answers (e.g. dnsperf's ``qps``); None without either.

        >>> CounterRecord(10.0, {"proc.cpu_s": 4.0}).cpu_us_per(20000.0)
        20.0
        """
        cpu = self.deltas.get("proc.cpu_s")
        if cpu is None or answered_per_s is None or not answered_per_s > 0:
            return None
        return 1e6 * cpu / self.window_s / answered_per_s

    def to_json(self) -> dict[str, Any]:
        """The stored form (the trial's ``counters`` column)."""
        return {"window_s": self.window_s, "deltas": dict(self.deltas), "problems": list(self.problems)}


def placed(place: str, values: dict[str, float]) -> dict[str, float]:
    """``values`` named for ``place``: unchanged at the server, ``PLACE.`` in front elsewhere.

    >>> placed("client", {"Udp.RcvbufErrors": 1.0})
    {'client.Udp.RcvbufErrors': 1.0}
    """
    return dict(values) if place == "server" else {f"{place}.{name}": value for name, value in values.items()}


def snapshot(sources: Sequence[CounterSource]) -> tuple[dict[str, float], list[str]]:
    """Every source read once: ``(values named by place, one problem line per source that failed)``."""
    values: dict[str, float] = {}
    problems = []
    for source in sources:
        try:
            values.update(placed(source.place, source.read()))
        except (TunelabError, OSError) as exc:
            problems.append(f"{source.place} {type(source).__name__}: {exc}")
    return values, problems


def differences(start: dict[str, float], end: dict[str, float]) -> dict[str, float]:
    """``end - start`` of each counter in both that did not go down, sorted by name.

    >>> differences({"a": 1.0, "b": 5.0, "c": 1.0}, {"a": 4.0, "b": 2.0, "d": 1.0})
    {'a': 3.0}
    """
    return {name: end[name] - start[name] for name in sorted(start.keys() & end.keys()) if end[name] >= start[name]}


@dataclass
class _Snapshot:
    at: float
    values: dict[str, float]
    problems: list[str]


@dataclass
class CounterWindow:
    """Snapshots of ``sources`` at ``warmup_s`` and ``warmup_s + measure_s`` after entering; see the module."""

    sources: Sequence[CounterSource]
    warmup_s: float
    measure_s: float
    #: seconds spent reading and differencing (the recording's own cost), and the CPU seconds of that work
    #: (less than ``cost_s`` on a busy machine, where a reading thread also waits for a CPU)
    cost_s: float = 0.0
    cpu_s: float = 0.0
    record: CounterRecord | None = None
    _taken: dict[str, _Snapshot] = field(default_factory=dict)
    _timers: list[threading.Timer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _take(self, which: str) -> None:
        with self._lock:
            if which in self._taken or (which == "end" and "start" not in self._taken):
                return
            began, cpu = time.perf_counter(), time.thread_time()
            values, problems = snapshot(self.sources)
            ended = time.perf_counter()
            self._taken[which] = _Snapshot((began + ended) / 2, values, problems)
            self.cost_s += ended - began
            self.cpu_s += time.thread_time() - cpu

    def __enter__(self) -> "CounterWindow":
        if not self.sources:
            return self
        if self.warmup_s <= 0:
            self._take("start")
        else:
            self._timers.append(threading.Timer(self.warmup_s, self._take, ("start",)))
        self._timers.append(threading.Timer(self.warmup_s + self.measure_s, self._take, ("end",)))
        for timer in self._timers:
            timer.daemon = True
            timer.start()
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        for timer in self._timers:
            timer.cancel()
            timer.join()
        if exc_type is None and self.sources:
            self._take("end")
            self.record = self._difference()

    def _difference(self) -> CounterRecord | None:
        start, end = self._taken.get("start"), self._taken.get("end")
        if start is None or end is None or end.at <= start.at:
            return None
        began, cpu = time.perf_counter(), time.thread_time()
        deltas = differences(start.values, end.values)
        self.cost_s += time.perf_counter() - began
        self.cpu_s += time.thread_time() - cpu
        return CounterRecord(end.at - start.at, deltas, tuple(dict.fromkeys(start.problems + end.problems)))
