"""A whole study's progress (:class:`tunelab.progress.StudyProgress`) on a file or pipe: every line names its round,
the done and total trials of the whole study and the counts as the store holds them at that moment; a dry run says
"planned"; and the once-a-minute rule on an injected clock. The expectations come from the store and the design,
never from the progress object itself."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

import tunelab
from progress_helpers import parsed, store_counts
from simulator_helpers import simulator_design
from tunelab import progress
from tunelab.progress import StudyProgress

ROOT = Path(__file__).resolve().parents[2]
class Probe(io.StringIO):
    """stderr as a pipe (no terminal) that reads the store each time a progress line is written."""

    def __init__(self, store: Path, study: str) -> None:
        super().__init__()
        self.store, self.study, self.seen = store, study, []

    def write(self, text: str) -> int:
        if text.startswith(f"{self.study}: "):
            self.seen.append((text, store_counts(self.store)))
        return super().write(text)


def test_a_sequential_study_piped_names_each_round_and_counts_what_the_store_holds(tmp_path: Path, monkeypatch) -> None:
    """A line after every trial (the interval set to 0): a trial counts the moment the store has it, not when the
    next one starts; the total is the calibration and round 1 from the start, each later round added as it starts."""
    design = tmp_path / "seq.yaml"
    design.write_text(simulator_design("seq", cv=0.4, replicates="{min: 2, max: 6, step: 2, until: decided}",
                                       extra="noise: {calibration_runs: 2}\n"))
    store = tmp_path / "seq.sqlite"
    probe = Probe(store, "seq")
    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)
    monkeypatch.setattr(sys, "stderr", probe)
    study = tunelab.run(design, store=store)
    monkeypatch.undo()

    rows = [(parsed(line), counts) for line, counts in probe.seen]
    planned = [record.planned for record in study.rounds]
    assert len(planned) >= 2, planned                    # a sequential study of several rounds
    labels = list(dict.fromkeys(row["label"] for row, _ in rows))
    assert labels == ["A/A calibration"] + [f"round {n}" for n in range(1, len(planned) + 1)]
    for row, counts in rows:
        held = {status: counts.get(status, 0) for status in ("ok", "flagged", "failed")}
        assert {status: row["counts"][status] for status in held} == held, (row, counts)   # as of that moment
        assert row["done"] == sum(held.values())
        number = 1 if row["label"] == "A/A calibration" else int(row["label"].split()[1])
        assert row["total"] == 2 + sum(planned[:number]), (row, planned)
    final = rows[-1][0]
    everything = sum(store_counts(store).values())
    assert (final["done"], final["total"]) == (everything, everything) == (2 + sum(planned), 2 + sum(planned))


def test_a_resumed_study_counts_the_trials_already_recorded(tmp_path: Path, monkeypatch) -> None:
    """Run twice: the second run measures nothing, and its one line says what the store holds (6 of 6)."""
    design = tmp_path / "again.yaml"
    design.write_text(simulator_design("again", cv=0.03, replicates="3"))   # 2 levels x 3 replicates
    store = tmp_path / "again.sqlite"
    tunelab.run(design, store=store, progress=False)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    tunelab.run(design, store=store)
    monkeypatch.undo()
    lines = [parsed(line) for line in out.getvalue().splitlines() if line.startswith("again: ")]
    assert [(row["label"], row["done"], row["total"]) for row in lines] == [("round 1", 6, 6)]
    assert lines[0]["counts"]["ok"] == store_counts(store)["ok"] == 6


def test_a_dry_run_says_planned_and_keeps_stdout_clean(tmp_path: Path) -> None:
    design = tmp_path / "dry.yaml"
    design.write_text(simulator_design("dry", cv=0.03, replicates="2", extra="noise: {calibration_runs: 2}\n"))
    proc = subprocess.run([sys.executable, "-m", "tunelab", "run", str(design), "--target", "dry-run",
                           "--store", str(tmp_path / "dry.sqlite")], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("dry (dry run): ")]
    assert lines[-1].startswith("dry (dry run): round 1, 6/6 trials, 6 planned,"), lines   # 2 A/A + 2 levels x 2
    assert not [line for line in lines if " ok" in line or "flagged" in line], lines
    assert "trials," not in proc.stdout                  # progress never reaches stdout
    assert not (tmp_path / "dry.sqlite").exists()


def test_a_line_per_round_or_per_minute_whichever_comes_first() -> None:
    now = [0.0]
    out = io.StringIO()
    with StudyProgress("s", expected=[2, 4], stream=out, clock=lambda: now[0]) as shown:
        shown.start_round(2, label="A/A calibration")
        for _ in range(2):                               # a round of 20 s: its line at its end, none by the minute
            now[0] += 10.0
            shown.record("ok")
        shown.start_round(4)
        for status in ("ok", "failed", "flagged", "interrupted", "ok"):   # 25 s each; interrupted is not done
            now[0] += 25.0
            shown.record(status, busy_repeats=0)
        shown.start_round(3)                             # round 2: 3 more trials join the total
        now[0] += 30.0
        shown.record("ok")
    assert out.getvalue().splitlines() == [
        "s: A/A calibration, 2/6 trials, 2 ok, 0 flagged, 0 failed, elapsed 00:20, ETA 00:40",
        "s: round 1, 5/6 trials, 3 ok, 1 flagged, 1 failed, 0 busy repeats, elapsed 01:35, ETA 00:19",  # 75 s after
        "s: round 1, 6/6 trials, 4 ok, 1 flagged, 1 failed, 0 busy repeats, elapsed 02:25, ETA 00:00",  # round ends
        "s: round 2, 7/9 trials, 5 ok, 1 flagged, 1 failed, 0 busy repeats, elapsed 02:55, ETA 00:50",  # the last
    ]


def test_off_shows_nothing_and_a_search_shrinks_to_what_it_measured() -> None:
    out = io.StringIO()
    with StudyProgress("quiet", enabled=False, stream=out) as quiet:
        quiet.start_round(3)
        quiet.record("ok")
    assert out.getvalue() == ""
    with StudyProgress("search", stream=out, clock=lambda: 0.0) as search:
        search.start_round(10, label="search")           # a budget of 10, of which 4 were needed
        for _ in range(4):
            search.record("ok")
        search.end_round(shrink=True)
        search.start_round(4, label="confirm")
    assert out.getvalue().splitlines()[-2:] == [
        "search: search, 4/4 trials, 4 ok, 0 flagged, 0 failed, elapsed 00:00, ETA 00:00",
        "search: confirm, 4/8 trials, 4 ok, 0 flagged, 0 failed, elapsed 00:00, ETA 00:00",
    ]


@pytest.mark.parametrize("status", ["ok", "failed"])
def test_a_bar_gets_the_counts_as_of_the_trial(status: str) -> None:
    """On a terminal the bar (tqdm.auto) shows the same counts, updated with the trial, not one behind."""
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    with StudyProgress("bar", expected=[2], stream=out) as shown:
        shown.start_round(2)
        shown.record(status)
        assert shown.display.n == 1 and f"{status}=1" in shown.display.postfix, shown.display.postfix
    assert "bar (round 1)" in out.getvalue()


def test_a_build_says_each_step_as_it_ends() -> None:
    """A report's notebooks (or a gallery's pages): a line per step on a pipe, naming it, counted in its units."""
    now = [0.0]
    out = io.StringIO()
    with StudyProgress("report s", expected=[4], units="steps", statuses=(), stream=out,
                       clock=lambda: now[0]) as shown:
        for name in ("01_screen executed", "02_posthoc executed", "01_screen rendered", "02_posthoc rendered"):
            now[0] += 10.0
            shown.step(name)
    assert out.getvalue().splitlines() == [
        "report s: 01_screen executed, 1/4 steps, elapsed 00:10, ETA 00:30",
        "report s: 02_posthoc executed, 2/4 steps, elapsed 00:20, ETA 00:20",
        "report s: 01_screen rendered, 3/4 steps, elapsed 00:30, ETA 00:10",
        "report s: 02_posthoc rendered, 4/4 steps, elapsed 00:40, ETA 00:00",
    ]


def test_an_error_before_any_trial_leaves_only_the_error_line() -> None:
    """A refusal (bad settings found once the round started) prints no progress line; after a trial it does."""
    out = io.StringIO()
    with pytest.raises(ValueError), StudyProgress("refused", stream=out) as shown:
        shown.start_round(8, done_statuses=["ok"], label="search")   # recorded before: not this run's work
        raise ValueError("bad settings")
    assert out.getvalue() == ""
    with pytest.raises(ValueError), StudyProgress("stopped", stream=out, clock=lambda: 0.0) as shown:
        shown.start_round(8)
        shown.record("failed")
        raise ValueError("the target went away")
    assert out.getvalue().splitlines() == ["stopped: round 1, 1/8 trials, 0 ok, 0 flagged, 1 failed, elapsed 00:00, "
                                           "ETA 00:00"]


def test_a_duet_study_counts_both_sides_of_every_pair(tmp_path: Path, monkeypatch) -> None:
    """measurement: duet on the simulator: two trials a planned run (and a calibration run), all in one total."""
    design = tmp_path / "pairs.yaml"
    design.write_text(simulator_design("pairs", cv=0.03, replicates="4",       # 2 levels x 4 replicates
                                       extra="noise: {calibration_runs: 2}\nmeasurement: duet\n"))
    store = tmp_path / "pairs.sqlite"
    probe = Probe(store, "pairs")
    monkeypatch.setattr(sys, "stderr", probe)
    tunelab.run(design, store=store)
    monkeypatch.undo()
    rows = [(parsed(line), counts) for line, counts in probe.seen]
    assert [(row["label"], row["done"], row["total"]) for row, _ in rows] == [("A/A calibration", 4, 20),
                                                                             ("round 1", 20, 20)]
    for row, counts in rows:                             # what the store held as each line was written
        assert row["counts"]["ok"] == counts.get("ok", 0) and row["done"] == sum(counts.values())
