"""Progress of a run where the user is: a widget bar in a notebook, a text bar on a terminal, and one
line per round or per minute when stderr goes to a file or a pipe (a log, ``nohup``, CI).

The widget bar is tqdm's (``tqdm.notebook``) and needs ipywidgets; without it a notebook shows the
progress line in one output updated in place. Either way the executed notebook keeps the last state.

:func:`trial_progress` picks the kind (:func:`progress_kind`); every kind takes ``update(n)``,
``set_postfix(**counts)`` and ``close()``. The counts are merged (a later ``set_postfix`` adds to the
earlier ones), so the runner's trial counts and the busy repeats so far show together. A line reads::

    dns-screen: 12/54 trials, 4 ok, 1 failed, 0 busy repeats, elapsed 01:10, ETA 04:05
"""
from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any, Callable, TextIO

from tqdm import tqdm as text_bar

#: seconds between two lines when stderr is neither a terminal nor a notebook
LINE_INTERVAL_S = 60.0


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython's ``IPKernelApp``), where a widget bar can show."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def progress_kind(stream: TextIO, notebook: bool | None = None, widgets: bool | None = None) -> str:
    """``'widget'`` in a notebook with ipywidgets, ``'cell'`` in one without (a line updated in place),
    ``'text'`` on a terminal, else ``'lines'``.

    >>> import io
    >>> progress_kind(io.StringIO(), notebook=False), progress_kind(io.StringIO(), notebook=True, widgets=True)
    ('lines', 'widget')
    """
    notebook = in_notebook() if notebook is None else notebook
    if notebook:
        return "widget" if (importlib.util.find_spec("ipywidgets") is not None if widgets is None else widgets) \
            else "cell"
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "lines"


class LineProgress:
    """Progress as plain lines on ``stream``: one at most every ``interval_s`` seconds while trials finish,
    and one when the round ends (``close``), with trials done/total, the counts, elapsed time and ETA."""

    def __init__(self, total: int, initial: int = 0, desc: str = "", stream: TextIO | None = None,
                 interval_s: float = LINE_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.n, self.desc = int(total), int(initial), desc
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s, self.clock = interval_s, clock
        self.started = self.last_line = clock()
        self.initial = int(initial)
        self.counts: dict[str, Any] = {}
        self.closed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.clock() - self.last_line >= self.interval_s:
            self.write()

    def set_postfix(self, refresh: bool = False, **counts: Any) -> None:
        self.counts.update(counts)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.write()

    def line(self) -> str:
        """The progress line, e.g. ``'study: 12/54 trials, 3 ok, elapsed 01:10, ETA 04:05'``."""
        elapsed = self.clock() - self.started
        done_now = self.n - self.initial
        eta = (text_bar.format_interval(elapsed / done_now * (self.total - self.n)) if done_now > 0 else "unknown")
        counts = [f"{value} {name.replace('_', ' ')}" for name, value in self.counts.items()]
        return (f"{self.desc + ': ' if self.desc else ''}{self.n}/{self.total} trials"
                + "".join(f", {count}" for count in counts)
                + f", elapsed {text_bar.format_interval(elapsed)}, ETA {eta}")

    def write(self) -> None:
        self.last_line = self.clock()
        print(self.line(), file=self.stream, flush=True)


class CellProgress(LineProgress):
    """The progress line in a notebook without ipywidgets: one output, updated in place at most every
    ``interval_s`` seconds and when the round ends (IPython's ``display_id``)."""

    def __init__(self, total: int, initial: int = 0, desc: str = "", interval_s: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from IPython.display import display

        super().__init__(total, initial, desc, interval_s=interval_s, clock=clock)
        self.handle = display({"text/plain": self.line()}, raw=True, display_id=True)

    def write(self) -> None:
        self.last_line = self.clock()
        self.handle.update({"text/plain": self.line()}, raw=True)


class _MergedPostfix:
    """A tqdm bar whose ``set_postfix`` adds to the counts already shown instead of replacing them."""

    def __init__(self, bar: Any) -> None:
        self.bar, self.counts = bar, {}

    def update(self, n: int = 1) -> None:
        self.bar.update(n)

    def set_postfix(self, refresh: bool = False, **counts: Any) -> None:
        self.counts.update(counts)
        self.bar.set_postfix(refresh=refresh, **self.counts)

    def close(self) -> None:
        self.bar.close()


def trial_progress(total: int, *, initial: int = 0, desc: str = "", enabled: bool = True,
                   stream: TextIO | None = None) -> Any:
    """The progress of ``total`` trials (``initial`` already done) where the user is (:func:`progress_kind`);
    nothing is shown when not ``enabled``."""
    stream = stream if stream is not None else sys.stderr
    kind = progress_kind(stream) if enabled else "off"
    if kind == "lines":
        return LineProgress(total, initial, desc, stream)
    if kind == "cell":
        return CellProgress(total, initial, desc)
    options = {"total": total, "initial": initial, "unit": "trial", "desc": desc, "disable": kind == "off"}
    if kind == "widget":
        from tqdm.notebook import tqdm as widget_bar

        return _MergedPostfix(widget_bar(**options))
    return _MergedPostfix(text_bar(file=stream, dynamic_ncols=True, **options))
