"""Progress where the user is (:mod:`tunelab.progress`): one line per round or per minute when stderr is a
file or a pipe, a text bar on a terminal; the lines say trials done/total, the counts, busy repeats, ETA.
Timing never decides a test: the per-minute lines run on a fake clock."""
from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from simulator_helpers import simulator_design
from tunelab.progress import LineProgress, progress_kind, trial_progress

ROOT = Path(__file__).resolve().parents[2]


def run_cli(design: Path, store: Path, stderr: int) -> subprocess.Popen:
    """``python -m tunelab run DESIGN --store STORE`` in a fresh interpreter, stderr to ``stderr``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tunelab", "run", str(design), "--store", str(store)],
                            cwd=design.parent, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                            stdin=subprocess.DEVNULL)


def test_redirected_stderr_gets_a_line_per_round_and_a_terminal_a_text_bar(tmp_path: Path) -> None:
    design = tmp_path / "progress-sim.yaml"
    design.write_text(simulator_design("progress-sim", cv=0.03, replicates="2"))   # 2 levels x 2 replicates
    with open(tmp_path / "stderr.txt", "w") as log:
        assert run_cli(design, tmp_path / "file.sqlite", log.fileno()).wait(timeout=120) == 0
    lines = (tmp_path / "stderr.txt").read_text().splitlines()
    line = re.compile(r"^progress-sim: round 1, 4/4 trials, 4 ok, 0 flagged, 0 failed, 0 busy repeats, "
                      r"elapsed \d\d:\d\d, ETA 00:00$")
    assert [text for text in lines if line.match(text)], lines
    assert not [text for text in lines if "\r" in text or "it/s" in text or "trial/s" in text]   # no bar in a log

    primary, secondary = pty.openpty()                  # a terminal: tqdm's text bar, redrawn with \r
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))   # 100 columns, as a terminal has
    proc = run_cli(design, tmp_path / "tty.sqlite", secondary)
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:                                 # the terminal closed: the run ended
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=120) == 0
    os.close(primary)
    text = seen.decode(errors="replace")
    assert "\r" in text and re.search(r"progress-sim \(round 1\): 100%\|[^|]*\| 4/4 \[", text), text
    assert "busy_repeats=0" in text and "elapsed" not in text


def test_a_line_per_minute_on_a_fake_clock() -> None:
    now = [0.0]
    out = io.StringIO()
    bar = LineProgress(10, initial=2, desc="study", stream=out, clock=lambda: now[0])
    bar.set_postfix(ok=0, busy_repeats=0)
    for step in range(8):                                # a trial every 25 s: a line at 75 s, 150 s, and at the end
        now[0] += 25.0
        bar.set_postfix(ok=step + 1)
        bar.update(1)
        if step == 3:
            bar.set_postfix(busy_repeats=1)
    bar.close()
    bar.close()                                          # closed once: one last line
    assert out.getvalue().splitlines() == [
        "study: 5/10 trials, 3 ok, 0 busy repeats, elapsed 01:15, ETA 02:05",   # 75 s / 3 trials x 5 left
        "study: 8/10 trials, 6 ok, 1 busy repeats, elapsed 02:30, ETA 00:50",   # 150 s / 6 trials x 2 left
        "study: 10/10 trials, 8 ok, 1 busy repeats, elapsed 03:20, ETA 00:00",
    ]


def test_where_the_user_is() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress_kind(io.StringIO(), notebook=False) == "lines"
    assert progress_kind(Terminal(), notebook=False) == "text"
    assert progress_kind(io.StringIO(), notebook=True, widgets=True) == "widget"
    assert progress_kind(Terminal(), notebook=True, widgets=False) == "cell"   # no ipywidgets: a line in place
    out = io.StringIO()
    quiet = trial_progress(3, desc="off", enabled=False, stream=out)
    quiet.update(3)
    quiet.close()
    assert out.getvalue() == ""


def test_a_notebook_without_ipywidgets_updates_one_line_in_place(monkeypatch) -> None:
    """No widget library: the line is one display output, updated in place (the saved notebook keeps the
    last state); a fake display and a fake clock stand in for the kernel."""
    import IPython.display

    from tunelab.progress import CellProgress

    shown: list[tuple[str, str]] = []

    class Handle:
        def update(self, data: dict, raw: bool = False) -> None:
            shown.append(("update", data["text/plain"]))

    def display(data: dict, raw: bool = False, display_id: bool = False) -> Handle:
        assert raw and display_id
        shown.append(("display", data["text/plain"]))
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    now = [0.0]
    bar = CellProgress(4, desc="nb", clock=lambda: now[0])
    for _ in range(4):
        now[0] += 0.3                                    # a refresh at most every 0.5 s
        bar.update(1)
        bar.set_postfix(busy_repeats=0)
    bar.close()
    assert shown == [
        ("display", "nb: 0/4 trials, elapsed 00:00, ETA unknown"),
        ("update", "nb: 2/4 trials, 0 busy repeats, elapsed 00:00, ETA 00:00"),   # at 0.6 s
        ("update", "nb: 4/4 trials, 0 busy repeats, elapsed 00:01, ETA 00:00"),   # at 1.2 s
        ("update", "nb: 4/4 trials, 0 busy repeats, elapsed 00:01, ETA 00:00"),   # the round ends
    ]
