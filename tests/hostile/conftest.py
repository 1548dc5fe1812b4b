"""Shared helpers of the hostile-input suite: run a CLI verb in-process and check its error path.

Every hostile case asserts two things: the CLI answered with exactly the documented shape (one
``tunelab: error:`` line and exit 2, or a clean success), and the effect the attack wanted did not
happen (no file written, no command run, no knob changed). The second is each test's own job.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from tunelab.cli import main


@dataclass(frozen=True)
class CliResult:
    """Exit status and captured output of one in-process ``tunelab`` call."""

    status: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("tunelab: error:")]


@pytest.fixture
def no_orphan_lab_cleanup(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tunelab restore` also removes orphaned labs; other people's labs are none of these tests' business."""
    import tunelab.journal

    monkeypatch.setattr(tunelab.journal, "remove_orphan_labs", lambda *a, **k: [])


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """``cli(*argv)`` runs ``tunelab ARGV`` and returns a :class:`CliResult`; never a traceback."""

    def call(*argv: str) -> CliResult:
        try:
            status = main([str(a) for a in argv])
        except SystemExit as exc:      # argparse usage errors exit 2 with a usage line
            status = int(exc.code or 0)
        captured = capsys.readouterr()
        result = CliResult(status, captured.out, captured.err)
        assert "Traceback" not in result.err + result.out, result.err
        return result

    return call


def assert_one_error(result: CliResult, *fragments: str) -> None:
    """Exit 2 with one ``tunelab: error:`` line that names every fragment (case-insensitive)."""
    assert result.status == 2, (result.status, result.out, result.err)
    assert len(result.error_lines) == 1, result.err
    line = result.error_lines[0].lower()
    for fragment in fragments:
        assert fragment.lower() in line, (fragment, result.err)
