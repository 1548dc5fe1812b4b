"""refine and validate show their progress (:class:`tunelab.progress.StudyProgress`) on stderr as ``run`` does: on
a pipe a line per round, its counts as the store holds them at that moment, done/total ending N/N where N is the
trials the store holds. The simulator target measures (1 s trials, no warm-up)."""
from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import tunelab
from progress_helpers import LINE, parsed, store_counts
from tunelab import progress
from tunelab.designs.change import BlockRule
from tunelab.optimize.validation import run_validate

class Probe(io.StringIO):
    """stderr as a pipe that reads the store whenever a progress line is written."""

    def __init__(self, store: Path) -> None:
        super().__init__()
        self.store, self.seen = store, []

    def write(self, text: str) -> int:
        match = LINE.match(text)
        if match:
            self.seen.append((match, store_counts(self.store) if self.store.exists() else {}))
        return super().write(text)


def checked_lines(probe: Probe) -> list[re.Match]:
    """Every line's counts are the store's at that moment, and done is their sum."""
    for match, counts in probe.seen:
        held = [counts.get(status, 0) for status in ("ok", "flagged", "failed")]
        shown = parsed(match[0])["counts"]
        assert [shown[status] for status in ("ok", "flagged", "failed")] == held, (match[0], counts)
        assert int(match["done"]) == sum(held), match[0]
    return [match for match, _ in probe.seen]


def test_refine_shows_its_search_and_confirmation_as_rounds(tmp_path: Path, monkeypatch) -> None:
    store = tmp_path / "refine.sqlite"
    probe = Probe(store)
    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)          # a line per trial
    monkeypatch.setattr(sys, "stderr", probe)
    outcome = tunelab.refine(target="simulator", budget=8, confirm_blocks=2, store=store)
    monkeypatch.undo()
    lines = checked_lines(probe)
    assert outcome.confirmation is not None, outcome.note
    assert list(dict.fromkeys(match["label"] for match in lines)) == ["search", "confirm"]
    assert {int(m["total"]) for m in lines if m["label"] == "search"} == {8}          # the budget
    assert {int(m["total"]) for m in lines if m["label"] == "confirm"} == {8 + 4 * 2}  # and 2 ABBA blocks
    everything = sum(store_counts(store).values())
    assert (int(lines[-1]["done"]), int(lines[-1]["total"])) == (everything, everything) == (16, 16)

    again = io.StringIO()                   # resumed: everything read back, a line per round (the interval's 60 s)
    monkeypatch.setattr(sys, "stderr", again)
    tunelab.refine(target="simulator", budget=8, confirm_blocks=2, store=store)
    monkeypatch.undo()
    shown = [LINE.match(line) for line in again.getvalue().splitlines() if LINE.match(line)]
    assert [(m["label"], m["done"], m["total"], str(parsed(m.string)["counts"]["ok"])) for m in shown] == [("search", "8", "8", "8"),
                                                                            ("confirm", "16", "16", "16")]


def test_validate_in_rounds_shows_each_look_as_a_round(tmp_path: Path, monkeypatch) -> None:
    store = tmp_path / "validate.sqlite"
    probe = Probe(store)
    monkeypatch.setattr(sys, "stderr", probe)                         # the default: a line per round (or minute)
    result = run_validate("simulator", {"net.core.somaxconn": 1024}, target_options={"cv": 0.4},
                          blocks=BlockRule(4, 12, 4), warmup_s=0, measure_s=1, store=store, write_sysctl=False)
    monkeypatch.undo()
    lines = checked_lines(probe)
    blocks = int(result.confirmation.table["blocks"].max())
    looks = blocks // 4
    assert [m["label"] for m in lines] == [f"round {n}" for n in range(1, looks + 1)], [m[0] for m in lines]
    assert [int(m["total"]) for m in lines] == [16 * n for n in range(1, looks + 1)]   # 4 more blocks a look
    assert lines[-1]["done"] == lines[-1]["total"] == str(sum(store_counts(store).values())) == str(4 * blocks)
