"""``tunelab tune`` on the command line: --plan measures nothing, JSON is strict, bad input is one error line with
nothing stored, and a run prints its stages and exits as its confirmation says."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import run_in_process

ROOT = Path(__file__).resolve().parents[2]


def test_plan_shows_the_split_as_json_and_measures_nothing(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "plan.sqlite"
    done = run_in_process(["tune", "--target", "simulator", "--surface", "wide27", "--budget", "100", "--plan",
                           "--format", "json", "--store", str(store)], tmp_path, capfd, monkeypatch)
    assert done.returncode == 0, done.stderr
    split = json.loads(done.stdout)
    assert split["design"] == "plackett_burman" and split["knobs"] == 27 and split["calibrate"] == 0
    assert split["cv_source"].startswith("noise not measured")    # one replicate at any noise: no A/A runs
    assert split["calibrate"] + split["screen"] + split["refine"] + split["confirm"] <= 100
    assert not store.exists()


@pytest.mark.parametrize("args,words", [
    (["--budget", "10"], "--budget 10 is too small: the confirmation takes 8 measurements"),
    (["--budget", "60", "--split", "screen=40"], "--split screen=40: give each of screen, refine, confirm"),
    (["--budget", "0"], "--budget must be a positive number"),
    (["--budget", "60", "--noise", "0"], "--noise"),
])
def test_bad_input_is_one_error_line_and_nothing_is_stored(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch, args: list[str],
                                                           words: str) -> None:
    store = tmp_path / "bad.sqlite"
    done = run_in_process(["tune", "--target", "simulator", "--store", str(store), *args], tmp_path, capfd,
                          monkeypatch)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tunelab: error: ") and words in lines[0], done.stderr
    assert not store.exists()


def test_a_run_prints_its_stages_and_writes_json(tmp_path: Path) -> None:
    """One real ``python -m tunelab`` process (start-up and exit status as a user sees them)."""
    out = tmp_path / "tune.json"
    done = subprocess.run([sys.executable, "-m", "tunelab", "tune", "--target", "simulator", "--budget", "60",
                           "--store", str(tmp_path / "s.sqlite"), "--json", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    result = json.loads(out.read_text())
    assert done.returncode == {"improve": 0, "equivalent": 0, "stopped": 0, "unconfirmed": 0, "regress": 3,
                               "inconclusive": 4, "untestable": 5}[result["verdict"]], done.stderr
    assert done.stdout.startswith(f"tune sim-simple: spent {result['spent_total']} of 60")
    assert "screen (oat): kept" in done.stdout
