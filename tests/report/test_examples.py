"""The example data every report test runs on must be present: real lab recordings, not invented numbers."""
from __future__ import annotations

from report_helpers import DEFAULT_EXAMPLE, EXAMPLES, example_stores, phases_of, stores_with


def test_default_example_exists_with_screen_trials() -> None:
    assert DEFAULT_EXAMPLE.is_file(), (
        f"{DEFAULT_EXAMPLE} is missing: copy the default study recorded in the lab there "
        "(sqlite3 data/default.sqlite '.backup data/examples/default.sqlite')")
    assert "screen" in phases_of(DEFAULT_EXAMPLE)


def test_examples_cover_every_notebook() -> None:
    """01/02 need screen trials, 03 refine trials and 04 confirm or validate trials in some example store."""
    assert example_stores(), f"no example stores in {EXAMPLES}"
    assert stores_with("refine"), f"no store in {EXAMPLES} holds refine trials, so 03_refine is never executed"
    assert stores_with("confirm", "validate"), (
        f"no store in {EXAMPLES} holds confirm or validate trials, so 04_validate is never executed")


def test_examples_are_lab_recordings() -> None:
    """Every example trial was measured on a real target (the simulator's trials say load 'simulated')."""
    import sqlite3

    for path in example_stores():
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            simulated = db.execute("SELECT COUNT(*) FROM trials WHERE provenance LIKE '%\"load\": \"simulated\"%'"
                                   ).fetchone()[0]
        finally:
            db.close()
        assert simulated == 0, f"{path.name} holds {simulated} SYNTHETIC simulator trials; ship lab recordings only"
