"""The `tunelab` entry point itself: --help, --version, errors on unknown verbs."""
from __future__ import annotations

import subprocess
import sys

import pytest

import tunelab
from tunelab.cli import main


def test_version_matches_package(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"tunelab {tunelab.__version__}"


def test_help_lists_the_verbs() -> None:
    out = subprocess.run([sys.executable, "-m", "tunelab", "--help"], capture_output=True, text=True, check=True).stdout
    for verb in ("plan", "knobs"):
        assert verb in out


def test_unknown_verb_exits_nonzero() -> None:
    proc = subprocess.run([sys.executable, "-m", "tunelab", "frobnicate"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "frobnicate" in proc.stderr
