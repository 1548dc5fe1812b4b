"""Progress of a run where the user is: a widget bar in a notebook, a text bar on a terminal (both
``tqdm.auto``'s), and one line per round or per minute when stderr goes to a file or a pipe (a log, ``nohup``,
CI). Progress goes to stderr, never to stdout (where ``--json -`` writes).

The widget bar needs ipywidgets; without it a notebook shows the progress line in one output updated in
place. Either way the executed notebook keeps the last state.

:class:`StudyProgress` follows a whole study, refinement or validation across its rounds: the runner, the
refinement and the validation record each trial into it as the store records it. A line reads::

    dns-screen: round 2, 30/54 trials, 28 ok, 1 flagged, 1 failed, 0 busy repeats, elapsed 01:10, ETA 00:56

:func:`trial_progress` is one round's (the cluster dispatcher's): every kind takes ``update(n)``,
``set_postfix(**counts)`` and ``close()``; the counts are merged (a later ``set_postfix`` adds to the earlier
ones). Both pick the kind with :func:`progress_kind`.
"""
from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any, Callable, Iterable, Sequence, TextIO

from tqdm import tqdm as text_bar

#: seconds between two lines when stderr is neither a terminal nor a notebook
LINE_INTERVAL_S = 60.0
#: seconds between two updates of the in-place line of a notebook without ipywidgets
CELL_INTERVAL_S = 0.5


def auto_bar(**options: Any) -> Any:
    """A ``tqdm.auto`` bar: a widget in a notebook, text elsewhere. Imported here, when a bar is made, never at
    import time: in a kernel without ipywidgets ``tqdm.auto``'s import alone warns ("IProgress not found") on
    stderr, and such a kernel gets the in-place line (:class:`CellProgress`) instead of a bar."""
    from tqdm.auto import tqdm

    return tqdm(**options)


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


#: the trial counts a study's progress shows, as of the moment it is shown
STATUSES = ("ok", "flagged", "failed")


class StudyProgress:
    """The progress of a whole study, refinement or validation across its rounds (:func:`trial_progress` is one
    round's): a tqdm.auto bar (a widget in a notebook, text on a terminal), one line updated in place in a notebook
    without ipywidgets, or on a file or pipe one line per round or per ``interval_s`` seconds, whichever comes
    first. A line names the round, the done and total trials of the whole study, the counts as of that moment
    (``planned`` for a dry run, which measures nothing) and the ETA::

        dns-screen: round 2, 30/54 trials, 28 ok, 1 flagged, 1 failed, 0 busy repeats, elapsed 01:10, ETA 00:56

    ``expected`` are the trial counts of the rounds known ahead (an A/A calibration and a first round): they count
    in the total from the start, each replaced by its round's own count when it starts (:meth:`start_round`).
    A trial counts when it is recorded (:meth:`record`), never later. Use it as a context manager (or call
    :meth:`close`).
    """

    def __init__(self, desc: str = "", *, expected: Iterable[int] = (), dry: bool = False, enabled: bool = True,
                 stream: TextIO | None = None, kind: str | None = None, interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, units: str = "trials",
                 statuses: Sequence[str] = STATUSES) -> None:
        self.desc, self.dry, self.units = desc, dry, units
        self.stream = stream if stream is not None else sys.stderr
        self.kind = kind if kind is not None else (progress_kind(self.stream) if enabled else "off")
        self.interval_s = LINE_INTERVAL_S if interval_s is None else interval_s     # None: the module's, read now
        self.clock = clock
        self.started = self.last_line = clock()
        self.expected = [int(n) for n in expected]
        self.started_total = 0          # the trials of the rounds started so far
        self.done = self.done_before = self.round_done = self.round_planned = self.rounds = 0
        self.counts: dict[str, int] = dict.fromkeys(("planned",) if dry else statuses, 0)
        self.extra: dict[str, Any] = {}
        self.label = ""
        self.open = self.closed = False
        self.display: Any = None
        self.last_text = ""

    @property
    def total(self) -> int:
        """The study's trials: of the rounds started, and of the rounds known ahead."""
        return self.started_total + sum(self.expected)

    def start_round(self, planned: int, *, done_statuses: Iterable[str] = (), label: str | None = None) -> None:
        """A round of ``planned`` trials starts (the one before it ends); ``done_statuses`` are the statuses of
        its trials already recorded (a resumed run). Without a ``label`` it is the next numbered round."""
        self.end_round()
        if label is None:
            self.rounds += 1
        self.label = label if label is not None else f"round {self.rounds}"
        if self.expected:
            self.expected.pop(0)
        self.started_total += int(planned)
        self.round_planned, self.round_done, self.open = int(planned), 0, True
        for status in map(str, done_statuses):
            if status in STATUSES:
                self._count(status)
                self.done_before += 1
        self._show(force=True)

    def record(self, status: str, **extra: Any) -> None:
        """One trial recorded with ``status`` (``ok``, ``flagged``, ``failed``; another, e.g. ``interrupted``,
        is not done); ``extra`` counts shown beside them (``busy_repeats=2``)."""
        self.extra.update(extra)
        if str(status) in STATUSES:
            self._count(str(status))
        self._show()

    def step(self, text: str) -> None:
        """One step of a build done (``units`` other than trials: a report's notebooks, a gallery's studies),
        ``text`` saying which: the bar advances, and on a file or pipe a line says it."""
        self.label = text
        self.done += 1
        self._show(line=True)

    def end_round(self, *, shrink: bool = False, failing: bool = False) -> None:
        """The open round ends (a line on a file or pipe); with ``shrink`` the trials it did not record leave
        the total (a search that needed fewer measurements than its budget). ``failing`` (an error ends it): no
        line unless this run recorded a trial, so a refusal stays one error line."""
        if not self.open:
            return
        self.open = False
        if failing and self.done == self.done_before:
            return
        if shrink:
            self.started_total -= max(0, self.round_planned - self.round_done)
        self._show(force=True, line=True)

    def close(self) -> None:
        """The last round ends; a bar is closed. Closing twice does nothing."""
        if self.closed:
            return
        self.end_round()
        self.closed = True
        if self.kind in ("widget", "text") and self.display is not None:
            self.display.close()

    def __enter__(self) -> "StudyProgress":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:
            self.end_round(failing=True)
        self.close()

    def line(self) -> str:
        """The progress line (class docstring)."""
        elapsed = self.clock() - self.started
        done_now = self.done - self.done_before
        eta = (text_bar.format_interval(elapsed / done_now * max(0, self.total - self.done)) if done_now > 0
               else "unknown")
        counts = [f"{value} {name.replace('_', ' ')}" for name, value in {**self.counts, **self.extra}.items()]
        return (f"{self.desc + ': ' if self.desc else ''}{self.label + ', ' if self.label else ''}"
                f"{self.done}/{self.total} {self.units}" + "".join(f", {count}" for count in counts)
                + f", elapsed {text_bar.format_interval(elapsed)}, ETA {eta}")

    def _count(self, status: str) -> None:
        name = "planned" if self.dry else status
        self.counts[name] = self.counts.get(name, 0) + 1
        self.done += 1
        self.round_done += 1

    def _show(self, force: bool = False, line: bool = False) -> None:
        """Bring the display up to date: a bar at once; a line on a file or pipe at a round's end (``line``) or once
        ``interval_s`` passed; the in-place notebook line every half second or when ``force``d."""
        if self.kind == "off":
            return
        if self.kind in ("widget", "text"):
            self._show_bar()
        elif self.kind == "cell":
            self._show_cell(force)
        elif line or self.clock() - self.last_line >= self.interval_s:
            text, self.last_line = self.line(), self.clock()
            if text != self.last_text:            # a round that ends as its minute's line was written: once
                print(text, file=self.stream, flush=True)
            self.last_text = text

    def _show_bar(self) -> None:
        desc = f"{self.desc} ({self.label})" if self.label else self.desc
        if self.display is None:
            self.display = auto_bar(total=self.total, initial=self.done, unit=self.units.rstrip("s"), desc=desc,
                                    dynamic_ncols=True, file=self.stream)
        bar = self.display
        bar.total = self.total
        bar.set_description(desc, refresh=False)
        bar.set_postfix(refresh=False, **self.counts, **self.extra)
        if self.done > bar.n:
            bar.update(self.done - bar.n)
        else:
            bar.refresh()

    def _show_cell(self, force: bool) -> None:
        from IPython.display import display

        if self.display is None:
            self.display = display({"text/plain": self.line()}, raw=True, display_id=True)
        elif force or self.clock() - self.last_line >= CELL_INTERVAL_S:
            self.display.update({"text/plain": self.line()}, raw=True)
        else:
            return
        self.last_line = self.clock()


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
    return _MergedPostfix(auto_bar(file=stream, dynamic_ncols=True, **options))   # a widget in a notebook
